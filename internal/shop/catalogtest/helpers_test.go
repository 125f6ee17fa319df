// Package catalogtest holds the catalog's and the sales' tests through the
// whole application (HTTP, the near cache, several instances, outages), so
// internal/inventory's own tests build only inventory and what it imports.
package catalogtest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// stores are the PostgreSQL and Redis one test's instances share.
type stores struct {
	*shoptest.Stores
	db     *pgxpool.Pool
	rdb    redis.UniversalClient // the instances' client (a test may hook it)
	prefix string
	users  *testUsers
}

// testUsers are an admin's and a shopper's tokens, valid on every instance
// of the stores (made by the first one).
type testUsers struct {
	once           sync.Once
	admin, shopper string
}

func newStores(t *testing.T) stores { return testenvStores(t) }

func testenvStores(t testing.TB) stores {
	t.Helper()
	st := shoptest.NewStores(t)
	return stores{Stores: st, db: st.DB.Pool, rdb: st.Redis.Client, prefix: st.Redis.Prefix, users: &testUsers{}}
}

// instance is one shop process as far as the catalog can tell: the whole
// application, wired as shop serve wires it, with its own cache
// (singleflight, metrics) on the shared stores.
type instance struct {
	*shoptest.App
	app   *fiber.App
	reg   *prometheus.Registry
	stock *inventory.Stock
	users *testUsers
}

func newInstance(t testing.TB, st stores, configure ...func(*config.Config)) *instance {
	t.Helper()
	a := shoptest.New(t, shoptest.Options{Stores: st.Stores, Redis: st.rdb, DB: st.db, Config: func(c *config.Config) {
		for _, f := range configure {
			f(c)
		}
	}})
	st.users.once.Do(func() {
		_, st.users.admin = a.User(t, "admin@example.com", auth.RoleAdmin)
		_, st.users.shopper = a.Shopper(t, "shopper@example.com")
	})
	return &instance{App: a, app: a.Fiber, reg: a.Reg, stock: a.Stock, users: st.users}
}

// nearOff turns the near cache and the stock view off
// (SHOP_NEAR_CACHE_TTL=0): every read goes to Redis, for the tests of
// what the Redis cache and the live keys guarantee by themselves.
func nearOff(c *config.Config) { c.NearCacheTTL = 0 }

type result struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request through the app and checks the exchange against
// openapi.yaml. Admin paths are sent with an admin's token.
func (in *instance) do(t testing.TB, method, path, body string, headers ...string) result {
	t.Helper()
	token := ""
	if strings.HasPrefix(path, "/api/v1/admin/") {
		token = in.users.admin
	}
	return in.doAs(t, token, method, path, body, headers...)
}

// doAs sends one request with token ("" for none).
func (in *instance) doAs(t testing.TB, token, method, path, body string, headers ...string) result {
	t.Helper()
	r := in.Do(t, method, path, token, body, headers...)
	return result{r.Status, r.Header, r.Body}
}

func (r result) product(t testing.TB) inventory.Product {
	t.Helper()
	var p inventory.Product
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("product %s: %v", r.body, err)
	}
	return p
}

func (r result) page(t testing.TB) inventory.Page {
	t.Helper()
	var p inventory.Page
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("page %s: %v", r.body, err)
	}
	return p
}

// problem decodes a problem document and checks its status and code.
func (r result) problem(t testing.TB, status int, code string) map[string]any {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != server.ContentTypeProblem {
		t.Fatalf("got %d %s %s, want %d problem", r.status, r.header.Get("Content-Type"), r.body, status)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	if m["code"] != code {
		t.Fatalf("code = %v, want %s: %s", m["code"], code, r.body)
	}
	return m
}

// fields lists the field names of an invalid_request problem.
func (r result) fields(t testing.TB) []string {
	t.Helper()
	p := r.problem(t, http.StatusBadRequest, apperr.CodeInvalidRequest)
	var out []string
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		out = append(out, e.(map[string]any)["field"].(string))
	}
	return out
}

// productJSON is a create body.
func productJSON(sku, category string, price int64) string {
	b, _ := json.Marshal(map[string]any{"sku": sku, "name": "Product " + sku, "description": "About " + sku, "category": category, "price_cents": price})
	return string(b)
}

// create adds a product through the API and fails the test otherwise.
func (in *instance) create(t testing.TB, sku, category string, price int64) inventory.Product {
	t.Helper()
	r := in.do(t, http.MethodPost, "/api/v1/admin/products", productJSON(sku, category, price))
	if r.status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", sku, r.status, r.body)
	}
	return r.product(t)
}

// exec runs SQL behind the cache's back, as another system would.
func (st stores) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := st.db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// metric sums the counters named name whose labels include the pairs.
func (in *instance) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for _, v := range shoptest.Counters(t, in.reg, name, labels...) {
		sum += v
	}
	return sum
}

func inventoryInput(category string, price int64) inventory.ProductInput {
	return inventory.ProductInput{Name: "Name", Description: "", Category: category, PriceCents: price}
}

// withClient returns the stores with a new Redis client on the same server,
// with hooks added.
func (st stores) withClient(t testing.TB, hooks ...redis.Hook) stores {
	t.Helper()
	rdb := redis.NewClient(st.rdb.(*redis.Client).Options())
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st.rdb = rdb
	return st
}

// slowScripts delays every Lua script call by d.
type slowScripts time.Duration

func (slowScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d slowScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			time.Sleep(time.Duration(d))
		}
		return next(ctx, cmd)
	}
}

func (slowScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// slowReplies delays the return of every pipeline (the cache's reads) by
// d after its replies came: a read has seen Redis and not yet acted on it.
type slowReplies time.Duration

func (slowReplies) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (slowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d slowReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		time.Sleep(time.Duration(d))
		return err
	}
}

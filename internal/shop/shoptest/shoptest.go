// Package shoptest builds the whole shop application, wired as `shop
// serve` wires it (internal/shop), on one test's own stores: its own
// PostgreSQL database and Redis key prefix. The HTTP tests of every domain
// use it instead of assembling auth, domains and server by hand, so the
// wiring under test is production's.
package shoptest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/shop"
	"github.com/shop-oss/shop/internal/testenv"
)

// Password is every test user's password.
const Password = "correct horse battery"

// MaxFuzzPath bounds what a fuzz test sends as a request's path (and its
// headers): well inside the server's 4 KiB read buffer, past which
// fasthttp refuses the request before Fiber (431 from a real server;
// app.Test reports it as an error instead). The HTTP layer's own tests
// cover that refusal, so a fuzz case over the bound is skipped.
const MaxFuzzPath = 2048

// App is the application on a test's stores.
type App struct {
	*shop.App
	DB     *testenv.Database
	Redis  *testenv.Redis
	Config *config.Config
	Reg    *prometheus.Registry
	Log    *slog.Logger
}

// Options change what the application is built on.
type Options struct {
	// Config edits the configuration before the app is built (the
	// defaults: rate limiting off, fast password hashing, the test's key
	// prefix, a fixed JWT secret).
	Config func(*config.Config)
	// Redis and DB, when set, replace the test's connections in the
	// application (an outage test hands in a dead or proxied one); the
	// test's own stay in App.Redis and App.DB for checking.
	Redis redis.UniversalClient
	DB    *pgxpool.Pool
	// Cache, when set, is the catalog cache's own Redis
	// (SHOP_CACHE_REDIS_URL); nil: the cache lives in the test's Redis.
	Cache redis.UniversalClient
	// Stores, when set, are another application's: the new one is a
	// second process on the same database and key prefix.
	Stores *Stores
	// Log, when set, is the application's logger (default: one that
	// discards); a benchmark hands in shop serve's JSON handler to count
	// the access log's cost.
	Log *slog.Logger
}

// Stores are one test's own database and Redis key prefix.
type Stores struct {
	DB    *testenv.Database
	Redis *testenv.Redis
}

// NewStores makes fresh stores of t's own.
func NewStores(t testing.TB) *Stores {
	t.Helper()
	return &Stores{DB: testenv.NewDatabase(t), Redis: testenv.NewRedis(t)}
}

// New builds the application on o.Stores, or on fresh stores of t's own.
func New(t testing.TB, o Options) *App {
	t.Helper()
	if o.Stores == nil {
		o.Stores = NewStores(t)
	}
	db, r := o.Stores.DB, o.Stores.Redis
	cfg, err := config.Load(map[string]string{
		"SHOP_JWT_SECRET":       "shop-tests-secret-0123456789abcdef",
		"SHOP_KEY_PREFIX":       r.Prefix,
		"SHOP_RATE_LIMIT":       "0",
		"SHOP_ENV":              "dev",
		"SHOP_PASSWORD_HASHING": "fast",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config != nil {
		o.Config(cfg)
	}
	st := shop.Stores{DB: db.Pool, Redis: r.Client}
	if o.Redis != nil {
		st.Redis = o.Redis
	}
	if o.DB != nil {
		st.DB = o.DB
	}
	if o.Cache != nil {
		st.Cache = o.Cache
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	a := &App{App: shop.New(cfg, st, log, reg), DB: db, Redis: r, Config: cfg, Reg: reg, Log: log}
	t.Cleanup(a.Start(context.Background()))
	// Until the subscriptions are up, the near cache and the stock view
	// keep nothing, and another instance's write made meanwhile would go
	// unheard: wait, so that tests start from what serving looks like
	// (unless an outage test handed in a Redis that does not answer).
	pctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if st.Redis.Ping(pctx).Err() != nil {
		return a
	}
	// The partition count recorded, as every command that opens the
	// stores does (tools read it, e.g. shop loadtest's checks).
	if err := orderkey.SettlePartitions(pctx, st.Redis, cfg.KeyPrefix, cfg.Partitions()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !a.Listening(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the near cache's and the live stock's subscriptions did not start within 10s")
		}
	}
	return a
}

// Serve serves the app on a random loopback port, as `shop serve` does
// (for what app.Test cannot show, such as a stream that never ends), and
// returns its base URL. It stops when t ends, live streams first.
func (a *App) Serve(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Fiber.Listener(server.Listener(ln)) }()
	t.Cleanup(func() {
		a.StopStreams()
		if err := a.Fiber.ShutdownWithTimeout(5 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

// Do sends one request through the app in process and checks the exchange
// against openapi.yaml (see openapitest.Do).
func (a *App) Do(t testing.TB, method, path, token, body string, headers ...string) openapitest.Reply {
	t.Helper()
	return openapitest.Do(t, a.Fiber, method, path, token, body, headers...)
}

// User creates a user with role and returns its id and an access token.
func (a *App) User(t testing.TB, email, role string) (id, token string) {
	t.Helper()
	ctx := context.Background()
	u, err := a.Auth.CreateUser(ctx, email, Password, "", role)
	if err != nil {
		t.Fatalf("create %s: %v", email, err)
	}
	tok, err := a.Auth.Login(ctx, email, Password, "test")
	if err != nil {
		t.Fatalf("log in %s: %v", email, err)
	}
	return u.ID, tok.AccessToken
}

// Shopper creates a shopper and returns its id and an access token.
func (a *App) Shopper(t testing.TB, email string) (id, token string) {
	t.Helper()
	return a.User(t, email, auth.RoleShopper)
}

// Product creates a catalog product in category "c".
func (a *App) Product(t testing.TB, sku string, price int64) {
	t.Helper()
	in := inventory.ProductInput{Name: "Product " + sku, Category: "c", PriceCents: price}
	if _, err := a.Catalog.Create(context.Background(), sku, in); err != nil {
		t.Fatalf("create %s: %v", sku, err)
	}
}

// Sale creates a product and opens a sale round of quantity units for it
// (limit per user, 0 = unlimited); it returns the round id.
func (a *App) Sale(t testing.TB, sku string, price int64, quantity, limit int) int64 {
	t.Helper()
	a.Product(t, sku, price)
	return a.Round(t, sku, inventory.Seed{Quantity: quantity, PerUserLimit: limit})
}

// Round opens a new sale round of an existing product.
func (a *App) Round(t testing.TB, sku string, seed inventory.Seed) int64 {
	t.Helper()
	rep, err := a.Sales.Open(context.Background(), sku, seed)
	if err != nil {
		t.Fatalf("open sale of %s: %v", sku, err)
	}
	return *rep.RoundID
}

// Pay pays user's order with a card the payment stub accepts.
func (a *App) Pay(t testing.TB, user, orderID string) {
	t.Helper()
	if _, err := a.Orders.Pay(context.Background(), user, orderID, "tok_ok"); err != nil {
		t.Fatal(err)
	}
}

// Cancel cancels user's order.
func (a *App) Cancel(t testing.TB, user, orderID string) {
	t.Helper()
	if _, err := a.Orders.Cancel(context.Background(), user, orderID); err != nil {
		t.Fatal(err)
	}
}

// Writer returns an order writer on the test's stores, with the
// after-commit work production wires unless o has its own.
func (a *App) Writer(o writer.Options) *writer.Writer {
	if o.Block == 0 {
		o.Block = 50 * time.Millisecond
	}
	if o.AfterCommit == nil {
		o.AfterCommit = shop.AfterCommit(a.Bestsellers)
	}
	if o.AfterTransition == nil {
		o.AfterTransition = shop.AfterTransition(a.Bestsellers)
	}
	if o.Partitions.Count() == 1 && !o.Partitions.Grouped() {
		o.Partitions = a.Config.Partitions()
	}
	return writer.New(a.DB.Pool, a.Redis.Client, a.Config.KeyPrefix, a.Log, prometheus.NewRegistry(), o)
}

// Drain runs an order writer until every order placed so far is written
// and acknowledged.
func (a *App) Drain(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := a.Writer(writer.Options{Consumer: "drain"})
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		// A stream already drained returns at once, and the writer may
		// then be cancelled while it still creates its group.
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("writer: %v", err)
		}
	}()
	if err := a.waitDrained(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// OrderKeys are order's keys of the one partition of a single Redis with
// the default layout (partition 0, the untagged stream), for a test that
// changes order's state by hand.
func (a *App) OrderKeys() ledger.StreamKeys {
	return ledger.New(a.Redis.Client, a.Config.KeyPrefix, keyspace.Partitions{}).Keys(0)
}

func (a *App) waitDrained(limit time.Duration) error {
	ctx := context.Background()
	deadline := time.Now().Add(limit)
	for _, stream := range orderkey.Streams(a.Config.KeyPrefix, a.Config.Partitions()) {
		for !writer.Drained(ctx, a.Redis.Client, stream) {
			if time.Now().After(deadline) {
				return fmt.Errorf("the order stream %s did not drain in %s", stream, limit)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// WantStatus fails t unless r has status.
func WantStatus(t testing.TB, r openapitest.Reply, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, http.StatusText(status))
	}
}

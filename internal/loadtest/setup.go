package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
)

// fixture is what setup made: the sale under test and its shoppers.
type fixture struct {
	run      string // unique per run; names the SKU, shoppers and keys
	sku      string
	admin    string // the admin's access token
	shoppers []shopper
	startsAt time.Time // a waiting-room run's sale start
}

type shopper struct {
	email string
	token string
	// addr is the shopper's X-Forwarded-For address (Config.ForwardedFor).
	addr string
}

// priceCents is the product's price; it matters to nobody.
const priceCents = 100

type tokens struct {
	AccessToken string `json:"access_token"`
}

// stock is the admin stock report (GET .../stock).
type stock struct {
	Quantity     int64 `json:"quantity"`
	Available    int64 `json:"available"`
	Sold         int64 `json:"sold"`
	Confirmed    int64 `json:"confirmed"`
	Paid         int64 `json:"paid"`
	Released     int64 `json:"released"`
	PerUserLimit int   `json:"per_user_limit"`
}

// setup logs the admin in, creates and seeds a product, and makes the
// shoppers.
func setup(ctx context.Context, c *client, cfg Config) (*fixture, error) {
	fx := &fixture{run: newRunID()}
	fx.sku = "lt-" + fx.run
	var err error
	if fx.admin, err = adminLogin(ctx, c, cfg.AdminEmail, cfg.AdminPassword); err != nil {
		return nil, err
	}
	if err := createProduct(ctx, c, fx); err != nil {
		return nil, err
	}
	if err := setupSale(ctx, c, cfg, fx); err != nil {
		discard(c, fx, cfg.Warn)
		return nil, err
	}
	return fx, nil
}

// setupSale seeds the product and makes the shoppers.
func setupSale(ctx context.Context, c *client, cfg Config, fx *fixture) error {
	var err error
	if cfg.Room == nil {
		if err := seed(ctx, c, fx, cfg.Units, cfg.PerUserLimit); err != nil {
			return err
		}
	}
	if fx.shoppers, err = makeShoppers(ctx, c, cfg, fx.run); err != nil {
		return err
	}
	if cfg.Room != nil { // after the shoppers: the room opens JoinWindow before the sale
		if fx.startsAt, err = seedRoom(ctx, c, fx, cfg); err != nil {
			return err
		}
	}
	return nil
}

// newRunID is the time in base 36 and 16 random bits: short, sortable, and
// distinct for runs started in the same second.
func newRunID() string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().Unix(), 36) + hex.EncodeToString(b[:])
}

func adminLogin(ctx context.Context, c *client, email, password string) (string, error) {
	var t tokens
	err := retrying(ctx, func() error {
		return c.do(ctx, http.MethodPost, "/api/v1/auth/login", "",
			map[string]string{"email": email, "password": password, "device": "loadtest"}, &t)
	})
	if err != nil {
		return "", fmt.Errorf("admin login: %w", err)
	}
	var me struct{ Role string }
	if err := c.do(ctx, http.MethodGet, "/api/v1/me", t.AccessToken, nil, &me); err != nil {
		return "", fmt.Errorf("admin login: %w", explainLimited(err))
	}
	if me.Role != "admin" {
		return "", fmt.Errorf("admin login: %s has role %q, not admin (make one with `shop user add --role admin`)", email, me.Role)
	}
	return t.AccessToken, nil
}

func createProduct(ctx context.Context, c *client, fx *fixture) error {
	body := map[string]any{
		"sku": fx.sku, "name": "Load test " + fx.run, "category": "loadtest", "price_cents": priceCents,
		"description": "made by shop loadtest",
	}
	if err := c.do(ctx, http.MethodPost, "/api/v1/admin/products", fx.admin, body, nil); err != nil {
		return fmt.Errorf("create product: %w", explainLimited(err))
	}
	return nil
}

func seed(ctx context.Context, c *client, fx *fixture, units, limit int) error {
	var s stock
	body := map[string]int{"quantity": units, "per_user_limit": limit}
	if err := c.do(ctx, http.MethodPut, stockPath(fx.sku), fx.admin, body, &s); err != nil {
		return fmt.Errorf("seed stock: %w", explainLimited(err))
	}
	if s.Available != int64(units) || s.PerUserLimit != limit {
		return fmt.Errorf("seed stock: the server reports %d available, limit %d; asked for %d, limit %d",
			s.Available, s.PerUserLimit, units, limit)
	}
	return nil
}

func stockPath(sku string) string { return "/api/v1/admin/products/" + sku + "/stock" }

// makeShoppers registers and logs in cfg.Users shoppers, SetupWorkers at a
// time: the server spends two argon2 hashes on each, and it sheds a long
// queue of them with 503s.
func makeShoppers(ctx context.Context, c *client, cfg Config, run string) ([]shopper, error) {
	password := randomHex(16)
	out := make([]shopper, cfg.Users)
	bar := newCountBar(cfg.Progress, cfg.Users, "shoppers")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.SetupWorkers)
	for i := range out {
		g.Go(func() error {
			email := fmt.Sprintf("lt-%s-%d@loadtest.invalid", run, i)
			addr := shopperAddr(i).String()
			token, err := makeShopper(gctx, c.as(addr), email, password)
			if err != nil {
				return fmt.Errorf("shopper %s: %w", email, err)
			}
			out[i] = shopper{email: email, token: token, addr: addr}
			bar.add(1)
			return nil
		})
	}
	err := g.Wait()
	bar.finish()
	return out, err
}

func makeShopper(ctx context.Context, c *client, email, password string) (string, error) {
	creds := map[string]string{"email": email, "password": password}
	if err := retrying(ctx, func() error {
		return c.do(ctx, http.MethodPost, "/api/v1/auth/register", "", creds, nil)
	}); err != nil {
		return "", err
	}
	var t tokens
	creds["device"] = "loadtest"
	if err := retrying(ctx, func() error {
		return c.do(ctx, http.MethodPost, "/api/v1/auth/login", "", creds, &t)
	}); err != nil {
		return "", err
	}
	return t.AccessToken, nil
}

// shopperAddr is shopper i's address in 198.18.0.0/15, the range set aside
// for benchmarks (RFC 2544): never a real client's. The admin's is
// adminAddr, past every shopper's.
func shopperAddr(i int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], (198<<24|18<<16)+uint32(i)+1)
	return netip.AddrFrom4(b)
}

// adminAddr is the X-Forwarded-For address of the admin's requests (setup,
// stock reads) with Config.ForwardedFor: the last of 198.18.0.0/15, so that
// they spend neither a shopper's rate-limit window nor this host's.
var adminAddr = netip.AddrFrom4([4]byte{198, 19, 255, 254}).String()

// discardTimeout bounds discard's tries: past one rate-limit window of
// `make run` (10 s).
const discardTimeout = 15 * time.Second

// discard deletes the run's product after a failed run, so that it does not
// stay in the catalog (its shoppers, who appear nowhere, stay). A run that
// failed on the server's rate limit finds it still spent: a 429 or 503 is
// tried again after its Retry-After, for up to discardTimeout. It reports
// what it did, or could not do, on warn.
func discard(c *client, fx *fixture, warn io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), discardTimeout)
	defer cancel()
	err := retryOn(ctx, func() error {
		return c.do(ctx, http.MethodDelete, "/api/v1/admin/products/"+fx.sku, fx.admin, nil, nil)
	}, http.StatusTooManyRequests, http.StatusServiceUnavailable)
	if err != nil {
		fmt.Fprintf(warn, "loadtest: the run failed and its product %s could not be deleted (%v): delete it with "+
			"DELETE /api/v1/admin/products/%s\n", fx.sku, err, fx.sku)
		return
	}
	fmt.Fprintf(warn, "loadtest: the run failed: its product %s was deleted\n", fx.sku)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

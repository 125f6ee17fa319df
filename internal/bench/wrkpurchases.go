package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// wrkPurchases is the purchases with wrk as the client (one thread, the
// same connections and duration as `shop loadtest`): a product of its
// own with 10^6 units and no per-user limit, Users shoppers signed up
// through the API, each request one unit with a fresh Idempotency-Key
// (scripts/wrk-purchase.lua); then the same at half its rate. Once the
// writer has drained, every 202 must be a sold unit, sold == quantity -
// available, and `shop audit --lag-bound 0s` must pass.
func (b *bench) wrkPurchases(ctx context.Context, run int, script float64) (wrkRun, bool) {
	r := wrkRun{PerSec: na, P50: na, P99: na, Ratio: na, HalfRate: na, HalfGot: na, HalfP50: na, HalfP99: na, Late: na, LateMaxMs: na}
	api := newAPI(b.base() + "/api/v1")
	admin, err := api.login(ctx, adminEmail, adminPassword, "", "198.19.255.1")
	if err != nil {
		b.warnf("wrk purchases: admin login failed: %v", err)
		return r, false
	}
	sku := fmt.Sprintf("wrkp-%d-%d", run, os.Getpid())
	if err := api.createProduct(ctx, admin, sku); err != nil {
		b.warnf("wrk purchases: could not create %s: %v", sku, err)
		return r, false
	}
	shoppers := fmt.Sprintf("wrk-shoppers-%d.txt", run)
	if n := b.signUp(ctx, api, run, shoppers); n != b.cfg.Users {
		b.warnf("wrk purchases: only %d of %d shoppers logged in", n, b.cfg.Users)
		return r, false
	}
	env := []string{"WRK_SHOPPERS=" + b.path(shoppers), "WRK_SKU=" + sku}
	runID := fmt.Sprintf("%d-%d", run, os.Getpid())
	start := now()
	full := b.wrk(ctx, fmt.Sprintf("wrk-purchases-%d.txt", run), append(env, "WRK_RUN="+runID), b.cfg.Duration,
		"scripts/wrk-purchase.lua", b.base())
	b.markInner(run, "purchases-wrk", full.PerSec, start, now())
	r.PerSec, r.P50, r.P99, r.Ratio = full.PerSec, full.P50, full.P99, ratio(full.PerSec, script)
	reports := []wrkReport{full}
	// The same client, shoppers and product paced at half its maximum
	// (WRK_RATE), with Redis's own clock on the window.
	if rate := half(full.PerSec); rate > 0 {
		r.HalfRate = float64(rate)
		start = now()
		stats := b.windowStart(ctx)
		h := b.wrk(ctx, fmt.Sprintf("wrk-half-%d.txt", run),
			append(env, "WRK_RUN="+runID+"-half", "WRK_RATE="+strconv.Itoa(rate)), b.cfg.RateDuration, "scripts/wrk-purchase.lua", b.base())
		end := now()
		b.windowEnd(ctx, stats, run, "half-wrk", start, end)
		b.markInner(run, "half-wrk", h.PerSec, start, end)
		r.HalfGot, r.HalfP50, r.HalfP99, r.Late, r.LateMaxMs = h.PerSec, h.P50, h.P99, h.Late, h.LateMaxMs
		reports = append(reports, h)
	}
	var errs float64
	for _, w := range reports {
		r.Accepted += w.Statuses[202]
		errs += w.SocketErrors
	}
	r.OK = b.wrkAddsUp(ctx, api, admin, run, sku, r.Accepted, errs, len(reports))
	return r, true
}

// wrkAddsUp waits for the writer to drain (the audit passes), then
// checks the stock against the 202s. wrk stops at the duration with a
// request in flight on each connection, whose purchase the server may
// still make: up to Connections units an attack, and one per socket
// error, are sold without a 202 read.
func (b *bench) wrkAddsUp(ctx context.Context, api *api, admin string, run int, sku string, accepted, errs float64, attacks int) bool {
	auditFile := b.path(fmt.Sprintf("wrk-audit-%d.json", run))
	audited := false
	for range 60 {
		f, err := os.Create(auditFile)
		if err != nil {
			break
		}
		err = b.shopTo(ctx, f, f, b.stores(), "audit", "--lag-bound", "0s")
		_ = f.Close()
		if err == nil {
			audited = true
			break
		}
		time.Sleep(time.Second)
	}
	sold, avail, err := api.stock(ctx, admin, sku)
	if err == nil && audited && soldAddsUp(accepted, sold, avail, errs, attacks*b.cfg.Connections) {
		return true
	}
	auditExit := 0
	if !audited {
		auditExit = 1
	}
	b.warnf("wrk purchases: accepted %.0f, sold %.0f, available %.0f, socket errors %.0f, audit exit %d (see %s)",
		accepted, sold, avail, errs, auditExit, auditFile)
	return false
}

// soldAddsUp: every 202 a sold unit, at most one unread answer per
// connection an attack and one per socket error beyond them, and the
// stock's 10^6 units all sold or available.
func soldAddsUp(accepted, sold, available, socketErrors float64, inFlight int) bool {
	return sold >= accepted && sold <= accepted+float64(inFlight)+socketErrors && wrkUnits-available == sold
}

// wrkUnits is the stock of wrk's product.
const wrkUnits = 1000000

// signUp registers and logs in the shoppers, four at a time, and writes
// "token address" for each (the address shop loadtest --forwarded-for
// gives shopper k) to file: how many it wrote.
func (b *bench) signUp(ctx context.Context, api *api, run int, file string) int {
	lines := make([]string, b.cfg.Users)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for k := range next {
				addr := fmt.Sprintf("198.18.%d.%d", k/256, k%256)
				email := fmt.Sprintf("wrk-%d-%d-%d@loadtest.invalid", run, os.Getpid(), k)
				if api.register(ctx, email, addr) != nil {
					continue
				}
				if t, err := api.login(ctx, email, "wrk-shopper-password", "wrk", addr); err == nil && t != "" {
					lines[k-1] = t + " " + addr
				}
			}
		})
	}
	for k := 1; k <= b.cfg.Users; k++ {
		next <- k
	}
	close(next)
	wg.Wait()
	var out strings.Builder
	n := 0
	for _, l := range lines {
		if l != "" {
			out.WriteString(l + "\n")
			n++
		}
	}
	_ = os.WriteFile(b.path(file), []byte(out.String()), 0o644)
	return n
}

// api is the few storefront and admin calls wrk's shoppers need.
type api struct {
	base string
	c    *http.Client
}

func newAPI(base string) *api { return &api{base: base, c: &http.Client{Timeout: 30 * time.Second}} }

func (a *api) call(ctx context.Context, method, path, token, addr string, in, out any) error {
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", addr)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (a *api) login(ctx context.Context, email, password, device, addr string) (string, error) {
	in := map[string]string{"email": email, "password": password}
	if device != "" {
		in["device"] = device
	}
	var out struct {
		AccessToken string `json:"access_token"`
	}
	err := a.call(ctx, http.MethodPost, "/auth/login", "", addr, in, &out)
	return out.AccessToken, err
}

func (a *api) register(ctx context.Context, email, addr string) error {
	return a.call(ctx, http.MethodPost, "/auth/register", "", addr,
		map[string]string{"email": email, "password": "wrk-shopper-password"}, nil)
}

const adminAddr = "198.19.255.1"

func (a *api) createProduct(ctx context.Context, admin, sku string) error {
	err := a.call(ctx, http.MethodPost, "/admin/products", admin, adminAddr,
		map[string]any{"sku": sku, "name": "wrk purchases", "category": "bench", "price_cents": 100}, nil)
	if err != nil {
		return err
	}
	return a.call(ctx, http.MethodPut, "/admin/products/"+sku+"/stock", admin, adminAddr,
		map[string]any{"quantity": wrkUnits, "per_user_limit": 0}, nil)
}

func (a *api) stock(ctx context.Context, admin, sku string) (sold, available float64, err error) {
	var out struct {
		Sold      float64 `json:"sold"`
		Available float64 `json:"available"`
	}
	err = a.call(ctx, http.MethodGet, "/admin/products/"+sku+"/stock", admin, adminAddr, nil, &out)
	return out.Sold, out.Available, err
}

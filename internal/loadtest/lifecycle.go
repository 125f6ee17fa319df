package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// After the sale, with Config.PayRatio > 0, a share of the winners pay and
// the rest let their orders expire: the payment window of docs/api.md
// ("Orders") under load. The server under test runs with a short
// SHOP_PAYMENT_TTL; each unpaid order's expires_at is read from the order
// itself, and the run waits, bounded, until the server's expiry sweep has
// given all their units back.

// payToken is what the payers pay with: the built-in test provider
// approves every token but tok_declined.
const payToken = "tok_loadtest"

// Bounds of the payment phase.
const (
	// payWorkers is how many payments (and order reads) go at once.
	payWorkers = 32
	// payAttempts bounds the tries of one payment answered 409
	// order_pending or 503 (each after its Retry-After).
	payAttempts = 20
	// maxRetryWait caps one wait between tries, whatever Retry-After says.
	maxRetryWait = 2 * time.Second
	// expiryPoll is how often the stock report is read while waiting for
	// the expiry sweep.
	expiryPoll = 200 * time.Millisecond
)

// lifecycleRun is what the payment phase did and found.
type lifecycleRun struct {
	ratio  float64
	payers int
	// paid are the orders answered 200 paid; late the payers answered 409
	// order_not_payable (their window closed first); retries counts the
	// 409 order_pending and 503 answers tried again.
	paid     []string
	late     int
	retries  int
	outcomes map[string]int
	payTime  time.Duration
	// expiring are the unpaid orders with a payment window (late payers
	// included), noWindow those without one (they stay confirmed).
	expiring []string
	noWindow int
	// expired is how many of expiring read back expired after the wait;
	// notExpired says what the others were.
	expired    int
	notExpired []string
	released   bool // the stock report counted them all released in time
	waitTime   time.Duration
	deadline   time.Time
	stock      stock // the stock report after the wait
}

// payers picks round(ratio × n) of the accepted orders at random to pay.
func payers(t *tally, ratio float64) (pay, rest []string) {
	ids := make([]string, 0, len(t.orders))
	for id := range t.orders {
		ids = append(ids, id.String())
	}
	slices.Sort(ids) // a map's order is not random enough to sample by
	t.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	n := int(math.Round(ratio * float64(len(ids))))
	return ids[:n], ids[n:]
}

// runLifecycle pays for a share of the winners, then waits for the rest of
// the orders to expire and their units to come back. It returns an error
// only when the server cannot be asked, or when the unpaid orders would
// expire too late to wait for.
func runLifecycle(ctx context.Context, c *client, cfg Config, fx *fixture, t *tally) (*lifecycleRun, error) {
	lr := &lifecycleRun{ratio: cfg.PayRatio, outcomes: map[string]int{}}
	buyer := func(id string) shopper { return fx.shoppers[t.shopperOf(id)] }
	pay, rest := payers(t, cfg.PayRatio)
	lr.payers = len(pay)
	start := time.Now()
	late, err := lr.payAll(ctx, c, cfg, pay, buyer)
	if err != nil {
		return nil, err
	}
	lr.payTime = time.Since(start)
	rest = append(rest, late...)
	latest, err := lr.windows(ctx, c, rest, buyer)
	if err != nil {
		return nil, err
	}
	if wait := time.Until(latest); wait > MaxDuration {
		return nil, fmt.Errorf("the unpaid orders expire in %s, more than %s from now: run the server with a short "+
			"SHOP_PAYMENT_TTL (a few seconds) for --pay-ratio", wait.Round(time.Second), MaxDuration)
	}
	lr.deadline = latest.Add(cfg.ExpiryTimeout)
	start = time.Now()
	if err := lr.waitReleased(ctx, c, cfg, fx); err != nil {
		return nil, err
	}
	lr.waitTime = time.Since(start)
	return lr, lr.readBack(ctx, c, buyer)
}

// payAll pays for each order in ids, payWorkers at a time, and returns
// the orders whose window had closed first.
func (lr *lifecycleRun) payAll(ctx context.Context, c *client, cfg Config, ids []string, buyer func(string) shopper) ([]string, error) {
	var mu sync.Mutex
	var late []string
	bar := newCountBar(cfg.Progress, len(ids), "paying")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(payWorkers)
	for _, id := range ids {
		g.Go(func() error {
			b := buyer(id)
			outcome, retries, err := payOne(gctx, c.as(b.addr), id, b.token)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			lr.outcomes[outcome]++
			lr.retries += retries
			switch outcome {
			case "200 paid":
				lr.paid = append(lr.paid, id)
			case "409 order_not_payable":
				late = append(late, id)
				lr.late++
			}
			bar.add(1)
			return nil
		})
	}
	err := g.Wait()
	bar.finish()
	return late, err
}

// payOne pays for order id as its buyer and returns the answer as
// "status code" (or "200 paid"). An order not persisted yet (409
// order_pending) and a 503 are tried again after their Retry-After, at
// most payAttempts times; the last answer is returned.
func payOne(ctx context.Context, c *client, id, token string) (outcome string, retries int, err error) {
	for attempt := 1; ; attempt++ {
		var o order
		err := c.do(ctx, http.MethodPost, "/api/v1/orders/"+id+"/pay", token, map[string]string{"payment_token": payToken}, &o)
		var ae *apiError
		switch {
		case err == nil:
			return "200 " + o.Status, retries, nil
		case !errors.As(err, &ae):
			return "", retries, fmt.Errorf("pay: %w", err)
		case attempt == payAttempts || (ae.Code != "order_pending" && ae.Status != http.StatusServiceUnavailable):
			return fmt.Sprintf("%d %s", ae.Status, ae.Code), retries, nil
		}
		retries++
		select {
		case <-ctx.Done():
			return "", retries, ctx.Err()
		case <-time.After(min(max(ae.RetryAfter, 100*time.Millisecond), maxRetryWait)):
		}
	}
}

// windows reads each unpaid order back as its buyer and returns the
// latest expires_at among them (now when none has one); those with a
// window are the ones to wait for.
func (lr *lifecycleRun) windows(ctx context.Context, c *client, ids []string, buyer func(string) shopper) (time.Time, error) {
	latest := time.Now()
	err := readOrders(ctx, c, ids, buyer, func(id string, o order) {
		if o.ExpiresAt == nil {
			lr.noWindow++
			return
		}
		lr.expiring = append(lr.expiring, id)
		if o.ExpiresAt.After(latest) {
			latest = *o.ExpiresAt
		}
	})
	return latest, err
}

// readOrders reads each order of ids back as its buyer, payWorkers at a
// time, and hands it to each, one call at a time (each may write to the
// run without a lock of its own).
func readOrders(ctx context.Context, c *client, ids []string, buyer func(string) shopper, each func(id string, o order)) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(payWorkers)
	for _, id := range ids {
		g.Go(func() error {
			var o order
			b := buyer(id)
			if err := c.as(b.addr).do(gctx, http.MethodGet, "/api/v1/orders/"+id, b.token, nil, &o); err != nil {
				return fmt.Errorf("read order back: %w", err)
			}
			mu.Lock()
			defer mu.Unlock()
			each(id, o)
			return nil
		})
	}
	return g.Wait()
}

// waitReleased polls the stock report until the server has given back a
// unit for each expiring order and recorded each payment, or the deadline
// passes; it shows how many are back.
func (lr *lifecycleRun) waitReleased(ctx context.Context, c *client, cfg Config, fx *fixture) error {
	want := int64(len(lr.expiring))
	bar := newCountBar(cfg.Progress, len(lr.expiring), "expiry")
	defer bar.finish()
	for {
		var s stock
		if err := c.do(ctx, http.MethodGet, stockPath(fx.sku), fx.admin, nil, &s); err != nil {
			return fmt.Errorf("read stock: %w", err)
		}
		lr.stock = s
		bar.set(int(min(s.Released, want)), fmt.Sprintf("expiry: %d of %d units back, the last window closes in %s",
			s.Released, want, max(time.Until(lr.deadline.Add(-cfg.ExpiryTimeout)), 0).Round(100*time.Millisecond)))
		if s.Released >= want && s.Paid >= int64(len(lr.paid)) {
			lr.released = true
			return nil
		}
		if time.Now().After(lr.deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(expiryPoll):
		}
	}
}

// readBack reads each expiring order once more: each must be expired.
func (lr *lifecycleRun) readBack(ctx context.Context, c *client, buyer func(string) shopper) error {
	return readOrders(ctx, c, lr.expiring, buyer, func(id string, o order) {
		if o.Status == "expired" {
			lr.expired++
		} else if len(lr.notExpired) < maxListed {
			lr.notExpired = append(lr.notExpired, id+" "+o.Status)
		}
	})
}

// lifecycleHeld judges the payment phase on the server's stock report
// and the orders read back: every payer paid (or came too late), every
// unpaid order with a window expired, and each gave its unit back once.
func lifecycleHeld(lr *lifecycleRun, unknown int) Invariant {
	inv := Invariant{Name: "paid orders kept, every unpaid order expired and released once"}
	if lr == nil {
		return Invariant{Name: inv.Name, OK: true, Skipped: true, Detail: "not checked: --pay-ratio 0, nobody paid"}
	}
	s, paid, exp := lr.stock, int64(len(lr.paid)), int64(len(lr.expiring))
	var bad []string
	if int(paid)+lr.late != lr.payers {
		bad = append(bad, fmt.Sprintf("of %d payers %d paid and %d came too late; answers %v", lr.payers, paid, lr.late, lr.outcomes))
	}
	if !lr.released {
		bad = append(bad, fmt.Sprintf("the server gave back %d units of %d expiring orders and recorded %d paid of %d by %s",
			s.Released, exp, s.Paid, paid, lr.deadline.Format(time.RFC3339)))
	}
	// An attempt without an answer may have bought a unit unseen; nobody
	// pays for it, so it expires too.
	if s.Released < exp || s.Released > exp+int64(unknown) || s.Paid != paid {
		bad = append(bad, fmt.Sprintf("released %d, paid %d; want released %d, paid %d", s.Released, s.Paid, exp, paid))
	}
	if lr.expired != len(lr.expiring) {
		bad = append(bad, fmt.Sprintf("%d of %d unpaid orders read back expired: %s", lr.expired, exp, few(lr.notExpired)))
	}
	inv.OK = len(bad) == 0
	inv.Detail = fmt.Sprintf("%d paid (%d too late), %d expired, %d units released, %d without a payment window",
		paid, lr.late, lr.expired, s.Released, lr.noWindow)
	if !inv.OK {
		inv.Detail = strings.Join(bad, "; ")
	}
	return inv
}

package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// verification is what was found after the attack.
type verification struct {
	stock      stock // when the writer drained
	drained    bool
	drainTime  time.Duration
	lifecycle  *lifecycleRun // nil without --pay-ratio
	invariants []Invariant
}

// drainPoll is how often the stock report is read while the writer drains.
const drainPoll = 100 * time.Millisecond

// verify waits for the order writer to persist what was sold, reads a
// sample of orders back, runs the payment phase (with a pay ratio), and
// judges the invariants. It returns an error only when the server cannot
// be asked.
func verify(ctx context.Context, c *client, cfg Config, fx *fixture, t *tally, st *stores, samples *Samples) (*verification, error) {
	v := &verification{}
	start := time.Now()
	var err error
	v.stock, v.drained, err = waitDrained(ctx, c, fx, cfg.DrainTimeout)
	if err != nil {
		return nil, err
	}
	v.drainTime = time.Since(start)
	bad, err := checkSample(ctx, c, fx, t.sample, time.Now().Add(cfg.DrainTimeout))
	if err != nil {
		return nil, err
	}
	if cfg.PayRatio > 0 {
		if v.lifecycle, err = runLifecycle(ctx, c, cfg, fx, t); err != nil {
			return nil, err
		}
	}
	ev, err := gather(ctx, c, cfg, fx, t, st, samples)
	if err != nil {
		return nil, err
	}
	if v.lifecycle != nil {
		ev.Answers.Paid = v.lifecycle.paid
	}
	v.invariants = append(Check(ev), checkInvariants(evidence{
		seeded: cfg.Units, limit: cfg.PerUserLimit, tally: t, stock: v.stock,
		drained: v.drained, drainTimeout: cfg.DrainTimeout,
		sampleChecked: len(t.sample), sampleBad: bad,
	})...)
	v.invariants = append(v.invariants, lifecycleHeld(v.lifecycle, t.unknown))
	return v, nil
}

// gather is the evidence for Check: the answers, the stores when given,
// and whether the server still answers /healthz (the one process a load
// test knows of).
func gather(ctx context.Context, c *client, cfg Config, fx *fixture, t *tally, st *stores, samples *Samples) (Evidence, error) {
	ev := Evidence{Quantity: int64(cfg.Units), PerUserLimit: cfg.PerUserLimit, Answers: t.answers(), Samples: samples}
	alive := c.do(ctx, http.MethodGet, "/healthz", "", nil, nil) == nil
	ev.Processes = []Process{{Name: "shop at " + c.t.base, Alive: alive}}
	if st == nil {
		return ev, nil
	}
	store, err := ReadDrainedIn(ctx, st.rdb, st.db, st.layout, fx.sku, 10*time.Second)
	if err != nil {
		return ev, err
	}
	ev.Store = store
	return ev, nil
}

// waitDrained polls the stock report until the writer has confirmed every
// unit taken (confirmed >= sold + released: a unit given back and sold
// again was taken twice), or timeout passes. It returns the last report
// either way.
func waitDrained(ctx context.Context, c *client, fx *fixture, timeout time.Duration) (stock, bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		var s stock
		if err := c.do(ctx, http.MethodGet, stockPath(fx.sku), fx.admin, nil, &s); err != nil {
			return stock{}, false, fmt.Errorf("read stock: %w", err)
		}
		if s.Confirmed >= s.Sold+s.Released {
			return s, true, nil
		}
		if time.Now().After(deadline) {
			return s, false, nil
		}
		select {
		case <-ctx.Done():
			return stock{}, false, ctx.Err()
		case <-time.After(drainPoll):
		}
	}
}

// order is the part of GET /orders/{id} that is checked.
type order struct {
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"`
	Items     []struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	} `json:"items"`
}

// checkSample reads each sampled order as its buyer and says what is wrong
// with those that are not one confirmed unit of the SKU (or expired, once
// its payment window closed: a server with a short one expires orders
// while the sale goes on). An order still pending is read again until
// deadline: the sale's confirmed count, which the drain waits for, is the
// writer's PostgreSQL commit, and the writer marks the orders confirmed in
// Redis just after it.
func checkSample(ctx context.Context, c *client, fx *fixture, sample []sampled, deadline time.Time) ([]string, error) {
	var bad []string
	for _, s := range sample {
		o, err := readSampled(ctx, c, fx, s, deadline)
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.Status < 500:
			bad = append(bad, fmt.Sprintf("order %s: %d %s", s.orderID, ae.Status, ae.Code))
		case err != nil:
			return nil, fmt.Errorf("read order back: %w", err)
		case !(o.Status == "confirmed" || o.Status == "expired" && o.ExpiresAt != nil && !time.Now().Before(*o.ExpiresAt)) ||
			len(o.Items) != 1 || o.Items[0].SKU != fx.sku || o.Items[0].Quantity != 1:
			bad = append(bad, fmt.Sprintf("order %s: status %s, items %+v", s.orderID, o.Status, o.Items))
		}
	}
	return bad, nil
}

// readSampled reads a sampled order, again while it is pending, until
// deadline.
func readSampled(ctx context.Context, c *client, fx *fixture, s sampled, deadline time.Time) (order, error) {
	for {
		var o order
		buyer := fx.shoppers[s.shopper]
		err := c.as(buyer.addr).do(ctx, http.MethodGet, "/api/v1/orders/"+s.orderID, buyer.token, nil, &o)
		if err != nil || o.Status != "pending" || !time.Now().Before(deadline) {
			return o, err
		}
		select {
		case <-ctx.Done():
			return o, ctx.Err()
		case <-time.After(drainPoll):
		}
	}
}

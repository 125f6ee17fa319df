package audittest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// A flash sale where half the winners never pay, over HTTP with the
// application's own sweeper and a writer: the unpaid units expire and are
// sold again to others, and the audit ends clean.
func TestHalfTheWinnersNeverPay(t *testing.T) {
	t.Parallel()
	const units = 10
	// The window must outlast the payments on a loaded machine (2 s did
	// not at a load of 23 on two cores).
	a := shoptest.New(t, shoptest.Options{Config: func(c *config.Config) { c.PaymentTTL = 5 * time.Second }})
	a.Sale(t, "flash", 500, units, 1)
	stop := runWriter(t, a)
	defer stop()

	tokens := shoppers(t, a, 3*units)
	first := buyExactly(t, a, tokens[:2*units], units) // twice as many shoppers as units
	paid := 0
	for tok, id := range first {
		if paid == units/2 {
			break
		}
		payWhenConfirmed(t, a, tok, id)
		paid++
	}
	waitAvailable(t, a, units/2)
	buyExactly(t, a, tokens[2*units:], units/2) // the units given back
	a.Drain(t)
	_, admin := a.User(t, "admin@example.com", "admin")
	r := a.Do(t, "GET", "/api/v1/admin/audit", admin, "")
	if r.Status != http.StatusOK || r.JSON(t)["ok"] != true {
		t.Fatalf("audit: %d %s", r.Status, r.Body)
	}
	st := a.Do(t, "GET", "/api/v1/admin/products/flash/stock", admin, "").JSON(t)
	if st["available"] != 0.0 || st["released"] != float64(units/2) || st["paid"] != float64(units/2) {
		t.Fatalf("stock report %v", st)
	}
}

// buyExactly is buyAll, failing t unless exactly want shoppers won.
func buyExactly(t *testing.T, a *shoptest.App, tokens []string, want int) map[string]string {
	t.Helper()
	won := buyAll(t, a, tokens)
	if len(won) != want {
		t.Fatalf("%d of %d shoppers won, want %d", len(won), len(tokens), want)
	}
	return won
}

// shoppers signs up n shoppers and returns their tokens.
func shoppers(t *testing.T, a *shoptest.App, n int) []string {
	tokens := make([]string, n)
	for i := range tokens {
		_, tokens[i] = a.Shopper(t, fmt.Sprintf("s%d@example.com", i))
	}
	return tokens
}

func runWriter(t *testing.T, a *shoptest.App) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := a.Writer(writer.Options{Consumer: "sale"})
	go func() { done <- w.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	}
}

// buyAll fires one purchase per token at once and returns the winners'
// orders.
func buyAll(t *testing.T, a *shoptest.App, tokens []string) map[string]string {
	var mu sync.Mutex
	won := map[string]string{}
	racetest.Together(racetest.Times(len(tokens), func(i int) {
		r := a.Do(t, "POST", "/api/v1/products/flash/purchase", tokens[i], `{}`)
		switch r.Status {
		case http.StatusAccepted:
			mu.Lock()
			won[tokens[i]] = r.JSON(t)["order_id"].(string)
			mu.Unlock()
		case http.StatusConflict:
		default:
			t.Errorf("purchase: %d %s", r.Status, r.Body)
		}
	})...)
	return won
}

func payWhenConfirmed(t *testing.T, a *shoptest.App, tok, id string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := a.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"tok_ok"}`)
		if r.Status == http.StatusOK {
			return
		}
		if r.JSON(t)["code"] != "order_pending" {
			t.Fatalf("pay: %d %s", r.Status, r.Body)
		}
	}
	t.Fatal("the order was not confirmed within 20s")
}

func waitAvailable(t *testing.T, a *shoptest.App, n int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got, err := a.Stock.Available(t.Context(), "flash")
		if err == nil && got[0] == n {
			return
		}
	}
	t.Fatalf("the unpaid units did not come back within 30s")
}

package paymenttest

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// confirmedOrders places n one-unit orders of sku, each of its own
// buyer, and waits until the writer has written them all.
func (f fixture) confirmedOrders(b *testing.B, sku string, n int) (ids, tokens []string) {
	b.Helper()
	f.Sale(b, sku, 300, n, 0)
	for i := range n {
		_, tok := f.Shopper(b, fmt.Sprintf("%s-%d@example.com", sku, i))
		r := f.Do(b, "POST", "/api/v1/products/"+sku+"/purchase", tok, `{"quantity":1}`)
		shoptest.WantStatus(b, r, http.StatusAccepted)
		ids, tokens = append(ids, r.JSON(b)["order_id"].(string)), append(tokens, tok)
	}
	f.Drain(b)
	return ids, tokens
}

// BenchmarkPay is one pay of a written order, through the HTTP handler:
// with the test provider, and with Stripe (stripe-mock on loopback, its
// intent answered succeeded), so their ratio is what Stripe's round trip
// and the recorded payment add.
func BenchmarkPay(b *testing.B) {
	for _, provider := range []string{"test", "stripe"} {
		b.Run("provider="+provider, func(b *testing.B) {
			f := newFixture(b, func(c *config.Config) { c.PaymentProvider = provider })
			if provider == "stripe" {
				f.stripe.point(b, stripeMockSucceeded(b))
			}
			ids, tokens := f.confirmedOrders(b, "bench-pay", b.N)
			b.ResetTimer()
			for i := range b.N {
				r := f.Do(b, "POST", "/api/v1/orders/"+ids[i]+"/pay", tokens[i], `{"payment_token":"pm_card_visa"}`)
				if r.Status != http.StatusOK {
					b.Fatalf("pay: %d %s", r.Status, r.Body)
				}
			}
		})
	}
}

// BenchmarkWebhook is one signed event through the webhook, each its own
// event id: payment_intent.payment_failed (recorded, applied: the
// payment's row) and payment_intent.succeeded (also the order's pay
// step). It reports the PostgreSQL calls per event (connections taken
// from the pool: a statement, or a transaction of several).
func BenchmarkWebhook(b *testing.B) {
	for _, typ := range []string{"payment_intent.payment_failed", "payment_intent.succeeded"} {
		b.Run("type="+typ, func(b *testing.B) {
			f := newFixture(b)
			ids, _ := f.confirmedOrders(b, "bench-hook", b.N)
			bodies := make([][]byte, b.N)
			for i := range b.N {
				bodies[i] = event(fmt.Sprintf("evt_bench_%d", i), typ,
					intent(fmt.Sprintf("pi_bench_%d", i), ids[i], "succeeded", 300))
			}
			before := f.DB.Pool.Stat().AcquireCount()
			var next atomic.Int64
			b.ResetTimer()
			// Deliveries side by side, as Stripe makes them to one
			// instance in a busy drop: ns/op is the instance's cost per
			// event, so 1e9/ns_op its events per second.
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1) - 1
					if r := f.deliver(b, bodies[i], secret, time.Now()); r.Status != http.StatusOK {
						b.Errorf("deliver: %d %s", r.Status, r.Body)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(f.DB.Pool.Stat().AcquireCount()-before)/float64(b.N), "pg-calls/event")
		})
	}
}

package roomtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The operators' gauges read at scrape time (internal/shop's collector)
// report the stores' real state: both stores up, each current round's
// seeded and available units, a room's waiting and admitted shoppers,
// and the latest audit's problems and time.
func TestScrapeReportsTheSale(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t, "gauge-plain", `{"quantity":7,"per_user_limit":0}`)
	f.seed(t, "gauge-room", `{"quantity":5,"starts_at":"`+stamp(nextSecond(time.Hour))+`","waiting_room":{"admit_per_second":5}}`)
	f.seed(t, "gauge-split", `{"quantity":9,"per_user_limit":0,"buckets":4}`) // bucket 0 holds 3
	_, buyer := f.shopper(t)
	f.Do(t, http.MethodPost, "/api/v1/products/gauge-plain/purchase", buyer, `{"quantity":2}`).Decode(t, http.StatusAccepted, &map[string]any{})
	f.Do(t, http.MethodPost, "/api/v1/products/gauge-split/purchase", buyer, `{"quantity":1}`).Decode(t, http.StatusAccepted, &map[string]any{})
	for range 3 {
		_, shopper := f.shopper(t)
		f.join(t, "gauge-room", shopper, "", http.StatusCreated)
	}
	before := time.Now()
	if rep, err := f.Audit.Run(context.Background()); err != nil || !rep.OK {
		t.Fatalf("audit: %v %+v", err, rep)
	}

	want := map[string]float64{
		"shop_redis_up":                          1,
		"shop_postgres_up":                       1,
		`shop_sale_quantity{sku="gauge-plain"}`:  7,
		`shop_sale_available{sku="gauge-plain"}`: 5,
		`shop_sale_quantity{sku="gauge-room"}`:   5,
		`shop_sale_available{sku="gauge-room"}`:  5,
		`shop_sale_quantity{sku="gauge-split"}`:  9,
		`shop_sale_available{sku="gauge-split"}`: 8,
		`shop_room_waiting{sku="gauge-room"}`:    3,
		`shop_room_admitted{sku="gauge-room"}`:   0,
		"shop_audit_problems":                    0,
		`shop_metrics_read_errors{read="stock"}`: 0,
		`shop_metrics_read_errors{read="rooms"}`: 0,
		`shop_metrics_read_errors{read="audit"}`: 0,
	}
	got := gauges(t, f.Reg)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (reported: %v), want %v", k, g, ok, v)
		}
	}
	if at := got["shop_audit_last_run_timestamp_seconds"]; at < float64(before.Unix()) || at > float64(time.Now().Unix()+1) {
		t.Errorf("shop_audit_last_run_timestamp_seconds = %v, want the audit's time (%v)", at, before.Unix())
	}

	// Reseeded, the SKU has two tracked rooms until the old one is
	// recorded: the scrape still succeeds and shows the new round's.
	f.seed(t, "gauge-room", `{"quantity":4,"starts_at":"`+stamp(nextSecond(time.Hour))+`","waiting_room":{"admit_per_second":5}}`)
	if got := gauges(t, f.Reg); got[`shop_room_waiting{sku="gauge-room"}`] != 0 || got[`shop_sale_quantity{sku="gauge-room"}`] != 4 {
		t.Errorf("after the reseed: waiting %v, quantity %v; want the new round's 0 and 4",
			got[`shop_room_waiting{sku="gauge-room"}`], got[`shop_sale_quantity{sku="gauge-room"}`])
	}
}

// gauges is every gauge g reports, keyed name{label="value"} (one label
// at most, as the collector's have).
func gauges(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if m.GetGauge() == nil {
				continue
			}
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += `{` + l.GetName() + `="` + l.GetValue() + `"}`
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

package draw

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/metric"
)

// metrics are the draws' progress in /metrics: the operator watches a
// draw's captures and its cancels drain at the provider's rate.
type metrics struct {
	entries    *prometheus.CounterVec
	captures   *prometheus.CounterVec
	cancels    *prometheus.CounterVec
	pending    prometheus.Gauge
	mismatches *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		entries: metric.CounterVec("shop_draw_entries_total",
			"Draw entries by what their request ended as: entered, authorizing (the shopper finishes it), "+
				"declined, failed (the provider unreachable: no entry), lost_late (authorised after the close).", "outcome"),
		captures: metric.CounterVec("shop_draw_captures_total",
			"Winners' captures asked of the payment provider by result: captured, declined (the entry failed), "+
				"error (retried by the next run).", "result"),
		cancels: metric.CounterVec("shop_draw_cancels_total",
			"Holds released with the provider by result: cancelled, error (retried).", "result"),
		pending: metric.Gauge("shop_draw_cancels_pending",
			"Holds the running draw has still to release (0 when no draw is cancelling)."),
		mismatches: metric.CounterVec("shop_draw_payment_mismatches_total",
			"Provider outcomes that disagree with their entry, by kind: succeeded_not_won, canceled_won. "+
				"Each is a bug to look at; nothing is repaired.", "kind"),
	}
	if reg != nil {
		reg.MustRegister(m.entries, m.captures, m.cancels, m.pending, m.mismatches)
	}
	return m
}

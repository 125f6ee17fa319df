package server

import (
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/metric"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: metric.CounterVec("shop_http_requests_total",
			"HTTP requests by method, route template and status.", "method", "route", "status"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shop_http_request_duration_seconds",
			Help:    "HTTP request latency by method and route template.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

func (m *httpMetrics) observe(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, statusLabel(status)).Inc()
	m.latency.WithLabelValues(method, route).Observe(d.Seconds())
}

// registerPoolMetrics exports the connection pools' state, read at scrape
// time: a pool that is always exhausted is the first sign of a slow store.
func registerPoolMetrics(reg prometheus.Registerer, db *pgxpool.Pool, rdb redis.UniversalClient) {
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	if db != nil {
		gauge("shop_pg_pool_total_conns", "PostgreSQL pool connections.", func() float64 { return float64(db.Stat().TotalConns()) })
		gauge("shop_pg_pool_acquired_conns", "PostgreSQL pool connections in use.", func() float64 { return float64(db.Stat().AcquiredConns()) })
		gauge("shop_pg_pool_idle_conns", "PostgreSQL pool idle connections.", func() float64 { return float64(db.Stat().IdleConns()) })
		gauge("shop_pg_pool_max_conns", "PostgreSQL pool size limit.", func() float64 { return float64(db.Stat().MaxConns()) })
		gauge("shop_pg_pool_empty_acquire_total", "Acquires that had to wait for a PostgreSQL connection.", func() float64 { return float64(db.Stat().EmptyAcquireCount()) })
	}
	if rdb != nil {
		gauge("shop_redis_pool_total_conns", "Redis pool connections.", func() float64 { return float64(rdb.PoolStats().TotalConns) })
		gauge("shop_redis_pool_idle_conns", "Redis pool idle connections.", func() float64 { return float64(rdb.PoolStats().IdleConns) })
		gauge("shop_redis_pool_timeouts_total", "Waits for a Redis connection that timed out.", func() float64 { return float64(rdb.PoolStats().Timeouts) })
		gauge("shop_redis_pool_misses_total", "Redis commands that found no free connection in the pool.", func() float64 { return float64(rdb.PoolStats().Misses) })
	}
}

func metricsHandler(reg *prometheus.Registry) fiber.Handler {
	return adaptor.HTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}

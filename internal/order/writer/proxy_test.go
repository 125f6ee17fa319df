package writer

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shop-oss/shop/internal/testenv"
)

// poolVia connects to the database of url through the proxy p.
func poolVia(t *testing.T, p *testenv.Proxy, url string) *pgxpool.Pool {
	t.Helper()
	return poolAt(t, p.Addr(), url)
}

// poolAt is a pool for url's database reached through addr (a proxy).
func poolAt(t *testing.T, addr, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(n)
	cfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func counterVecValue(t *testing.T, c *prometheus.CounterVec, label string) float64 {
	t.Helper()
	return counterValue(t, c.WithLabelValues(label))
}

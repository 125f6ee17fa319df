package shop

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/room"
)

// scrapeTimeout bounds the reads one scrape makes.
const scrapeTimeout = 2 * time.Second

// saleCollector exports, read from the stores at scrape time, what the
// dashboard and the alert rules (deploy/monitoring) show of a sale: the
// stores' reachability, each current round's stock, each waiting room's
// counters and the latest audit. Every instance reports the same values,
// so the rules take their max; a store that does not answer leaves its
// series out and its shop_*_up at 0.
type saleCollector struct {
	db    *pgxpool.Pool
	rdb   redis.UniversalClient
	sales *inventory.Sales
	rooms *room.Service
	audit *audit.Auditor

	redisUp, postgresUp                      *prometheus.Desc
	quantity, available                      *prometheus.Desc
	roomWaiting, roomAdmitted                *prometheus.Desc
	auditProblems, auditLast, scrapeFailures *prometheus.Desc
}

func newSaleCollector(a *App, st Stores) *saleCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &saleCollector{
		db: st.DB, rdb: st.Redis, sales: a.Sales, rooms: a.Rooms, audit: a.Audit,
		redisUp:        desc("shop_redis_up", "1 when Redis answered a PING within the scrape, else 0."),
		postgresUp:     desc("shop_postgres_up", "1 when PostgreSQL answered a ping within the scrape, else 0."),
		quantity:       desc("shop_sale_quantity", "Units seeded in the SKU's current round.", "sku"),
		available:      desc("shop_sale_available", "Units of the SKU's current round still available.", "sku"),
		roomWaiting:    desc("shop_room_waiting", "Shoppers in the SKU's waiting room not yet admitted.", "sku"),
		roomAdmitted:   desc("shop_room_admitted", "Shoppers the SKU's waiting room has admitted this round.", "sku"),
		auditProblems:  desc("shop_audit_problems", "Problems the latest audit found (0: every invariant held)."),
		auditLast:      desc("shop_audit_last_run_timestamp_seconds", "When the latest audit ran (Unix time)."),
		scrapeFailures: desc("shop_metrics_read_errors", "Reads this scrape could not make (stock, rooms, audit).", "read"),
	}
}

func (c *saleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.redisUp, c.postgresUp, c.quantity, c.available,
		c.roomWaiting, c.roomAdmitted, c.auditProblems, c.auditLast, c.scrapeFailures} {
		ch <- d
	}
}

func (c *saleCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	up := func(err error) float64 {
		if err != nil {
			return 0
		}
		return 1
	}
	gauge(c.redisUp, up(c.rdb.Ping(ctx).Err()))
	gauge(c.postgresUp, up(c.db.Ping(ctx)))
	failed := func(read string, err error) { gauge(c.scrapeFailures, 1-up(err), read) }

	sales, err := c.sales.OnSale(ctx)
	failed("stock", err)
	for _, s := range sales {
		gauge(c.quantity, float64(s.Quantity), s.SKU)
		gauge(c.available, float64(s.Available), s.SKU)
	}
	rooms, err := c.rooms.Tracked(ctx)
	failed("rooms", err)
	for _, r := range latestRooms(rooms) {
		gauge(c.roomWaiting, float64(r.Waiting), r.SKU)
		gauge(c.roomAdmitted, float64(r.Admitted), r.SKU)
	}
	last, ok, err := c.audit.Latest(ctx)
	failed("audit", err)
	if ok {
		gauge(c.auditProblems, float64(last.Problems))
		gauge(c.auditLast, float64(last.At.UnixMilli())/1000)
	}
}

// latestRooms keeps each SKU's latest round: a reseeded SKU's previous
// room stays tracked until it is recorded, and two series with the same
// sku label would fail the whole scrape.
func latestRooms(rooms []room.RoomCount) map[string]room.RoomCount {
	out := make(map[string]room.RoomCount, len(rooms))
	for _, r := range rooms {
		if cur, ok := out[r.SKU]; !ok || r.Round > cur.Round {
			out[r.SKU] = r
		}
	}
	return out
}

package audittest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// partitionedSale is a sale over SKUs in every one of 3 order partitions
// of a single Redis: skus[p] are partition p's.
type partitionedSale struct {
	*shoptest.App
	parts keyspace.Partitions
	skus  [][]string
	keys  []ledger.StreamKeys
}

const partitionedUnits = 60

func newPartitionedSale(t *testing.T) *partitionedSale {
	t.Helper()
	s := &partitionedSale{App: shoptest.New(t, shoptest.Options{Config: func(c *config.Config) { c.OrderPartitions = 3 }})}
	s.parts = s.Config.Partitions()
	s.keys = ledger.New(s.Redis.Client, s.Config.KeyPrefix, s.parts).Partitions()
	s.skus = make([][]string, s.parts.Count())
	for i := 0; slices.ContainsFunc(s.skus, func(skus []string) bool { return len(skus) < 3 }); i++ {
		sku := fmt.Sprintf("p-%d", i)
		if p := s.parts.Of(sku); len(s.skus[p]) < 3 {
			s.Sale(t, sku, 100, partitionedUnits, 0)
			s.skus[p] = append(s.skus[p], sku)
		}
	}
	return s
}

// all is every SKU, partition by partition.
func (s *partitionedSale) all() []string { return slices.Concat(s.skus...) }

func (s *partitionedSale) audit(t *testing.T, lagBound bool) audit.Report {
	t.Helper()
	a := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
	if !lagBound {
		a.LagBound = 0
	}
	rep, err := a.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Buyers released together buy one- and three-line orders whose lines
// fall in different partitions (an order's event goes to its first line's
// partition, its other lines take stock in theirs), a writer writes, and
// buyers cancel, while audits run again and again: every audit is clean,
// since one snapshot reads every partition of a single Redis at one
// instant and PostgreSQL is cut at each order's home stream. Afterwards
// the rounds add up exactly.
func TestAuditOfAPartitionedSaleWhileItRuns(t *testing.T) {
	t.Parallel()
	s := newPartitionedSale(t)
	skus := s.all()
	users := make([]string, 12)
	for i := range users {
		users[i], _ = s.Shopper(t, fmt.Sprintf("pbuyer%d@example.com", i))
	}
	ctx, stopWriter := context.WithCancel(context.Background())
	w := s.Writer(writer.Options{Consumer: "sale"})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	start := make(chan struct{})
	var buyers sync.WaitGroup
	var placed, cancelled atomic.Int64
	for g, u := range users {
		buyers.Add(1)
		go func() {
			defer buyers.Done()
			<-start
			for i := range 25 {
				lines := []order.Line{{SKU: skus[(g+i)%len(skus)], Quantity: 1}}
				if i%2 == 0 { // lines in the other partitions too
					lines = append(lines, order.Line{SKU: skus[(g+i+1)%len(skus)], Quantity: 2},
						order.Line{SKU: skus[(g+i+5)%len(skus)], Quantity: 1})
				}
				p, err := s.Orders.Place(context.Background(), u, lines, order.PlaceOptions{})
				if err != nil {
					continue // sold out
				}
				placed.Add(1)
				if i%5 == 0 {
					if _, err := s.Orders.Cancel(context.Background(), u, p.OrderID); err == nil {
						cancelled.Add(1)
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	waitAudits := shoptest.CleanAudits(t, start, stop, func() *audit.Auditor {
		return audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
	})
	close(start)
	buyers.Wait()
	close(stop)
	clean := waitAudits()
	stopWriter()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d orders placed (%d cancelled), %d clean audits during the sale", placed.Load(), cancelled.Load(), clean)
	if clean == 0 || placed.Load() == 0 {
		t.Fatal("no audit or no order during the sale: the race tested nothing")
	}
	s.Drain(t)
	rep := s.audit(t, false)
	if !rep.OK || len(rep.Rounds) != len(skus) {
		t.Fatalf("audit after the drain: %d rounds, %+v", len(rep.Rounds), rep.Problems)
	}
	var held, released int64
	for _, r := range rep.Rounds {
		if r.Quantity != r.Available+r.HeldRedis || r.HeldRedis != r.HeldPostgres {
			t.Fatalf("round %+v does not add up", r)
		}
		held, released = held+r.HeldRedis, released+r.Released
	}
	var sold, given int64
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT
		coalesce(sum(i.quantity) FILTER (WHERE t.status IS NULL), 0),
		coalesce(sum(i.quantity) FILTER (WHERE t.status = 'cancelled'), 0)
		FROM order_items i LEFT JOIN order_transitions t ON t.order_id = i.order_id`).Scan(&sold, &given); err != nil {
		t.Fatal(err)
	}
	if held != sold || released != given {
		t.Fatalf("rounds hold %d and released %d; PostgreSQL's orders hold %d and gave back %d", held, released, sold, given)
	}
}

// In a partitioned layout each corruption is named with the partition it
// is in: a unit from nowhere in a SKU of partition 2, an order of
// partition 1 PostgreSQL lost, a dead letter in partition 2's dead
// letters, partition 1's stream lost in a failover.
func TestAuditNamesTheViolatingPartition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		corrupt func(t *testing.T, s *partitionedSale, order1 string)
		kinds   []string
		// A problem of kind partKind names partition part.
		partKind string
		part     int
		order    bool // the problems name order1
	}{
		{"unit_from_nowhere", func(t *testing.T, s *partitionedSale, _ string) {
			s.Redis.Client.HIncrBy(context.Background(), s.Stock.SaleKey(s.skus[2][1]), "available", 1)
		}, []string{"stock_postgres", "stock_redis"}, "stock_redis", 2, false},
		{"order_row_lost", func(t *testing.T, s *partitionedSale, id string) {
			if _, err := s.DB.Pool.Exec(context.Background(), `DELETE FROM orders WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}, []string{"buyer", "not_persisted", "stock_postgres"}, "buyer", 1, true},
		{"dead_letter", func(t *testing.T, s *partitionedSale, id string) {
			s.Redis.Client.XAdd(context.Background(), &redis.XAddArgs{Stream: s.keys[2].Dead,
				Values: []string{"source_id", "1-1", "reason", "test", "event_order_id", id}})
		}, []string{"dead_letter"}, "dead_letter", 2, true},
		{"stream_lost_in_a_failover", func(t *testing.T, s *partitionedSale, _ string) {
			s.Redis.Client.Del(context.Background(), s.keys[1].Stream)
		}, []string{"buyer", "stock_postgres", "stream_behind"}, "stream_behind", 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newPartitionedSale(t)
			ctx := context.Background()
			u, _ := s.Shopper(t, "one@example.com")
			var order1 string
			for p, skus := range s.skus {
				for _, sku := range skus {
					// A one-line order of each SKU, and a two-line one
					// with its home in p and a line in the next partition.
					lines := [][]order.Line{{{SKU: sku, Quantity: 2}},
						{{SKU: sku, Quantity: 1}, {SKU: s.skus[(p+1)%len(s.skus)][0], Quantity: 1}}}
					for _, l := range lines {
						placed, err := s.Orders.Place(ctx, u, l, order.PlaceOptions{})
						if err != nil {
							t.Fatal(err)
						}
						if p == 1 && order1 == "" {
							order1 = placed.OrderID
						}
					}
				}
			}
			s.Drain(t)
			if rep := s.audit(t, false); !rep.OK {
				t.Fatalf("audit before the corruption: %+v", rep.Problems)
			}
			tc.corrupt(t, s, order1)
			rep := s.audit(t, false)
			var kinds []string
			named, inPart := !tc.order, false
			for _, p := range rep.Problems {
				if !slices.Contains(kinds, p.Kind) {
					kinds = append(kinds, p.Kind)
				}
				if p.SKU != "" && (p.Partition == nil || *p.Partition != s.parts.Of(p.SKU)) {
					t.Errorf("problem %+v: want it in its SKU's partition %d", p, s.parts.Of(p.SKU))
				}
				inPart = inPart || (p.Kind == tc.partKind && p.Partition != nil && *p.Partition == tc.part)
				named = named || slices.Contains(p.OrderIDs, order1)
			}
			slices.Sort(kinds)
			if rep.OK || !slices.Equal(kinds, tc.kinds) || !named || !inPart {
				t.Fatalf("problems %+v: kinds %v, want %v (naming %s: %v; %s in partition %d: %v)",
					rep.Problems, kinds, tc.kinds, order1, tc.order, tc.partKind, tc.part, inPart)
			}
		})
	}
}

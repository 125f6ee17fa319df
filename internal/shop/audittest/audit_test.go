// Package audittest holds internal/audit's tests through the whole application
// (shoptest), so audit's own tests build only audit and what it imports.
package audittest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// sale is a finished little sale: three buyers of "a" (one pays, one
// cancels, one just waits), all written; and one order of "b" still in
// the stream, never written.
type sale struct {
	*shoptest.App
	users  []string
	orders []string
}

func newSale(t *testing.T) *sale {
	t.Helper()
	s := &sale{App: shoptest.New(t, shoptest.Options{})}
	s.Sale(t, "a", 100, 10, 0)
	s.Sale(t, "b", 100, 5, 0)
	ctx := context.Background()
	for i := range 3 {
		u, _ := s.Shopper(t, "buyer"+string(rune('0'+i))+"@example.com")
		p, err := s.Orders.Place(ctx, u, []order.Line{{SKU: "a", Quantity: i + 1}}, order.PlaceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.users, s.orders = append(s.users, u), append(s.orders, p.OrderID)
	}
	s.Drain(t)
	s.Pay(t, s.users[0], s.orders[0])
	s.Cancel(t, s.users[1], s.orders[1])
	s.Drain(t)
	if _, err := s.Orders.Place(ctx, s.users[2], []order.Line{{SKU: "b", Quantity: 2}}, order.PlaceOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *sale) audit(t *testing.T) audit.Report {
	t.Helper()
	a := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
	a.LagBound = 0
	rep, err := a.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestAuditOfACleanSale(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	// The "b" order is pending: only the stream has it, and with a lag
	// bound of 0 it counts as missing; with the default it does not.
	a := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
	rep, err := a.Run(context.Background())
	if err != nil || !rep.OK {
		t.Fatalf("audit = %+v %v, want ok", rep, err)
	}
	want := []audit.Round{
		{SKU: "a", RoundID: rep.Rounds[0].RoundID, Quantity: 10, Available: 6, Released: 2, HeldRedis: 4, HeldPostgres: 4},
		{SKU: "b", RoundID: rep.Rounds[1].RoundID, Quantity: 5, Available: 3, HeldRedis: 2, HeldPostgres: 2},
	}
	if !slices.Equal(rep.Rounds, want) {
		t.Fatalf("rounds %+v, want %+v", rep.Rounds, want)
	}
	s.Drain(t)
	if rep := s.audit(t); !rep.OK {
		t.Fatalf("audit after the drain: %+v", rep.Problems)
	}
}

// Each corruption is named by the problem it causes.
func TestAuditNamesEachViolation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		corrupt func(t *testing.T, s *sale) (wantOrder string)
		kinds   []string
	}{
		{"available_inflated", func(t *testing.T, s *sale) string {
			s.Redis.Client.HIncrBy(context.Background(), s.Stock.SaleKey("a"), "available", 1)
			return ""
		}, []string{"stock_redis", "stock_postgres"}},
		{"buyer_count_lost", func(t *testing.T, s *sale) string {
			s.Redis.Client.HDel(context.Background(), s.Stock.BuyersKey("a"), s.users[2])
			return s.orders[2]
		}, []string{"stock_redis", "buyer"}},
		{"order_row_lost", func(t *testing.T, s *sale) string {
			exec(t, s, `DELETE FROM orders WHERE id = $1`, s.orders[2])
			return s.orders[2]
		}, []string{"stock_postgres", "buyer", "not_persisted"}},
		{"cancellation_not_recorded", func(t *testing.T, s *sale) string {
			exec(t, s, `DELETE FROM order_transitions WHERE order_id = $1`, s.orders[1])
			return s.orders[1]
		}, []string{"stock_postgres", "buyer"}},
		{"quantity_differs", func(t *testing.T, s *sale) string {
			exec(t, s, `UPDATE sale_rounds SET quantity = quantity + 1 WHERE sku = 'a'`)
			return ""
		}, []string{"quantity"}},
		{"pending_entry_gone", func(t *testing.T, s *sale) string {
			ctx, k := context.Background(), s.OrderKeys()
			id := s.Redis.Client.XAdd(ctx, &redis.XAddArgs{Stream: k.Stream, Values: []string{"x", "1"}}).Val()
			s.Redis.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: k.Group, Consumer: "gone", Streams: []string{k.Stream, ">"}})
			s.Redis.Client.XDel(ctx, k.Stream, id)
			return ""
		}, []string{"pending_missing"}},
		{"stream_lost_in_a_failover", func(t *testing.T, s *sale) string {
			s.Redis.Client.Del(context.Background(), s.OrderKeys().Stream)
			return s.orders[2]
		}, []string{"stock_postgres", "buyer", "stream_behind"}},
		{"dead_letter", func(t *testing.T, s *sale) string {
			k := s.OrderKeys()
			s.Redis.Client.XAdd(context.Background(), &redis.XAddArgs{Stream: k.Dead,
				Values: []string{"source_id", "1-1", "reason", "test", "event_order_id", s.orders[0]}})
			return s.orders[0]
		}, []string{"dead_letter"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSale(t)
			s.Drain(t)
			if rep := s.audit(t); !rep.OK {
				t.Fatalf("audit before the corruption: %+v", rep.Problems)
			}
			wantOrder := tc.corrupt(t, s)
			rep := s.audit(t)
			var kinds []string
			named := wantOrder == ""
			for _, p := range rep.Problems {
				if !slices.Contains(kinds, p.Kind) {
					kinds = append(kinds, p.Kind)
				}
				named = named || slices.Contains(p.OrderIDs, wantOrder)
			}
			slices.Sort(kinds)
			want := slices.Sorted(slices.Values(tc.kinds))
			if rep.OK || !slices.Equal(kinds, want) || !named {
				t.Fatalf("problems %+v: kinds %v, want %v naming order %q", rep.Problems, kinds, want, wantOrder)
			}
		})
	}
}

func exec(t *testing.T, s *sale, sql string, args ...any) {
	t.Helper()
	if _, err := s.DB.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func TestAuditOverHTTP(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	s.Drain(t)
	_, admin := s.User(t, "admin@example.com", "admin")
	_, shopper := s.Shopper(t, "nosy@example.com")
	if r := s.Do(t, "GET", "/api/v1/admin/audit", shopper, ""); r.Status != http.StatusForbidden {
		t.Fatalf("shopper: %d", r.Status)
	}
	r := s.Do(t, "GET", "/api/v1/admin/audit", admin, "")
	if r.Status != http.StatusOK || r.JSON(t)["ok"] != true {
		t.Fatalf("audit: %d %s", r.Status, r.Body)
	}
	s.Redis.Client.HIncrBy(context.Background(), s.Stock.SaleKey("b"), "available", -1)
	r = s.Do(t, "GET", "/api/v1/admin/audit", admin, "")
	if r.Status != http.StatusOK || r.JSON(t)["ok"] != false || !strings.Contains(string(r.Body), `"sku":"b"`) {
		t.Fatalf("audit of a corrupted sale: %d %s", r.Status, r.Body)
	}
}

// A recorded round that never went live (its seeding failed a while ago)
// is named, without failing the audit; a live round whose opened mark
// alone is missing, one being seeded now, and one never marked that sold
// (its mark lost, its sale state gone from Redis since) are not.
func TestAuditNamesRoundsThatNeverWentLive(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	ctx := context.Background()
	var never int64
	err := s.DB.Pool.QueryRow(ctx, `INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents, seeded_at)
		VALUES ('a', 40, 0, 100, now() - interval '2 minutes') RETURNING id`).Scan(&never)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents) VALUES ('b', 9, 0, 100);
		UPDATE sale_rounds SET opened_at = NULL WHERE sku = 'b' AND quantity = 5;
		INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents, sold, seeded_at)
		VALUES ('gone', 30, 0, 100, 2, now() - interval '2 minutes')`); err != nil {
		t.Fatal(err)
	}
	a := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
	rep, err := a.Run(ctx)
	if err != nil || !rep.OK {
		t.Fatalf("audit = %+v %v, want ok", rep, err)
	}
	if len(rep.NeverLive) != 1 || rep.NeverLive[0].RoundID != never || rep.NeverLive[0].SKU != "a" || rep.NeverLive[0].Quantity != 40 {
		t.Fatalf("never live: %+v, want round %d of a", rep.NeverLive, never)
	}
}

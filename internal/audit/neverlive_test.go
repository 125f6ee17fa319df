package audit_test

import (
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/audit"
)

// A round never marked opened that sold went live (its mark alone was
// lost, and its sale state left Redis since): it is not named as a round
// that never went live.
func TestAuditDoesNotNameARoundThatSold(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	ctx := context.Background()
	var never int64
	err := s.DB.Pool.QueryRow(ctx, `INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents, seeded_at)
		VALUES ('gone', 40, 0, 100, now() - interval '3 minutes') RETURNING id`).Scan(&never)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents, sold, seeded_at)
		VALUES ('gone', 30, 0, 100, 2, now() - interval '2 minutes')`); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log).Run(ctx)
	if err != nil || !rep.OK {
		t.Fatalf("audit = %+v %v, want ok", rep, err)
	}
	if len(rep.NeverLive) != 1 || rep.NeverLive[0].RoundID != never {
		t.Fatalf("never live: %+v, want only round %d", rep.NeverLive, never)
	}
}

package audit_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/outage"
	"github.com/shop-oss/shop/internal/testenv"
)

// outageBound is how long an audit may take to give up on a PostgreSQL
// that stopped answering: its first statement's deadline (3 s, as every
// other PostgreSQL route) with room for a loaded machine, and well under
// the 10 s it took before.
const outageBound = 6 * time.Second

// A stalled PostgreSQL (a proxy that stops forwarding, as a SIGSTOPped
// server would) fails the audit as unavailable (the route's 503) within
// the same bound as the other PostgreSQL routes.
func TestAuditWhilePostgresHangs(t *testing.T) {
	t.Parallel()
	pool, proxy := testenv.NewProxiedDatabase(t)
	r := testenv.NewRedis(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stock := inventory.NewStock(r.Client, r.Prefix)
	a := audit.New(pool, r.Client, stock, r.Prefix, log)
	if _, err := a.Run(context.Background()); err != nil {
		t.Fatalf("before the stall: %v", err)
	}

	proxy.Stall(true)
	t.Cleanup(func() { proxy.Stall(false) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the route's own bound
	defer cancel()
	start := time.Now()
	_, err := a.Run(ctx)
	took := time.Since(start)
	if !outage.Is(err) {
		t.Fatalf("audit with PostgreSQL stalled: %v, want an unavailable error (503)", err)
	}
	if took > outageBound {
		t.Fatalf("audit gave up after %s with PostgreSQL stalled, want under %s", took.Round(time.Millisecond), outageBound)
	}
}

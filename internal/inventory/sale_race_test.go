package inventory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shop-oss/shop/internal/inventory"
)

// A price change or a deletion made while a round is being opened, after
// the open recorded the round (at the price it read) and before it opened
// it in Redis, leaves the live sale as PostgreSQL records them: the new
// round at the product's price now, or no sale for a product that is
// gone. Unordered, the open would reach Redis last with what it read.
// The other write is started at that point and the open goes on once the
// write is done or is seen waiting its turn.
func TestAdminWriteDuringAnOpenIsOrderedAfterIt(t *testing.T) {
	t.Parallel()
	for _, write := range []string{"update", "delete"} {
		t.Run(write, func(t *testing.T) {
			t.Parallel()
			in := newServices(t)
			ctx := context.Background()
			in.create(t, "p", "c", 100)
			in.seed(t, "p", 5)
			done := make(chan error, 1)
			in.Sales.InjectAfterRecord(func() {
				in.Sales.InjectAfterRecord(nil)
				go func() {
					if write == "update" {
						_, err := in.Catalog.Update(ctx, "p", inventory.ProductInput{Name: "n", Category: "c", PriceCents: 250})
						done <- err
						return
					}
					done <- in.Catalog.Delete(ctx, "p")
				}()
				waitDoneOrLocked(t, in.db.Pool, done)
			})
			if _, err := in.Sales.Open(ctx, "p", inventory.Seed{Quantity: 7}); err != nil {
				t.Fatalf("open: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", write, err)
			}
			live, ok, err := in.stock.Live(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			var price int64
			err = in.db.Pool.QueryRow(ctx, `SELECT price_cents FROM products WHERE sku = 'p'`).Scan(&price)
			switch {
			case write == "delete" && !errors.Is(err, pgx.ErrNoRows):
				t.Fatalf("not deleted: %v", err)
			case write == "delete" && ok:
				t.Fatalf("the product was deleted, but round %d is live in Redis", live.Round)
			case write == "update" && err != nil:
				t.Fatal(err)
			case write == "update" && (!ok || live.Quantity != 7 || live.PriceCents != 250):
				t.Fatalf("Redis has %+v (live %v), want the new round at the new price, 250", live, ok)
			}
		})
	}
}

// waitingForAdvisoryLocks counts the sessions of the test's database that
// wait for an advisory lock (a sale lock).
const waitingForAdvisoryLocks = `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// waitDoneOrLocked waits until the write is done (its error put back for
// the caller) or waits for the sale lock of "p", in the process or on an
// advisory lock in the test's database.
func waitDoneOrLocked(t *testing.T, db *pgxpool.Pool, done chan error) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); { // a bound on a hang
		select {
		case err := <-done:
			done <- err
			return
		default:
		}
		var waiting int
		if err := db.QueryRow(ctx, waitingForAdvisoryLocks).Scan(&waiting); err != nil {
			t.Error(err)
			return
		}
		if waiting > 0 || inventory.SaleWaiters(db, "p") > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Error("the write neither finished nor waited for the open")
}

// Admin writes of one SKU released together on one instance take their
// turns at the sale lock in the instance: none of them waits for it in
// PostgreSQL, where each waiter would hold one of the pool's connections
// (the pool the order writer shares). Every write lands, and the live
// price is the catalog's.
func TestAdminWritesOfOneSKUQueueInTheInstance(t *testing.T) {
	t.Parallel()
	in := newServices(t)
	ctx := context.Background()
	in.create(t, "q", "c", 100)
	in.seed(t, "q", 5)
	watcher, err := pgx.Connect(ctx, in.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	stop, most := make(chan struct{}), make(chan int, 1)
	go func() {
		seen := 0
		for {
			select {
			case <-stop:
				most <- seen
				return
			default:
			}
			var n int
			if err := watcher.QueryRow(ctx, waitingForAdvisoryLocks).Scan(&n); err != nil {
				t.Error(err)
			}
			seen = max(seen, n)
		}
	}()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := in.Catalog.Update(ctx, "q", inventory.ProductInput{Name: "n", Category: "c", PriceCents: int64(200 + i)}); err != nil {
				t.Errorf("update %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(stop)
	if n := <-most; n != 0 {
		t.Errorf("up to %d writes waited for the sale lock in PostgreSQL, each holding a connection", n)
	}
	live, _, err := in.stock.Live(ctx, "q")
	var price int64
	if err == nil {
		err = in.db.Pool.QueryRow(ctx, `SELECT price_cents FROM products WHERE sku = 'q'`).Scan(&price)
	}
	if err != nil || live.PriceCents != price {
		t.Fatalf("live price %d, catalog %d (%v)", live.PriceCents, price, err)
	}
}

package inventory

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockSale serializes, per SKU, the admin writes that change both PostgreSQL
// and the SKU's live sale in Redis: opening a round (at the product's price),
// updating a product (the live price follows) and deleting one (its sale
// closes). Each holds the lock from before its PostgreSQL write until it
// returns (its Redis write the last step that needs it), so Redis takes them
// in the order PostgreSQL did.
// More in docs/design/inventory.md ("salelock.go").
func lockSale(ctx context.Context, db *pgxpool.Pool, sku string) (*pgxpool.Conn, func(), error) {
	// The whole wait is a PostgreSQL statement's: a stalled server answers
	// 503 as soon as without the lock, and so does a holder that takes
	// longer.
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	leave, err := gatesOf(db).enter(ctx, sku)
	if err != nil {
		return nil, nil, dbError("lock the sale of "+sku, err)
	}
	conn, unlockSession, err := lockSaleSession(ctx, db, sku)
	if err != nil {
		leave()
		return nil, nil, err
	}
	return conn, func() { unlockSession(); leave() }, nil
}

// lockSaleSession takes sku's advisory lock on a connection of db's.
func lockSaleSession(ctx context.Context, db *pgxpool.Pool, sku string) (conn *pgxpool.Conn, unlock func(), err error) {
	conn, err = db.Acquire(ctx)
	if err != nil {
		return nil, nil, dbError("lock the sale of "+sku, err)
	}
	key := "shop:sale:" + sku
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, key); err != nil {
		// Cut off just as it was granted, the lock may be held: the
		// session goes, and the lock with it.
		endSession(conn)
		return nil, nil, dbError("lock the sale of "+sku, err)
	}
	return conn, func() {
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key); err != nil {
			endSession(conn)
			return
		}
		conn.Release()
	}, nil
}

// endSession closes conn's session rather than pooling it (the pool
// destroys a closed connection on release).
func endSession(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Conn().Close(ctx)
	conn.Release()
}

// rowQuerier is a pool or one of its connections (a sale lock's).
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// saleGates are a pool's queues in front of the sale locks: one per SKU
// while some write of it waits or holds.
type saleGates struct {
	mu    sync.Mutex
	bySKU map[string]*saleGate
}

type saleGate struct {
	turn  chan struct{} // a token while a write has its turn
	users int           // writes holding or waiting; the gate goes at 0
}

// gates are the saleGates of each pool (the Catalog and the Sales of an
// instance each hold the pool, not one another).
// A pool's entry stays for the process's life: there is one pool or two.
var gates sync.Map // *pgxpool.Pool -> *saleGates

func gatesOf(db *pgxpool.Pool) *saleGates {
	g, _ := gates.LoadOrStore(db, &saleGates{bySKU: map[string]*saleGate{}})
	return g.(*saleGates)
}

// waiting is how many writes of sku wait for their turn.
func (g *saleGates) waiting(sku string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.bySKU[sku]; e != nil {
		return e.users - len(e.turn)
	}
	return 0
}

// enter waits for sku's turn (or ctx's end); leave gives it up.
func (g *saleGates) enter(ctx context.Context, sku string) (leave func(), err error) {
	g.mu.Lock()
	e := g.bySKU[sku]
	if e == nil {
		e = &saleGate{turn: make(chan struct{}, 1)}
		g.bySKU[sku] = e
	}
	e.users++
	g.mu.Unlock()
	select {
	case e.turn <- struct{}{}:
		return func() { <-e.turn; g.done(sku, e) }, nil
	case <-ctx.Done():
		g.done(sku, e)
		return nil, ctx.Err()
	}
}

func (g *saleGates) done(sku string, e *saleGate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e.users--; e.users == 0 {
		delete(g.bySKU, sku)
	}
}

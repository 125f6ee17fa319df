package inventory

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockSale serializes, per SKU, the admin writes that change both
// PostgreSQL and the SKU's live sale in Redis: opening a round (at the
// product's price), updating a product (the live price follows) and
// deleting one (its sale closes). Each holds the lock from before its
// PostgreSQL write until it returns (its Redis write the last step that
// needs it), so Redis takes them in the order PostgreSQL did. Unordered, an open that read the old price, or read the product
// just before its deletion, could reach Redis last and stay there: sold
// at a price the catalog no longer has, or a sale of a deleted product.
//
// It is a PostgreSQL session-level advisory lock: every instance's writes
// wait on it, and it goes with the session if the process dies. The
// holder makes its PostgreSQL write on the lock's connection (conn), so
// that holder and waiters never need more than one connection each: a
// holder waiting for a pool its waiters had taken would wait for itself.
// A waiter holds its connection while it waits (3 s at most): many admin
// writes to one SKU at once take as many of the pool's connections, which
// the writer of `shop serve` shares. Admin writes are rare; purchases
// never take the lock.
func lockSale(ctx context.Context, db *pgxpool.Pool, sku string) (conn *pgxpool.Conn, unlock func(), err error) {
	// The wait is a PostgreSQL statement's: a stalled server answers 503
	// as soon as without the lock, and so does a holder that takes longer.
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
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

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/bestseller"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/writer"
)

// `shop seed demo --reset` clears the demo's data, and only it, so that a
// demo that was bought out, refunded and edited can be shown again from
// the start without touching what an admin added beside it:
//
//   - the demo products (demoCatalog), their sale rounds (and rooms), and
//     every order with a line of them, whoever bought it: those orders
//     hold the rounds' units, so they go with the rounds;
//   - the demo shoppers (demoShopper) with all their orders, and their
//     sessions;
//   - first, though, every order accepted so far is persisted (a writer
//     runs until the order streams are drained): an order still in a
//     stream would otherwise be written after the reset, naming a round
//     and a shopper that are gone;
//   - what Redis keeps of those orders (their status hashes, so that no
//     sweeper expires a deleted order later), and the best-seller boards,
//     rebuilt from what PostgreSQL keeps.
//
// The demo admin is kept, and so are its sessions: a console left open
// keeps working. The demo stores are put back as seeded. The live stock
// of the demo products needs no clearing: seeding opens a new round,
// which replaces it (a round id is never reused).
//
// It is a development tool (SHOP_ENV=dev): the rows of several domains
// go in one transaction of SQL kept here, rather than through each
// domain's API, which has no "forget this history" on purpose.
const (
	demoOrdersSQL = `
SELECT o.id::text FROM orders o
WHERE o.id IN (SELECT order_id FROM order_items WHERE sku = ANY($1))
   OR o.user_id IN (SELECT id FROM users WHERE email = ANY($2))`

	demoShoppersSQL = `SELECT id::text FROM users WHERE email = ANY($1)`
)

// resetDeletes run in this order, on @skus the demo SKUs, @orders the
// demo orders' ids and @shoppers the demo shoppers' ids: each row goes
// before the rows that reference it.
var resetDeletes = []string{
	`DELETE FROM payments WHERE order_id = ANY(@orders::uuid[])`,
	`DELETE FROM order_transitions WHERE order_id = ANY(@orders::uuid[])`,
	`DELETE FROM orders WHERE id = ANY(@orders::uuid[])`, // its items cascade
	`DELETE FROM queue_entries WHERE round_id IN (SELECT id FROM sale_rounds WHERE sku = ANY(@skus::text[]))`,
	`DELETE FROM queue_rooms WHERE round_id IN (SELECT id FROM sale_rounds WHERE sku = ANY(@skus::text[]))`,
	`DELETE FROM sale_rounds WHERE sku = ANY(@skus::text[])`,
	`DELETE FROM products WHERE sku = ANY(@skus::text[])`, // its image cascades
	`DELETE FROM users WHERE id = ANY(@shoppers::uuid[])`,
}

// resetDemo clears the demo's data (see above).
func resetDemo(ctx context.Context, st *stores, cfg *config.Config, log *slog.Logger, users *auth.Service,
	boards *bestseller.Service) error {
	if err := persistAccepted(ctx, st, cfg, log); err != nil {
		return fmt.Errorf("seed demo --reset: %w", err)
	}
	db, rdb := st.db, st.redis
	statuses := ledger.New(rdb, cfg.KeyPrefix, cfg.Partitions())
	skus, emails := demoSKUs(), demoShoppers()
	orders, err := queryStrings(ctx, db, demoOrdersSQL, skus, emails)
	if err != nil {
		return fmt.Errorf("seed demo --reset: demo orders: %w", err)
	}
	shoppers, err := queryStrings(ctx, db, demoShoppersSQL, emails)
	if err != nil {
		return fmt.Errorf("seed demo --reset: demo shoppers: %w", err)
	}
	// Sessions first: a shopper deleted with a live session could still
	// buy, as nobody.
	for _, id := range shoppers {
		if _, err := users.EraseUser(ctx, id); err != nil {
			return fmt.Errorf("seed demo --reset: sign out %s: %w", id, err)
		}
	}
	args := pgx.NamedArgs{"skus": skus, "orders": orders, "shoppers": shoppers}
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, q := range resetDeletes {
			if _, err := tx.Exec(ctx, q, args); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("seed demo --reset: %w", err)
	}
	if err := forgetStatuses(ctx, rdb, statuses, orders); err != nil {
		return err
	}
	if err := boards.Rebuild(ctx); err != nil {
		return fmt.Errorf("seed demo --reset: best sellers: %w", err)
	}
	return nil
}

// drainLimit bounds the wait for the order streams to drain.
const drainLimit = 30 * time.Second

// persistAccepted runs an order writer until every order accepted so far
// is written to PostgreSQL and acknowledged (alongside `shop serve`'s own
// writer, if one runs: a consumer of the same group).
func persistAccepted(ctx context.Context, st *stores, cfg *config.Config, log *slog.Logger) error {
	wf := writerFlags{consumer: "seed-reset", batch: 1000, claimIdle: 30 * time.Second, forgetIdle: 10 * time.Minute,
		maxDeliveries: 5, concurrency: 1}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- newWriter(st, cfg, log, newRegistry(), wf, nil).Run(wctx) }()
	err := waitDrained(ctx, st.redis, orderkey.Streams(cfg.KeyPrefix, cfg.Partitions()))
	stop()
	// A writer may return at once (nothing to do) or when stopped.
	if werr := <-done; err == nil && werr != nil && !errors.Is(werr, context.Canceled) {
		err = werr
	}
	return err
}

// waitDrained waits until each stream's group has read and acknowledged
// every entry (or the stream does not exist).
func waitDrained(ctx context.Context, rdb redis.UniversalClient, streams []string) error {
	deadline := time.Now().Add(drainLimit)
	for _, s := range streams {
		for !writer.Drained(ctx, rdb, s) {
			if time.Now().After(deadline) {
				return fmt.Errorf("the order stream %s did not drain in %s: is PostgreSQL up?", s, drainLimit)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// forgetStatuses deletes the status hashes of deleted orders: the
// lifecycle and the sweeper go by them, and an order with none is left
// alone.
func forgetStatuses(ctx context.Context, rdb redis.UniversalClient, l *ledger.Ledger, ids []string) error {
	for _, id := range ids {
		if err := rdb.Del(ctx, l.Keys(0).StatusKey(id)).Err(); err != nil {
			return fmt.Errorf("seed demo --reset: order %s: %w", id, err)
		}
	}
	return nil
}

func queryStrings(ctx context.Context, db *pgxpool.Pool, q string, args ...any) ([]string, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func demoSKUs() []string {
	out := make([]string, len(demoCatalog))
	for i, p := range demoCatalog {
		out[i] = p.sku
	}
	return out
}

func demoShoppers() []string {
	out := make([]string, len(demoSales))
	for i := range demoSales {
		out[i] = demoShopper(i)
	}
	return out
}

package inventory

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
)

// Live stock: the state of each SKU's current sale round in Redis.
// More in docs/design/inventory.md ("stock.go").

var (
	//go:embed seed.lua
	seedLua    string
	seedScript = redis.NewScript(seedLua)
)

// Stock reads and changes the live sale state in Redis.
type Stock struct {
	rdb    redis.UniversalClient
	prefix string
	parts  keyspace.Partitions
	hints  bucketHints // how many buckets each SKU's round has, as purchases learnt it
	// faultAfterMoveOut, for tests, runs after a cluster move's first
	// step (a crash there leaves the record for FinishMoves).
	faultAfterMoveOut func() error
}

// NewStock returns the live stock whose keys start with prefix, on a
// single Redis with one order partition (every SKU tagged by itself).
func NewStock(rdb redis.UniversalClient, prefix string) *Stock {
	return NewPartitionedStock(rdb, prefix, keyspace.Partitions{})
}

// NewPartitionedStock returns the live stock under prefix whose SKUs fall
// in parts; grouped partitions (a cluster) tag each SKU's keys by its
// partition.
func NewPartitionedStock(rdb redis.UniversalClient, prefix string, parts keyspace.Partitions) *Stock {
	return &Stock{rdb: rdb, prefix: prefix, parts: parts}
}

// Partitions is how the SKUs fall in the order stream's partitions: the
// order package appends a SKU's orders to the partition Partitions().Of.
func (s *Stock) Partitions() keyspace.Partitions { return s.parts }

// SaleKey is the key of sku's sale state hash. The order package's reserve
// script reads and changes it (its format: docs/design/inventory.md); nothing
// else outside this package may.
func (s *Stock) SaleKey(sku string) string {
	if s.parts.Grouped() {
		return s.prefix + "sale:" + s.parts.Tag(s.parts.Of(sku)) + sku
	}
	return s.prefix + "sale:{" + sku + "}"
}

// BuyersKey is the key of sku's per-buyer counts, the reserve script's too.
func (s *Stock) BuyersKey(sku string) string { return s.SaleKey(sku) + ":buyers" }

// releasedKey is the set of order ids whose units of sku this round
// already went back to stock: it makes Release happen once per order.
func (s *Stock) releasedKey(sku string) string { return s.SaleKey(sku) + ":released" }

// ReleasedKey is releasedKey for readers (the audit reads, on a cluster,
// which orders' units of sku went back, at the instant of its snapshot).
func (s *Stock) ReleasedKey(sku string) string { return s.releasedKey(sku) }

// LiveRound is the live state of a SKU's current sale round.
type LiveRound struct {
	Round        int64
	Quantity     int64
	Available    int64
	PerUserLimit int
	StartsAt     time.Time // zero: open from seeding
	EndsAt       time.Time // zero: no end
	PriceCents   int64
	Released     int64     // units given back by released orders this round
	Room         *LiveRoom // nil: no waiting room
	// Buckets is how many sale hashes the units are split over (0 or 1:
	// one, the SKU's of before); Available and Released are their sums.
	Buckets int
	// Draw: the round is a draw (draw.go); its units are not bought.
	Draw bool
}

// roomArgs are the seed and restore scripts' waiting room arguments,
// which carry a draw's mark (drawArgs) when the round is one.
func (r LiveRound) roomArgs() []any {
	if r.Draw {
		return drawArgs
	}
	return r.Room.args()
}

// OpenRound replaces the live state of sku with a fresh round: available is
// its quantity and the buyer counts start from zero. The round must already
// be recorded in PostgreSQL (its id is r.Round); a round older than the one
// open is refused (errStaleRound). When ctx has a deadline the script
// carries it and Redis refuses to open the round past it (errTooLate): a
// script that reaches a stalled Redis and runs when it resumes, after the
// caller gave up, changes nothing.
func (s *Stock) OpenRound(ctx context.Context, sku string, r LiveRound) error {
	// In milliseconds, not a Duration: an end centuries away (up to 9999)
	// overflows time.Duration's 292 years.
	var ttlMs int64
	if !r.EndsAt.IsZero() {
		ttlMs = max(r.EndsAt.Add(7*24*time.Hour).UnixMilli()-time.Now().UnixMilli(), 0)
	}
	var applyBy int64 // 0: no deadline
	if d, ok := ctx.Deadline(); ok {
		applyBy = d.UnixMilli()
	}
	opened, err := s.openRound(ctx, sku, r, applyBy, ttlMs)
	switch {
	case err != nil:
		return fmt.Errorf("open sale round %d for %s: %w", r.Round, sku, err)
	case opened == 0:
		return fmt.Errorf("open sale round %d for %s: %w", r.Round, sku, errStaleRound)
	case opened == -1:
		return fmt.Errorf("open sale round %d for %s: %w", r.Round, sku, errTooLate)
	}
	return nil
}

var (
	// errStaleRound: a round as new or newer is already open.
	errStaleRound = errors.New("a newer round is open")
	// errTooLate: the seed script ran after its caller's deadline.
	errTooLate = errors.New("the seed reached Redis after its deadline; nothing was opened")
)

// openRound runs the seeding: one run of seed.lua for a round of one
// bucket (closing the buckets of a round of several it replaces), else
// openBuckets. It returns seed.lua's answer.
func (s *Stock) openRound(ctx context.Context, sku string, r LiveRound, applyBy, ttlMs int64) (int, error) {
	if r.Buckets > 1 {
		return s.openBuckets(ctx, sku, r, applyBy, ttlMs)
	}
	before, err := s.bucketsOf(ctx, sku)
	if err != nil {
		return 0, err
	}
	args := append([]any{r.Round, r.Quantity, r.PerUserLimit, unixMilli(r.StartsAt), unixMilli(r.EndsAt),
		r.PriceCents, ttlMs, applyBy, s.ChangesChannel(sku), s.PublishCommand()}, r.roomArgs()...)
	opened, err := seedScript.Run(ctx, s.rdb, []string{s.SaleKey(sku), s.BuyersKey(sku), s.releasedKey(sku)},
		args...).Int()
	if err != nil || opened != 1 {
		return opened, err
	}
	return 1, s.closeBuckets(ctx, sku, 1, before)
}

// Live returns the live round of sku; ok is false when none was seeded.
func (s *Stock) Live(ctx context.Context, sku string) (LiveRound, bool, error) {
	m, err := s.rdb.HGetAll(ctx, s.SaleKey(sku)).Result()
	if err != nil {
		return LiveRound{}, false, fmt.Errorf("live stock of %s: %w", sku, err)
	}
	if m["round"] == "" {
		return LiveRound{}, false, nil
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	r := LiveRound{
		Round:        num("round"),
		Quantity:     num("quantity"),
		Available:    num("available"),
		PerUserLimit: int(num("limit")),
		StartsAt:     fromMilli(num("starts_ms")),
		EndsAt:       fromMilli(num("ends_ms")),
		PriceCents:   num("price_cents"),
		Released:     num("released"),
		Room:         liveRoom(m),
		Buckets:      max(int(num("buckets")), 1),
		Draw:         m["draw"] == "1",
	}
	sums := []int64{r.Available, r.Released}
	if err := s.sumBuckets(ctx, sku, r.Buckets, sums, "available", "released"); err != nil {
		return LiveRound{}, false, fmt.Errorf("live stock of %s: %w", sku, err)
	}
	r.Available, r.Released = sums[0], sums[1]
	return r, true, nil
}

// Available returns the live available units of each SKU, in one round trip
// (0 for a SKU with no sale).
func (s *Stock) Available(ctx context.Context, skus ...string) ([]int64, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(skus))
	for i, sku := range skus {
		cmds[i] = pipe.HMGet(ctx, s.SaleKey(sku), "available", "buckets")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("available stock: %w", err)
	}
	out := make([]int64, len(skus))
	for i, c := range cmds {
		v := c.Val()
		str, _ := v[0].(string) // nil: no sale, 0
		out[i], _ = strconv.ParseInt(str, 10, 64)
		// A round of several buckets: a second trip, for its SKUs only.
		if str, _ = v[1].(string); str != "" {
			buckets, _ := strconv.Atoi(str)
			sum := []int64{out[i]}
			if err := s.sumBuckets(ctx, skus[i], buckets, sum, "available"); err != nil {
				return nil, fmt.Errorf("available stock: %w", err)
			}
			out[i] = sum[0]
		}
	}
	return out, nil
}

// SetPrice changes the unit price of sku's live round, if it has one, so
// that reservations take the product's price at that moment.
// Each bucket of a round of several takes the price in its own step.
func (s *Stock) SetPrice(ctx context.Context, sku string, priceCents int64) error {
	buckets, err := s.bucketsOf(ctx, sku)
	if err != nil {
		return fmt.Errorf("set live price of %s: %w", sku, err)
	}
	for b := range buckets {
		err := setPriceScript.Run(ctx, s.rdb, []string{s.BucketKey(sku, b, buckets)}, priceCents).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("set live price of %s: %w", sku, err)
		}
	}
	return nil
}

// setPriceScript updates the price only of an existing round: a plain HSET
// would create a half sale hash for a SKU with none.
var setPriceScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('HSET', KEYS[1], 'price_cents', ARGV[1])
end
return 0`)

// Close ends sku's live sale (the product was deleted): nothing more can be
// reserved. Orders already reserved are still persisted by the writer.
// Its subscribers hear "no sale" in the same MULTI (PublishCommand's: on a
// cluster the MULTI's keys and the sharded channel share one slot).
func (s *Stock) Close(ctx context.Context, sku string) error {
	buckets, err := s.bucketsOf(ctx, sku)
	if err != nil {
		return fmt.Errorf("close sale of %s: %w", sku, err)
	}
	if err := s.closeBuckets(ctx, sku, 1, buckets); err != nil {
		return fmt.Errorf("close sale of %s: %w", sku, err)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Unlink(ctx, s.SaleKey(sku), s.BuyersKey(sku), s.releasedKey(sku))
		if s.ShardedChanges() {
			p.SPublish(ctx, s.ChangesChannel(sku), closedMessage)
		} else {
			p.Publish(ctx, s.ChangesChannel(sku), closedMessage)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("close sale of %s: %w", sku, err)
	}
	return nil
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

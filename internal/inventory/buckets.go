package inventory

import (
	"context"
	"crypto/sha1" //nolint:gosec // a spread of user ids over buckets, as the scripts' redis.sha1hex; no secret
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Stock buckets: a round's units split over several sale hashes, each
// under a hash tag of its own, so that one SKU's purchases spread over a
// cluster's masters. Bucket 0 is the SKU's sale hash of before; the
// design (keys, home buckets, moves) is docs/design/buckets.md.

// MaxBuckets bounds a round's buckets (the stock PUT's `buckets`).
const MaxBuckets = 64

// BucketKey is the sale hash of sku's bucket b: SaleKey for bucket 0,
// else a hash under a tag of its own (on a cluster, a partition's spaced
// evenly from the SKU's over buckets of them). Its :buyers and :released
// keys and its changes channel follow it as SaleKey's do.
func (s *Stock) BucketKey(sku string, b, buckets int) string {
	if b == 0 {
		return s.SaleKey(sku)
	}
	suffix := "#" + strconv.Itoa(b)
	if s.parts.Grouped() {
		return s.prefix + "sale:" + s.parts.Tag(s.BucketPartition(sku, b, buckets)) + sku + suffix
	}
	return s.prefix + "sale:{" + sku + suffix + "}"
}

// BucketPartition is the order partition whose slot bucket b of sku's
// round of buckets shares on a cluster: the SKU's own for bucket 0, the
// others spaced evenly over the partitions from it. A purchase from the
// bucket appends its order to that partition's stream in the same script.
func (s *Stock) BucketPartition(sku string, b, buckets int) int {
	p := s.parts.Of(sku)
	if b == 0 || buckets <= 1 || !s.parts.Grouped() {
		return p // a single Redis: any partition's stream is as near
	}
	n := s.parts.Count()
	return (p + b*n/buckets) % n
}

// BucketChannel is the changes channel a purchase from bucket b publishes
// on: the SKU's on a single Redis, the bucket's own on a cluster, where
// SPUBLISH must stay in the slot of the keys the script writes.
func (s *Stock) BucketChannel(sku string, b, buckets int) string {
	if b == 0 || !s.parts.Grouped() {
		return s.ChangesChannel(sku)
	}
	return s.BucketKey(sku, b, buckets) + ":changed"
}

// BucketBuyersKey is the buyer counts of sku's bucket b: the shoppers
// homed there (HomeBucket), and only they.
func (s *Stock) BucketBuyersKey(sku string, b, buckets int) string {
	return s.BucketKey(sku, b, buckets) + ":buyers"
}

// HomeBucket is user's bucket in a round of buckets: the first 32 bits of
// the SHA-1 of the user id, mod buckets. lines.lua computes the same with
// redis.sha1hex and refuses a purchase decided anywhere else, so a
// shopper's count lives in one bucket only (docs/design/buckets.md).
func HomeBucket(user string, buckets int) int {
	if buckets <= 1 {
		return 0
	}
	sum := sha1.Sum([]byte(user)) //nolint:gosec // see the import
	return int(binary.BigEndian.Uint32(sum[:4]) % uint32(buckets))
}

// share is bucket b's part of quantity units over buckets: the first
// quantity mod buckets get one more, so the shares sum to quantity.
func share(quantity int64, b, buckets int) int64 {
	n := quantity / int64(buckets)
	if int64(b) < quantity%int64(buckets) {
		n++
	}
	return n
}

// openBuckets seeds each bucket of r (r.Buckets > 1) in its own run of
// seed.lua, in its own slot: the others first and bucket 0, where
// readers find the round, last; then it closes the buckets of the round
// before beyond r's. Only bucket 0 publishes the round's state.
func (s *Stock) openBuckets(ctx context.Context, sku string, r LiveRound, applyBy, ttlMs int64) (int, error) {
	before, err := s.bucketsOf(ctx, sku)
	if err != nil {
		return 0, err
	}
	for b := r.Buckets - 1; b >= 0; b-- {
		channel := ""
		if b == 0 {
			channel = s.ChangesChannel(sku)
		}
		key := s.BucketKey(sku, b, r.Buckets)
		args := append([]any{r.Round, r.Quantity, r.PerUserLimit, unixMilli(r.StartsAt), unixMilli(r.EndsAt),
			r.PriceCents, ttlMs, applyBy, channel, s.PublishCommand()}, r.roomArgs()...)
		args = append(args, b, r.Buckets, share(r.Quantity, b, r.Buckets))
		opened, err := seedScript.Run(ctx, s.rdb, []string{key, key + ":buyers", key + ":released"}, args...).Int()
		if err != nil || opened != 1 {
			return opened, err
		}
	}
	return 1, s.closeBuckets(ctx, sku, r.Buckets, before)
}

// closeBuckets removes sku's buckets from..to-1 of a round of to buckets
// that a round of from buckets replaced (from >= 1 keeps bucket 0).
func (s *Stock) closeBuckets(ctx context.Context, sku string, from, to int) error {
	for b := max(from, 1); b < to; b++ {
		key := s.BucketKey(sku, b, to)
		if err := s.rdb.Unlink(ctx, key, key+":buyers", key+":released").Err(); err != nil {
			return fmt.Errorf("close bucket %d of %s: %w", b, sku, err)
		}
	}
	return nil
}

// bucketsOf reads how many buckets sku's live round has (1 with none).
func (s *Stock) bucketsOf(ctx context.Context, sku string) (int, error) {
	v, err := s.rdb.HGet(ctx, s.SaleKey(sku), "buckets").Int()
	switch {
	case errors.Is(err, redis.Nil):
		return 1, nil
	case err != nil:
		return 0, fmt.Errorf("buckets of %s: %w", sku, err)
	}
	return max(v, 1), nil
}

// sumBuckets sets sums (holding bucket 0's values of fields: available,
// released, ...) to their sums over every bucket of a round of buckets,
// bucket 0 read again with the others: in one MULTI on a single Redis,
// so that the sum is one instant's (a release into bucket 0 and a sale
// from another between two reads would show units the round never had
// so few of); in one pipeline on a cluster, where the buckets lie in
// several slots (go-redis sends it to each master at once).
func (s *Stock) sumBuckets(ctx context.Context, sku string, buckets int, sums []int64, fields ...string) error {
	if buckets <= 1 {
		return nil
	}
	values, err := s.readEach(ctx, sku, buckets, fields...)
	if err != nil {
		return err
	}
	clear(sums)
	for _, v := range values {
		for i := range v {
			sums[i] += intField(v[i])
		}
	}
	return nil
}

// readEach reads fields of every bucket of sku's round of buckets, in
// bucket order: in one MULTI on a single Redis (one instant's values),
// in one pipeline on a cluster.
func (s *Stock) readEach(ctx context.Context, sku string, buckets int, fields ...string) ([][]any, error) {
	pipe := s.rdb.TxPipeline()
	if s.parts.Grouped() {
		pipe = s.rdb.Pipeline()
	}
	cmds := make([]*redis.SliceCmd, buckets)
	for b := range buckets {
		cmds[b] = pipe.HMGet(ctx, s.BucketKey(sku, b, buckets), fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("buckets of %s: %w", sku, err)
	}
	out := make([][]any, buckets)
	for b, c := range cmds {
		out[b] = c.Val()
	}
	return out, nil
}

// intField reads a hash field's integer (absent reads 0).
func intField(v any) int64 {
	str, _ := v.(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
}

// bucketHints remembers how many buckets each SKU's live round has, as
// the purchases of this process last learnt it (1 until told). A stale
// hint costs a retry, never a wrong count: the script deciding a
// purchase refuses one not made in the shopper's home bucket.
type bucketHints struct{ m sync.Map }

func (h *bucketHints) of(sku string) int {
	if v, ok := h.m.Load(sku); ok {
		return v.(int)
	}
	return 1
}

// Home is where a shopper's purchases of a SKU are decided: their home
// bucket's sale hash, buyer counts and changes channel, and the order
// partition whose slot those keys share on a cluster.
type Home struct {
	Sale, Buyers, Channel      string
	Bucket, Buckets, Partition int
}

// HomeOf is user's Home for sku, as this process last knew the round's
// buckets (SaleKey, BuyersKey and bucket 0 for a round of one). A
// purchase refused 'bucket' asks LearnBuckets and tries again.
func (s *Stock) HomeOf(sku, user string) Home {
	buckets := s.hints.of(sku)
	return s.HomeIn(sku, user, buckets)
}

// HomeIn is user's Home for sku in a round of buckets.
func (s *Stock) HomeIn(sku, user string, buckets int) Home {
	b := HomeBucket(user, buckets)
	sale := s.BucketKey(sku, b, buckets)
	return Home{Sale: sale, Buyers: sale + ":buyers", Channel: s.BucketChannel(sku, b, buckets),
		Bucket: b, Buckets: max(buckets, 1), Partition: s.BucketPartition(sku, b, buckets)}
}

// BucketsHint is how many buckets sku's round has, as PurchaseKeys
// assumes.
func (s *Stock) BucketsHint(sku string) int { return s.hints.of(sku) }

// LearnBuckets reads how many buckets sku's live round has and keeps it
// for PurchaseKeys.
func (s *Stock) LearnBuckets(ctx context.Context, sku string) (int, error) {
	n, err := s.bucketsOf(ctx, sku)
	if err != nil {
		return 0, err
	}
	if n <= 1 {
		s.hints.m.Delete(sku) // most SKUs: keep the map to the bucketed ones
	} else {
		s.hints.m.Store(sku, n)
	}
	return n, nil
}

// PastLimit tells whether user's count in their home bucket of sku's
// round, with need units more, passes the round's per-user limit (0: no
// limit). The bucket's hash and its buyer counts share a slot, so one
// transaction reads both at one instant.
func (s *Stock) PastLimit(ctx context.Context, sku, user string, home, buckets, need int) (bool, error) {
	var limit, bought *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		limit = p.HGet(ctx, s.BucketKey(sku, home, buckets), "limit")
		bought = p.HGet(ctx, s.BucketBuyersKey(sku, home, buckets), user)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("read the limit of %s in bucket %d: %w", sku, home, err)
	}
	l, _ := limit.Int64()
	n, _ := bought.Int64()
	return l > 0 && n+int64(need) > l, nil
}

var (
	//go:embed move.lua
	moveLua    string
	moveScript = redis.NewScript(moveLua)
)

// ErrRoundShort: the round as a whole, over every bucket, has fewer
// units than a purchase needs.
var ErrRoundShort = errors.New("the round has too few units in all its buckets")

// ErrBucketsChanging: the buckets are not one round (a seeding or a close
// is under way); the caller retries or answers 503.
var ErrBucketsChanging = errors.New("the round's buckets are changing")

// MoveInto moves units of sku's live round of buckets into bucket home
// from the others, so that home holds at least need (move.lua), in one
// atomic step: ErrRoundShort when the round has fewer, ErrBucketsChanging
// when its buckets are mid-seeding. On a cluster, where the buckets lie
// in several slots, it moves in steps (move_cluster.go).
func (s *Stock) MoveInto(ctx context.Context, sku string, home, need, buckets int) error {
	if s.parts.Grouped() {
		return s.moveAcross(ctx, sku, home, need, buckets)
	}
	keys := make([]string, buckets)
	for b := range keys {
		keys[b] = s.BucketKey(sku, b, buckets)
	}
	reply, err := moveScript.Run(ctx, s.rdb, keys, home, need).Slice()
	if err != nil {
		return fmt.Errorf("move units of %s into bucket %d: %w", sku, home, err)
	}
	switch reply[0] {
	case "ok":
		return nil
	case "short":
		return s.moveAcross(ctx, sku, home, need, buckets)
	}
	return fmt.Errorf("move units of %s into bucket %d: %w", sku, home, ErrBucketsChanging)
}

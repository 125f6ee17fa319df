package orderkey

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
)

// PartitionsKey holds the order partitions a Redis's orders are spread
// over (SHOP_ORDER_PARTITIONS as the first process set it). A partition's
// tag depends on the count as well as its number, and an order keeps only
// its number: under another count its stream, due set and the SKUs' keys
// on a cluster would be other keys, and the orders waiting in the old ones
// would never be written nor expire. So every process that opens the
// stores settles the count against this key and refuses another.
func PartitionsKey(prefix string) string { return prefix + "orders:partitions" }

// settleScript records ARGV[1] partitions unless a count is recorded; it
// raises a recorded 1 when ARGV[2] is '1' (a single Redis, where partition
// 0 keeps the untagged stream, so every order placed keeps its keys). It
// returns the count in force.
var settleScript = redis.NewScript(`
local want = tonumber(ARGV[1])
if not want or want < 1 then return redis.error_reply('ERR partitions: bad count') end
local have = tonumber(redis.call('GET', KEYS[1]))
if not have or (have == 1 and ARGV[2] == '1') then
  redis.call('SET', KEYS[1], want)
  return want
end
return have`)

// ErrPartitionsChanged: the configured partition count is not the one the
// orders in Redis are spread over.
var ErrPartitionsChanged = errors.New("order partitions changed")

// SettlePartitions records parts' count for the orders under prefix, or
// checks it against the count recorded: raising 1 partition on a single
// Redis is allowed, any other change is refused (see PartitionsKey).
func SettlePartitions(ctx context.Context, rdb redis.UniversalClient, prefix string, parts keyspace.Partitions) error {
	raise := "0"
	if !parts.Grouped() {
		raise = "1"
	}
	have, err := settleScript.Run(ctx, rdb, []string{PartitionsKey(prefix)}, parts.Count(), raise).Int()
	if err != nil {
		return fmt.Errorf("record the order partitions: %w", err)
	}
	if have != parts.Count() {
		how := "on a cluster every change re-tags the SKUs' keys"
		if !parts.Grouped() {
			how = "only a count of 1 may be raised"
		}
		return fmt.Errorf("%w: SHOP_ORDER_PARTITIONS is %d but the orders under %q are spread over %d partitions (%s; drain the writers and delete %s to start afresh)",
			ErrPartitionsChanged, parts.Count(), strings.TrimSuffix(prefix, ":"), have, how, PartitionsKey(prefix))
	}
	return nil
}

// Streams names the order streams under prefix, one per partition of
// parts (for tests and tools that wait for the writers).
func Streams(prefix string, parts keyspace.Partitions) []string {
	k := New(prefix, parts)
	out := make([]string, parts.Count())
	for p := range out {
		out[p] = k.Stream(p)
	}
	return out
}

package order

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/room/roomkey"
)

// A round with a waiting room sells only to the shoppers it admitted: a
// line of its SKU needs the buyer's pass (docs/api.md, "The pass"). The pass is
// checked in the same atomic step that takes the stock (lines.lua's
// check_lines), against the room's pass hash, which only the admitter
// writes (internal/room; the key's name is internal/room/roomkey's).

// HeaderQueuePass carries the buyer's waiting room passes: one, or several
// comma-separated for a checkout.
const HeaderQueuePass = "X-Queue-Pass"

// Bounds on the passes one placement presents. A pass outside them cannot
// be one the admitter issued, so it is dropped: it simply matches nothing.
const (
	MaxPasses   = 100
	MaxPassSize = 128
)

// ErrPassRequired: a line's round has a waiting room and the buyer
// presented no live pass of it (none, another shopper's, another round's
// or an expired one); nothing was reserved.
var ErrPassRequired = apperr.NewError(apperr.CodePassRequired,
	"this sale has a waiting room: buying needs your pass from it (header "+HeaderQueuePass+")")

// ParsePasses reads an X-Queue-Pass header: comma-separated passes,
// spaces around each trimmed, empty ones ignored, at most MaxPasses kept.
func ParsePasses(header string) []string {
	var out []string
	for p := range strings.SplitSeq(header, ",") {
		if p = strings.TrimSpace(p); p != "" && len(out) < MaxPasses {
			out = append(out, strings.Clone(p))
		}
	}
	return out
}

// passArg is the scripts' passes argument: the passes comma-joined, each
// one that could be a pass (1 to MaxPassSize visible ASCII characters,
// no comma), at most MaxPasses of them. The others are left out, so one
// holding a comma is never split into passes it was not.
func passArg(passes []string) string {
	var b strings.Builder
	n := 0
	for _, p := range passes {
		if n == MaxPasses {
			break
		}
		if !validPass(p) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p)
		n++
	}
	return b.String()
}

func validPass(p string) bool {
	if p == "" || len(p) > MaxPassSize {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] > '~' || p[i] == ',' {
			return false
		}
	}
	return true
}

// passesKey is sku's room pass hash, the stock-taking scripts' third key
// of a line (read only when the sale has a room).
func (s *Service) passesKey(sku string) string { return roomkey.New(s.stock).Passes(sku) }

// copyPassScript copies a room's pass of one shopper into a bucket's pass
// hash, in the bucket's slot, keeping the hash alive as long as the
// room's. KEYS[1] the bucket's passes; ARGV[1] the user, ARGV[2] the pass
// field (room's format), ARGV[3] the room hash's TTL (ms; <= 0: none).
// Returns 1, or 0 when the bucket already held that very pass.
var copyPassScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3])
if ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1`)

// copyPasses copies user's room passes of lines decided outside bucket 0
// on a cluster into their buckets' pass hashes (LinePlace.Passes), where
// the script deciding the line reads them: the room admits into the
// SKU's own hash (docs/design/buckets.md, "Waiting-room passes"). It says
// whether it copied any pass the bucket lacked, so that a refusal for
// want of one is worth another try.
func (s *Service) copyPasses(ctx context.Context, user string, lines []Line) (bool, error) {
	copied := false
	for _, l := range lines {
		at := s.linePlace(l.SKU, user)
		if at.Bucket == 0 || !s.stock.Partitions().Grouped() {
			continue
		}
		src := s.passesKey(l.SKU)
		pipe := s.rdb.Pipeline()
		field, ttl := pipe.HGet(ctx, src, user), pipe.PTTL(ctx, src)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return copied, fmt.Errorf("read the room pass of %s: %w", l.SKU, err)
		}
		if field.Val() == "" {
			continue
		}
		n, err := copyPassScript.Run(ctx, s.rdb, []string{at.Passes}, user, field.Val(), ttl.Val().Milliseconds()).Int()
		if err != nil {
			return copied, fmt.Errorf("copy the room pass of %s: %w", l.SKU, err)
		}
		copied = copied || n == 1
	}
	return copied, nil
}

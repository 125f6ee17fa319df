package inventory

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Moving units between the buckets of a round on a Redis Cluster, where
// the buckets lie in several slots: three steps with a durable record
// (moveout.lua, movein.lua, movedone.lua), which the sweeper finishes
// after a crash (FinishMoves). docs/design/buckets.md has the reasoning.

var (
	//go:embed moveout.lua
	moveOutLua    string
	moveOutScript = redis.NewScript(moveOutLua)
	//go:embed movein.lua
	moveInLua    string
	moveInScript = redis.NewScript(moveInLua)
	//go:embed movedone.lua
	moveDoneLua    string
	moveDoneScript = redis.NewScript(moveDoneLua)
)

// moveDeadline is how long a move's record waits for its other steps
// before the sweeper finishes it: well past the milliseconds they take.
const moveDeadline = 10 * time.Second

// bucketState is what a cluster move reads of one bucket.
type bucketState struct {
	round                        string
	available, movedOut, movedIn int64
}

// unsold is the bucket's units not sold, whether in it or moved out and
// on their way: a move leaves it unchanged on both sides (out lowers
// available as it raises moved_out; in raises available and moved_in
// together), so the sum over buckets read one by one is the round's,
// however moves interleave with the reads.
func (b bucketState) unsold() int64 { return b.available + b.movedOut - b.movedIn }

// moveAcross is MoveInto on a cluster: it reads every bucket (one
// pipeline), answers ErrRoundShort when the round's unsold units, those
// on their way included, are fewer than need, and otherwise moves units
// into home from the fullest others, each move in three steps.
func (s *Stock) moveAcross(ctx context.Context, sku string, home, need, buckets int) error {
	states, err := s.readBuckets(ctx, sku, buckets)
	if err != nil {
		return err
	}
	var unsold, avail int64
	for _, b := range states {
		if b.round != states[0].round {
			return fmt.Errorf("move units of %s: %w", sku, ErrBucketsChanging)
		}
		unsold, avail = unsold+b.unsold(), avail+b.available
	}
	if unsold < int64(need) {
		return ErrRoundShort
	}
	missing := max(int64(need), avail/int64(buckets)) - states[home].available
	for _, src := range fullestFirst(states, home) {
		if missing <= 0 {
			break
		}
		k := min(missing, states[src].available)
		moved, err := s.moveOne(ctx, sku, states[0].round, src, home, buckets, k)
		if err != nil {
			return err
		}
		missing -= moved
	}
	return nil
}

// fullestFirst is the buckets other than home, the fullest first.
func fullestFirst(states []bucketState, home int) []int {
	out := make([]int, 0, len(states)-1)
	for b := range states {
		if b != home && states[b].available > 0 {
			out = append(out, b)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return int(states[b].available - states[a].available) })
	return out
}

// readBuckets reads the move's fields of each bucket of sku's round.
func (s *Stock) readBuckets(ctx context.Context, sku string, buckets int) ([]bucketState, error) {
	values, err := s.readEach(ctx, sku, buckets, "round", "available", "moved_out", "moved_in")
	if err != nil {
		return nil, err
	}
	out := make([]bucketState, buckets)
	for b, v := range values {
		out[b].round, _ = v[0].(string)
		out[b].available, out[b].movedOut, out[b].movedIn = intField(v[1]), intField(v[2]), intField(v[3])
	}
	return out, nil
}

// move is one move's names: the record's id, its buckets, and its entry
// in the source partition's moves index.
type move struct {
	id, sku, round    string
	src, dst, buckets int
}

func (m move) member() string {
	return m.sku + " " + strconv.Itoa(m.buckets) + " " + strconv.Itoa(m.src) + " " + m.id
}

// moveOne moves up to k units of sku's round from bucket src to dst and
// returns how many moved. A failure after the first step leaves the
// record for FinishMoves: the units are on their way, never lost.
func (s *Stock) moveOne(ctx context.Context, sku, round string, src, dst, buckets int, k int64) (int64, error) {
	m := move{id: uuid.NewString(), sku: sku, round: round, src: src, dst: dst, buckets: buckets}
	deadline := time.Now().Add(moveDeadline).UnixMilli()
	out := s.BucketKey(sku, src, buckets)
	took, err := moveOutScript.Run(ctx, s.rdb, []string{out, out + ":moves", s.movesIndex(sku, src, buckets)},
		m.id, round, k, dst, deadline, m.member()).Int64Slice()
	if err != nil || len(took) != 2 {
		return 0, fmt.Errorf("move units of %s out of bucket %d: %w %v", sku, src, err, took)
	}
	if took[0] == 0 {
		return 0, nil
	}
	if s.faultAfterMoveOut != nil {
		if err := s.faultAfterMoveOut(); err != nil {
			return 0, err
		}
	}
	if err := s.finishMove(ctx, m, took[0], took[1]); err != nil {
		return 0, err
	}
	return took[0], nil
}

// finishMove runs a move's last two steps: k units (released of them
// given back ones) into the target, then the record's end.
func (s *Stock) finishMove(ctx context.Context, m move, k, released int64) error {
	in := s.BucketKey(m.sku, m.dst, m.buckets)
	if err := moveInScript.Run(ctx, s.rdb, []string{in, in + ":moved"}, m.id, m.round, k, released).Err(); err != nil {
		return fmt.Errorf("move units of %s into bucket %d: %w", m.sku, m.dst, err)
	}
	out := s.BucketKey(m.sku, m.src, m.buckets)
	if err := moveDoneScript.Run(ctx, s.rdb, []string{out, out + ":moves", s.movesIndex(m.sku, m.src, m.buckets)},
		m.id, m.member()).Err(); err != nil {
		return fmt.Errorf("end the move of units of %s: %w", m.sku, err)
	}
	return nil
}

// movesIndex is the moves index of the partition whose slot bucket b of
// sku's round shares: the sweeper finds unfinished moves there.
func (s *Stock) movesIndex(sku string, b, buckets int) string {
	return s.movesIndexOf(s.BucketPartition(sku, b, buckets))
}

func (s *Stock) movesIndexOf(p int) string { return s.prefix + "moves:" + s.parts.Tag(p) }

// FinishMoves finishes the moves whose record is past its deadline (a
// crash or an outage between their steps), in every partition, and
// returns how many it finished. The steps are idempotent, so two
// sweepers at once do no harm.
func (s *Stock) FinishMoves(ctx context.Context) (int, error) {
	if !s.parts.Grouped() {
		return 0, nil
	}
	done := 0
	for p := range s.parts.Count() {
		n, err := s.finishMovesIn(ctx, p)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// finishMovesBatch bounds one read of a partition's due moves.
const finishMovesBatch = 100

func (s *Stock) finishMovesIn(ctx context.Context, p int) (int, error) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	members, err := s.rdb.ZRangeByScore(ctx, s.movesIndexOf(p), &redis.ZRangeBy{Min: "-inf", Max: now, Count: finishMovesBatch}).Result()
	if err != nil {
		return 0, fmt.Errorf("moves due in partition %d: %w", p, err)
	}
	done := 0
	for _, member := range members {
		if err := s.finishDue(ctx, p, member); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// finishDue finishes the move an index entry names, from its record.
func (s *Stock) finishDue(ctx context.Context, p int, member string) error {
	f := strings.Fields(member)
	buckets, err1 := strconv.Atoi(get(f, 1))
	src, err2 := strconv.Atoi(get(f, 2))
	if len(f) != 4 || err1 != nil || err2 != nil || buckets < 2 || buckets > MaxBuckets || src < 0 || src >= buckets {
		// Not an entry this package writes: drop it, not the sweep.
		return s.rdb.ZRem(ctx, s.movesIndexOf(p), member).Err()
	}
	m := move{id: f[3], sku: f[0], src: src, buckets: buckets}
	out := s.BucketKey(m.sku, m.src, m.buckets)
	rec, err := s.rdb.HGet(ctx, out+":moves", m.id).Result()
	if errors.Is(err, redis.Nil) {
		return moveDoneScript.Run(ctx, s.rdb, []string{out, out + ":moves", s.movesIndexOf(p)}, m.id, member).Err()
	}
	if err != nil {
		return fmt.Errorf("read move %s of %s: %w", m.id, m.sku, err)
	}
	var k, released int64
	if _, err := fmt.Sscanf(rec, "%d %d %d %s", &m.dst, &k, &released, &m.round); err != nil || m.dst < 0 || m.dst >= buckets {
		return s.rdb.ZRem(ctx, s.movesIndexOf(p), member).Err()
	}
	return s.finishMove(ctx, m, k, released)
}

func get(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

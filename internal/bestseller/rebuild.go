package bestseller

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed swap.lua
var swapLua string

var swapScript = redis.NewScript(swapLua)

// Rebuild attempts: a swap refused because orders were counted meanwhile
// is tried again, with a pause, this many times in all.
const (
	rebuildAttempts = 5
	rebuildPause    = 200 * time.Millisecond
	copyTTL         = 10 * time.Minute
	zaddChunk       = 1000
)

// ErrRaced: every rebuild attempt lost the race with orders being counted;
// run it again when fewer orders arrive.
var ErrRaced = errors.New("bestseller: orders kept changing the boards during the rebuild")

// Rebuild recomputes the current day, week and month boards and the
// all-time board from PostgreSQL, under the rebuild lock. It returns
// lock.ErrBusy when another instance is rebuilding, ErrRaced, or the
// store's error.
func (s *Service) Rebuild(ctx context.Context) error {
	return s.locker.Run(ctx, lockName, lockTTL, s.rebuild)
}

// rebuild is the job itself; it is exact when several run at once, and
// while orders are counted (see the package doc).
func (s *Service) rebuild(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		swapped, err := s.rebuildOnce(ctx, s.now())
		if err != nil || swapped {
			return err
		}
		if attempt == rebuildAttempts {
			return ErrRaced
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rebuildPause * time.Duration(attempt)):
		}
	}
}

func (s *Service) rebuildOnce(ctx context.Context, now time.Time) (bool, error) {
	gen, err := s.rdb.Get(ctx, s.keys.gen()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("rebuild: %w", err)
	}
	snap, err := s.readSnapshot(ctx, now)
	if err != nil {
		return false, fmt.Errorf("rebuild: %w", err)
	}
	copies := s.copyKeys()
	if err := s.writeCopies(ctx, copies, snap); err != nil {
		return false, fmt.Errorf("rebuild: %w", err)
	}
	if s.beforeSwap != nil {
		s.beforeSwap()
	}
	keys, args := s.swapArgs(gen, copies, snap, now)
	n, err := swapScript.Run(ctx, s.rdb, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("rebuild: swap: %w", err)
	}
	return n == 1, nil
}

// copyKeys names this attempt's rebuilt boards, one per period.
func (s *Service) copyKeys() []string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	run := hex.EncodeToString(b)
	out := make([]string, len(Periods))
	for i, p := range Periods {
		out[i] = s.keys.tag() + "rebuild:" + run + ":" + string(p)
	}
	return out
}

// writeCopies fills the copies (which expire if the rebuild dies).
func (s *Service) writeCopies(ctx context.Context, copies []string, snap snapshot) error {
	pipe := s.rdb.Pipeline()
	for i, key := range copies {
		zs := make([]redis.Z, 0, len(snap.totals[i]))
		for sku, units := range snap.totals[i] {
			zs = append(zs, redis.Z{Member: sku, Score: float64(-units)})
		}
		for start := 0; start < len(zs); start += zaddChunk {
			pipe.ZAdd(ctx, key, zs[start:min(start+zaddChunk, len(zs))]...)
		}
		pipe.Expire(ctx, key, copyTTL)
	}
	_, err := pipe.Exec(ctx)
	return err
}

func (s *Service) swapArgs(gen int64, copies []string, snap snapshot, now time.Time) ([]string, []any) {
	keys := []string{s.keys.gen()}
	args := []any{gen, len(Periods)}
	for _, p := range Periods {
		keys = append(keys, s.keys.board(p, now))
		args = append(args, expiryUnix(p, now))
	}
	keys = append(keys, copies...)
	index := map[string]int{}
	args = append(args, len(snap.recent))
	for _, o := range snap.recent {
		k := s.keys.marks(o.At)
		if _, ok := index[k]; !ok {
			keys = append(keys, k)
			index[k] = len(keys)
		}
		mark := "c"
		if o.released {
			mark = "x"
		}
		args = append(args, index[k], o.ID, markExpiry(o.At, now).Unix(), mark)
	}
	return keys, args
}

package bestseller

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/outage"
)

//go:embed record.lua
var recordLua string

var recordScript = redis.NewScript(recordLua)

// maxUnits bounds one line, far below where a float64 score loses
// integer precision.
const maxUnits = 1 << 40

// Record counts the orders on the boards of the periods of their creation
// time, each order once however often it is given (see the package doc).
// It returns ErrInvalidOrder (nothing counted) for a malformed order, or
// a 503 error when Redis does not answer; then some chunks of the batch
// may be counted, and a retry counts only the rest.
func (s *Service) Record(ctx context.Context, orders []Order) (Result, error) {
	res, err := s.apply(ctx, "count", orders)
	s.m.updates("count", res, err)
	return res, err
}

// TakeBack takes cancelled or expired orders back off the boards: each
// order at most once, and only if Record counted it. An order taken back
// before it was recorded is never counted afterwards. Errors as Record's.
func (s *Service) TakeBack(ctx context.Context, orders []Order) (Result, error) {
	res, err := s.apply(ctx, "takeback", orders)
	s.m.updates("takeback", res, err)
	return res, err
}

func (s *Service) apply(ctx context.Context, mode string, orders []Order) (Result, error) {
	for _, o := range orders {
		if err := checkOrder(o); err != nil {
			return Result{}, fmt.Errorf("%s %s: %w", mode, o.ID, err)
		}
	}
	var total Result
	now := s.now()
	for start := 0; start < len(orders); start += scriptOrders {
		chunk := orders[start:min(start+scriptOrders, len(orders))]
		r, err := s.run(ctx, mode, chunk, now)
		total.Applied += r.Applied
		total.Skipped += r.Skipped
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func checkOrder(o Order) error {
	if o.ID == "" || len(o.ID) > 128 || o.At.IsZero() || len(o.Lines) == 0 {
		return ErrInvalidOrder
	}
	for _, l := range o.Lines {
		if !inventory.ValidSKU(l.SKU) || l.Units <= 0 || l.Units > maxUnits {
			return fmt.Errorf("%w: line %q × %d", ErrInvalidOrder, l.SKU, l.Units)
		}
	}
	return nil
}

func (s *Service) run(ctx context.Context, mode string, orders []Order, now time.Time) (Result, error) {
	keys, args := s.scriptArgs(mode, orders, now)
	rctx, cancel := redisCtx(ctx)
	defer cancel()
	v, err := recordScript.Run(rctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return Result{}, outage.Wrap(fmt.Sprintf("%s %d orders", mode, len(orders)), errRedisDown, err)
	}
	return Result{Applied: int(v[0]), Skipped: int(v[1])}, nil
}

// scriptArgs lays the orders out as record.lua reads them. Boards whose
// period has already expired are left out: a count would recreate them
// only for the expiry to delete them again.
func (s *Service) scriptArgs(mode string, orders []Order, now time.Time) ([]string, []any) {
	keys := []string{s.keys.gen()}
	index := map[string]int{}
	idx := func(k string) int {
		if i, ok := index[k]; ok {
			return i
		}
		keys = append(keys, k)
		index[k] = len(keys)
		return len(keys)
	}
	// An order's marks and boards depend only on its UTC day, and a
	// batch's orders mostly share one: each day's are worked out and sent
	// once, and an order names its day (per order, formatting the keys
	// was half the writer's cost of a batch, and parsing them again half
	// the script's).
	days := map[[3]int]int{}
	var dayArgs []any
	orderArgs := []any{len(orders)}
	for _, o := range orders {
		y, m, d := o.At.UTC().Date()
		day, ok := days[[3]int{y, int(m), d}]
		if !ok {
			dayArgs = append(dayArgs, s.dayArgs(o.At, now, idx)...)
			day = len(days) + 1
			days[[3]int{y, int(m), d}] = day
		}
		orderArgs = append(orderArgs, o.ID, day, len(o.Lines))
		for _, l := range o.Lines {
			orderArgs = append(orderArgs, l.SKU, l.Units)
		}
	}
	args := append([]any{mode, len(days)}, dayArgs...)
	return keys, append(args, orderArgs...)
}

// dayArgs are the arguments of t's UTC day: its marks key (by index) and
// their expiry, then its live boards, each by index with its expiry.
func (s *Service) dayArgs(t, now time.Time, idx func(string) int) []any {
	boards := s.liveBoards(t, now)
	out := []any{idx(s.keys.marks(t)), markExpiry(t, now).Unix(), len(boards)}
	for _, p := range boards {
		out = append(out, idx(s.keys.board(p, t)), expiryUnix(p, t))
	}
	return out
}

// liveBoards are the periods whose board holding t has not expired by now.
func (s *Service) liveBoards(t, now time.Time) []Period {
	var out []Period
	for _, p := range Periods {
		if p == All || p.expiry(t).After(now) {
			out = append(out, p)
		}
	}
	return out
}

// expiryUnix is p.expiry(t) in Unix seconds, 0 for none.
func expiryUnix(p Period, t time.Time) int64 {
	if p == All {
		return 0
	}
	return p.expiry(t).Unix()
}

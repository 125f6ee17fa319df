package saga

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
)

// The saga's last step, in the buyer's slot (place in saga.go): the pending index
// and the cart. It runs after the commit, so a crash may skip it; a
// checkout's repeat then does it (refinish), told by the Idempotency-Key's
// finish mark whether the first run did.

// finish indexes a committed order for its buyer and takes the bought
// lines out of the cart, in the user's slot, and marks the Idempotency-Key
// record idem (” for none) finished. The order exists already: a failure
// here is logged, and the writer's confirm makes the index entry needless
// once the order is persisted; a checkout's repeat finishes again
// (refinish). erased is true when the buyer was erased since their check
// (CancelUnpaid): the order stays unindexed, for the caller to cancel.
func (s *Placer) finish(ctx context.Context, user string, res reservation, lines []order.Line, cartKey, idem string) (erased bool) {
	ctx, cancel := afterward(ctx)
	defer cancel()
	pending := s.keys.Pending(user)
	keys := []string{pending, pending + ":nocart"}
	args := []any{res.OrderID, res.CreatedAt.UnixMilli(), s.StatusTTL.Milliseconds(), 0}
	if cartKey != "" {
		keys[1] = cartKey
		args[3] = len(lines)
		for _, l := range lines {
			args = append(args, l.SKU, strconv.Itoa(l.Quantity))
		}
	}
	if idem != "" {
		keys = append(keys, finishedKey(idem))
	}
	done, err := s.finishScript.Run(ctx, s.Redis, keys, args...).Int()
	if err != nil {
		s.Log.Warn("index a placed order for its buyer", "order", res.OrderID, "err", err)
	}
	return err == nil && done == 0
}

// finishedKey is the finish mark of the Idempotency-Key record idem, in
// its slot (the user's): the id of the order whose finish ran.
func finishedKey(idem string) string { return idem + ":finished" }

// refinish does the finish of a checkout repeated after its order
// committed, when the first run never did it (a crash between the commit
// and the finish: the mark does not name the order): the order's own
// lines come out of the cart where it still holds their quantities, as
// the first run would have taken them. Failures are logged, as finish's.
func (s *Placer) refinish(ctx context.Context, user, id, idem, cartKey string) {
	marked, err := s.Redis.Get(ctx, finishedKey(idem)).Result()
	switch {
	case err == nil && marked == id:
		return
	case err != nil && !errors.Is(err, redis.Nil):
		s.Log.Warn("read a repeated checkout's finish mark", "order", id, "err", err)
		return
	}
	o, found, err := s.Live(ctx, id)
	if err != nil || !found {
		s.Log.Warn("finish a repeated checkout", "order", id, "found", found, "err", err)
		return
	}
	lines := make([]order.Line, len(o.Items))
	for i, it := range o.Items {
		lines[i] = order.Line{SKU: it.SKU, Quantity: it.Quantity}
	}
	if s.finish(ctx, user, reservation{OrderID: id, CreatedAt: o.CreatedAt}, lines, cartKey, idem) {
		s.cancelErased(ctx, user, id)
	}
}

// cancelErased cancels an order a saga committed for a buyer erased while
// it ran (finish said so): the erasure read their orders before this one
// was indexed, so it is this run's to give back. A failure is logged; the
// order's payment window, or a repeated erasure, ends it then.
func (s *Placer) cancelErased(ctx context.Context, user, id string) {
	ctx, cancel := afterward(ctx)
	defer cancel()
	if _, err := s.Cancel(ctx, user, id); err != nil {
		s.Log.Warn("cancel the order of an erased buyer", "order", id, "err", err)
	}
}

package live

import (
	"context"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
)

// Two messages do not tell all a stream shows, so the hub reads the
// round again instead (Stock.Current), at most once an Interval per SKU,
// and hands out what it read:
//   - a change of a round split over stock buckets (docs/design/buckets.md)
//     tells one bucket's units, not the round's (Current sums them);
//   - a seeding's or a restore's message does not say whether the round
//     is a draw (the message keeps the format an older instance reads
//     during an upgrade), and Current does.

// rereadRound reads sku's round again after such a message, or, while a
// read is under way, has it read once more after. h.mu is held.
func (h *Hub) rereadRound(sku string) {
	if _, busy := h.rereads[sku]; busy {
		h.rereads[sku] = true
		return
	}
	h.rereads[sku] = false
	go h.reread(sku)
}

// reread reads sku's round and hands it out, again after an Interval
// while changes of its buckets keep coming.
func (h *Hub) reread(sku string) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
		c, err := h.current(ctx, sku)
		cancel()
		h.mu.Lock()
		t := h.topics[sku]
		if err != nil {
			h.log.Warn("live stock: a round not read again", "sku", sku, "err", err)
		} else if t != nil {
			h.update(t, c)
		}
		again := h.rereads[sku] && t != nil
		if again {
			h.rereads[sku] = false
		} else {
			delete(h.rereads, sku)
		}
		h.mu.Unlock()
		if !again {
			return
		}
		select {
		case <-time.After(h.o.Interval):
		case <-h.shutdown:
			h.mu.Lock()
			delete(h.rereads, sku)
			h.mu.Unlock()
			return
		}
	}
}

// current reads sku's live state (Stock.Current, which sums a bucketed
// round's buckets). A round whose buckets it learns of this way widens
// the SKU's subscription on a cluster, where each bucket publishes on a
// channel of its own (poke).
func (h *Hub) current(ctx context.Context, sku string) (inventory.Change, error) {
	before := h.stock.BucketsHint(sku)
	c, err := h.stock.Current(ctx, sku)
	if h.stock.BucketsHint(sku) != before {
		h.poke()
	}
	return c, err
}

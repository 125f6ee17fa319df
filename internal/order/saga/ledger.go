package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
)

// Ledger is the saga's Redis state as a recovery reads and restores it:
// each partition's holds and settled log, under the keys order's Ledger
// names (ledger.StreamKeys).
type Ledger struct {
	rdb     redis.UniversalClient
	grouped bool // on a single Redis there are no sagas, so none of it
}

// NewLedger returns the ledger of the sagas on rdb, partitioned as parts.
func NewLedger(rdb redis.UniversalClient, parts keyspace.Partitions) *Ledger {
	return &Ledger{rdb: rdb, grouped: parts.Grouped()}
}

// Settled is what partition k's holds and settled log name (a cluster's,
// for recover): Orders are the order ids the log or a hold names, Entries
// the log's entries by order id (their exact text, to remove), Holds the
// holds standing when they were read (Ledger's ReadHolds).
type Settled struct {
	Orders  map[string]bool
	Entries map[string][]SettledEntry
	Holds   []Hold
}

// Hold is a saga's hold on one partition as recover reads it: the lines
// of order OrderID (its buyer User) that the saga's hold.lua took there, whose
// order has not committed, or has and the hold is not dropped yet.
type Hold struct {
	OrderID string
	User    string
	Items   []order.ReservedItem
}

// readHoldsScript reads a partition's holds in one step: every order id
// its index names whose record still exists, with the record's user and
// items. KEYS[1] the holds index; ARGV[1] the prefix that names a record
// with its order id (the records share the index's slot). Returns
// {id, user, items_json...}.
var readHoldsScript = redis.NewScript(`
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local h = redis.call('HMGET', ARGV[1] .. id, 'user', 'items')
  if h[1] and h[2] then
    local n = #out
    out[n + 1], out[n + 2], out[n + 3] = id, h[1], h[2]
  end
end
return out`)

// SettledEntry is one entry of a settled log (unholdScript's drop): the lines of order OrderID
// (its buyer User) taken in the log's partition, which a drop recorded as
// the order's.
type SettledEntry struct {
	OrderID string               `json:"order_id"`
	User    string               `json:"user"`
	Items   []order.ReservedItem `json:"items"`
	raw     string
}

// ReadSettled reads partition k's settled log and holds (nothing on a
// single Redis, which has neither).
func (l *Ledger) ReadSettled(ctx context.Context, k ledger.StreamKeys) (Settled, error) {
	out := Settled{Orders: map[string]bool{}, Entries: map[string][]SettledEntry{}}
	if !l.grouped {
		return out, nil
	}
	log, err := l.rdb.ZRange(ctx, k.Settled, 0, -1).Result()
	if err != nil {
		return out, fmt.Errorf("read the settled log %s: %w", k.Settled, err)
	}
	for _, raw := range log {
		var e SettledEntry
		if json.Unmarshal([]byte(raw), &e) != nil || e.OrderID == "" {
			continue // not an entry this package wrote
		}
		e.raw = raw
		out.Orders[e.OrderID] = true
		out.Entries[e.OrderID] = append(out.Entries[e.OrderID], e)
	}
	if out.Holds, err = l.ReadHolds(ctx, k); err != nil {
		return out, err
	}
	for _, h := range out.Holds {
		out.Orders[h.OrderID] = true
	}
	return out, nil
}

// ReadHolds reads partition k's standing holds, at one instant (nothing
// on a single Redis, which has none). A record this package did not write
// is an error: recover must not rebuild the stock without its lines.
func (l *Ledger) ReadHolds(ctx context.Context, k ledger.StreamKeys) ([]Hold, error) {
	if !l.grouped {
		return nil, nil
	}
	raw, err := readHoldsScript.Run(ctx, l.rdb, []string{k.Holds}, k.HoldPrefix).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the holds %s: %w", k.Holds, err)
	}
	out := make([]Hold, 0, len(raw)/3)
	for i := 0; i+2 < len(raw); i += 3 {
		h := Hold{OrderID: raw[i], User: raw[i+1]}
		if err := json.Unmarshal([]byte(raw[i+2]), &h.Items); err != nil {
			return nil, fmt.Errorf("read the hold of order %s in %s: %w", h.OrderID, k.Holds, err)
		}
		out = append(out, h)
	}
	return out, nil
}

// RestoreSettled brings partition k's settled log in step with the stock
// recover rebuilt: the entries in remove go (their orders are lost: no
// store knows them, so no unit is theirs any more) and add's are written
// (orders whose units recover counted as taken in this partition, whose
// log entry the failover lost), with the log's retention from now.
func (l *Ledger) RestoreSettled(ctx context.Context, k ledger.StreamKeys, remove, add []SettledEntry) error {
	if len(remove) == 0 && len(add) == 0 {
		return nil
	}
	now, err := l.rdb.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("restore the settled log %s: %w", k.Settled, err)
	}
	pipe := l.rdb.TxPipeline() // one slot: the log's
	for _, e := range remove {
		pipe.ZRem(ctx, k.Settled, e.raw)
	}
	for _, e := range add {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		pipe.ZAdd(ctx, k.Settled, redis.Z{Score: float64(now.UnixMilli()), Member: string(b)})
	}
	pipe.PExpire(ctx, k.Settled, ledger.SettledRetention)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("restore the settled log %s: %w", k.Settled, err)
	}
	return nil
}

package saga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/order"
)

// A stock refusal is final only when it is true of the round: no saga in
// flight holds the units that would make up the shortfall. Units another
// saga holds are not sold until it commits, and come back if it does not
// (it is refused elsewhere, or its process died and the repair gives its
// hold back); a refusal answered meanwhile could be followed by a repeat
// of the same Idempotency-Key that buys them, two answers to one
// request. More in docs/design/order.md ("saga/held.go").

// heldWait bounds how long a placement waits for the holds that could
// undo its stock refusal: a live saga settles them within milliseconds
// (one whose process died, only the repair, so its buyer is told to
// retry). It looks again after heldPoll, then twice as long each time,
// so that a buyer waiting on a dead saga's hold costs a few runs, not one
// every poll.
const (
	heldWait = time.Second
	heldPoll = 5 * time.Millisecond
)

// errHeld: a stock refusal that units held by other sagas could undo;
// stale when a hold among them is past its deadline (its saga is gone:
// only the repair settles it).
type errHeld struct{ stale bool }

func (e *errHeld) Error() string { return "order: the units refused are held by a saga in flight" }

// errUnitsHeld answers a placement whose refusal the holds still standing
// could undo.
var errUnitsHeld = apperr.Unavailable("the units are held by checkouts not settled yet; retry with the same Idempotency-Key")

// sagaSettled runs the saga of order id until its answer no longer
// depends on other sagas' holds: a refusal they could undo is tried
// again once they settle (live holds, heldWait at most), else answered
// errUnitsHeld.
func (s *Placer) sagaSettled(ctx context.Context, id, user, passes string, lines []order.Line) (reservation, error) {
	until := time.Now().Add(heldWait)
	for pause := heldPoll; ; pause *= 2 {
		res, err := s.saga(ctx, id, user, passes, lines)
		var held *errHeld
		if !errors.As(err, &held) {
			return res, err
		}
		if held.stale || time.Now().Add(pause).After(until) {
			return reservation{}, errUnitsHeld
		}
		select {
		case <-ctx.Done():
			return reservation{}, errUnitsHeld
		case <-time.After(pause):
		}
	}
}

// refusalOf is the answer to a saga refused as r: r's error, or an
// *errHeld when it is out_of_stock and units other sagas hold could make
// up the shortfall of a refused line.
func (s *Placer) refusalOf(ctx context.Context, r refusal, lines []order.Line) error {
	if r.reason != "stock" {
		return r.err(s.Kit, lines)
	}
	held, err := s.heldFor(ctx, lines, r.skus)
	switch {
	case err != nil:
		return err
	case held != nil:
		return held
	}
	return r.err(s.Kit, lines)
}

// heldFor asks each partition of the refused SKUs (skus, of lines)
// whether units held there could make up a refused line's shortfall: an
// *errHeld if so, nil if not.
func (s *Placer) heldFor(ctx context.Context, lines []order.Line, skus []string) (*errHeld, error) {
	refused := map[string]bool{}
	for _, sku := range skus {
		refused[sku] = true
	}
	byPart := map[int][]order.Line{}
	for _, l := range lines {
		if refused[l.SKU] {
			p := s.keys.Parts().Of(l.SKU)
			byPart[p] = append(byPart[p], l)
		}
	}
	var out *errHeld
	for p, ls := range byPart {
		covered, stale, err := s.heldOn(ctx, p, ls)
		if err != nil {
			return nil, err
		}
		if covered {
			out = &errHeld{stale: stale || out != nil && out.stale}
		}
	}
	return out, nil
}

// heldOn runs heldScript on partition p for lines (all of p).
func (s *Placer) heldOn(ctx context.Context, p int, lines []order.Line) (covered, stale bool, err error) {
	keys := []string{s.keys.Holds(p)}
	args := []any{s.keys.Hold(p, "")}
	for _, l := range lines {
		keys = append(keys, s.Stock.SaleKey(l.SKU))
		args = append(args, l.SKU, l.Quantity)
	}
	got, err := heldScript.Run(ctx, s.Reserve, keys, args...).Int64Slice()
	switch {
	case err != nil:
		return false, false, fmt.Errorf("read the holds of partition %d: %w", p, err)
	case len(got) != 2:
		return false, false, fmt.Errorf("read the holds of partition %d: unexpected reply %v", p, got)
	}
	return got[0] == 1, got[1] == 1, nil
}

// heldScript says whether the holds of a partition could make up the
// shortfall of a line refused out_of_stock there: the units of its SKU
// that holds of its sale's round take (a hold of an older round gives
// nothing back), with what is available, reach its quantity. In the
// partition's slot. KEYS[1] the holds index, KEYS[1 + i] the sale state
// of line i; ARGV[1] the prefix that names a hold record with its order
// id, ARGV[2i], ARGV[2i + 1] line i's SKU and quantity.
// Returns {covered, stale}: 1 when a line's shortfall is covered, and
// when a hold among those covering it is past its deadline.
var heldScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lines = {}
for i = 2, #KEYS do
  local s = redis.call('HMGET', KEYS[i], 'round', 'available')
  lines[ARGV[2 * i - 2]] = {qty = tonumber(ARGV[2 * i - 1]), round = tonumber(s[1]),
    have = tonumber(s[2] or '0') or 0, stale = false}
end
local index = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for j = 1, #index, 2 do
  local raw = redis.call('HGET', ARGV[1] .. index[j], 'items')
  local ok, items = pcall(cjson.decode, raw or '')
  if ok and type(items) == 'table' then
    for _, it in ipairs(items) do
      local l = type(it) == 'table' and lines[it.sku]
      if l and it.round_id == l.round and tonumber(it.quantity) then
        l.have = l.have + it.quantity
        l.stale = l.stale or tonumber(index[j + 1]) <= now
      end
    end
  end
end
local covered, stale = 0, 0
for _, l in pairs(lines) do
  if l.have >= l.qty then
    covered = 1
    if l.stale then stale = 1 end
  end
end
return {covered, stale}`)

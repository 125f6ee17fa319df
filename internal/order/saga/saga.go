// Package saga places orders on a Redis Cluster, where an order's lines
// lie in several shards: a saga of claim, hold, commit and finish (the
// Placer order.New takes), the repair of sagas a crash left between hold
// and commit (the Repair the order sweeper runs), and the drills' crash
// points. Package order owns the orders; this package only its cluster
// steps. The reasoning is in docs/design/order.md ("saga/saga.go").
package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/telemetry"
)

// DefaultHoldLifetime is how long a hold waits for its commit before the
// repair may undo the saga (Options.HoldLifetime sets another). A placement
// gives up after order's placeTimeout, far sooner.
const DefaultHoldLifetime = 30 * time.Second

// stepTimeout bounds each step after a decision, as order's lifecycle
// steps are bounded.
const stepTimeout = 2 * time.Second

// Options are the optional parts of a Placer.
type Options struct {
	// HoldLifetime is how long a hold waits for its commit before the
	// sweeper's repair may undo it (DefaultHoldLifetime when not
	// positive). It bounds how long a crash between hold and commit keeps
	// units out of stock, and must stay above the few seconds a placement
	// may take: a hold that outlives its deadline mid-placement is undone
	// and the placement answers 503.
	HoldLifetime time.Duration
}

// Placer places orders on a cluster (see the package doc). New makes
// one; order.New binds it to its service with On (order.Options.Placer).
type Placer struct {
	order.Kit
	keys                                   orderkey.Keys
	holdScript, commitScript, finishScript *redis.Script
	holdLifetime                           time.Duration
	// fault, for the fault drills, is called at each Point a placement
	// reaches (InjectFault); nil otherwise.
	fault func(Point)
}

// New returns a saga placer, for order.Options.Placer (its On).
func New(o Options) *Placer {
	p := &Placer{holdLifetime: DefaultHoldLifetime}
	if o.HoldLifetime > 0 {
		p.holdLifetime = o.HoldLifetime
	}
	return p
}

// On binds p to the order service whose Kit k is, once, in order.New.
func (p *Placer) On(k order.Kit) order.Placer {
	p.Kit, p.keys = k, k.Keys
	p.holdScript, p.commitScript = redis.NewScript(k.Script(holdLua)), redis.NewScript(k.Script(commitLua))
	p.finishScript = redis.NewScript(fmt.Sprintf(finishLua, k.Erased))
	return p
}

// Exists: the record is claimed before the order exists, which it may
// never (refused, or aborted).
func (p *Placer) Exists(ctx context.Context, id string) (bool, error) {
	_, ok, err := p.Live(ctx, id)
	return ok, err
}

// abortedTTL is how long a tombstone refuses a late commit (and answers a
// repeat of the aborted id's Idempotency-Key with a fresh order).
const abortedTTL = order.IdemTTL

// reservation is what a saga did: the order, or the one a repeat names.
type reservation = order.Reserved

// errSagaAborted: the repair undid this order id (its first run stopped
// between hold and commit); nothing is held for it any more.
var errSagaAborted = errors.New("order: the saga of this order id was aborted")

// errSagaBusy: another run with the same Idempotency-Key holds a
// partition of this order right now.
var errSagaBusy = apperr.Unavailable("another request with this Idempotency-Key is in progress; retry it in a moment")

// Place places an order on a cluster (see the package doc).
func (s *Placer) Place(ctx context.Context, user string, lines []order.Line, o order.PlaceOptions) (order.Placed, error) {
	var res reservation
	err := s.InBuckets(ctx, user, lines, func() (err error) {
		res, err = s.place(ctx, user, lines, o)
		return err
	})
	return order.Placed{OrderID: res.OrderID, Status: order.StatusPending, Replayed: res.Replayed}, err
}

func (s *Placer) place(ctx context.Context, user string, lines []order.Line, o order.PlaceOptions) (reservation, error) {
	if err := s.CheckLines(lines); err != nil {
		return reservation{}, err
	}
	id, err := s.NewOrderID(user, lines)
	if err != nil {
		return reservation{}, err
	}
	fp, idem := s.Fingerprint(lines, o.CartKey != ""), ""
	if o.IdemKey != "" {
		idem = s.keys.Idem(user, o.IdemKey)
		var replayed bool
		if id, replayed, err = s.claimOrderID(ctx, idem, fp, id, user, lines); err != nil || replayed {
			if replayed && o.CartKey != "" {
				s.refinish(ctx, user, id, idem, o.CartKey)
			}
			return reservation{OrderID: id, Replayed: replayed}, err
		}
	}
	passes := s.Passes(o.Passes)
	res, err := s.sagaSettled(ctx, id, user, passes, lines)
	if errors.Is(err, errSagaAborted) && idem != "" {
		// The repair undid this id while the claim pointed at it (it
		// decided between our claim and our commit): start afresh once.
		if id, err = s.reclaim(ctx, idem, fp, id, user, lines); err == nil {
			res, err = s.sagaSettled(ctx, id, user, passes, lines)
		}
	}
	if errors.Is(err, errSagaAborted) {
		return reservation{}, apperr.Unavailable("the order could not be placed now; retry with the same Idempotency-Key")
	}
	if err != nil || res.Replayed {
		return res, err
	}
	s.at(BeforeFinish)
	if s.finish(ctx, user, res, lines, o.CartKey, idem) {
		s.cancelErased(ctx, user, res.OrderID)
		return reservation{}, order.ErrBuyerErased
	}
	return res, nil
}

// claimOrderID claims the Idempotency-Key record idem for id and returns
// the order id to place under: id, or the one claimed before for the same
// request. replayed is true when that earlier order exists (a repeat:
// nothing to do); one the repair aborted is replaced by a new id.
func (s *Placer) claimOrderID(ctx context.Context, idem, fp, id, user string, lines []order.Line) (string, bool, error) {
	got, had, err := s.claim(ctx, idem, fp, id, "")
	if err != nil || !had {
		return got, false, err
	}
	st, err := s.Redis.HMGet(ctx, s.keys.Status(got), "status", "deciding").Result()
	if err != nil {
		return "", false, fmt.Errorf("read order %s status: %w", got, err)
	}
	status, _ := st[0].(string)
	switch {
	case status == order.StatusAborted && st[1] != nil:
		// The repair is asking PostgreSQL whether the order is a written
		// one whose status a failover lost: a fresh order could be a
		// second one for this key.
		return "", false, errSagaBusy
	case status == order.StatusAborted:
		got, err = s.reclaim(ctx, idem, fp, got, user, lines)
		return got, false, err
	case st[0] != nil:
		return got, true, nil
	}
	return got, false, nil // claimed before, never committed (refused, or in flight): run it again
}

// reclaim points the record idem, which names the aborted order old, at a
// new id, once none of old's holds is left: the repair tombstones the
// order when it settles its first hold, and gives the holds on the other
// partitions back as it reaches them. Until then their units still count
// in the buyer's totals, so a fresh order run now could be refused
// limit_exceeded (or out_of_stock) for units no order will keep, a
// final answer to a request whose repeat, moments later, succeeds
// (e2e TestClusterDrillServeKilledMidCheckout saw it under load). The
// repeat is told to retry (503) instead.
func (s *Placer) reclaim(ctx context.Context, idem, fp, old, user string, lines []order.Line) (string, error) {
	if held, err := s.heldAnywhere(ctx, old); err != nil || held {
		if err == nil {
			err = errSagaBusy
		}
		return "", err
	}
	fresh, err := s.NewOrderID(user, lines)
	if err != nil {
		return "", err
	}
	id, _, err := s.claim(ctx, idem, fp, fresh, old)
	return id, err
}

// heldAnywhere says whether order id still has a hold on any partition
// (one EXISTS a partition, in one pipeline: a rare path, taken only after
// the repair aborted an order).
func (s *Placer) heldAnywhere(ctx context.Context, id string) (bool, error) {
	n := s.keys.Parts().Count()
	cmds := make([]*redis.IntCmd, n)
	_, err := s.Redis.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for p := range n {
			cmds[p] = pipe.Exists(ctx, s.keys.Hold(p, id))
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read the holds of order %s: %w", id, err)
	}
	for _, c := range cmds {
		if c.Val() > 0 {
			return true, nil
		}
	}
	return false, nil
}

// claim runs idemClaimScript: had is true when the record named an order
// already (other than replace).
func (s *Placer) claim(ctx context.Context, idem, fp, id, replace string) (got string, had bool, err error) {
	reply, err := idemClaimScript.Run(ctx, s.Redis, []string{idem}, fp, id, order.IdemTTL.Milliseconds(), replace).StringSlice()
	switch {
	case err != nil:
		return "", false, fmt.Errorf("claim idempotency key: %w", err)
	case len(reply) == 1 && reply[0] == "reused":
		return "", false, order.ErrIdempotencyKeyReused
	case len(reply) == 2 && (reply[0] == "new" || reply[0] == "had"):
		return reply[1], reply[0] == "had", nil
	}
	return "", false, fmt.Errorf("claim idempotency key: unexpected reply %q", reply)
}

// heldPart is what a hold took on partition p.
type heldPart struct {
	p     int
	items []order.ReservedItem
}

// saga holds the lines outside the home, then commits on the home; passes
// are the buyer's waiting room passes (passArg).
func (s *Placer) saga(ctx context.Context, id, user, passes string, lines []order.Line) (reservation, error) {
	home := s.keys.Parts().Home(id)
	attempt := uuid.NewString()
	// Where each line is decided, read once: the hint of a round's buckets
	// may change meanwhile (another placement learns it), and the holds and
	// the commit must agree on which lines are the home's.
	places := s.linePlaces(user, lines)
	groups := groupLines(lines, places, home)
	var held []heldPart
	var refused refusal
	for _, g := range groups {
		mode := "take"
		if refused.reason != "" {
			mode = "check" // only to rank the refusal as a single Redis would
		}
		items, fail, err := s.hold(ctx, g, id, user, passes, attempt, mode, home)
		if err != nil {
			s.unholdAll(ctx, id, user, attempt, append(held, heldPart{p: g.p, items: g.asItems()}))
			return reservation{}, err
		}
		if refused.add(fail); fail == nil && mode == "take" {
			held = append(held, heldPart{p: g.p, items: items})
		}
	}
	mode := "commit"
	if refused.reason != "" {
		mode = "check"
	}
	s.at(AfterHold)
	res, fail, err := s.commit(ctx, id, user, passes, attempt, home, mode, lines, places, held)
	refused.add(fail)
	switch {
	case err == nil && refused.reason == "" && !res.Replayed:
		s.at(AfterCommit)
		s.dropAll(ctx, id, user, attempt, held)
		return res, nil
	case err == nil && res.Replayed:
		// Another run of this order (a repeat of its Idempotency-Key)
		// committed: that order is the answer, even if this run's holds
		// were refused because of it, and what this run holds is no order's.
		s.unholdAll(ctx, id, user, attempt, held)
		return res, nil
	case errors.Is(err, errSagaBusy):
		// The repair is deciding this order (it may be a written one whose
		// status a failover lost): no commit, and no answer yet but retry.
		s.unholdAll(ctx, id, user, attempt, held)
		return reservation{}, err
	case err == nil || errors.Is(err, errSagaAborted):
		// Refused, or another run of this order committed: what this run
		// holds is no order's.
		s.unholdAll(ctx, id, user, attempt, held)
		if refused.reason != "" {
			return reservation{}, s.refusalOf(ctx, refused, lines)
		}
		return res, err
	}
	if mode == "check" {
		// The check failed (an outage of the home, or a fault of its
		// state), but a check writes nothing: this attempt has no order and
		// never will, so its holds go back now, not at the repair's
		// deadline (a repeat of its Idempotency-Key would meet them as
		// busy). The release is this attempt's only, so a repair that got
		// there first is not undone twice. The refusal found so far is not
		// the answer: the home's lines, unjudged, may outrank it, or its
		// status name a repeat that committed; so the error stands.
		s.unholdAll(ctx, id, user, attempt, held)
		return reservation{}, fmt.Errorf("check order %s on its home: %w", id, err)
	}
	// Redis failed: the commit may have happened. The holds stay for the
	// repair, which asks the home after their deadline.
	return reservation{}, fmt.Errorf("commit order %s: %w", id, err)
}

// lineGroup is an order's lines on one partition, with where each is
// decided (the buyer's home bucket of its SKU: order.LinePlace).
type lineGroup struct {
	p      int
	lines  []order.Line
	places []order.LinePlace
}

// linePlaces is where each of user's lines is decided (order.LinePlace).
func (s *Placer) linePlaces(user string, lines []order.Line) []order.LinePlace {
	out := make([]order.LinePlace, len(lines))
	for i, l := range lines {
		out[i] = s.LinePlace(l.SKU, user)
	}
	return out
}

// groupLines groups the lines outside home by the partition of the bucket
// each is decided on (places, in line order), in ascending partition order.
func groupLines(lines []order.Line, places []order.LinePlace, home int) []lineGroup {
	by := map[int]*lineGroup{}
	for i, l := range lines {
		at := places[i]
		if at.Partition == home {
			continue
		}
		g := by[at.Partition]
		if g == nil {
			g = &lineGroup{p: at.Partition}
			by[at.Partition] = g
		}
		g.lines, g.places = append(g.lines, l), append(g.places, at)
	}
	out := make([]lineGroup, 0, len(by))
	for _, g := range by {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b lineGroup) int { return a.p - b.p })
	return out
}

// asItems names g's lines as items, for releasing a hold whose answer was
// lost: in the buckets the hold named.
func (g lineGroup) asItems() []order.ReservedItem {
	out := make([]order.ReservedItem, len(g.lines))
	for i, l := range g.lines {
		out[i] = order.ReservedItem{SKU: l.SKU, Quantity: l.Quantity, Buckets: g.places[i].Buckets}
	}
	return out
}

// hold runs hold.lua on g's partition; fail is its refusal (reason, SKUs).
func (s *Placer) hold(ctx context.Context, g lineGroup, id, user, passes, attempt, mode string, home int) ([]order.ReservedItem, []string, error) {
	p := g.p
	keys := []string{s.keys.Hold(p, id), s.keys.Holds(p)}
	args := []any{id, user, attempt, mode, home, s.holdLifetime.Milliseconds(), len(g.lines)}
	for i, l := range g.lines {
		at := g.places[i]
		keys = append(keys, at.Sale, at.Buyers, at.Passes)
		args = append(args, l.SKU, l.Quantity, at.Channel)
	}
	args = append(args, passes)
	reply, err := s.holdScript.Run(ctx, s.Reserve, keys, args...).StringSlice()
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("hold order %s on partition %d: %w", id, p, err)
	case len(reply) >= 2 && reply[0] == "fail":
		return nil, reply[1:], nil
	case len(reply) == 1 && reply[0] == "busy":
		return nil, nil, errSagaBusy
	case len(reply) == 2 && reply[0] == "ok" && mode == "check":
		return nil, nil, nil
	case len(reply) == 2 && reply[0] == "ok":
		var items []order.ReservedItem
		if err := json.Unmarshal([]byte(reply[1]), &items); err != nil {
			return nil, nil, fmt.Errorf("hold order %s: items: %w", id, err)
		}
		return items, nil, nil
	}
	return nil, nil, fmt.Errorf("hold order %s: unexpected reply %q", id, reply)
}

// commit runs commit.lua on the home, lines decided where places say;
// fail is its refusal.
func (s *Placer) commit(ctx context.Context, id, user, passes, attempt string, home int, mode string,
	lines []order.Line, places []order.LinePlace, held []heldPart) (reservation, []string, error) {
	items := map[string]order.ReservedItem{}
	for _, h := range held {
		for _, it := range h.items {
			items[it.SKU] = it
		}
	}
	keys := []string{s.keys.Stream(home), s.keys.Status(id), s.keys.Due(home)}
	args := []any{id, user, s.StatusTTL.Milliseconds(), s.PaymentTTL.Milliseconds(), home, attempt, mode, len(lines)}
	for i, l := range lines {
		heldJSON := ""
		at := places[i]
		if at.Partition != home {
			it, ok := items[l.SKU]
			if !ok { // check mode: a line refused elsewhere, not judged here
				it = order.ReservedItem{SKU: l.SKU, Quantity: l.Quantity}
			}
			b, err := json.Marshal(it)
			if err != nil {
				return reservation{}, nil, err
			}
			heldJSON = string(b)
		} else {
			keys = append(keys, at.Sale, at.Buyers, at.Passes)
		}
		args = append(args, l.SKU, l.Quantity, at.Channel, heldJSON)
	}
	args = append(args, passes, telemetry.Traceparent(ctx))
	reply, err := s.commitScript.Run(ctx, s.Reserve, keys, args...).StringSlice()
	switch {
	case err != nil:
		return reservation{}, nil, err
	case len(reply) >= 2 && reply[0] == "fail":
		return reservation{}, reply[1:], nil
	case len(reply) == 1 && reply[0] == "aborted":
		return reservation{}, nil, errSagaAborted
	case len(reply) == 1 && reply[0] == "busy":
		return reservation{}, nil, errSagaBusy
	case len(reply) == 1 && reply[0] == "ok" && mode == "check":
		return reservation{}, nil, nil
	}
	res, err := order.ParseReply(id, reply)
	return res, nil, err
}

// refusal gathers the refusals of a saga's steps: the most important kind
// and its SKUs, as reserve.lua ranks them over all lines.
type refusal struct {
	reason string
	skus   []string
}

// refusalRank is lines.lua's rank: 'bucket' (a stale guess of a round's
// buckets) first, 'short' (a dry home bucket) with 'stock'.
var refusalRank = map[string]int{"bucket": 6, "no_sale": 5, "not_active": 4, "pass": 3, "limit": 2, "stock": 1, "short": 1}

// add merges one step's refusal (reason, SKUs...; nil: none).
func (r *refusal) add(fail []string) {
	if len(fail) == 0 {
		return
	}
	switch reason := fail[0]; {
	case refusalRank[reason] > refusalRank[r.reason]:
		r.reason, r.skus = reason, slices.Clone(fail[1:])
	case refusalRank[reason] == refusalRank[r.reason]:
		if reason == "short" {
			r.reason = reason // some line may get units moved in: try that
		}
		r.skus = append(r.skus, fail[1:]...)
	}
}

// err is the refusal's error (k's), its SKUs in the order's line order.
func (r *refusal) err(k order.Kit, lines []order.Line) error {
	at := map[string]int{}
	for i, l := range lines {
		at[l.SKU] = i
	}
	slices.SortFunc(r.skus, func(a, b string) int { return at[a] - at[b] })
	return k.Refusal(r.reason, r.skus)
}

// dropAll ends the holds of a committed order: their units are the
// order's. A drop that fails is done by the repair after the deadline (it
// finds the order committed by this attempt).
func (s *Placer) dropAll(ctx context.Context, id, user, attempt string, held []heldPart) {
	s.endHolds(ctx, id, user, attempt, held, "drop", "drop a committed order's hold; the sweeper will")
}

// unholdAll gives back the holds of an order that did not commit. A
// release that fails is done by the repair after the deadline.
func (s *Placer) unholdAll(ctx context.Context, id, user, attempt string, held []heldPart) {
	s.endHolds(ctx, id, user, attempt, held, "release", "release a refused order's hold; the sweeper will")
}

// endHolds runs unhold in mode over each hold, past the buyer's leaving;
// a failure is logged as failed, for the repair to finish.
func (s *Placer) endHolds(ctx context.Context, id, user, attempt string, held []heldPart, mode, failed string) {
	ctx, cancel := afterward(ctx)
	defer cancel()
	for _, h := range held {
		if _, err := s.unhold(ctx, h.p, id, user, attempt, mode, h.items); err != nil {
			s.Log.Warn(failed, "order", id, "partition", h.p, "err", err)
		}
	}
}

// afterward bounds the steps that follow a decision (drop, release,
// finish): they run even when the buyer has gone, within their own time.
func afterward(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
}

// unhold runs unholdScript over the hold of order id on partition p, whose
// record holds items; it returns the units given back (-1: no such hold).
func (s *Placer) unhold(ctx context.Context, p int, id, user, attempt, mode string, items []order.ReservedItem) (int64, error) {
	return unholdOn(ctx, s.Redis, s.keys, s.Stock, p, id, user, attempt, mode, items)
}

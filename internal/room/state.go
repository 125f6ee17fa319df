package room

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/inventory"
)

// state is the instance's live state of its rooms: what it read of each
// SKU's live round, what it derived of each shopper's entry, its last
// admit turn's snapshot of each room, and the streams waiting on their
// admission. Its methods are the only ones that take its lock.
type state struct {
	mu    sync.Mutex
	infos map[string]cachedInfo
	ids   map[idsKey]derivedIDs // what a shopper's entry derives from the room's secrets
	snaps map[string]*snapshot  // by SKU: what the admitter last read of its room
	ranks map[rankKey]*rankWait // the streams waiting on their admission
}

func newState() *state {
	return &state{infos: map[string]cachedInfo{}, ids: map[idsKey]derivedIDs{},
		snaps: map[string]*snapshot{}, ranks: map[rankKey]*rankWait{}}
}

// get reads m[k] under st's lock.
func get[K comparable, V any](st *state, m map[K]V, k K) (V, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	v, ok := m[k]
	return v, ok
}

// keep stores v as m[k] under st's lock, starting m afresh once it holds
// limit entries: m caches what can be read or derived again.
func keep[K comparable, V any](st *state, m map[K]V, limit int, k K, v V) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(m) >= limit {
		clear(m)
	}
	m[k] = v
}

// cachedInfo is what the instance read of a SKU's live round, and when.
type cachedInfo struct {
	r    inventory.LiveRound
	ok   bool
	read time.Time
}

// maxInfos bounds the live rounds kept: SKUs probed by anyone.
const maxInfos = 10_000

// liveRound returns what the instance last read of sku's live round.
func (st *state) liveRound(sku string) (cachedInfo, bool) { return get(st, st.infos, sku) }

// keepLive keeps what the instance just read of sku's live round.
func (st *state) keepLive(sku string, c cachedInfo) { keep(st, st.infos, maxInfos, sku, c) }

// forget drops what the instance read of sku's live round.
func (st *state) forget(sku string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.infos, sku)
}

// rate is the admission rate of sku's live room as last read (1: none).
func (st *state) rate(sku string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	if c, ok := st.infos[sku]; ok && c.r.Room != nil {
		return c.r.Room.AdmitPerSecond
	}
	return 1
}

// idsKey names one shopper's entry in one round's room.
type idsKey struct {
	sku   string
	round int64
	user  uuid.UUID
}

// derivedIDs are the HMACs and digests of a shopper's entry: the same for
// every request of the round, and a tenth of a ticket read's CPU when
// made anew each time. at is the entry's place once a read has seen it:
// an early one before starts_at with rank -1, then from the first read
// after starts_at the final place (rank >= 0); pass the pass once a read
// has seen its admission, which is for good.
type derivedIDs struct {
	entryID, prefix, eventsURL string
	at                         place
	pass                       passInfo
}

// maxIDs bounds the derived ids kept (about 200 bytes each).
const maxIDs = 200_000

// derived returns the ids kept of entry k.
func (st *state) derived(k idsKey) (derivedIDs, bool) { return get(st, st.ids, k) }

// keepDerived keeps d as entry k's ids.
func (st *state) keepDerived(k idsKey, d derivedIDs) { keep(st, st.ids, maxIDs, k, d) }

// place keeps p as entry k's place and pass as its pass, when the
// instance has derived its ids.
func (st *state) place(k idsKey, p place, pass passInfo) {
	st.mu.Lock()
	defer st.mu.Unlock()
	d, ok := st.ids[k]
	if !ok {
		return
	}
	// An answer read before the shuffle that comes back after one read
	// since must not take the rank away.
	if p.rank >= 0 || d.at.rank < 0 {
		d.at = p
	}
	if pass.pass != "" {
		d.pass = pass
	}
	st.ids[k] = d
}

// keepSnapshot keeps v as the snapshot of sku's room and wakes the
// streams of the ranks its turn admitted.
func (st *state) keepSnapshot(sku string, v *snapshot) {
	st.mu.Lock()
	defer st.mu.Unlock()
	from := int64(0)
	if old := st.snaps[sku]; old != nil && old.round == v.round {
		from = old.turn.Total
	}
	st.snaps[sku] = v
	st.admitRanks(sku, v.round, from, v.turn.Total) // their streams buy
}

// dropSnapshot drops the snapshot of sku's room: the round ended or is gone.
func (st *state) dropSnapshot(sku string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.snaps, sku)
}

// snapshot returns the snapshot of sku's room in round, or nil when
// there is none as fresh as maxSnapshotAge.
func (st *state) snapshot(sku string, round int64) *snapshot {
	st.mu.Lock()
	v := st.snaps[sku]
	st.mu.Unlock()
	if v == nil || v.round != round || v.age() > maxSnapshotAge {
		return nil
	}
	return v
}

// A waiting stream whose place is known does not poll for its admission:
// it waits on its rank, and the instance's admitter turn that admits the
// rank wakes it (keepSnapshot). Every instance's turn sees the room's
// admitted count, whoever admitted, so each wakes its own streams. A
// turn admits up to a second of the rate at once; a woken stream reads
// its pass after a spread of up to a turn (events.go), so those shoppers
// buy over the next 100 ms rather than in one instant.

// rankKey names one rank of one round's room.
type rankKey struct {
	sku         string
	round, rank int64
}

// rankWait is the streams waiting on one rank (a shopper's tabs share it).
type rankWait struct {
	ch chan struct{}
	n  int
}

// awaitRank returns a channel closed once sku's room in round admits
// rank (at once if the snapshot has it admitted), and the function that
// stops waiting.
func (st *state) awaitRank(sku string, round, rank int64) (<-chan struct{}, func()) {
	k := rankKey{sku: sku, round: round, rank: rank}
	st.mu.Lock()
	defer st.mu.Unlock()
	if v := st.snaps[sku]; v != nil && v.round == round && rank < v.turn.Total {
		c := make(chan struct{})
		close(c)
		return c, func() {}
	}
	w := st.ranks[k]
	if w == nil {
		w = &rankWait{ch: make(chan struct{})}
		st.ranks[k] = w
	}
	w.n++
	return w.ch, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if w.n--; w.n == 0 && st.ranks[k] == w {
			delete(st.ranks, k)
		}
	}
}

// admitRanks wakes the streams waiting on ranks from to to-1 of sku's
// room in round; st.mu is held.
func (st *state) admitRanks(sku string, round, from, to int64) {
	if to <= from || len(st.ranks) == 0 {
		return
	}
	wake := func(k rankKey, w *rankWait) {
		close(w.ch)
		delete(st.ranks, k)
	}
	if to-from <= int64(len(st.ranks)) {
		for r := from; r < to; r++ {
			k := rankKey{sku: sku, round: round, rank: r}
			if w := st.ranks[k]; w != nil {
				wake(k, w)
			}
		}
		return
	}
	for k, w := range st.ranks {
		if k.sku == sku && k.round == round && k.rank >= from && k.rank < to {
			wake(k, w)
		}
	}
}

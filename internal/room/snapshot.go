package room

import (
	"time"

	"github.com/shop-oss/shop/internal/inventory"
)

// A ticket is the room's shared state (admitted, early entries, units
// available, the clock) read against the entry's place, which never
// changes after starts_at. Every instance's admitter reads that state on
// each turn anyway, so the turn's answer is kept as the instance's snapshot
// of the room: the ticket streams, and the ticket reads of shoppers too
// far back to be admitted since the turn, are worked out from it instead
// of one Redis read each. docs/design/room.md "Waiting" has the bounds.

// snapshot is what the instance's last admit turn read of a room.
type snapshot struct {
	round  int64
	starts int64     // starts_at, ms (0: none)
	turn   Turn      // Early, Total, Available, Now, Rate: the shared state
	at     time.Time // when the turn answered
}

// maxSnapshotAge is the oldest snapshot an answer is worked out from: a
// few of the admitter's turns. An older one means this instance's admitter is
// not running or Redis is slow; the tickets are read from Redis then.
const maxSnapshotAge = 3 * Tick

// keepSnapshot keeps what an admit turn of sku's live round read.
func (s *Service) keepSnapshot(sku string, live inventory.LiveRound, t Turn) {
	v := &snapshot{round: live.Round, turn: t, at: time.Now()}
	if !live.StartsAt.IsZero() {
		v.starts = live.StartsAt.UnixMilli()
	}
	s.mu.Lock()
	from := int64(0)
	if old := s.snaps[sku]; old != nil && old.round == live.Round {
		from = old.turn.Total
	}
	s.snaps[sku] = v
	s.admitRanksLocked(sku, live.Round, from, t.Total) // their streams buy
	s.mu.Unlock()
}

// dropSnapshot drops the snapshot of sku's room: the round ended or is gone.
func (s *Service) dropSnapshot(sku string) {
	s.mu.Lock()
	delete(s.snaps, sku)
	s.mu.Unlock()
}

// snapshotOf returns the instance's snapshot of sku's room in round, or nil when
// there is none as fresh as maxSnapshotAge.
func (s *Service) snapshotOf(sku string, round int64) *snapshot {
	s.mu.Lock()
	v := s.snaps[sku]
	s.mu.Unlock()
	if v == nil || v.round != round || time.Since(v.at) > maxSnapshotAge {
		return nil
	}
	return v
}

// now is Redis's clock now, as the snapshot's turn read it plus the time
// since.
func (v *snapshot) now() int64 { return v.turn.Now + time.Since(v.at).Milliseconds() }

// shared is the room's state a ticket is read against.
func (v *snapshot) shared() shared {
	return shared{early: v.turn.Early, admitted: v.turn.Total, available: v.turn.Available, now: v.now()}
}

// farBack is whether an entry at place p cannot have been admitted since
// the snapshot was read: the bucket holds at most a second of the rate, and
// refills at the rate over the snapshot's age at most.
func (v *snapshot) farBack(p place) bool {
	if p.rank < 0 {
		return false
	}
	ahead := p.rank - v.turn.Total // entries before p still waiting
	rate := v.turn.Rate            // the turn's: a PATCH is in force from the next turn
	reach := rate + rate*int64(maxSnapshotAge)/int64(time.Second) + 1
	return ahead >= reach
}

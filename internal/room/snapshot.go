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

// Tick is how often an instance's admitter takes a turn in each room.
const Tick = 100 * time.Millisecond

// Turn is what one admit turn found.
type Turn struct {
	Status   string // ok, waiting, sold_out, ended, no_room
	Admitted int64  // now
	Total    int64  // admitted so far
	// Early, Available, Now (Redis's clock, ms) and Rate (the one the
	// turn admitted at) are the rest of the room's shared state when
	// Status is ok, waiting or sold_out.
	Early, Available, Now, Rate int64
}

// snapshot is what the instance's last admit turn read of a room. A kept
// one is never changed: readers hold it without the state's lock.
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

// newSnapshot is what turn t of live's room read, as of now.
func newSnapshot(live inventory.LiveRound, t Turn) *snapshot {
	v := &snapshot{round: live.Round, turn: t, at: time.Now()}
	if !live.StartsAt.IsZero() {
		v.starts = live.StartsAt.UnixMilli()
	}
	return v
}

// age is how long ago the snapshot's turn answered.
func (v *snapshot) age() time.Duration { return time.Since(v.at) }

// now is Redis's clock now, as the snapshot's turn read it plus the time
// since.
func (v *snapshot) now() int64 { return v.turn.Now + v.age().Milliseconds() }

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

package room

import (
	"math/rand/v2"
	"time"
)

// A waiting stream whose place is known does not poll for its admission:
// it waits on its rank, and the instance's admitter turn that admits the
// rank wakes it (snapshot.go keeps the turns). Every instance's turn sees
// the room's admitted count, whoever admitted, so each wakes its own
// streams. A turn admits up to a second of the rate at once; a woken
// stream reads its pass after a spread of up to a turn, so those shoppers
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
// rank (at once if the instance's snapshot has it admitted), and the
// function that stops waiting.
func (s *Service) awaitRank(sku string, round, rank int64) (<-chan struct{}, func()) {
	k := rankKey{sku: sku, round: round, rank: rank}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.snaps[sku]; v != nil && v.round == round && rank < v.turn.Total {
		c := make(chan struct{})
		close(c)
		return c, func() {}
	}
	w := s.ranks[k]
	if w == nil {
		w = &rankWait{ch: make(chan struct{})}
		s.ranks[k] = w
	}
	w.n++
	return w.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.n--; w.n == 0 && s.ranks[k] == w {
			delete(s.ranks, k)
		}
	}
}

// admitRanksLocked wakes the streams waiting on ranks from to to-1 of
// sku's room in round; s.mu is held.
func (s *Service) admitRanksLocked(sku string, round, from, to int64) {
	if to <= from || len(s.ranks) == 0 {
		return
	}
	wake := func(k rankKey, w *rankWait) {
		close(w.ch)
		delete(s.ranks, k)
	}
	if to-from <= int64(len(s.ranks)) {
		for r := from; r < to; r++ {
			k := rankKey{sku: sku, round: round, rank: r}
			if w := s.ranks[k]; w != nil {
				wake(k, w)
			}
		}
		return
	}
	for k, w := range s.ranks {
		if k.sku == sku && k.round == round && k.rank >= from && k.rank < to {
			wake(k, w)
		}
	}
}

// spread is how long a woken stream waits before it reads its pass.
func spread() time.Duration { return rand.N(Tick) }

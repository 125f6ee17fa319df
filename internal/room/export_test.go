package room

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
)

// JoinMany joins users to the room of sku's live round as Join does (the
// same script, keys and arguments), but pipelined: batch calls a round
// trip, workers pipelines at once. For tests that need a large room fast.
func (s *Service) JoinMany(ctx context.Context, sku string, users []string, batch, workers int) error {
	live, ok, err := s.live(ctx, sku, true)
	if err != nil {
		return err
	}
	if !ok || live.Room == nil {
		return ErrNoRoom
	}
	if err := joinScript.Load(ctx, s.rdb).Err(); err != nil {
		return err
	}
	next := make(chan []string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for us := range next {
				pipe := s.rdb.Pipeline()
				cmds := make([]*redis.Cmd, len(us))
				for i, user := range us {
					u, err := parseUser(user)
					if err != nil {
						errs <- err
						return
					}
					keys, args := s.joinCall(sku, live, u, user, "join", nil)
					cmds[i] = joinScript.EvalSha(ctx, pipe, keys, args...)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					errs <- err
					return
				}
				for i, c := range cmds {
					r, err := c.StringSlice()
					if err != nil || len(r) < 2 || r[0] != "ok" || r[1] != "1" {
						errs <- fmt.Errorf("join %s: %q %v", us[i], r, err)
						return
					}
				}
			}
		}()
	}
	var first error
feed:
	for i := 0; i < len(users); i += batch {
		select {
		case next <- users[i:min(i+batch, len(users))]:
		case first = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		select {
		case first = <-errs:
		default:
		}
	}
	return first
}

// StreamTo writes user's ticket stream to w, as the events route does,
// until a write fails or the room ends.
func (s *Service) StreamTo(ctx context.Context, w io.Writer, sku, user string) error {
	first, err := s.TicketOf(ctx, sku, user, nil)
	if err != nil {
		return err
	}
	s.stream(bufio.NewWriter(w), nil, sku, user, first)
	return nil
}

// RedisTicket reads user's ticket from Redis, never from the instance's
// snapshot of the room.
func (s *Service) RedisTicket(ctx context.Context, sku, user string) (Ticket, error) {
	st := s.state
	st.mu.Lock()
	v := st.snaps[sku]
	delete(st.snaps, sku)
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		if _, ok := st.snaps[sku]; !ok && v != nil {
			st.snaps[sku] = v
		}
		st.mu.Unlock()
	}()
	return s.TicketOf(ctx, sku, user, nil)
}

// Rank is user's place in admission order in sku's live room, from 0,
// as Redis holds it (-1: none).
func (s *Service) Rank(sku, user string) int64 {
	ctx := context.Background()
	u, err := parseUser(user)
	if err != nil {
		return -1
	}
	live, ok, err := s.live(ctx, sku, true)
	if err != nil || !ok || live.Room == nil {
		return -1
	}
	if r, err := s.rdb.ZRank(ctx, s.keys.Late(sku, live.Round), string(u[:])).Result(); err == nil {
		early, _ := s.rdb.ZCard(ctx, s.keys.Early(sku, live.Round)).Result()
		return early + r
	}
	early, _ := s.rdb.ZRangeByLex(ctx, s.keys.Early(sku, live.Round), &redis.ZRangeBy{Min: "-", Max: "+"}).Result()
	for i, m := range early {
		if m[32:48] == string(u[:]) {
			return int64(i)
		}
	}
	return -1
}

// Forget drops what the instance derived and learnt of user's entry in
// sku's rooms, as after a restart.
func (s *Service) Forget(sku, user string) {
	st := s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	for k := range st.ids {
		if k.sku == sku && k.user.String() == user {
			delete(st.ids, k)
		}
	}
}

// Freshen makes the instance's snapshot of sku's room as young as if its
// turn had just answered.
func (s *Service) Freshen(sku string) {
	st := s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if v := st.snaps[sku]; v != nil {
		c := *v // a stored snapshot is never changed: readers hold it unlocked
		c.turn.Now += time.Since(v.at).Milliseconds()
		c.at = time.Now()
		st.snaps[sku] = &c
	}
}

// WakeAfter is wakeAfter for a ticket in state at position (nil: none)
// in sku's room.
func (s *Service) WakeAfter(sku, state string, position *int64) time.Duration {
	return s.wakeAfter(sku, Ticket{State: state, Position: position})
}

// TurnAdmits keeps a turn of sku's room in round that has admitted total
// so far, as AdmitTurn does with what admit.lua answers.
func (s *Service) TurnAdmits(sku string, round, total int64) {
	live := inventory.LiveRound{Round: round, Room: &inventory.LiveRoom{RoomSettings: inventory.RoomSettings{AdmitPerSecond: 10}}}
	s.state.keepSnapshot(sku, newSnapshot(live, Turn{Status: "ok", Total: total, Available: 1, Rate: 10}))
}

// AwaitRank is awaitRank.
func (s *Service) AwaitRank(sku string, round, rank int64) (<-chan struct{}, func()) {
	return s.state.awaitRank(sku, round, rank)
}

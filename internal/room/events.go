package room

import (
	"bufio"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
)

var errNoStream = apperr.NewError(apperr.CodeNotFound, "no such ticket stream")

// streamUser checks a stream token against sku's live room and returns
// the user it is for. Errors: errNoStream, or a 503.
func (s *Service) streamUser(ctx context.Context, sku, token string) (string, error) {
	if len(token) != 64 {
		return "", errNoStream
	}
	raw, err := hex.DecodeString(token[:32])
	if err != nil {
		return "", errNoStream
	}
	u, err := uuid.FromBytes(raw)
	if err != nil {
		return "", errNoStream
	}
	live, ok, err := s.live(ctx, sku, false)
	if err != nil {
		return "", err
	}
	if !ok || live.Room == nil || !hmac.Equal([]byte(token[32:]), []byte(streamMAC(live.Room.Secret, u))) {
		return "", errNoStream
	}
	return u.String(), nil
}

// Stream timing: a waiting ticket is sent at most once a second. Its
// admission wakes it (state.go's awaitRank) once its place is known and the
// instance's admitter turns; otherwise it is worked out again when its
// entry could be admitted (wakeAfter), at most a turn apart.
const (
	streamSlow   = time.Second
	streamFast   = Tick
	keepAliveGap = 15 * time.Second
	// streamWriteTimeout drops a client that took no data for this long.
	// fasthttp sets one write deadline for a whole response, its
	// WriteTimeout after the handler returns, which would cut every
	// stream at that age; each write moves it on instead.
	streamWriteTimeout = 10 * time.Second
)

// stream writes user's ticket as `queue` events to w, on conn (nil: none
// to keep alive): the current one first, then each change, until the
// client leaves, the room ends, or Close.
func (s *Service) stream(w *bufio.Writer, conn net.Conn, sku, user string, first Ticket) {
	cur, lastJSON := first, ""
	var sent, wrote time.Time // the last event; the last write of any kind
	write := func(format string, a ...any) bool {
		if conn != nil {
			_ = conn.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		}
		if _, err := fmt.Fprintf(w, format, a...); err != nil || w.Flush() != nil {
			return false
		}
		wrote = time.Now()
		return true
	}
	event := func(t Ticket) bool {
		b, err := json.Marshal(t)
		if err != nil || string(b) == lastJSON {
			return err == nil
		}
		lastJSON, sent = string(b), time.Now()
		return write("event: queue\ndata: %s\n\n", b)
	}
	if !event(first) {
		return
	}
	for {
		if !s.sleep(sku, cur) {
			return
		}
		t, err := s.streamTicket(sku, user, cur)
		switch {
		case errors.Is(err, ErrNotInRoom), errors.Is(err, ErrNoRoom):
			return // the room is over
		case err != nil:
			// An outage: try again.
		default:
			state := cur.State
			cur = t
			// While waiting, at most one event a second; a new state at once.
			if (t.State != state || time.Since(sent) >= streamSlow) && !event(t) {
				return
			}
		}
		if time.Since(wrote) > keepAliveGap && !write(": keep-alive\n\n") {
			return
		}
	}
}

// sleep waits until a stream whose ticket is t works it out again: a
// second on while it waits, or at its admission (and a spread) once its
// place is known and the instance's admitter turns; false when the
// service closes.
func (s *Service) sleep(sku string, t Ticket) bool {
	var admitted <-chan struct{}
	wait := s.wakeAfter(sku, t)
	if t.State == StateWaiting && t.at.rank >= 0 && s.state.snapshot(sku, t.round) != nil {
		var stop func()
		admitted, stop = s.state.awaitRank(sku, t.round, t.at.rank)
		defer stop()
		wait = streamSlow
	}
	select {
	case <-s.done:
		return false
	case <-time.After(wait):
		return true
	case <-admitted:
	}
	select {
	case <-s.done:
		return false
	case <-time.After(spread()):
		return true
	}
}

// wakeAfter is when a stream whose ticket is t works it out again when
// no admitter turn can wake it (sleep): an entry p places back cannot be
// admitted for (p - 1 - rate) / rate seconds, the bucket holding a second
// of the rate; it looks then, a turn to a second on, on its own phase.
func (s *Service) wakeAfter(sku string, t Ticket) time.Duration {
	if t.State != StateWaiting || t.Position == nil {
		return streamSlow
	}
	rate := int64(s.state.rate(sku))
	d := time.Duration(*t.Position-1-rate) * time.Second / time.Duration(rate)
	return min(max(d, streamFast), streamSlow)
}

// streamTicket works out user's ticket, last worked out as last, from the
// instance's snapshot of the room: its place is final after the shuffle
// (one ZRANK finds an early entry's) and its pass was sent with its
// admission. Without a fresh snapshot, or for the pass, it reads Redis.
func (s *Service) streamTicket(sku, user string, last Ticket) (Ticket, error) {
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	u, err := parseUser(user)
	if err != nil {
		return Ticket{}, err
	}
	live, ok, err := s.live(ctx, sku, false)
	if err != nil {
		return Ticket{}, err
	}
	v := (*snapshot)(nil)
	if ok && live.Room != nil && live.Round == last.round {
		v = s.state.snapshot(sku, live.Round)
	}
	if v == nil {
		return s.TicketOf(ctx, sku, user, nil)
	}
	p, sh := last.at, v.shared()
	if p.rank < 0 && sh.now >= v.starts {
		if p, err = s.shuffled(ctx, sku, live, u, p); err != nil {
			return Ticket{}, err
		}
	}
	if p.rank >= 0 && p.rank < sh.admitted && last.pass.pass == "" {
		return s.TicketOf(ctx, sku, user, nil) // just admitted: its pass
	}
	return s.build(sku, u, live, p, sh, last.pass), nil
}

// shuffled finds early entry p's rank once the shuffle is final: a ZRANK
// of its member, which the place and the shopper's ids spell out.
func (s *Service) shuffled(ctx context.Context, sku string, live inventory.LiveRound, u uuid.UUID, p place) (place, error) {
	ms, b := p.joinedMs, make([]byte, 6)
	for i := 5; i >= 0; i-- {
		b[i], ms = byte(ms), ms>>8
	}
	r, err := s.rdb.ZRank(ctx, s.keys.Early(sku, live.Round), s.idsOf(sku, live, u).prefix+string(b)).Result()
	if errors.Is(err, redis.Nil) {
		return p, ErrNotInRoom // recorded, or never early
	}
	if err != nil {
		return p, storeError("rank", err)
	}
	p.rank = r
	s.placed(sku, live, u, p, passInfo{})
	return p, nil
}

// spread is how long a woken stream waits before it reads its pass: up
// to a turn, so the shoppers one turn admits buy over the next 100 ms.
func spread() time.Duration { return rand.N(Tick) }

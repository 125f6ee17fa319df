package room

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
)

// A ticket's event stream needs no header (an EventSource cannot send
// one): its URL carries the user id and a MAC of it under the room's
// secret, so only the ticket's owner has it.

var errNoStream = apperr.NewError(apperr.CodeNotFound, "no such ticket stream")

// eventsURL is the relative URL of user's ticket stream.
func (s *Service) eventsURL(sku, user string, room *inventory.LiveRoom) string {
	u, _ := uuid.Parse(user)
	return "/api/v1/products/" + sku + "/queue/events/" + hex.EncodeToString(u[:]) + streamMAC(room.Secret, u)
}

func streamMAC(secret string, u uuid.UUID) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("events:" + u.String()))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

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

// Stream timing: a waiting ticket is read at most once a second; near
// the front, where an admission can come within the second (a turn
// admits up to a second's rate at once), five times a second, so the
// admission is sent at once.
const (
	streamSlow   = time.Second
	streamFast   = 200 * time.Millisecond
	keepAliveGap = 15 * time.Second
)

// stream writes user's ticket as `queue` events: the current one first,
// then each change, until the client leaves, the room ends, or Close.
func (s *Service) stream(w *bufio.Writer, sku, user string, first Ticket) {
	last, lastJSON := first, ""
	var sent, wrote time.Time // the last event; the last write of any kind
	write := func(format string, a ...any) bool {
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
		lastJSON, last, sent = string(b), t, time.Now()
		return write("event: queue\ndata: %s\n\n", b)
	}
	if !event(first) {
		return
	}
	for {
		wait := streamSlow
		if last.State == StateWaiting && last.Position != nil &&
			*last.Position <= 2*int64(s.rateOf(sku))+1 {
			wait = streamFast
		}
		select {
		case <-s.done:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		t, err := s.TicketOf(ctx, sku, user, nil)
		cancel()
		switch {
		case errors.Is(err, ErrNotInRoom), errors.Is(err, ErrNoRoom):
			return // the room is over
		case err != nil:
			// An outage: try again.
		case t.State != last.State || time.Since(sent) >= streamSlow:
			// While waiting, at most one event a second; a new state at once.
			if !event(t) {
				return
			}
		}
		if time.Since(wrote) > keepAliveGap && !write(": keep-alive\n\n") {
			return
		}
	}
}

// rateOf is the admission rate of sku's live room as last read (1: none).
func (s *Service) rateOf(sku string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.infos[sku]; ok && c.r.Room != nil {
		return c.r.Room.AdmitPerSecond
	}
	return 1
}

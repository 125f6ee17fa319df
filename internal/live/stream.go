package live

import (
	"bufio"
	"encoding/json"
	"net"
	"strconv"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
)

// Sale statuses of a stock event.
const (
	SaleNone     = "none"
	SaleUpcoming = "upcoming"
	SaleOpen     = "open"
	SaleSoldOut  = "sold_out"
	SaleEnded    = "ended"
)

// Event is the data of a `stock` event.
type Event struct {
	SKU       string     `json:"sku"`
	Available int64      `json:"available"`
	Sale      string     `json:"sale"`
	StartsAt  *time.Time `json:"starts_at"`
	EndsAt    *time.Time `json:"ends_at"`
	// PerUserLimit is the round's units per shopper, 0 for no limit;
	// absent without a sale.
	PerUserLimit *int64 `json:"per_user_limit,omitempty"`
	// WaitingRoom tells whether the round puts its buyers through a
	// waiting room (false without a sale).
	WaitingRoom bool `json:"waiting_room"`
	// Draw tells whether the round is a draw, entered rather than bought
	// (false without a sale).
	Draw bool `json:"draw"`
	// RoundID is the live round's id (as in the stock report and the
	// fairness answer); absent without a sale. A page tells a new round
	// from the last one by it.
	RoundID *int64 `json:"round_id,omitempty"`
}

// EventOf is what a stream shows of c at now. The sale's window is checked
// as the reserve script checks it: open from starts_at, ended at ends_at.
func EventOf(c inventory.Change, now time.Time) Event {
	limit, round := c.PerUserLimit, c.Round
	e := Event{SKU: c.SKU, Available: max(c.Available, 0), Sale: SaleOpen, StartsAt: timePtr(c.StartsAt),
		EndsAt: timePtr(c.EndsAt), PerUserLimit: &limit, WaitingRoom: c.Room, Draw: c.Draw, RoundID: &round}
	switch {
	case c.Round == 0:
		e.Sale, e.Available, e.PerUserLimit, e.WaitingRoom, e.Draw, e.RoundID = SaleNone, 0, nil, false, false, nil
	case !c.EndsAt.IsZero() && !now.Before(c.EndsAt):
		e.Sale = SaleEnded
	case now.Before(c.StartsAt):
		e.Sale = SaleUpcoming
	case c.Available <= 0:
		e.Sale = SaleSoldOut
	}
	return e
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// stream is one client's event stream, run by fasthttp's body stream
// writer: w is the response body, conn the client's connection (for its
// write deadline).
type stream struct {
	h    *Hub
	sub  *subscriber
	w    *bufio.Writer
	conn net.Conn
	last Event
	// said is the last state that said whether its round has a waiting
	// room or is a draw: a purchase's or a release's message does not,
	// and is shown with its round's flags from here.
	said inventory.Change
	gone chan struct{} // closed when the client hangs up
}

// run writes the first state, then every state the hub hands over (unless
// it shows nothing new) and a keep-alive comment after each silent
// KeepAlive, until a write fails (the client left, or stopped reading) or
// the hub shuts down.
func (s *stream) run(first inventory.Change) {
	defer s.h.unsubscribe(s.sub)
	s.gone = make(chan struct{})
	if s.conn != nil {
		go s.watch()
	}
	s.retry(s.h.o.Retry)
	if !s.event(first, true) || !s.flush() {
		return
	}
	keepAlive := time.NewTicker(s.h.o.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case c := <-s.sub.box:
			if !s.event(c, false) {
				continue // nothing new to show
			}
		case <-keepAlive.C:
			_, _ = s.w.WriteString(": keep-alive\n\n")
		case <-s.gone:
			return
		case <-s.h.shutdown:
			// Clients reconnect (to another instance) after the retry
			// delay; the comment says why the stream ends.
			s.retry(s.h.o.Retry)
			_, _ = s.w.WriteString(": server shutting down, reconnect\n\n")
			_ = s.flush()
			return
		}
		if !s.flush() {
			return
		}
	}
}

// watch reads the connection until the client hangs up, so that its
// stream (and its place in the limits) ends at once rather than at the
// next failed write. The response carries Connection: close, so fasthttp
// reads nothing more from this connection and nothing else is taken from
// it; what a client might still send is discarded.
func (s *stream) watch() {
	defer close(s.gone)
	_ = s.conn.SetReadDeadline(time.Time{}) // fasthttp's was for the request
	var buf [64]byte
	for {
		if _, err := s.conn.Read(buf[:]); err != nil {
			return
		}
	}
}

func (s *stream) retry(d time.Duration) {
	_, _ = s.w.WriteString("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n")
}

// event writes c as a stock event unless it shows what the stream last
// showed (a coalesced repeat); it reports whether it wrote.
func (s *stream) event(c inventory.Change, force bool) bool {
	if c = carryFlags(c, s.said); c.RoomKnown || c.DrawKnown {
		s.said = c
	}
	e := EventOf(c, time.Now())
	if !force && sameEvent(e, s.last) {
		return false
	}
	s.last = e
	data, _ := json.Marshal(e) // cannot fail: plain fields
	_, _ = s.w.WriteString("event: stock\ndata: ")
	_, _ = s.w.Write(data)
	_, _ = s.w.WriteString("\n\n")
	s.h.metrics.events.Inc()
	return true
}

func sameEvent(a, b Event) bool {
	return a.SKU == b.SKU && a.Available == b.Available && a.Sale == b.Sale && a.WaitingRoom == b.WaitingRoom && a.Draw == b.Draw &&
		equalTime(a.StartsAt, b.StartsAt) && equalTime(a.EndsAt, b.EndsAt) &&
		equalInt(a.PerUserLimit, b.PerUserLimit) && equalInt(a.RoundID, b.RoundID)
}

func equalInt(a, b *int64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func equalTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// flush sends what was written to the client. The connection's write
// deadline is renewed first: fasthttp set it once when the response began,
// which would end every stream WriteTimeout after it started; renewed, it
// ends only a stream whose client took no data for that long.
func (s *stream) flush() bool {
	if s.conn != nil {
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.h.o.WriteTimeout))
	}
	return s.w.Flush() == nil
}

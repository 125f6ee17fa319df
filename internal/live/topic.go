package live

import (
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"time"
)

// topic is one watched SKU: its streams and the latest state heard. Every
// field is guarded by the hub's mutex.
type topic struct {
	sku    string
	subs   map[*subscriber]struct{}
	latest inventory.Change
	known  bool      // latest holds a state
	heard  uint64    // published changes applied: a resync's read older than one is dropped
	sent   time.Time // when the streams were last handed a state
	flush  *time.Timer
	edge   *time.Timer // the next sale moment (starts_at, ends_at)
	edgeAt time.Time
}

// subscriber is one stream's end of the fan-out: a mailbox of one state.
type subscriber struct {
	topic *topic
	ip    string
	box   chan inventory.Change
}

// offer puts c in the mailbox, replacing a state the stream has not read
// yet: it never blocks. Only the hub, under its mutex, offers, so the
// second send cannot find the box full.
func (s *subscriber) offer(c inventory.Change) {
	select {
	case s.box <- c:
		return
	default:
	}
	select {
	case <-s.box:
	default:
	}
	select {
	case s.box <- c:
	default:
	}
}

// Refusals of a new stream.
var (
	errTooManyForClient = &apperr.Error{Code: apperr.CodeRateLimited, RetryAfter: 5,
		Detail: "too many live streams from this client; close one or retry later"}
	errTooMany = &apperr.Error{Code: apperr.CodeUnavailable, RetryAfter: 5,
		Detail: "this server has as many live streams as it takes; retry shortly"}
	errShuttingDown = &apperr.Error{Code: apperr.CodeUnavailable, RetryAfter: 1,
		Detail: "this server is shutting down; retry shortly"}
)

// subscribe registers a stream of sku for the client ip, within the
// limits.
func (h *Hub) subscribe(sku, ip string) (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		h.metrics.refused.WithLabelValues("shutdown").Inc()
		return nil, errShuttingDown
	case h.streams >= h.o.MaxStreams:
		h.metrics.refused.WithLabelValues("total").Inc()
		return nil, errTooMany
	case h.perIP[ip] >= h.o.MaxPerClient:
		h.metrics.refused.WithLabelValues("per_client").Inc()
		return nil, errTooManyForClient
	}
	t := h.topics[sku]
	if t == nil {
		t = &topic{sku: sku, subs: map[*subscriber]struct{}{}}
		h.topics[sku] = t
		h.poke()
	}
	s := &subscriber{topic: t, ip: ip, box: make(chan inventory.Change, 1)}
	t.subs[s] = struct{}{}
	h.perIP[ip]++
	h.streams++
	h.active.Add(1)
	h.metrics.streams.Inc()
	return s, nil
}

// unsubscribe removes a stream; a topic without streams is forgotten.
func (h *Hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := s.topic
	if _, ok := t.subs[s]; !ok {
		return
	}
	delete(t.subs, s)
	if h.perIP[s.ip]--; h.perIP[s.ip] <= 0 {
		delete(h.perIP, s.ip)
	}
	h.streams--
	h.active.Done()
	h.metrics.streams.Dec()
	if len(t.subs) == 0 {
		stop(t.flush)
		stop(t.edge)
		delete(h.topics, t.sku)
		h.poke()
	}
}

// started records the state a new stream read itself, when the hub has
// heard none for the SKU yet, so that its sale moments are scheduled.
func (h *Hub) started(s *subscriber, c inventory.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := s.topic; !t.known && h.topics[t.sku] == t {
		t.latest, t.known = c, true
		h.scheduleEdge(t, time.Now())
	}
}

// update records a newer state and hands it out: now if the streams were
// last handed one at least an Interval ago, else when the Interval is up
// (by then perhaps a still newer one).
func (h *Hub) update(t *topic, c inventory.Change) {
	if t.known {
		c = carryFlags(c, t.latest) // a state handed out in its place must keep them
	}
	t.latest, t.known = c, true
	if t.flush != nil {
		return // a hand-out is due; it takes the latest
	}
	wait := h.o.Interval - time.Since(t.sent)
	if wait <= 0 {
		h.handOut(t)
		return
	}
	t.flush = time.AfterFunc(wait, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if t.flush != nil && h.topics[t.sku] == t {
			t.flush = nil
			h.handOut(t)
		}
	})
}

// handOut gives every stream of t the latest state.
func (h *Hub) handOut(t *topic) {
	now := time.Now()
	t.sent = now
	for s := range t.subs {
		s.offer(t.latest)
	}
	h.scheduleEdge(t, now)
}

// edgeSlack puts the timer just past the moment, so that a stream working
// out the status then sees the new one.
const edgeSlack = 5 * time.Millisecond

// scheduleEdge sets the timer of t's next sale moment after now, if any.
func (h *Hub) scheduleEdge(t *topic, now time.Time) {
	at := nextMoment(t.latest, now)
	if at.Equal(t.edgeAt) && t.edge != nil {
		return
	}
	stop(t.edge)
	t.edge, t.edgeAt = nil, at
	if at.IsZero() {
		return
	}
	t.edge = time.AfterFunc(at.Sub(now)+edgeSlack, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.topics[t.sku] == t && t.edgeAt.Equal(at) {
			t.edge, t.edgeAt = nil, time.Time{}
			h.handOut(t)
		}
	})
}

// nextMoment is the next time after now at which c's sale status changes
// by itself: its start, else its end; zero if none.
func nextMoment(c inventory.Change, now time.Time) time.Time {
	switch {
	case c.Round == 0:
		return time.Time{}
	case now.Before(c.StartsAt):
		return c.StartsAt
	case now.Before(c.EndsAt):
		return c.EndsAt
	}
	return time.Time{}
}

func stop(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// carryFlags gives c the waiting room's and the draw's flags of prev, an
// earlier state of the same round that said them, when c (a purchase's
// or a release's message) does not say them itself.
func carryFlags(c, prev inventory.Change) inventory.Change {
	if prev.Round != c.Round {
		return c
	}
	if !c.RoomKnown && prev.RoomKnown {
		c.Room, c.RoomKnown = prev.Room, true
	}
	if !c.DrawKnown && prev.DrawKnown {
		c.Draw, c.DrawKnown = prev.Draw, true
	}
	return c
}

package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// How a waiting shopper learns of its turn: by default it follows its
// ticket's event stream (events_url), one open connection and no reads;
// with Wait "poll" it reads the ticket again about when its turn is due
// (ticketWait). A stream that breaks before the ticket is final (a
// server restart, a network error) is replaced by one read of the ticket
// and, after a short backoff, a new stream, streamTries times at most;
// then the shopper polls for the rest of its wait.
const (
	streamTries   = 5
	streamBackoff = 100 * time.Millisecond // doubled at each try
)

// ticketWaiter is one shopper's wait for its turn.
type ticketWaiter struct {
	cfg      Config
	i        int
	queue    string // the ticket's path
	deadline time.Time
	rr       *roomRun
	call     func(method, path string, body any, header http.Header) (*vegeta.Result, error)
	// open GETs an events_url.
	open func(ctx context.Context, url string) (*http.Response, error)
}

// read reads the ticket once; a refusal or a failed request is the zero
// ticket, to be read again.
func (w ticketWaiter) read() (roomTicket, error) {
	r, err := w.call(http.MethodGet, w.queue, nil, nil)
	if err != nil {
		return roomTicket{}, err
	}
	w.rr.mu.Lock()
	w.rr.ticket.Add(r)
	w.rr.mu.Unlock()
	var t roomTicket
	if r.Code != http.StatusOK || json.Unmarshal(r.Body, &t) != nil {
		return roomTicket{}, nil
	}
	return t, nil
}

// poll reads the ticket until it is final or the deadline passes (then
// the zero ticket).
func (w ticketWaiter) poll(ctx context.Context) (roomTicket, error) {
	for time.Now().Before(w.deadline) {
		t, err := w.read()
		if err != nil || ended(t) {
			return t, err
		}
		select {
		case <-ctx.Done():
			return roomTicket{}, ctx.Err()
		case <-time.After(ticketWait(t, w.cfg.Room.AdmitPerSecond, w.rr.startsAt, time.Now(), spreadOf(w.i), w.cfg.Room.MaxPoll)):
		}
	}
	return roomTicket{}, nil
}

// follow follows the ticket's stream at url until the ticket is final or
// the deadline passes (then the zero ticket).
func (w ticketWaiter) follow(ctx context.Context, url string) (roomTicket, error) {
	for try := range streamTries {
		t, err := w.stream(ctx, url)
		if err != nil || ended(t) || !time.Now().Before(w.deadline) {
			return t, err
		}
		if t, err = w.read(); err != nil || ended(t) { // what the broken stream may have missed
			return t, err
		}
		if t.EventsURL != "" {
			url = t.EventsURL
		}
		// Spread by shopper: after a server restart, not every stream at once.
		backoff := time.Duration(float64(streamBackoff<<try) * (1 + spreadOf(w.i)))
		select {
		case <-ctx.Done():
			return roomTicket{}, ctx.Err()
		case <-time.After(backoff):
		}
	}
	return w.poll(ctx)
}

// stream opens the stream at url and reads it until the ticket is final
// (returned), the stream ends or breaks, or the deadline passes (then
// the zero ticket); the error is ctx's only.
func (w ticketWaiter) stream(ctx context.Context, url string) (roomTicket, error) {
	sctx, cancel := context.WithDeadline(ctx, w.deadline)
	defer cancel() // also closes a stream left before its end
	start := time.Now()
	resp, err := w.open(sctx, url)
	w.rr.mu.Lock()
	w.rr.opens++
	w.rr.mu.Unlock()
	if err != nil {
		return roomTicket{}, ctx.Err()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK { // 404: no such stream (any more)
		return roomTicket{}, nil
	}
	sc := bufio.NewScanner(resp.Body) // lines up to 64 KiB; a ticket is under 1 KiB
	for first := true; ; first = false {
		ev, ok := readEvent(sc)
		if !ok {
			return roomTicket{}, ctx.Err()
		}
		w.rr.mu.Lock()
		w.rr.events++
		if first {
			w.rr.firstEvent.Add(&vegeta.Result{Timestamp: start, Latency: time.Since(start), Code: http.StatusOK})
		}
		w.rr.mu.Unlock()
		var t roomTicket
		if ev.name == "queue" && json.Unmarshal([]byte(ev.data), &t) == nil && ended(t) {
			return t, nil
		}
	}
}

// openStream GETs the stream at url (relative to the target) as shopper
// s: no Authorization, the URL is the credential.
func openStream(ctx context.Context, hc *http.Client, tgt target, s shopper, forwardedFor bool, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tgt.url(url), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if forwardedFor {
		req.Header.Set("X-Forwarded-For", s.addr)
	}
	return hc.Do(req)
}

// sseEvent is one server-sent event: its type and its data lines joined.
type sseEvent struct {
	name, data string
}

// readEvent reads sc up to the end of the next event. ok is false when
// the stream ends or breaks first; an event cut off by the end is not
// one (the format's rule). Comments (":", the keep-alives) and fields
// other than event and data are skipped.
func readEvent(sc *bufio.Scanner) (ev sseEvent, ok bool) {
	var data []string
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if data != nil {
				ev.data = strings.Join(data, "\n")
				return ev, true
			}
			ev = sseEvent{} // an event of no data is none
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.name = value
		case "data":
			data = append(data, value)
		}
	}
	return sseEvent{}, false
}

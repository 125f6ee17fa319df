package openapitest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// StockEvent is the data of one `stock` event of a live stock stream.
type StockEvent struct {
	SKU       string     `json:"sku"`
	Available int64      `json:"available"`
	Sale      string     `json:"sale"`
	StartsAt  *time.Time `json:"starts_at"`
	EndsAt    *time.Time `json:"ends_at"`
	// PerUserLimit is absent without a sale.
	PerUserLimit *int64 `json:"per_user_limit"`
	Draw         bool   `json:"draw"`
	// At is when the reader received it.
	At time.Time `json:"-"`
}

// Stream is an open Server-Sent Events stream read in the background.
type Stream struct {
	Resp   *http.Response
	events chan StockEvent
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	retries  []string // retry: values, in order
	comments int
	err      error // why reading stopped (io.EOF: the server closed it)
}

// OpenStream opens url as an event stream on client, with headers as name,
// value pairs, and checks the answer's status and headers against
// openapi.yaml; it fails t unless the status is 200. The stream is closed
// when t ends.
func OpenStream(t testing.TB, client *http.Client, url string, headers ...string) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		Check(t, req, nil, resp, body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	Check(t, req, nil, resp, nil)
	s := &Stream{Resp: resp, events: make(chan StockEvent, 1024), cancel: cancel, done: make(chan struct{})}
	go s.read()
	t.Cleanup(s.Close)
	return s
}

// Close ends the stream from the client's side.
func (s *Stream) Close() {
	s.cancel()
	<-s.done
	s.Resp.Body.Close()
}

func (s *Stream) read() {
	defer close(s.done)
	defer close(s.events)
	r := bufio.NewReader(s.Resp.Body)
	var name, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if name == "stock" {
				var e StockEvent
				if json.Unmarshal([]byte(data), &e) == nil {
					e.At = time.Now()
					s.events <- e
				}
			}
			name, data = "", ""
		case strings.HasPrefix(line, ":"):
			s.mu.Lock()
			s.comments++
			s.mu.Unlock()
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "retry: "):
			s.mu.Lock()
			s.retries = append(s.retries, strings.TrimPrefix(line, "retry: "))
			s.mu.Unlock()
		}
	}
}

// Next returns the next stock event, or ok false when none came within
// wait or the stream ended.
func (s *Stream) Next(wait time.Duration) (e StockEvent, ok bool) {
	select {
	case e, ok = <-s.events:
		return e, ok
	case <-time.After(wait):
		return StockEvent{}, false
	}
}

// Until reads events until one satisfies match, within wait in all; it
// returns that event, or ok false.
func (s *Stream) Until(wait time.Duration, match func(StockEvent) bool) (StockEvent, bool) {
	deadline := time.Now().Add(wait)
	for {
		e, ok := s.Next(time.Until(deadline))
		if !ok || match(e) {
			return e, ok
		}
	}
}

// Ended waits up to wait for the server to end the stream and returns the
// retry: values it sent and whether it ended cleanly (EOF).
func (s *Stream) Ended(wait time.Duration) (retries []string, clean bool) {
	select {
	case <-s.done:
	case <-time.After(wait):
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retries, s.err == io.EOF
}

// Comments is the number of comment lines (keep-alives) read so far.
func (s *Stream) Comments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.comments
}

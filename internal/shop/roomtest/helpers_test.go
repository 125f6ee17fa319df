// Package roomtest holds the waiting room's tests through the whole
// application over HTTP (shoptest), each exchange checked against
// openapi.yaml: the routes of docs/api.md's "Waiting room" section, their bad
// inputs, the fairness check and the ticket's event stream.
package roomtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/room"
	"github.com/shop-oss/shop/internal/room/roomrule"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// fixture is one app with an admin.
type fixture struct {
	*shoptest.App
	admin string
	users int
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "admin@example.com", auth.RoleAdmin)
	return &fixture{App: a, admin: admin}
}

// shopper makes a new shopper and returns its id and token.
func (f *fixture) shopper(t testing.TB) (id, token string) {
	t.Helper()
	f.users++
	return f.Shopper(t, fmt.Sprintf("shopper%d@example.com", f.users))
}

// stamp is an RFC 3339 time for a request body.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// nextSecond is at least d from now, on a whole second (the request's
// precision).
func nextSecond(d time.Duration) time.Time {
	return time.Now().Add(d).Truncate(time.Second).Add(time.Second).UTC()
}

// The answers decode into the API's own types (inventory.StockReport,
// room.Ticket, room.View, room.Fairness, room.Entry): the wire form is
// openapi.yaml's to check, which every exchange here is checked against.

// seed opens a round of sku (made if need be) with body as PUT stock's;
// it fails t unless that answers 200 and returns the report.
func (f *fixture) seed(t testing.TB, sku, body string) inventory.StockReport {
	t.Helper()
	if _, err := f.Catalog.Get(context.Background(), sku); err != nil {
		f.Product(t, sku, 1000)
	}
	var rep inventory.StockReport
	f.Do(t, http.MethodPut, "/api/v1/admin/products/"+sku+"/stock", f.admin, body).Decode(t, http.StatusOK, &rep)
	return rep
}

// sameEntries tells whether a and b list the same entries alike.
func sameEntries(a, b []room.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y room.Entry) bool {
		px, py := x.Position, y.Position
		x.Position, y.Position = nil, nil
		return x == y && (px == nil) == (py == nil) && (px == nil || *px == *py)
	})
}

// position shows an entry's position, "null" for none.
func position(p *int64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

type entryPage struct {
	Items      []room.Entry `json:"items"`
	NextCursor *string      `json:"next_cursor"`
}

func (f *fixture) report(t testing.TB, sku string) inventory.StockReport {
	t.Helper()
	var rep inventory.StockReport
	f.Do(t, http.MethodGet, "/api/v1/admin/products/"+sku+"/stock", f.admin, "").Decode(t, http.StatusOK, &rep)
	return rep
}

func (f *fixture) join(t testing.TB, sku, token, body string, status int) room.Ticket {
	t.Helper()
	var tk room.Ticket
	f.Do(t, http.MethodPost, "/api/v1/products/"+sku+"/queue", token, body).Decode(t, status, &tk)
	return tk
}

func (f *fixture) ticket(t testing.TB, sku, token string) room.Ticket {
	t.Helper()
	var tk room.Ticket
	f.Do(t, http.MethodGet, "/api/v1/products/"+sku+"/queue", token, "").Decode(t, http.StatusOK, &tk)
	return tk
}

func (f *fixture) adminView(t testing.TB, sku string) room.View {
	t.Helper()
	var v room.View
	f.Do(t, http.MethodGet, "/api/v1/admin/products/"+sku+"/queue", f.admin, "").Decode(t, http.StatusOK, &v)
	return v
}

func (f *fixture) fairness(t testing.TB, sku string) room.Fairness {
	t.Helper()
	var fr room.Fairness
	f.Do(t, http.MethodGet, "/api/v1/products/"+sku+"/queue/fairness", "", "").Decode(t, http.StatusOK, &fr)
	return fr
}

// allEntries reads the whole entry list, limit at a time.
func (f *fixture) allEntries(t testing.TB, sku string, limit int) []room.Entry {
	t.Helper()
	var out []room.Entry
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("the entry list does not end")
		}
		path := fmt.Sprintf("/api/v1/admin/products/%s/queue/entries?limit=%d", sku, limit)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var p entryPage
		f.Do(t, http.MethodGet, path, f.admin, "").Decode(t, http.StatusOK, &p)
		if len(p.Items) > limit {
			t.Fatalf("a page of %d entries with limit %d", len(p.Items), limit)
		}
		out = append(out, p.Items...)
		if p.NextCursor == nil {
			return out
		}
		cursor = *p.NextCursor
	}
}

// state is what a bad request must leave as it was: the stock report,
// the room's admin view and its entries.
func (f *fixture) state(t testing.TB, skus ...string) string {
	t.Helper()
	var b strings.Builder
	for _, sku := range skus {
		for _, path := range []string{"/stock", "/queue", "/queue/entries?limit=1000"} {
			r := f.Do(t, http.MethodGet, "/api/v1/admin/products/"+sku+path, f.admin, "")
			body := string(r.Body)
			if r.Status != http.StatusOK {
				body, _ = r.JSON(t)["code"].(string) // a problem's request_id differs
			}
			fmt.Fprintf(&b, "%s%s %d %s\n", sku, path, r.Status, body)
		}
	}
	return b.String()
}

// eventually retries cond until it holds, within wait.
func eventually(t testing.TB, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, wait)
		}
	}
}

// queueStream is a ticket's event stream read in the background.
type queueStream struct {
	resp    *http.Response
	tickets chan room.Ticket
	cancel  context.CancelFunc
}

// openQueueStream opens base+eventsURL, checks the answer against
// openapi.yaml and fails t unless it is a 200 event stream.
func openQueueStream(t testing.TB, base, eventsURL string) *queueStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+eventsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	openapitest.Check(t, req, nil, resp, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", eventsURL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &queueStream{resp: resp, tickets: make(chan room.Ticket, 64), cancel: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.tickets)
		r := bufio.NewReader(resp.Body)
		var name, data string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if name == "queue" {
					var tk room.Ticket
					if json.Unmarshal([]byte(data), &tk) == nil {
						s.tickets <- tk
					} else {
						t.Errorf("a queue event whose data is not a ticket: %q", data)
					}
				} else if name != "" {
					t.Errorf("an event %q, want queue", name)
				}
				name, data = "", ""
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done; resp.Body.Close() })
	return s
}

// next returns the next ticket of the stream, failing t if none comes
// within wait.
func (s *queueStream) next(t testing.TB, wait time.Duration) room.Ticket {
	t.Helper()
	select {
	case tk, ok := <-s.tickets:
		if !ok {
			t.Fatal("the stream ended")
		}
		return tk
	case <-time.After(wait):
		t.Fatalf("no queue event within %s", wait)
	}
	return room.Ticket{}
}

// solve answers a challenge of bits.
func solve(challenge string, bits int) string { return roomrule.Solve(challenge, bits) }

// solves tells whether nonce answers challenge at bits.
func solves(challenge, nonce string, bits int) bool { return roomrule.Solves(challenge, nonce, bits) }

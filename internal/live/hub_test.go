package live

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/inventory"
)

func newTestHub(o Options) *Hub {
	return New(nil, inventory.NewStock(nil, "t:"), o, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
}

// A stream that reads nothing never holds up the hub: its mailbox keeps
// only the newest state, whatever the hub hands it meanwhile.
func TestStalledStreamNeverBlocksTheHub(t *testing.T) {
	h := newTestHub(Options{Interval: time.Nanosecond})
	stalled, err := h.subscribe("p1", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			h.mu.Lock()
			h.update(h.topics["p1"], inventory.Change{SKU: "p1", Round: 1, Available: int64(10000 - i)})
			h.mu.Unlock()
			time.Sleep(time.Microsecond) // past the interval: each one handed out
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the hub blocked on a stream that reads nothing")
	}
	waitHandedOut(t, h, "p1")
	if got := <-stalled.box; got.Available != 1 {
		t.Fatalf("the stalled stream's mailbox holds %+v, want the newest state (1 available)", got)
	}
	select {
	case c := <-stalled.box:
		t.Fatalf("a second state %+v was kept", c)
	default:
	}
}

// A burst of changes within one interval reaches a stream as the first
// (at once) and the newest (when the interval is up).
func TestChangesAreCoalesced(t *testing.T) {
	h := newTestHub(Options{Interval: 300 * time.Millisecond})
	s, err := h.subscribe("p1", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	for i := range 100 {
		h.update(h.topics["p1"], inventory.Change{SKU: "p1", Round: 1, Available: int64(100 - i)})
	}
	h.mu.Unlock()
	if c := <-s.box; c.Available != 100 {
		t.Fatalf("first hand-out %+v, want the first change at once", c)
	}
	select {
	case c := <-s.box:
		t.Fatalf("%+v handed out within the interval", c)
	case <-time.After(100 * time.Millisecond):
	}
	select {
	case c := <-s.box:
		if c.Available != 1 {
			t.Fatalf("second hand-out %+v, want the newest", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the newest state was never handed out")
	}
}

func waitHandedOut(t *testing.T, h *Hub, sku string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		pending := h.topics[sku].flush != nil
		h.mu.Unlock()
		if !pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("hand-out still pending")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestEventOf(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	hour := time.Hour
	for _, tc := range []struct {
		name string
		c    inventory.Change
		want string
	}{
		{"none", inventory.Change{}, SaleNone},
		{"open", inventory.Change{Round: 1, Available: 3}, SaleOpen},
		{"sold_out", inventory.Change{Round: 1}, SaleSoldOut},
		{"upcoming", inventory.Change{Round: 1, Available: 3, StartsAt: now.Add(hour)}, SaleUpcoming},
		{"open_at_start", inventory.Change{Round: 1, Available: 3, StartsAt: now}, SaleOpen},
		{"ended_at_end", inventory.Change{Round: 1, Available: 3, EndsAt: now}, SaleEnded},
		{"ended_sold_out", inventory.Change{Round: 1, EndsAt: now.Add(-hour)}, SaleEnded},
		{"negative_is_zero", inventory.Change{Round: 1, Available: -2}, SaleSoldOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := EventOf(tc.c, now)
			if e.Sale != tc.want || e.Available < 0 {
				t.Errorf("EventOf(%+v) = %+v, want sale %s", tc.c, e, tc.want)
			}
		})
	}
}

// A stream shows whether the round has a waiting room or is a draw: a
// seeding's message and the first read say it; a purchase's or a
// release's message of the same round does not, and is shown with the
// round's flags; a new round's seeding says them afresh.
func TestStreamCarriesTheRoundsRoom(t *testing.T) {
	var buf bytes.Buffer
	s := &stream{h: newTestHub(Options{}), w: bufio.NewWriter(&buf)}
	for _, step := range []struct {
		name       string
		c          inventory.Change
		want, draw bool
	}{
		{"first_read", inventory.Change{SKU: "p1", Round: 1, Available: 5, Room: true, RoomKnown: true}, true, false},
		{"purchase", inventory.Change{SKU: "p1", Round: 1, Available: 4}, true, false},
		{"new_round_without", inventory.Change{SKU: "p1", Round: 2, Available: 9, RoomKnown: true}, false, false},
		{"its_purchase", inventory.Change{SKU: "p1", Round: 2, Available: 8}, false, false},
		{"draw_round", inventory.Change{SKU: "p1", Round: 3, Available: 2, Draw: true, DrawKnown: true, RoomKnown: true}, false, true},
		{"its_release", inventory.Change{SKU: "p1", Round: 3, Available: 3}, false, true},
		{"no_sale", inventory.Change{SKU: "p1"}, false, false},
	} {
		buf.Reset()
		if !s.event(step.c, false) {
			t.Fatalf("%s: no event written", step.name)
		}
		_ = s.w.Flush()
		data := strings.TrimSpace(strings.TrimPrefix(buf.String(), "event: stock\ndata: "))
		var e Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("%s: %q: %v", step.name, buf.String(), err)
		}
		if e.WaitingRoom != step.want || e.Draw != step.draw {
			t.Errorf("%s: waiting_room %v draw %v, want %v and %v (%s)", step.name, e.WaitingRoom, e.Draw, step.want, step.draw, data)
		}
	}
}

// States coalesced between two hand-outs keep the round's flags: a
// purchase's or a release's message that replaces the read that said
// them is handed out with them, so that no stream shows a draw or a
// room as gone.
func TestCoalescedStatesKeepTheRoundsFlags(t *testing.T) {
	h := newTestHub(Options{Interval: time.Hour})
	s, err := h.subscribe("p1", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	tp := s.topic
	h.update(tp, inventory.Change{SKU: "p1", Round: 3, Available: 2, Draw: true, DrawKnown: true, RoomKnown: true})
	h.update(tp, inventory.Change{SKU: "p1", Round: 3, Available: 1}) // coalesced: the next hand-out is an hour away
	latest := tp.latest
	if tp.flush != nil {
		tp.flush.Stop()
	}
	h.mu.Unlock()
	if !latest.Draw || !latest.DrawKnown || !latest.RoomKnown || latest.Available != 1 {
		t.Fatalf("latest %+v, want the purchase's units with the round's draw", latest)
	}
}

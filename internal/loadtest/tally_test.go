package loadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func accepted(id string) []byte { return []byte(`{"order_id":"` + id + `","status":"pending"}`) }

func problemBody(code string) []byte {
	return []byte(`{"type":"about:blank","title":"x","status":409,"code":"` + code + `"}`)
}

func TestTallyOutcomes(t *testing.T) {
	tl := newTally(2, 1, 10)
	tl.add(0, 202, accepted(uuid.NewString()))
	tl.add(0, 409, problemBody("limit_exceeded"))
	tl.add(1, 409, problemBody("out_of_stock"))
	tl.add(1, 429, problemBody("rate_limited"))
	tl.add(1, 503, problemBody("unavailable"))
	tl.add(1, 502, []byte("<html>bad gateway</html>"))
	tl.add(-1, 0, nil)

	want := map[string]int{
		"202 accepted": 1, "409 limit_exceeded": 1, "409 out_of_stock": 1, "429 rate_limited": 1,
		"503 unavailable": 1, "502 Bad Gateway": 1, "0 no answer": 1,
	}
	if fmt.Sprint(tl.outcomes) != fmt.Sprint(want) {
		t.Errorf("outcomes = %v, want %v", tl.outcomes, want)
	}
	if tl.requests != 7 || tl.accepted != 1 || tl.unknown != 3 || tl.limited != 1 || !tl.soldOut {
		t.Errorf("requests %d accepted %d unknown %d limited %d soldOut %v",
			tl.requests, tl.accepted, tl.unknown, tl.limited, tl.soldOut)
	}
}

func TestTallyOrders(t *testing.T) {
	tests := []struct {
		name                              string
		shopper                           int
		body                              []byte
		distinct, dups, malformed, unattr int
	}{
		{"fresh", 0, nil, 2, 0, 0, 0},
		{"repeated_id", 0, accepted("0190a5a8-0000-7000-8000-000000000001"), 1, 1, 0, 0},
		{"no_order_id", 1, []byte(`{"status":"pending"}`), 1, 0, 1, 0},
		{"not_json", 1, []byte(`oops`), 1, 0, 1, 0},
		{"unknown_shopper", -1, nil, 2, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTally(2, 0, 10)
			tl.add(0, 202, accepted("0190a5a8-0000-7000-8000-000000000001"))
			body := tc.body
			if body == nil {
				body = accepted(uuid.NewString())
			}
			tl.add(tc.shopper, 202, body)
			if len(tl.orders) != tc.distinct || tl.duplicates != tc.dups || tl.malformed != tc.malformed || tl.unattributed != tc.unattr {
				t.Errorf("distinct %d dups %d malformed %d unattributed %d, want %d %d %d %d",
					len(tl.orders), tl.duplicates, tl.malformed, tl.unattributed, tc.distinct, tc.dups, tc.malformed, tc.unattr)
			}
		})
	}
}

func TestTallyExhausted(t *testing.T) {
	tl := newTally(2, 2, 0)
	buy := func(s int) { tl.add(s, 202, accepted(uuid.NewString())) }
	buy(0)
	buy(0)
	buy(1)
	if tl.exhausted() {
		t.Fatal("exhausted with shopper 1 below the limit")
	}
	tl.add(0, 409, problemBody("limit_exceeded"))
	buy(1)
	if !tl.exhausted() || tl.soldOut {
		t.Fatalf("exhausted %v soldOut %v after both shoppers reached the limit", tl.exhausted(), tl.soldOut)
	}
	if s, n := tl.maxPerShopper(); n != 2 || s < 0 {
		t.Errorf("maxPerShopper = %d, %d", s, n)
	}

	unlimited := newTally(1, 0, 0)
	unlimited.add(0, 202, accepted(uuid.NewString()))
	if unlimited.exhausted() {
		t.Error("an unlimited sale with stock left is exhausted")
	}
}

// TestTallySample: the reservoir keeps exactly Sample accepted orders with
// their buyers, and keeps replacing them as more arrive.
func TestTallySample(t *testing.T) {
	tl := newTally(3, 0, 5)
	first := map[string]bool{}
	for i := range 1000 {
		id := uuid.NewString()
		if i < 5 {
			first[id] = true
		}
		tl.add(i%3, 202, accepted(id))
	}
	if len(tl.sample) != 5 {
		t.Fatalf("sample of %d, want 5", len(tl.sample))
	}
	replaced := 0
	for _, s := range tl.sample {
		buyer, ok := tl.orders[uuid.MustParse(s.orderID)]
		if !ok || buyer != int32(s.shopper) {
			t.Errorf("sampled %+v is not an accepted order of that shopper", s)
		}
		if !first[s.orderID] {
			replaced++
		}
	}
	// Each of the first five stays with probability 5/1000.
	if replaced == 0 {
		t.Error("the sample is still the first five orders after 1000")
	}

	none := newTally(1, 0, 0)
	none.add(0, 202, accepted(uuid.NewString()))
	if len(none.sample) != 0 {
		t.Error("sampled with Sample 0")
	}
}

// The accepted-order log holds every distinct id answered 202, once, and
// nothing else.
func TestWriteAccepted(t *testing.T) {
	tl := newTally(2, 0, 10)
	a, b := uuid.NewString(), uuid.NewString()
	tl.add(0, 202, accepted(a))
	tl.add(1, 202, accepted(b))
	tl.add(1, 202, accepted(a)) // repeated: listed once
	tl.add(1, 409, problemBody("out_of_stock"))
	path := filepath.Join(t.TempDir(), "accepted")
	if err := writeAccepted(path, tl); err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b2)), "\n")
	want := []string{"# 2 order ids answered 202 accepted", min(a, b), max(a, b)}
	if !slices.Equal(lines, want) {
		t.Fatalf("file %q, want %q", lines, want)
	}
}

package loadtest

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func TestTicketWait(t *testing.T) {
	now := time.Now()
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name   string
		t      roomTicket
		starts time.Time
		want   time.Duration
	}{
		{"eta", roomTicket{ETASeconds: f(0.5), Position: i(9999)}, now, 500 * time.Millisecond},
		{"eta capped", roomTicket{ETASeconds: f(30)}, now, maxTicketPoll},
		{"near the front", roomTicket{ETASeconds: f(0)}, now, minTicketPoll},
		{"position", roomTicket{Position: i(300)}, now, 300 * time.Millisecond},
		{"position far back", roomTicket{Position: i(100_000)}, now, maxTicketPoll},
		{"before the sale", roomTicket{}, now.Add(700 * time.Millisecond), 700*time.Millisecond + maxTicketPoll/4},
		{"long before the sale", roomTicket{}, now.Add(time.Minute), maxTicketPoll},
		{"sale started, no position", roomTicket{}, now.Add(-time.Second), minTicketPoll},
	} {
		if got := ticketWait(c.t, 1000, c.starts, now, 0.25, 0); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := ticketWait(roomTicket{Position: i(8000)}, 1000, now, now, 0, 10*time.Second); got != 8*time.Second {
		t.Errorf("position with a 10 s cap: %v, want 8s", got)
	}
}

// A join answered 503 or 429 is sent again, a few times at most; any
// other answer is final.
func TestJoinRoomRetriesBusyAnswers(t *testing.T) {
	for _, c := range []struct {
		name    string
		codes   []uint16
		want    uint16
		retries int
	}{
		{"created", []uint16{201}, 201, 0},
		{"busy then created", []uint16{503, 429, 201}, 201, 2},
		{"refused", []uint16{403, 201}, 403, 0},
		{"busy throughout", []uint16{503, 503, 503, 503, 503, 201}, 503, joinTries - 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent := 0
			call := func(string, string, any, http.Header) (*vegeta.Result, error) {
				sent++
				return &vegeta.Result{Code: c.codes[sent-1]}, nil
			}
			var rr roomRun
			r, err := joinRoom(context.Background(), call, "/q", nil, 0, &rr)
			if err != nil || r.Code != c.want || rr.joinRetries != c.retries || sent != c.retries+1 {
				t.Fatalf("answer %d %v after %d sends, %d retries; want %d after %d", r.Code, err, sent, rr.joinRetries,
					c.want, c.retries+1)
			}
		})
	}
}

// The timeline groups purchases by when they were sent, from starts_at,
// those sent before it too.
func TestTimeline(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	got := timeline([]timed{{ms(-250), ms(9)}, {ms(-1), ms(1)}, {ms(0), ms(4)}, {ms(249), ms(2)}, {ms(100), ms(3)},
		{ms(1000), ms(7)}}, 250*time.Millisecond)
	want := []Span{{FromMs: -250, Purchases: 2, P50: 1, P99: 9, Max: 9}, {FromMs: 0, Purchases: 3, P50: 3, P99: 4, Max: 4},
		{FromMs: 1000, Purchases: 1, P50: 7, P99: 7, Max: 7}}
	if !slices.Equal(got, want) {
		t.Fatalf("timeline %+v, want %+v", got, want)
	}
}

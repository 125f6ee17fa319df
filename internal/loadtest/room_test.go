package loadtest

import (
	"testing"
	"time"
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

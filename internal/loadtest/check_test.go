package loadtest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// cleanSale is the evidence of a sale that went right: 10 units seeded, a
// limit of 1, 6 shoppers bought one each, all persisted, nothing pending.
func cleanSale() Evidence {
	st := &Store{Round: 7, RoundQuantity: 10, RoundSold: 6, LiveRound: 7, Available: 4, Buyers: map[string]int64{},
		Statuses: map[string]string{}, Transitions: map[string]string{}}
	acc := map[string]int64{}
	for i := range 6 {
		id, user, sid := "o"+strconv.Itoa(i), "u"+strconv.Itoa(i), "1-"+strconv.Itoa(i)
		st.Rows = append(st.Rows, Row{OrderID: id, UserID: user, StreamID: sid, Units: 1})
		st.Stream = append(st.Stream, Entry{StreamID: sid, OrderID: id, UserID: user, Units: 1})
		st.Buyers[user] = 1
		st.Statuses[id] = "confirmed"
		acc[id] = 1
	}
	now := time.Now()
	return Evidence{
		Quantity: 10, PerUserLimit: 1,
		Answers:      Answers{Accepted: acc, ServerErrors: []ServerError{{At: now, Status: 503, What: "purchase"}}},
		Samples:      &Samples{N: 40, Min: 4},
		Store:        st,
		Processes:    []Process{{Name: "shop serve", Alive: true}, {Name: "writer-1", Killed: true}},
		FaultWindows: []Window{{From: now.Add(-time.Second), To: now.Add(time.Second)}},
	}
}

// Each corruption of the evidence breaks exactly one invariant, and the
// failure names what is at fault.
func TestCheckCatchesEachInvariant(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(e *Evidence)
		fails   string // invariant name prefix (an oversell breaks I4 too)
		names   string // the failure detail must contain it
	}{
		{"I1_stock_below_zero_sampled", func(e *Evidence) { e.Samples.Min = -1 }, "I1", "live stock -1"},
		{"I1_never_sampled", func(e *Evidence) { e.Samples = &Samples{Errors: 3} }, "I1", "never read"},
		{"I1_pg_sold_over_quantity", func(e *Evidence) {
			e.Store.RoundSold = 11
		}, "I1", "PostgreSQL sold 11"},
		{"I2_accepted_not_persisted", func(e *Evidence) {
			e.Store.Rows = e.Store.Rows[1:]
			e.Store.Stream = e.Store.Stream[1:]
			e.Store.RoundSold = 5
			delete(e.Store.Buyers, "u0")
			e.Store.Available = 5
		}, "I2", "o0"},
		{"I2_row_nobody_was_told_of", func(e *Evidence) { delete(e.Answers.Accepted, "o3") }, "I2", "o3"},
		{"I3_id_answered_twice", func(e *Evidence) { e.Answers.Repeated = []string{"o2"} }, "I3", "o2"},
		{"I3_stream_entry_written_twice", func(e *Evidence) {
			e.Store.Rows[1].StreamID = e.Store.Rows[0].StreamID
		}, "I3", "1-0"},
		{"I3_second_order_same_user", func(e *Evidence) {
			for i := range e.Store.Rows[:2] {
				e.Store.Rows[i].UserID = "u0"
				e.Store.Stream[i].UserID = "u0"
			}
			e.Store.Buyers["u0"] = 2
			delete(e.Store.Buyers, "u1")
			e.PerUserLimit = 1
		}, "I3", "u0"},
		{"I3_persisted_and_dead_lettered", func(e *Evidence) {
			e.Store.Dead = append(e.Store.Dead, Entry{StreamID: "1-1", OrderID: "o1", UserID: "u1", Units: 1})
		}, "I3", "both persisted and dead-lettered: o1"},
		{"I4_decrement_without_event", func(e *Evidence) {
			e.Store.Available = 3
			e.Store.Buyers["u9"] = 1
		}, "I4", "u9"},
		{"I5_event_never_written", func(e *Evidence) {
			e.Store.Stream = append(e.Store.Stream, Entry{StreamID: "1-9", OrderID: "o9", UserID: "u9", Units: 1})
			e.Store.Buyers["u9"] = 1
			e.Store.Available-- // an event whose answer was lost, never written
		}, "I5", "o9"},
		{"I5_pending_not_acked", func(e *Evidence) { e.Store.Pending = []string{"1-5"} }, "I5", "1-5"},
		{"I5_pending_trimmed", func(e *Evidence) { e.Store.Missing = []string{"1-4"} }, "I5", "1-4"},
		{"I6_process_died", func(e *Evidence) { e.Processes[0].Alive = false }, "I6", "shop serve died"},
		{"I6_5xx_outside_fault", func(e *Evidence) {
			e.Answers.ServerErrors = append(e.Answers.ServerErrors, ServerError{At: time.Now().Add(time.Minute), Status: 500, What: "purchase by 3"})
		}, "I6", "purchase by 3"},
	}
	runCorruptions(t, cleanSale, tests)
}

// runCorruptions checks that the clean evidence passes and that each
// corruption of it breaks exactly its invariant, naming what is at fault.
func runCorruptions(t *testing.T, clean func() Evidence, tests []struct {
	name    string
	corrupt func(e *Evidence)
	fails   string
	names   string
},
) {
	t.Helper()
	if bad := Failed(Check(clean())); len(bad) > 0 {
		t.Fatalf("a clean sale fails: %+v", bad)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := clean()
			tc.corrupt(&e)
			invs := Check(e)
			if len(invs) != 7 {
				t.Fatalf("%d invariants, want 7", len(invs))
			}
			bad := Failed(invs)
			if len(bad) == 2 && tc.fails == "I1" && strings.HasPrefix(bad[1].Name, "I4") {
				bad = bad[:1]
			}
			if len(bad) != 1 || !strings.HasPrefix(bad[0].Name, tc.fails) {
				t.Fatalf("failed %+v, want only %s", bad, tc.fails)
			}
			if !strings.Contains(bad[0].Detail, tc.names) {
				t.Errorf("detail %q does not name %q", bad[0].Detail, tc.names)
			}
		})
	}
}

// Without the stores, what needs them is skipped, not passed silently.
func TestCheckWithoutStores(t *testing.T) {
	e := cleanSale()
	e.Store, e.Samples = nil, nil
	skipped := 0
	for _, inv := range Check(e) {
		if inv.Skipped {
			skipped++
			if !inv.OK || !strings.HasPrefix(inv.Detail, "not checked") {
				t.Errorf("%+v", inv)
			}
		}
	}
	if skipped != 5 {
		t.Errorf("%d skipped, want I1, I2, I4, I5, I7", skipped)
	}
}

// lifecycleSale is cleanSale after the payment window: o4 was paid, o5
// expired and gave its unit back (available 5, the sale hash counts 1
// released, u5's count gone), the others are confirmed.
func lifecycleSale() Evidence {
	e := cleanSale()
	st := e.Store
	st.Statuses["o4"], st.Transitions["o4"] = "paid", "paid"
	st.Statuses["o5"], st.Transitions["o5"] = "expired", "expired"
	st.ReleasedIDs, st.Released, st.Available = []string{"o5"}, 1, 5
	delete(st.Buyers, "u5")
	e.Answers.Paid = []string{"o4"}
	return e
}

// Releases are checked: conservation counts units given back, each once;
// a paid order keeps its units; Redis and PostgreSQL agree on statuses.
func TestCheckCatchesLifecycleViolations(t *testing.T) {
	runCorruptions(t, lifecycleSale, []struct {
		name    string
		corrupt func(e *Evidence)
		fails   string
		names   string
	}{
		{"I4_released_twice", func(e *Evidence) {
			e.Store.Released, e.Store.Available = 2, 6
		}, "I4", "counts 2 units given back"},
		{"I4_unit_added_to_available", func(e *Evidence) { e.Store.Available = 6 }, "I4", "available 6"},
		{"I4_expired_order_kept_its_buyer_count", func(e *Evidence) { e.Store.Buyers["u5"] = 1 }, "I4", "u5"},
		{"I7_paid_order_released", func(e *Evidence) {
			e.Store.ReleasedIDs = append(e.Store.ReleasedIDs, "o4")
		}, "I7", "not cancelled or expired: o4 (paid)"},
		{"I7_paid_answer_not_paid", func(e *Evidence) {
			e.Answers.Paid = append(e.Answers.Paid, "o3")
		}, "I7", "answered paid, not paid in PostgreSQL: o3"},
		{"I7_expired_not_given_back", func(e *Evidence) { e.Store.ReleasedIDs = nil }, "I7", "never given back: o5"},
		{"I7_statuses_disagree", func(e *Evidence) { e.Store.Transitions["o2"] = "cancelled" }, "I7", "o2: Redis confirmed, PostgreSQL cancelled"},
		{"I7_transition_unrecorded", func(e *Evidence) { delete(e.Store.Transitions, "o5") }, "I7", "o5: Redis expired, PostgreSQL confirmed"},
		{"I7_transition_dead_lettered", func(e *Evidence) { e.Store.DeadTransitions = []string{"o4"} }, "I7", "dead-lettered, never recorded: o4"},
	})
}

func TestFewListsAtMostFive(t *testing.T) {
	got := few([]string{"g", "f", "e", "d", "c", "b", "a"})
	if got != "a, b, c, d, e … (7 in all)" {
		t.Errorf("few = %q", got)
	}
}

// A 5xx is a fault's when its request was in flight during the fault:
// sent before it and answered in it, or sent in it and answered late,
// within LateAnswer of its end; not when it was sent after the fault (and
// its grace) ended, answered before the fault began, or left hanging.
func TestServerErrorInFlightDuringAFault(t *testing.T) {
	from := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	to := from.Add(4 * time.Second)
	at := func(s float64) time.Time { return from.Add(time.Duration(s * float64(time.Second))) }
	tests := []struct {
		name     string
		sent, at time.Time
		want     bool
	}{
		{"sent_and_answered_in_it", at(1), at(2), true},
		{"sent_before_answered_in_it", at(-1), at(0.5), true},
		{"sent_in_it_answered_late", at(3.9), at(12), true},
		{"sent_in_it_left_hanging", at(3.9), to.Add(LateAnswer + time.Millisecond), false},
		{"spanning_it", at(-1), at(5), true},
		{"sent_after_it", at(4.1), at(4.2), false},
		{"answered_before_it", at(-2), at(-0.1), false},
		{"no_sent_time_answered_in_it", time.Time{}, at(3), true},
		{"no_sent_time_answered_after_it", time.Time{}, at(6), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			se := ServerError{Sent: tt.sent, At: tt.at, Status: 503, What: "purchase"}
			if got := se.inFault([]Window{{From: from, To: to}}); got != tt.want {
				t.Errorf("inFault = %v, want %v", got, tt.want)
			}
		})
	}
}

package loadtesttest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/loadtest"
)

// A sale behind a waiting room: 30 shoppers join in the room's first
// seconds (solving 4-bit challenges), follow their tickets' streams (by
// default) or read their tickets (poll), and those admitted buy with
// their passes; those of the first ten admitted first try without one.
// Every invariant holds, I1–I7 and the room's: the seed's early order,
// the rate, and no purchase without a pass.
func TestRunWithWaitingRoom(t *testing.T) {
	t.Parallel()
	t.Run("events", func(t *testing.T) {
		t.Parallel()
		rm := runWithWaitingRoom(t, "") // the default
		// A read only where a stream ended before the ticket was final.
		if rm.Wait != loadtest.WaitEvents || rm.StreamOpens < 30 || rm.StreamEvents < 30 || rm.TicketReads > uint64(rm.StreamOpens) {
			t.Errorf("room %+v", rm)
		}
	})
	t.Run("poll", func(t *testing.T) {
		t.Parallel()
		if rm := runWithWaitingRoom(t, loadtest.WaitPoll); rm.Wait != loadtest.WaitPoll || rm.StreamOpens != 0 || rm.TicketReads == 0 {
			t.Errorf("room %+v", rm)
		}
	})
}

func runWithWaitingRoom(t *testing.T, wait string) *loadtest.RoomStats {
	_, cfg := lifecycleShop(t, 15*time.Minute)
	cfg.PayRatio = 0
	cfg.Users, cfg.Connections, cfg.Duration = 30, 30, 20*time.Second
	cfg.Room = &loadtest.RoomConfig{AdmitPerSecond: 8, ChallengeBits: 4, PassTTL: time.Minute, JoinWindow: 2 * time.Second, Wait: wait}
	rep, err := loadtest.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("invariants failed: %s", rep.Failure())
	}
	rm := rep.Room
	if rm == nil || rm.Joined != 30 || rm.Admitted < 10 || rm.PasslessTries < 1 || rm.PasslessRefused != rm.PasslessTries || !rm.FairOrder {
		t.Fatalf("room %+v", rm)
	}
	if rep.Stock.Sold != 10 || rep.Attack.Accepted != 10 {
		t.Fatalf("sold %d, accepted %d; want 10", rep.Stock.Sold, rep.Attack.Accepted)
	}
	var names []string
	for _, inv := range rep.Invariants {
		if inv.Skipped && !strings.Contains(inv.Name, "unpaid") { // nobody pays here
			t.Errorf("%s skipped: %s", inv.Name, inv.Detail)
		}
		names = append(names, inv.Name)
	}
	if !strings.HasPrefix(names[len(names)-1], "R3") {
		t.Errorf("invariants %q", names)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "30 joined") || !strings.Contains(text.String(), "streams opened") {
		t.Errorf("text report: %v\n%s", err, text.String())
	}
	return rm
}

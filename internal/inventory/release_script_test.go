package inventory

import (
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

// release.lua checks its own inputs before any write, whatever the Go side
// would have refused first: a caller that builds its arguments wrong (or a
// future one on another code path) changes nothing.
func TestReleaseScriptRefusesBadArgumentsBeforeWriting(t *testing.T) {
	t.Parallel()
	r, s := twoHeldOfFive(t)
	ctx := context.Background()
	keys := []string{s.SaleKey("a") + ":noguard", s.SaleKey("a"), s.BuyersKey("a"), s.releasedKey("a"), s.SaleKey("a") + ":nooutbox"}
	good := []any{"o1", "u1", "", "", "", 1, "a", 2, 1, "", 0, 0, "0", "PUBLISH"}
	bad := map[string][]any{
		"no_order":       {"", "u1", "", "", "", 1, "a", 2, 1, "", 0, 0, "0", "PUBLISH"},
		"no_user":        {"o1", "", "", "", "", 1, "a", 2, 1, "", 0, 0, "0", "PUBLISH"},
		"zero_quantity":  {"o1", "u1", "", "", "", 1, "a", 0, 1, "", 0, 0, "0", "PUBLISH"},
		"fraction":       {"o1", "u1", "", "", "", 1, "a", 1.5, 1, "", 0, 0, "0", "PUBLISH"},
		"no_round":       {"o1", "u1", "", "", "", 1, "a", 2, 0, "", 0, 0},
		"line_count":     {"o1", "u1", "", "", "", 2, "a", 2, 1, "", 0, 0, "0", "PUBLISH"},
		"guard_no_value": {"o1", "u1", "status", "", "", 1, "a", 2, 1, "", 0, 0, "0", "PUBLISH"},
		"empty_sku":      {"o1", "u1", "", "", "", 1, "", 2, 1, "", 0, 0, "0", "PUBLISH"},
		"outbox_odd":     {"o1", "u1", "", "", "", 1, "a", 2, 1, "", 0, 1, "field", "0", "PUBLISH"},
		"no_command":     {"o1", "u1", "", "", "", 1, "a", 2, 1, "", 0, 0},
		"bad_command":    {"o1", "u1", "", "", "", 1, "a", 2, 1, "", 0, 0, "0", "SET"},
		"bad_condition":  {"o1", "u1", "", "", "", 1, "a", 2, 1, "", 0, 0, "2", "PUBLISH"},
		"bad_bucket":     {"o1", "u1", "", "", "", 1, "a", 2, 1, "", -1, 0, "0", "PUBLISH"},
		"no_bucket":      {"o1", "u1", "", "", "", 1, "a", 2, 1, "", "", 0, "0", "PUBLISH"},
	}
	for name, args := range bad {
		if err := releaseScript.Run(ctx, r.Client, keys, args...).Err(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if a, _ := r.Client.HGet(ctx, s.SaleKey("a"), "available").Int(); a != 3 || r.Client.Exists(ctx, s.releasedKey("a")).Val() != 0 {
		t.Fatalf("bad arguments wrote something: available %d", a)
	}
	if err := releaseScript.Run(ctx, r.Client, keys, good...).Err(); err != nil {
		t.Fatalf("the good call: %v", err)
	}
	if a, _ := r.Client.HGet(ctx, s.SaleKey("a"), "available").Int(); a != 5 {
		t.Fatalf("available %d after the good call, want 5", a)
	}
}

// An outbox marked WhenGiven gets an entry only from the release that gave
// units back: not from a repeat of it, nor from a release of a round that
// is gone. So the stream records the releases that happened, each once.
func TestReleaseOutboxWhenGivenRecordsOnlyTheReleaseThatGaveUnitsBack(t *testing.T) {
	t.Parallel()
	r, s := twoHeldOfFive(t)
	ctx := context.Background()
	outbox := s.SaleKey("a") + ":log" // the SKU's slot
	release := func(order string, round int64) Released {
		t.Helper()
		got, err := s.Release(ctx, Release{OrderID: order, UserID: "u1", Lines: []ReleaseLine{{SKU: "a", Quantity: 2, RoundID: round}},
			Outbox: &Outbox{Stream: outbox, Values: []string{"order_id", order}, WhenGiven: true}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := release("o1", 1); got.Units != 2 {
		t.Fatalf("first release: %+v, want 2 units back", got)
	}
	if got := release("o1", 1); got.Units != 0 || got.Before != 1 {
		t.Fatalf("repeat: %+v, want nothing, released before", got)
	}
	if got := release("o2", 7); got.Units != 0 || got.Stale != 1 {
		t.Fatalf("release of another round: %+v, want nothing, stale", got)
	}
	entries := r.Client.XRange(ctx, outbox, "-", "+").Val()
	if len(entries) != 1 || entries[0].Values["order_id"] != "o1" {
		t.Fatalf("outbox %v, want the one entry of o1's first release", entries)
	}
}

// twoHeldOfFive opens round 1 of SKU "a" with 5 units, of which buyer u1
// holds 2: the state a release starts from.
func twoHeldOfFive(t *testing.T) (*testenv.Redis, *Stock) {
	t.Helper()
	r := testenv.NewRedis(t)
	s := NewStock(r.Client, r.Prefix)
	ctx := context.Background()
	if err := s.OpenRound(ctx, "a", LiveRound{Round: 1, Quantity: 5, PriceCents: 1}); err != nil {
		t.Fatal(err)
	}
	r.Client.HSet(ctx, s.SaleKey("a"), "available", 3)
	r.Client.HSet(ctx, s.BuyersKey("a"), "u1", 2)
	return r, s
}

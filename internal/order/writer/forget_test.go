package writer

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// consumers lists the group's consumers and what each holds.
func (f *fixture) consumers(t *testing.T) map[string]int64 {
	t.Helper()
	list, err := f.R.Client.XInfoConsumers(context.Background(), f.keys.Stream(0), group).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, c := range list {
		out[c.Name] = c.Pending
	}
	return out
}

// deliver has consumer read one new entry of the group, as a writer would.
func (f *fixture) deliver(t *testing.T, consumer string) redis.XMessage {
	t.Helper()
	res, err := f.R.Client.XReadGroup(context.Background(), &redis.XReadGroupArgs{
		Group: group, Consumer: consumer, Streams: []string{f.keys.Stream(0), ">"}, Count: 1, Block: -1,
	}).Result()
	if err != nil || len(res) == 0 || len(res[0].Messages) != 1 {
		t.Fatalf("deliver to %s: %v %v", consumer, res, err)
	}
	return res[0].Messages[0]
}

// Dead writers pile up in the group (two per restart under a new name):
// housekeeping removes a consumer once it holds nothing and has been idle
// for ForgetIdle, never one that still holds entries, never its own.
func TestWriterForgetsIdleConsumersHoldingNothing(t *testing.T) {
	t.Parallel()
	f, _, u := newSale(t, 10)
	ctx := context.Background()
	f.placeN(t, u, "s", 2, 1)
	stream := f.keys.Stream(0)
	if err := f.R.Client.XGroupCreateMkStream(ctx, stream, group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	// "done" read an entry and acked it; "holding" died with one in hand.
	f.R.Client.XAck(ctx, stream, group, f.deliver(t, "done").ID)
	f.deliver(t, "holding")

	// Called directly on a writer that has not run: its own consumers are
	// spared however idle they are; "holding" keeps its entry.
	idle := f.writer("w", Options{ForgetIdle: time.Millisecond, Concurrency: 2, ClaimIdle: time.Hour})
	for _, own := range idle.own {
		f.R.Client.XGroupCreateConsumer(ctx, stream, group, own)
	}
	time.Sleep(5 * time.Millisecond)
	gone, err := idle.forgetConsumers(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gone, []string{"done"}) {
		t.Fatalf("removed %v, want [done]", gone)
	}
	if got := f.consumers(t); len(got) != 3 || got["holding"] != 1 || got["w-1"] != 0 || got["w-2"] != 0 {
		t.Fatalf("consumers %v, want holding (1 pending), w-1 and w-2", got)
	}

	// Running, with a claim-idle short enough to take "holding"'s entry
	// over: its housekeeping then removes "holding" too.
	f.R.Client.XGroupCreateConsumer(ctx, stream, group, "done-again")
	w := f.writer("live", Options{ForgetIdle: 300 * time.Millisecond, Housekeeping: 50 * time.Millisecond,
		ClaimIdle: 200 * time.Millisecond})
	r := start(w)
	defer r.Stop(t)
	f.drained(t)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := f.consumers(t)
		if _, ok := got["live"]; ok && len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumers %v, want only the live writer", got)
		}
	}
}

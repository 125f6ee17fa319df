package room_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/testenv"
)

// maxBytesPerEntry is issue 33's bar: Redis memory per waiting entry.
const maxBytesPerEntry = 256

// newPrivateFixture is a fixture on a redis-server of the test's own, so
// that INFO memory is the room's alone.
func newPrivateFixture(t testing.TB) *fixture {
	t.Helper()
	rs := testenv.StartRedis(t)
	opts, err := redis.ParseURL(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return newFixtureOn(t, &testenv.Redis{Client: rdb, URL: rs.URL, Prefix: "shop:"})
}

// infoMemory reads INFO memory's used_memory and mem_clients_normal.
func infoMemory(t *testing.T, rdb *redis.Client) (used, clients int64) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "used_memory":
			used = n
		case "mem_clients_normal":
			clients = n
		}
	}
	return used, clients
}

// memoryUsage is MEMORY USAGE key SAMPLES 0 (every element counted), 0
// for a key that does not exist.
func memoryUsage(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := rdb.MemoryUsage(context.Background(), key, 0).Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatalf("MEMORY USAGE %s: %v", key, err)
	}
	return n
}

// TestRoomMemoryPerEntry joins N shoppers through join.lua and measures
// what the room's keys take in Redis per entry: MEMORY USAGE of the
// round's keys, and the used_memory it grew by (client buffers taken
// out). Early joiners (before starts_at) and late ones have members of
// their own layout (roomkey.Keys). 10,000 in the normal run; with
// SHOP_ROOM_MEMORY=1 also 100,000 and 1,000,000.
func TestRoomMemoryPerEntry(t *testing.T) {
	t.Parallel()
	sizes := []int{10_000}
	if os.Getenv("SHOP_ROOM_MEMORY") != "" {
		sizes = append(sizes, 100_000, 1_000_000)
	}
	for _, n := range sizes {
		for _, early := range []bool{true, false} {
			kind := "late"
			if early {
				kind = "early"
			}
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				f := newPrivateFixture(t)
				ctx := context.Background()
				rdb := f.r.Client
				starts := time.Time{}
				if early {
					starts = time.Now().Add(time.Hour)
				}
				rep := f.open(t, "mem", 1, starts, inventory.RoomSettings{AdmitPerSecond: 100, PassTTL: time.Minute})
				round := *rep.RoundID
				// One shopper first: the keys and the script exist before
				// the baseline, so the delta is the entries'.
				if _, _, err := f.rooms.Join(ctx, "mem", users(1)[0], nil, nil); err != nil {
					t.Fatal(err)
				}
				usedBefore, clientsBefore := infoMemory(t, rdb)
				began := time.Now()
				if err := f.rooms.JoinMany(ctx, "mem", users(n), 500, 4); err != nil {
					t.Fatal(err)
				}
				joined := time.Since(began)
				usedAfter, clientsAfter := infoMemory(t, rdb)

				k := f.rooms.Keys()
				set := k.Late("mem", round)
				if early {
					set = k.Early("mem", round)
				}
				if got := rdb.ZCard(ctx, set).Val(); got != int64(n+1) {
					t.Fatalf("%s holds %d entries, want %d", set, got, n+1)
				}
				keys := 0.0
				for _, key := range []string{k.State("mem", round), k.Early("mem", round), k.Joined("mem", round), k.Late("mem", round),
					k.Passes("mem"), k.Admissions("mem", round)} {
					keys += float64(memoryUsage(t, rdb, key))
				}
				perKey := keys / float64(n+1)
				delta := float64((usedAfter - clientsAfter) - (usedBefore - clientsBefore))
				perUsed := delta / float64(n)
				t.Logf("%s joiners, %d entries: MEMORY USAGE %.1f B/entry (%.0f B in the room's keys); "+
					"used_memory +%.1f B/entry (+%d B, client buffers %+d B left out); joined in %v (%.0f/s)",
					kind, n, perKey, keys, perUsed, usedAfter-usedBefore, clientsAfter-clientsBefore,
					joined.Round(time.Millisecond), float64(n)/joined.Seconds())
				if perKey > maxBytesPerEntry || perUsed > maxBytesPerEntry {
					t.Errorf("%s entries take %.1f B (MEMORY USAGE) and %.1f B (used_memory) each; the bar is %d",
						kind, perKey, perUsed, maxBytesPerEntry)
				}
			})
		}
	}
}

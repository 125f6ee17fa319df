package room_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/room/roomrule"
)

// BenchmarkJoinScript is join.lua's own cost in Redis for a first join,
// early (before starts_at) and late: b.N shoppers join through JoinMany
// (pipelined, 100 a pipeline, as Service.Join calls it) on a
// redis-server of the benchmark's own, and redis-us/join is INFO
// commandstats' evalsha time per call, the commands it runs included.
func BenchmarkJoinScript(b *testing.B) {
	for _, c := range []struct {
		name   string
		starts time.Time
	}{{"early", time.Now().Add(time.Hour)}, {"late", time.Time{}}} {
		b.Run(c.name, func(b *testing.B) {
			f := newPrivateFixture(b)
			sku := "bench-" + c.name
			f.open(b, sku, 100, c.starts, inventory.RoomSettings{AdmitPerSecond: 1, PassTTL: time.Minute})
			us := users(b.N)
			before := evalshaUsec(b, f.r.Client)
			b.ResetTimer()
			if err := f.rooms.JoinMany(context.Background(), sku, us, 100, 2); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric((evalshaUsec(b, f.r.Client)-before)/float64(b.N), "redis-us/join")
		})
	}
}

// evalshaUsec is INFO commandstats' total evalsha time, in µs.
func evalshaUsec(b testing.TB, rdb *redis.Client) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
	}
	return 0
}

// BenchmarkChallenge is what a challenge costs each side: the shopper's
// Solve at 8 and 16 bits (about 2^n SHA-256s, here in Go; the storefront
// solves in the browser) and the server's check of an answer, one
// SHA-256 whatever the bits.
func BenchmarkChallenge(b *testing.B) {
	challenges := make([]string, 64)
	for i := range challenges {
		challenges[i] = fmt.Sprintf("%032x", i*7919+1)
	}
	for _, bits := range []int{8, 16} {
		b.Run(fmt.Sprintf("solve-%d-bits", bits), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				roomrule.Solve(challenges[i%len(challenges)], bits)
			}
		})
	}
	nonce := roomrule.Solve(challenges[0], 16)
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !roomrule.Solves(challenges[0], nonce, 16) {
				b.Fatal("the answer does not solve")
			}
		}
	})
}

package e2e

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/testenv"
)

// Redis is killed with SIGKILL mid-sale and restarted on its append-only
// file. Shoppers arrive spread over 4 s; the crash comes at 0.8 s and
// Redis is back 3 s later. A purchase that meets the outage is answered
// 503 within its Redis timeout (2 s), and the shopper retries with the same
// Idempotency-Key, as docs/api.md tells clients to. Afterwards: exactly the
// seeded units were sold, nobody got two orders (a retry of a purchase
// that ran before the crash gets the same order back), and every accepted
// order is confirmed once in PostgreSQL.
//
// It runs with appendfsync always (deploy/redis.conf), again with the
// purchase path auto-pipelined (SHOP_REDIS_PIPELINE), and with
// everysec, Redis's default. Measured with everysec: nothing lost, every
// run. Redis write(2)s the AOF before it replies under every fsync policy;
// everysec only defers the fsync, so a killed process loses nothing the
// kernel already holds. What everysec may lose (up to a second of accepted
// orders) is an OS crash or power cut before the fsync, which a SIGKILL
// cannot show; hence always in production.
func TestDrillRedisKilledMidSale(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"always", "everysec", "always-pipelined"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			fsync, pipeline := strings.CutSuffix(mode, "-pipelined")
			redisKilledMidSale(t, fsync, pipeline)
		})
	}
}

// redisKilledMidSale runs the drill with appendfsync fsync, with the
// purchase path auto-pipelined or not (pipelined).
func redisKilledMidSale(t *testing.T, fsync string, pipeline bool) {
	rs := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", fsync, "--maxmemory-policy", "noeviction")
	e := newEnv(t)
	pipelined(e, pipeline)
	e["SHOP_REDIS_URL"] = rs.URL
	s := newShop(t, e)
	const units, buyers = 100, 200
	s.product(t, "drill-redis", 100, map[string]any{"quantity": units, "per_user_limit": 1})
	tokens := s.shoppers(t, buyers, "redis")

	var crashed atomic.Bool
	var refused, beforeCrash atomic.Int64
	start := time.Now()
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(800 * time.Millisecond)
		crashed.Store(true)
		end := s.watch.fault(5 * time.Second)
		rs.Kill()
		time.Sleep(3 * time.Second)
		if err := rs.Restart(); err != nil {
			t.Error(err)
		}
		end()
	}()
	tally := newSale()
	var wg sync.WaitGroup
	for b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(rand.N(4 * time.Second))))
			key := "redis-drill-" + strconv.Itoa(b)
			for deadline := time.Now().Add(30 * time.Second); ; {
				o := s.purchase(t, tokens[b], "drill-redis", 1, key)
				if o.status != http.StatusServiceUnavailable {
					if o.status == http.StatusAccepted && !crashed.Load() {
						beforeCrash.Add(1)
					}
					tally.add(b, 1, o)
					return
				}
				refused.Add(1)
				if time.Now().After(deadline) {
					t.Errorf("buyer %d: still 503 after 30 s", b)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	<-restarted
	if len(tally.bad) > 0 {
		t.Fatalf("unexpected answers: %v", tally.bad[:min(len(tally.bad), 10)])
	}
	if refused.Load() == 0 || beforeCrash.Load() == 0 {
		t.Fatalf("the crash did not fall mid-sale: %d purchases accepted before it, %d refused with 503",
			beforeCrash.Load(), refused.Load())
	}
	t.Logf("appendfsync %s: %d purchases accepted before the crash, %d answers 503 while Redis was down",
		fsync, beforeCrash.Load(), refused.Load())
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-redis", units, tally, 1)
}

package e2e

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// The network between the shop and Redis loses every answer for 2.5 s
// mid-sale while requests still arrive: scripts run but their replies never
// come back, so a purchase in flight has an unknown outcome and is answered
// 503 when its Redis timeout ends, not left hanging. 50 shoppers buy one
// unit after another until the stock is gone, retrying each purchase with
// its Idempotency-Key after a 503 (the network heals and every connection
// is reset); a purchase that did run gets its order back, never a second
// one. A second reservation would be a unit sold that no shopper was told
// of: the totals would not add up.
//
// It runs with the purchase path auto-pipelined (pipelined), where a lost
// answer fails a whole batch of other shoppers' commands at once, and
// without.
func TestDrillRedisAnswersLost(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"plain", "pipelined"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pipelined(e, mode == "pipelined")
			redisAnswersLost(t, e)
		})
	}
}

// pipelined turns the purchase path's auto-pipelining (SHOP_REDIS_PIPELINE,
// on by default) off, or on with its defaults and the rate limiter, so that
// both of a purchase's scripts (the limiter with the session check, and
// the reserve script) ride it.
func pipelined(e env, on bool) {
	e["SHOP_REDIS_PIPELINE"] = strconv.FormatBool(on)
	if on {
		e["SHOP_RATE_LIMIT"] = "1000000/10s"
	}
}

func redisAnswersLost(t *testing.T, e env) {
	opts, err := redis.ParseURL(e["SHOP_REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opts.Addr)
	e[directRedis] = e["SHOP_REDIS_URL"]
	e["SHOP_REDIS_URL"] = strings.Replace(e["SHOP_REDIS_URL"], opts.Addr, proxy.Addr(), 1)
	// Entries a lost reply delivered must be re-read at once, not claimed
	// after --claim-idle: an hour here, so only the re-read confirms them.
	s := newShop(t, e, "--claim-idle", "1h")
	const units, buyers = 3000, 50
	s.product(t, "drill-net", 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "net")

	var unknown retries
	// The replies are lost once purchases flow (a fixed delay could end
	// before a loaded machine's first purchase, and then every purchase
	// would meet the fault in its session check, none in its script):
	// after 2·buyers purchases accepted, or 30 s. Not sooner: while the
	// first purchases open the pool's connections, the buyers still in
	// flight may all be in their session checks (it happened once in CI at
	// buyers/5: 100 answers 503, not one with its script run).
	var accepted atomic.Int64
	flowing := make(chan struct{})
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		select {
		case <-flowing:
		case <-time.After(30 * time.Second):
		}
		end := s.watch.fault(5 * time.Second)
		proxy.Blackhole(true)
		time.Sleep(2500 * time.Millisecond)
		proxy.Blackhole(false)
		end()
	}()
	tally := attack(t, buyers, func(b, _ int) (int, outcome) {
		o := buyUntilAnswered(t, s, tokens[b], "drill-net", &unknown)
		if o.status == http.StatusAccepted && accepted.Add(1) == 2*buyers {
			close(flowing) // once: the count passes 2·buyers once
		}
		return 1, o
	}, units/buyers*2)
	<-healed
	if n := tally.refused["out_of_stock"]; n == 0 {
		t.Fatalf("the stock did not run out (refused %v)", tally.refused)
	}
	// A replay is the case this drill is about.
	replays := replayed(t, s)
	t.Logf("%d answers 503 while Redis's replies were lost; %s retries replayed an order that had run", unknown.unavailable.Load(), replays)
	if unknown.unavailable.Load() == 0 || replays == "0" {
		t.Fatal("no purchase met the lost answers with its script run: the drill tested nothing")
	}
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-net", units, tally, 0)
}

// retries counts the 503s of purchases retried until answered, and the
// slowest answer of any attempt.
type retries struct {
	unavailable atomic.Int64
	slowest     atomic.Int64 // nanoseconds
}

func (r *retries) took(d time.Duration) {
	for {
		old := r.slowest.Load()
		if int64(d) <= old || r.slowest.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// buyUntilAnswered makes one purchase, retried with the same
// Idempotency-Key while the answer is 503, and returns the first other one.
func buyUntilAnswered(t *testing.T, s *shop, token, sku string, r *retries) outcome {
	key := "net-" + strconv.FormatUint(rand.Uint64(), 36)
	for deadline := time.Now().Add(30 * time.Second); ; {
		start := time.Now()
		o := s.purchase(t, token, sku, 1, key)
		r.took(time.Since(start))
		if o.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return o
		}
		r.unavailable.Add(1)
		time.Sleep(100 * time.Millisecond)
	}
}

// replayed reads how many purchases replayed an order that had run (a
// retry whose first try ran on Redis though its shopper got a 503).
func replayed(t *testing.T, s *shop) string {
	t.Helper()
	for _, line := range strings.Split(string(call(t, http.MethodGet, s.URL+"/metrics", nil).Body), "\n") {
		if v, ok := strings.CutPrefix(line, `shop_purchases_total{outcome="replayed"} `); ok {
			return v
		}
	}
	return "0"
}

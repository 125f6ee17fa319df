package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// viaToxiProxy puts a toxiproxy between the shop and e's Redis (store
// "SHOP_REDIS_URL") or PostgreSQL ("SHOP_DATABASE_URL"); the check keeps
// reading the store directly.
func viaToxiProxy(t *testing.T, e env, store string) *testenv.ToxiProxy {
	t.Helper()
	u := e[store]
	var addr string
	if store == "SHOP_REDIS_URL" {
		opts, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		addr = opts.Addr
	} else {
		addr = hostPort(t, u)
	}
	p := testenv.NewToxiProxy(t, addr)
	e[map[string]string{"SHOP_REDIS_URL": directRedis, "SHOP_DATABASE_URL": directDatabase}[store]] = u
	e[store] = strings.Replace(u, addr, p.Addr(), 1)
	return p
}

// faultPhase is one toxic applied for a while.
type faultPhase struct {
	toxic testenv.Toxic
	for_  time.Duration
}

// runFaults applies each phase in turn, inside one fault window of the
// check, and closes done when the network is healthy again.
func runFaults(t *testing.T, s *shop, p *testenv.ToxiProxy, after time.Duration, phases []faultPhase) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(after)
		end := s.watch.fault(6 * time.Second)
		defer end()
		for _, ph := range phases {
			p.Add(t, ph.toxic)
			time.Sleep(ph.for_)
			p.Remove(t, ph.toxic.Name)
		}
	}()
	return done
}

// Drill 19: the network between the shop and Redis turns bad mid-sale:
// 200 ms ± 100 ms of latency, then every connection reset as its answer
// comes back (the script ran, its reply is lost: an unknown outcome), then
// answers held back until the connection times out. Every purchase is
// answered 202, 409 or a 503 within a bound (its Redis timeouts), never a
// hang; shoppers retry 503s with their Idempotency-Key, and the totals are
// exact: no unit sold that no shopper was told of, nobody's order twice.
func TestDrillRedisNetworkFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := viaToxiProxy(t, e, "SHOP_REDIS_URL")
	s := newShop(t, e)
	const units, buyers = 1500, 40
	s.product(t, "drill-toxic-redis", 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "toxr")

	var r retries
	healed := runFaults(t, s, p, 200*time.Millisecond, []faultPhase{
		{testenv.Toxic{Name: "slow", Type: "latency", Attributes: map[string]any{"latency": 200, "jitter": 100}}, 1500 * time.Millisecond},
		{testenv.Toxic{Name: "reset", Type: "reset_peer", Attributes: map[string]any{"timeout": 0}}, time.Second},
		{testenv.Toxic{Name: "hold", Type: "timeout", Attributes: map[string]any{"timeout": 1500}}, 1500 * time.Millisecond},
	})
	tally := attack(t, buyers, func(b, _ int) (int, outcome) {
		return 1, buyUntilAnswered(t, s, tokens[b], "drill-toxic-redis", &r)
	}, units/buyers*2)
	<-healed
	if tally.refused["out_of_stock"] == 0 {
		t.Fatalf("the stock did not run out (refused %v)", tally.refused)
	}
	slowest := time.Duration(r.slowest.Load())
	t.Logf("%d answers 503 during the faults, %s retries replayed an order that had run; slowest answer %s",
		r.unavailable.Load(), replayed(t, s), slowest.Round(time.Millisecond))
	if r.unavailable.Load() == 0 {
		t.Fatal("no purchase met a fault: the drill tested nothing")
	}
	// Session check, replay lookup and script each give up after 2 s.
	if slowest > 10*time.Second {
		t.Errorf("an answer took %s: a fault left a request hanging", slowest)
	}
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-toxic-redis", units, tally, 0)
}

func hostPort(t *testing.T, u string) string {
	t.Helper()
	at := strings.LastIndex(u, "@")
	rest := u[at+1:]
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		t.Fatalf("no host:port in %s", u)
	}
	return rest
}

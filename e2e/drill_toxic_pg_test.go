package e2e

import (
	"context"
	"io"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// Drills on the order writer's path to PostgreSQL, through toxiproxy. The
// API talks to PostgreSQL directly (admin calls, the stock report); only
// the writer processes go through the proxy.

// metricWriter is a `shop writer` with its /metrics on a port of its own.
type metricWriter struct {
	*proc
	metrics string
}

// writerVia runs `shop writer` with e's stores (e.g. through a proxy)
// and its metrics served, watched by the check.
func (s *shop) writerVia(t *testing.T, e env, consumer string, args ...string) *metricWriter {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(shopBin, append([]string{"writer", "--consumer", consumer, "--metrics-addr", addr}, args...)...)
	cmd.Env = e.list()
	p := startProc(t, "shop writer "+consumer, cmd)
	s.watch.process(p.name, p.alive, p.killed.Load)
	w := &metricWriter{proc: p, metrics: "http://" + addr + "/metrics"}
	// The metrics listener opens after the stores and the migrations: a
	// fault added from then on meets only the writer's own work.
	for deadline := time.Now().Add(30 * time.Second); metric(w.metrics, "go_goroutines") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) || !p.alive() {
			t.Fatalf("shop writer %s did not start", consumer)
		}
	}
	return w
}

// metric sums the samples of a metric (all label sets) on a /metrics page;
// 0 when it is absent or the page does not answer yet.
func metric(url, name string) float64 {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			sum += v
		}
	}
	return sum
}

// pgViaProxy copies e with its PostgreSQL behind a new toxiproxy.
func pgViaProxy(t *testing.T, e env) (env, *testenv.ToxiProxy) {
	t.Helper()
	w := maps.Clone(e)
	return w, viaToxiProxy(t, w, "SHOP_DATABASE_URL")
}

// pacedSale has buyers buy one unit after another, a pause between, until
// the stock is gone: a sale spread over seconds, so the writer's faults
// meet a stream that keeps filling.
func pacedSale(t *testing.T, s *shop, sku string, buyers int, tokens []string, pause time.Duration, units int) *sale {
	t.Helper()
	var r retries
	return attack(t, buyers, func(b, _ int) (int, outcome) {
		time.Sleep(pause)
		return 1, buyUntilAnswered(t, s, tokens[b], sku, &r)
	}, units/buyers+2)
}

// Drill 13: the writer's network to PostgreSQL goes bad while the sale
// runs, one fault after another: 2 s of latency on every answer, every
// connection reset, answers held until the connection times out, each
// connection cut after 1 KiB. Purchases never need PostgreSQL, so none
// fails; the writer retries, acknowledges nothing it has not committed,
// and once the network heals everything is persisted once.
func TestDrillPostgresNetworkFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	we, p := pgViaProxy(t, e)
	w := s.writerVia(t, we, "pg-faults")
	const units, buyers = 600, 20
	s.product(t, "drill-pg-net", 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "pgnet")
	healed := runFaults(t, s, p, 300*time.Millisecond, []faultPhase{
		{testenv.Toxic{Name: "slow", Type: "latency", Attributes: map[string]any{"latency": 2000}}, 1500 * time.Millisecond},
		{testenv.Toxic{Name: "reset", Type: "reset_peer", Attributes: map[string]any{"timeout": 0}}, time.Second},
		{testenv.Toxic{Name: "hold", Type: "timeout", Attributes: map[string]any{"timeout": 1000}}, 1500 * time.Millisecond},
		{testenv.Toxic{Name: "limit", Type: "limit_data", Attributes: map[string]any{"bytes": 1024}}, time.Second},
	})
	tally := pacedSale(t, s, "drill-pg-net", buyers, tokens, 60*time.Millisecond, units)
	<-healed
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-pg-net", units, tally, 0)
	transient := metric(w.metrics, `shop_order_writer_errors_total{kind="transient"}`)
	t.Logf("the writer met %v database errors and retried", transient)
	if transient == 0 {
		t.Fatal("the writer never met a fault: the drill tested nothing")
	}
}

// Drill 13, the unknown-outcome COMMIT: the writer's connection is cut
// right after its COMMIT reached PostgreSQL, three times. The writer
// cannot know whether the batch committed; it retries the batch, which
// inserts nothing twice (ON CONFLICT) and adds nothing twice to the sold
// count.
func TestDrillPostgresCommitCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	we, p := pgViaProxy(t, e)
	w := s.writerVia(t, we, "pg-cut")
	cut := p.Add(t, testenv.Toxic{Name: "cut", Type: "commit_cut", Stream: "upstream", Attributes: map[string]any{"times": 3}}).(*testenv.CommitCut)
	const units, buyers = 150, 30
	s.product(t, "drill-pg-cut", 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "pgcut")
	end := s.watch.fault(0)
	tally := pacedSale(t, s, "drill-pg-cut", buyers, tokens, 20*time.Millisecond, units)
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-pg-cut", units, tally, 0)
	end()
	// The writer counts what its successful transactions inserted: the
	// orders of a cut COMMIT that did commit are not among them.
	written := metric(w.metrics, "shop_order_writer_orders_total")
	t.Logf("%d commits cut; the writer counts %v orders inserted of %d persisted", cut.Fired(), written, units)
	if cut.Fired() == 0 || written >= units {
		t.Fatalf("no cut COMMIT had committed (%d cut, %v of %d counted): the drill tested nothing", cut.Fired(), written, units)
	}
}

// Drill 8: a second writer claims entries the first is still writing.
// Writer A's requests to PostgreSQL are delayed 1.5 s each, so one batch
// takes seconds; writer B (--claim-idle 1s) XAUTOCLAIMs A's entries
// meanwhile and writes them. When A's statements arrive its inserts find
// the rows (ON CONFLICT DO NOTHING) and add nothing to the sold count;
// both acknowledge; every order is written once.
func TestDrillClaimWhileInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	we, p := pgViaProxy(t, e)
	a := s.writerVia(t, we, "slow-a", "--claim-idle", "1h", "--concurrency", "1")
	p.Add(t, testenv.Toxic{Name: "slow", Type: "latency", Stream: "upstream", Attributes: map[string]any{"latency": 1500}})
	// Stock is left over, so that the round's CHECK (sold <= quantity)
	// cannot hide a sold count added twice: only the invariants can tell.
	const units, buyers, seeded = 60, 30, 100
	s.product(t, "drill-claim", 100, map[string]any{"quantity": seeded, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "claim")
	tally := attack(t, buyers, func(b, i int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], "drill-claim", 1, "c"+strconv.Itoa(i))
	}, units/buyers)
	waitPendingFor(t, s, "slow-a")
	b := s.writerVia(t, e, "fast-b", "--claim-idle", "1s", "--concurrency", "1")
	if rep := s.waitConfirmed(t, "drill-claim", units); rep.Confirmed != units {
		t.Fatalf("stock %+v, want %d confirmed", rep, units)
	}
	handledA := metric(a.metrics, "shop_order_writer_batch_size_sum")
	writtenA, writtenB := metric(a.metrics, "shop_order_writer_orders_total"), metric(b.metrics, "shop_order_writer_orders_total")
	a.stop(t) // it finishes the batch in hand first: its late transaction is in what is checked
	s.check(t, "drill-claim", seeded, 0, tally)
	t.Logf("writer A handled %v entries and inserted %v; B inserted %v", handledA, writtenA, writtenB)
	if writtenA+writtenB != units || writtenB == 0 || handledA <= writtenA {
		t.Fatalf("A handled %v, inserted %v; B inserted %v; want B to have written entries A held, %d in all",
			handledA, writtenA, writtenB, units)
	}
}

// waitPendingFor waits until consumer holds pending entries.
func waitPendingFor(t *testing.T, s *shop, consumer string) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := s.watch.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: s.watch.env["SHOP_KEY_PREFIX"] + "orders", Group: "writers", Start: "-", End: "+", Count: 1, Consumer: consumer,
		}).Result()
		if err == nil && len(res) > 0 {
			return
		}
	}
	t.Fatalf("%s never held a pending entry", consumer)
}

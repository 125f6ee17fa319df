package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// Drill 24: asynchronous replication loses accepted orders. A primary
// (AOF on) with a replica; `shop serve` and a `shop writer` on the
// primary. The replica's link runs through a proxy, so the loss is made
// deterministic, not left to timing: once the first burst has replicated
// (offsets equal) the link is stalled, and nothing the primary does after
// reaches the replica. Then a second burst is accepted and written to
// PostgreSQL (so the replica's stock would sell those units again), the
// writer is killed, a third burst is accepted (in the primary's stream
// only), and the primary is killed with SIGKILL right after. The replica
// is promoted (REPLICAOF NO ONE) and the app repointed (serve and a writer
// restarted on it).
//
// Before recovery the audit fails: the loss is visible. `shop recover`
// with the driver's log of 202s names exactly the third burst's orders
// (count and ids), rebuilds the stock from PostgreSQL and what the
// replica's stream holds, and the sale then sells exactly what is left:
// PostgreSQL never holds more than was seeded (its CHECK is the last
// guard, never needed), the audit is clean, and I1–I7 hold with the
// reported orders taken out of the accepted set; every other accepted
// order is a row (nothing silently dropped).
func TestDrillReplicaPromotedAfterLoss(t *testing.T) {
	t.Parallel()
	primary := testenv.StartRedis(t, "--appendonly", "yes", "--maxmemory-policy", "noeviction")
	link := testenv.NewProxy(t, addrOf(t, primary.URL))
	host, port, _ := strings.Cut(link.Addr(), ":")
	replica := testenv.StartRedis(t, "--replicaof", host, port, "--appendonly", "yes", "--maxmemory-policy", "noeviction")
	prdb, rrdb := client(t, primary.URL), client(t, replica.URL)

	e := newEnv(t)
	e["SHOP_REDIS_URL"] = primary.URL
	s := newShop(t, e, "--writer=false")
	w := s.writer(t, "before")
	const sku, units = "drill-failover", 60
	const first, second, third = 20, 10, 8
	s.product(t, sku, 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, 30, "failover")
	burst := func(name string, n, attempts int) *sale {
		return attack(t, n, func(b, a int) (int, outcome) {
			return 1, s.purchase(t, tokens[b], sku, 1, name+"-"+strconv.Itoa(a))
		}, attempts)
	}

	sold := burst("first", first, 1)
	s.waitConfirmed(t, sku, first)
	caughtUp(t, prdb, rrdb)
	link.Stall(true) // from here on the replica hears nothing

	lostInRedis := burst("second", second, 1) // written to PostgreSQL, unknown to the replica
	if rep := s.waitConfirmed(t, sku, first+second); rep.Confirmed != first+second {
		t.Fatalf("the second burst was not written: %+v", rep)
	}
	w.kill()
	lost := burst("third", third, 1) // accepted, in the dying primary's stream only
	primary.Kill()
	sold.merge(lostInRedis)
	sold.merge(lost)
	if n, _ := sold.accepted(); n != first+second+third {
		t.Fatalf("accepted %d of the %d attempts before the failover", n, first+second+third)
	}
	if err := rrdb.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	s.repoint(t, sku, replica.URL, rrdb)

	if out, stderr, err := runShop(t, e, "audit"); err == nil {
		t.Fatalf("the audit found nothing wrong after the loss:\n%s%s", out, stderr)
	}
	log := writeLog(t, sold)
	out, stderr, err := runShop(t, e, "recover", "--accepted", log)
	reported := lostLines(out)
	if err == nil || !slices.Equal(reported, ids(lost)) {
		t.Fatalf("recover reported %d lost %v (err %v), want the third burst's %d %v\n%s%s",
			len(reported), reported, err, third, ids(lost), out, stderr)
	}
	// The second burst's statuses never reached the replica either.
	if !strings.Contains(out, fmt.Sprintf("%d confirmed orders had lost their status in Redis: restored", second)) {
		t.Fatalf("recover did not restore the second burst's statuses:\n%s", out)
	}
	t.Logf("recover: %s", strings.Split(out, "\n")[0])
	if out, stderr, err := runShop(t, e, "recover", "--accepted", log); err == nil || !strings.Contains(out, ": unchanged") {
		t.Fatalf("a second recover: %v\n%s%s", err, out, stderr)
	}

	// The sale goes on: exactly what no known order holds is sold.
	rest := units - first - second
	after := attack(t, rest, func(b, a int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], sku, 1, "after-"+strconv.Itoa(a))
	}, 2)
	if n, _ := after.accepted(); n != rest {
		t.Fatalf("after recovery %d units sold, want %d (refused %v)", n, rest, after.refused)
	}
	sold.merge(after)
	if rep := s.waitConfirmed(t, sku, units); rep.Confirmed != units || rep.Available != 0 {
		t.Fatalf("stock after the sale %+v, want %d confirmed", rep, units)
	}
	if out, stderr, err := runShop(t, e, "audit"); err != nil {
		t.Fatalf("audit after recovery: %v\n%s%s", err, out, stderr)
	}
	rows, rowUnits, distinct := orderRows(t, e["SHOP_DATABASE_URL"], sku)
	if rows != units || rowUnits != units || distinct != units {
		t.Fatalf("PostgreSQL holds %d rows (%d units, %d distinct) of %d seeded", rows, rowUnits, distinct, units)
	}
	for _, id := range reported { // reported, so not silently dropped
		delete(sold.units, id)
	}
	s.check(t, sku, units, 0, sold)
}

// repoint stops the serve that used the dead primary (the check knows it
// was stopped on purpose) and starts serve and a writer on url, whose
// live stock the check samples from now on.
func (s *shop) repoint(t *testing.T, sku, url string, rdb *redis.Client) {
	t.Helper()
	old := s.server
	_ = old.cmd.Process.Kill()
	<-old.exited
	w := s.watch
	w.mu.Lock()
	for i, p := range w.procs {
		if p.name == "shop serve" {
			w.procs[i].killed = func() bool { return true }
		}
	}
	sm := w.samplers[sku]
	delete(w.samplers, sku)
	w.rdb = rdb
	w.env["SHOP_REDIS_URL"] = url
	w.mu.Unlock()
	if before := sm.Stop(); before.N == 0 || before.Min < 0 {
		t.Fatalf("live stock before the failover: %+v", before)
	}
	w.sample(t, sku)
	s.server = s.startServer(t)
	s.api = s.server.URL + "/api/v1"
	s.writer(t, "after")
}

// caughtUp waits until the replica has everything the primary wrote.
func caughtUp(t *testing.T, primary, replica *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, r := replOffset(primary, "master_repl_offset"), replOffset(replica, "slave_repl_offset")
		if p > 0 && p == r {
			return
		}
		if time.Now().After(deadline) {
			pi, _ := primary.Info(context.Background(), "replication").Result()
			ri, _ := replica.Info(context.Background(), "replication").Result()
			t.Fatalf("the replica did not catch up: primary offset %d, replica %d\n%s\n%s", p, r, pi, ri)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func replOffset(rdb *redis.Client, field string) int64 {
	info, _ := rdb.Info(context.Background(), "replication").Result()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// addrOf is the host:port of a redis:// URL.
func addrOf(t *testing.T, redisURL string) string {
	t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil || u.Host == "" {
		t.Fatalf("no host:port in %s: %v", redisURL, err)
	}
	return u.Host
}

func client(t *testing.T, redisURL string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// writeLog writes the driver's log of accepted order ids for recover.
func writeLog(t *testing.T, s *sale) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "accepted")
	if err := os.WriteFile(path, []byte(strings.Join(ids(s), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func ids(s *sale) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.units))
	for id := range s.units {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// lostLines are the ids of recover's "lost <id>" lines, sorted.
func lostLines(out string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "lost "); ok {
			ids = append(ids, strings.Fields(rest)[0])
		}
	}
	slices.Sort(ids)
	return ids
}

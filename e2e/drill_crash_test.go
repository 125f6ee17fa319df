package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Drills 5 and 6, and a writer stopped mid-transaction: the `shop writer`
// process itself crashes at a chosen point of a batch (--fault, a hidden
// flag honoured only with SHOP_ENV=dev), not a hook inside a test process.
// The stream is filled first, so that the crashing batch is known: the
// first --batch entries.

const crashBatch = 10

// crashWriter runs `shop writer` with a fault and waits for it to exit as
// a SIGKILLed process does (status 137).
func crashWriter(t *testing.T, s *shop, consumer, fault string) {
	t.Helper()
	p := s.writer(t, consumer, "--concurrency", "1", "--batch", strconv.Itoa(crashBatch), "--fault", fault)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s with --fault %s did not exit", p.name, fault)
	}
	p.killed.Store(true) // it died on purpose
	if code := p.cmd.ProcessState.ExitCode(); code != 137 {
		t.Fatalf("%s exited with %d, want 137 (--fault %s)", p.name, code, fault)
	}
}

// held is what consumer holds: the pending entries' ids and their
// delivery counts.
func held(t *testing.T, s *shop, consumer string) map[string]int64 {
	t.Helper()
	res, err := s.watch.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{
		Stream: s.watch.env["SHOP_KEY_PREFIX"] + "orders", Group: "writers", Start: "-", End: "+", Count: 1000, Consumer: consumer,
	}).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range res {
		out[p.ID] = p.RetryCount
	}
	return out
}

// rowsOf counts the orders of sku in PostgreSQL.
func rowsOf(t *testing.T, s *shop, sku string) int {
	t.Helper()
	rows, _, _ := orderRows(t, s.watch.env.direct("SHOP_DATABASE_URL"), sku)
	return rows
}

// filledSale opens sku with units units, no per-buyer limit, and buys
// them all before any writer runs.
func filledSale(t *testing.T, s *shop, sku string, units int) *sale {
	t.Helper()
	const buyers = 20
	s.product(t, sku, 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, sku)
	return attack(t, buyers, func(b, i int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], sku, 1, sku+strconv.Itoa(i))
	}, units/buyers)
}

// Drill 5: the writer exits right after COMMIT, before XACK, three times
// in a row under the same name. Each restart reads its own pending batch
// again (its delivery count goes 1, 2, 3) and writes nothing twice: the
// rows are the batch's from the first COMMIT on. A writer without the
// fault then drains the stream; nothing is lost.
func TestDrillWriterExitsAfterCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	const units = 60
	tally := filledSale(t, s, "drill-exit-after", units)
	for crash := int64(1); crash <= 3; crash++ {
		crashWriter(t, s, "crashing", "exit-after-commit:1")
		pend := held(t, s, "crashing")
		if len(pend) != crashBatch {
			t.Fatalf("after crash %d the writer holds %d entries, want its batch of %d", crash, len(pend), crashBatch)
		}
		for id, n := range pend {
			if n != crash {
				t.Fatalf("after crash %d entry %s was delivered %d times, want %d", crash, id, n, crash)
			}
		}
		if rows := rowsOf(t, s, "drill-exit-after"); rows != crashBatch {
			t.Fatalf("after crash %d PostgreSQL holds %d orders, want the batch's %d, once", crash, rows, crashBatch)
		}
	}
	s.writer(t, "after-crashes", "--concurrency", "1")
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-exit-after", units, tally, 0)
	// The redelivered batch was already written: acknowledged as such, not
	// taken for entries that can never be written.
	if n := s.watch.rdb.XLen(context.Background(), e["SHOP_KEY_PREFIX"]+"orders:dead").Val(); n != 0 {
		t.Fatalf("%d entries dead-lettered", n)
	}
}

// Drill 6: the writer exits mid-transaction, after its INSERTs and before
// COMMIT, twice. Nothing of the batch is in PostgreSQL after either crash
// (the transaction died with the connection); the batch stays pending. A
// writer under another name claims it (--claim-idle 1s) and writes it all.
func TestDrillWriterExitsBeforeCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	const units = 60
	tally := filledSale(t, s, "drill-exit-before", units)
	for crash := int64(1); crash <= 2; crash++ {
		crashWriter(t, s, "crashing", "exit-before-commit:1")
		if pend := held(t, s, "crashing"); len(pend) != crashBatch {
			t.Fatalf("after crash %d the writer holds %d entries, want its batch of %d", crash, len(pend), crashBatch)
		}
		if rows := rowsOf(t, s, "drill-exit-before"); rows != 0 {
			t.Fatalf("after crash %d PostgreSQL holds %d orders of a batch never committed", crash, rows)
		}
	}
	s.writer(t, "claimer", "--concurrency", "1")
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-exit-before", units, tally, 0)
}

// stopped waits until the process is stopped (state T in /proc).
func stopped(t *testing.T, p *proc) {
	t.Helper()
	stat := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat"
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "T" {
			return
		}
	}
	t.Fatalf("%s never stopped", p.name)
}

// idleInTransaction counts the sessions of e's database idle inside a
// transaction.
func idleInTransaction(t *testing.T, e env) int {
	t.Helper()
	var n int
	err := openPool(t, e).QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A writer stopped (SIGSTOP) after its INSERTs and before COMMIT keeps its
// transaction open, and with it the row locks of its batch: the orders it
// inserted and its sale round's sold count. The survivor that claims the
// batch waits on those locks until PostgreSQL ends the stopped session
// (idle_in_transaction_session_timeout, 15 s); without that it would wait
// for as long as the stopped process lives. Then the stopped writer
// resumes: its COMMIT fails, its retry inserts nothing, nothing is written
// twice.
func TestDrillWriterStoppedMidTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	const units = 40
	tally := filledSale(t, s, "drill-stop-tx", units)
	a := s.writer(t, "stopped-mid-tx", "--concurrency", "1", "--claim-idle", "1h", "--fault", "stop-before-commit:1")
	stopped(t, a)
	since := time.Now()
	if rows := rowsOf(t, s, "drill-stop-tx"); rows != 0 {
		t.Fatalf("%d orders committed by a writer stopped before COMMIT", rows)
	}
	if n := idleInTransaction(t, e); n != 1 {
		t.Fatalf("%d sessions idle in transaction, want the stopped writer's", n)
	}
	s.writer(t, "survivor", "--concurrency", "1", "--claim-idle", "1s")
	// 15 s for PostgreSQL to end the stopped session, then the claim and
	// the batch: far less than the minute allowed, on a loaded machine.
	const bound = 60 * time.Second
	for rowsOf(t, s, "drill-stop-tx") != units {
		if time.Since(since) > bound {
			t.Fatalf("the survivor wrote %d of %d orders in %s: still waiting on the stopped writer's locks?",
				rowsOf(t, s, "drill-stop-tx"), units, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the survivor wrote the stopped writer's batch %s after the stop", time.Since(since).Round(100*time.Millisecond))
	a.resume()
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-stop-tx", units, tally, 0)
}

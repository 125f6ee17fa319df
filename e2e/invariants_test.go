package e2e

import (
	"context"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/loadtest"
)

// Every sale and every drill here ends with the same check, I1–I7 (I1–I6
// of the reliability bar, I7 the order lifecycle's), judged by loadtest.Check (which `shop loadtest` uses
// too) on evidence from three sides: the answers the buyers got (sale),
// the live stock sampled during the sale, and Redis and PostgreSQL read
// directly once the writer has drained (loadtest.ReadStore), plus which
// processes are alive and when faults were injected.

// Drills that put a proxy between the shop and a store tell the check the
// store's own address, so that it reads past the fault.
const (
	directRedis    = "E2E_DIRECT_REDIS_URL"
	directDatabase = "E2E_DIRECT_DATABASE_URL"
)

func (e env) direct(store string) string {
	if u := e[map[string]string{"SHOP_REDIS_URL": directRedis, "SHOP_DATABASE_URL": directDatabase}[store]]; u != "" {
		return u
	}
	return e[store]
}

// watch is what a shop's check needs besides the answers: the stores, the
// samplers of its sales, its processes, its faults.
type watch struct {
	env      env
	mu       sync.Mutex
	samplers map[string]*loadtest.StockSampler
	procs    []watched
	faults   []loadtest.Window
	errors   []loadtest.ServerError // every 5xx answer
	rdb      redis.UniversalClient  // a cluster client on a cluster
}

type watched struct {
	name   string
	alive  func() bool
	killed func() bool
}

func newWatch(t *testing.T, e env) *watch {
	w := &watch{env: e, samplers: map[string]*loadtest.StockSampler{}, rdb: directRedisClient(t, e)}
	t.Cleanup(func() {
		w.mu.Lock()
		for _, sm := range w.samplers {
			sm.Stop()
		}
		w.mu.Unlock()
		_ = w.rdb.Close()
	})
	return w
}

// directRedisClient is a client of e's Redis as the shop sees it (a
// cluster client with SHOP_REDIS_CLUSTER=true), past any proxy, that never
// resends a command.
func directRedisClient(t *testing.T, e env) redis.UniversalClient {
	t.Helper()
	if e["SHOP_REDIS_CLUSTER"] == "true" {
		opts, err := database.ParseClusterURL(e.direct("SHOP_REDIS_URL"))
		if err != nil {
			t.Fatal(err)
		}
		opts.MaxRetries = -1
		// The check's reads follow a failover within a second, as the
		// shop's clients do (database.OpenCluster).
		opts.ClusterStateReloadInterval = time.Second
		return redis.NewClusterClient(opts)
	}
	opts, err := redis.ParseURL(e.direct("SHOP_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	return redis.NewClient(opts)
}

// layout is where the shop keeps its keys (its order partitions, grouped
// on a cluster), as the server recorded it when it started.
func (w *watch) layout() (loadtest.Layout, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return loadtest.LayoutOf(ctx, w.rdb, w.env["SHOP_KEY_PREFIX"])
}

// sample starts sampling sku's live stock every 20 ms.
func (w *watch) sample(t *testing.T, sku string) {
	t.Helper()
	l, err := w.layout()
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samplers[sku] = loadtest.SampleStockIn(w.rdb, l, sku, 20*time.Millisecond)
}

// process adds a process the check expects alive unless killed says the
// drill ended it on purpose.
func (w *watch) process(name string, alive, killed func() bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.procs = append(w.procs, watched{name, alive, killed})
}

// fault records that a fault starts now; the returned function records
// its end. A 5xx is expected for a request in flight at any time from
// the fault's start to grace after its end (the shop recovering: pools
// reconnecting, the first tries after an outage), however late its
// answer comes on a loaded machine.
func (w *watch) fault(grace time.Duration) (end func()) {
	from := time.Now()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.faults = append(w.faults, loadtest.Window{From: from, To: time.Now().Add(grace)})
	}
}

// serverError records a 5xx answer, now, to a request sent at sent.
func (w *watch) serverError(sent time.Time, status int, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errors = append(w.errors, loadtest.ServerError{Sent: sent, At: time.Now(), Status: status, What: what})
}

// errorsByWhat counts the 5xx answers by what they answered.
func (w *watch) errorsByWhat() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, e := range w.errors {
		out[strconv.Itoa(e.Status)+" "+e.What]++
	}
	return out
}

// check gathers the evidence of sku's sale and fails t, naming what is at
// fault, unless I1–I7 all hold. Call it once the writer has drained.
func (s *shop) check(t *testing.T, sku string, seeded, limit int, tally *sale) {
	t.Helper()
	ev := s.evidence(t, sku, seeded, limit, tally)
	for _, inv := range loadtest.Check(ev) {
		if !inv.OK || inv.Skipped {
			t.Errorf("%s: %s", inv.Name, inv.Detail)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func (s *shop) evidence(t *testing.T, sku string, seeded, limit int, tally *sale) loadtest.Evidence {
	t.Helper()
	w := s.watch
	w.mu.Lock()
	sm := w.samplers[sku]
	delete(w.samplers, sku)
	w.mu.Unlock()
	var samples *loadtest.Samples
	if sm != nil {
		samples = sm.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgxpool.New(ctx, w.env.direct("SHOP_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := w.layout()
	if err != nil {
		t.Fatal(err)
	}
	st, err := loadtest.ReadDrainedIn(ctx, w.rdb, db, l, sku, 20*time.Second)
	if err != nil {
		t.Fatalf("read the stores: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := loadtest.Evidence{
		Quantity: int64(seeded), PerUserLimit: limit, Answers: tally.answers(),
		Samples: samples, Store: st, FaultWindows: w.faults,
	}
	ev.Answers.ServerErrors = w.errors
	for _, p := range w.procs {
		ev.Processes = append(ev.Processes, loadtest.Process{Name: p.name, Alive: p.alive(), Killed: p.killed != nil && p.killed()})
	}
	return ev
}

// proc is a shop process a drill may kill, stop and continue.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	killed atomic.Bool
}

func startProc(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill is a SIGKILL the check knows of.
func (p *proc) kill() {
	p.killed.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop is a SIGTERM, waited for: the process finishes what it has in
// hand and exits.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30 s of SIGTERM", p.name)
	}
}

// pause (SIGSTOP) and resume (SIGCONT) the process.
func (p *proc) pause()  { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *proc) resume() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// openPool connects to e's PostgreSQL directly, for the test's own reads.
func openPool(t *testing.T, e env) *pgxpool.Pool {
	t.Helper()
	db, err := pgxpool.New(context.Background(), e.direct("SHOP_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

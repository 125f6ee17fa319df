package tracingtest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/telemetry"
	"github.com/shop-oss/shop/internal/testenv"
)

// An instance with nothing to do exports nothing: its background loops
// (the writer's reads and housekeeping, the sweeper, the waiting rooms'
// admitter, …) tick without a span. A purchase then makes two traces:
// the request's, and the writer's job, one root span with the job's
// Redis and PostgreSQL calls under it (issue 46).
func TestIdleInstanceTracesOnlyItsJobs(t *testing.T) {
	rec := recorder()
	stores := tracedStores(t)
	calls := countCalls(stores.Redis.Client)
	// An audit is work: none falls in this test, however slow the host.
	app := shoptest.New(t, shoptest.Options{Stores: stores,
		Config: func(c *config.Config) { c.AuditInterval = time.Hour }})
	app.Sale(t, "idle", 100, 5, 0)
	_, tok := app.Shopper(t, "idle@example.com")
	runWriter(t, app)

	// Idle for a few ticks of each loop, counted by the Redis calls they
	// make: the writer's reads and housekeeping samples, the admitter's
	// reads of its index, the sweeper's claims of due orders.
	from := len(rec.Started())
	calls.wait(t, map[string]int{"xreadgroup": 5, "xlen": 3, "zrange": 5, "script on due": 2})
	if idle := rec.Started()[from:]; len(idle) > 0 {
		t.Fatalf("an idle instance started %d spans: %v", len(idle), startedNames(idle))
	}

	// A trace id of this run's own: the recorder is the binary's.
	traceID := trace.TraceID(uuid.New()).String()
	r := app.Do(t, "POST", "/api/v1/products/idle/purchase", tok, `{"quantity":1}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b9-01")
	shoptest.WantStatus(t, r, http.StatusAccepted)
	job := writerJob(t, rec, traceID)
	spans := inTrace(rec.Ended(), job.SpanContext().TraceID())
	var redisCalls, queries int
	for _, s := range spans {
		if s != job && !descends(spans, s, job) {
			t.Errorf("span %s of the writer's trace is not under its job's span", s.Name())
		}
		switch scope := s.InstrumentationScope().Name; {
		case strings.Contains(scope, "redisotel"):
			redisCalls++
		case strings.Contains(scope, "otelpgx"):
			queries++
		}
	}
	if redisCalls == 0 || queries == 0 {
		t.Errorf("the writer's job has %d Redis and %d PostgreSQL calls under it, want some of each: %v",
			redisCalls, queries, names(spans))
	}
	for _, s := range rec.Started()[from:] {
		if id := s.SpanContext().TraceID(); id.String() != traceID && id != job.SpanContext().TraceID() {
			t.Errorf("span %s in a trace of its own, neither the purchase's nor the writer's job's", s.Name())
		}
	}
}

// writerJob waits for the writer's span that persisted the purchase of
// traceID, then for the root of its trace to end, and returns that root:
// the span of the writer's job.
func writerJob(t *testing.T, rec *tracetest.SpanRecorder, traceID string) sdktrace.ReadOnlySpan {
	t.Helper()
	var persist sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, s := range rec.Ended() {
			if s.Name() == "order writer: persist orders" && linksTo(s, traceID) {
				persist = s
			}
		}
		if persist == nil {
			continue
		}
		var roots []sdktrace.ReadOnlySpan
		for _, s := range inTrace(rec.Ended(), persist.SpanContext().TraceID()) {
			if !s.Parent().IsValid() {
				roots = append(roots, s)
			}
		}
		if len(roots) == 1 && roots[0] != persist && descends(rec.Ended(), persist, roots[0]) {
			return roots[0]
		}
	}
	if persist == nil {
		t.Fatalf("no writer span linked to the purchase: %v", names(rec.Ended()))
	}
	t.Fatalf("the writer's persist span is not under one job's span: its trace holds %v",
		names(inTrace(rec.Ended(), persist.SpanContext().TraceID())))
	return nil
}

func linksTo(s sdktrace.ReadOnlySpan, traceID string) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID().String() == traceID {
			return true
		}
	}
	return false
}

func inTrace(spans []sdktrace.ReadOnlySpan, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

func startedNames(spans []sdktrace.ReadWriteSpan) []string {
	ro := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		ro[i] = s
	}
	return names(ro)
}

// tracedStores are a test's stores with their clients instrumented as
// `shop serve` instruments them when tracing is on.
func tracedStores(t *testing.T) *shoptest.Stores {
	t.Helper()
	stores := shoptest.NewStores(t)
	if err := telemetry.InstrumentRedis(stores.Redis.Client); err != nil {
		t.Fatal(err)
	}
	pool, err := database.OpenPostgres(context.Background(), stores.DB.URL, otelpgx.NewTracer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	stores.DB = &testenv.Database{Pool: pool, URL: stores.DB.URL}
	return stores
}

// runWriter runs an order writer, as `shop serve` does, until t ends;
// it housekeeps often, so that an idle spell sees it.
func runWriter(t *testing.T, app *shoptest.App) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := app.Writer(writer.Options{Consumer: "traced", Housekeeping: 20 * time.Millisecond})
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("writer: %v", err)
		}
	})
}

// calls counts a client's Redis commands by name: the ticks of the
// background loops, seen whether or not they are traced.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func countCalls(rdb *redis.Client) *calls {
	c := &calls{n: map[string]int{}}
	rdb.AddHook(c)
	return c
}

// wait returns once each command of want was made that many more times
// than when it was called.
func (c *calls) wait(t *testing.T, want map[string]int) {
	t.Helper()
	c.mu.Lock()
	from := map[string]int{}
	for name := range want {
		from[name] = c.n[name]
	}
	c.mu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		done, seen := true, map[string]int{}
		for name, n := range want {
			seen[name] = c.n[name] - from[name]
			done = done && seen[name] >= n
		}
		c.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background loops did not tick %v within 30s, only %v", want, seen)
		}
	}
}

func (c *calls) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.n[callName(cmd)]++
	}
}

// callName is a command's name; a script call's is named by the last
// part of its first key ("script on due": the sweeper's claim).
func callName(cmd redis.Cmder) string {
	args := cmd.Args()
	if n := cmd.Name(); (n != "evalsha" && n != "eval") || len(args) < 4 {
		return n
	}
	key, _ := args[3].(string)
	return "script on " + key[strings.LastIndexByte(key, ':')+1:]
}

func (c *calls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

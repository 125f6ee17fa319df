package visitor

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/openapitest"
)

func TestProductReadsCountViewsAndVisitors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.product(t, "p1")
	f.product(t, "p2")
	ann, annToken := f.token(t, "ann@example.com")
	_, bobToken := f.token(t, "bob@example.com")
	if r := openapitest.Do(t, f.app, http.MethodPost, "/api/v1/auth/logout", bobToken, ""); r.Status != http.StatusNoContent {
		t.Fatalf("logout: %d", r.Status)
	}
	reads := []struct {
		sku, ip, token string
		status         int
	}{
		{"p1", "203.0.113.1", "", 200},
		{"p1", "203.0.113.1", "", 200},            // same visitor again
		{"p1", "203.0.113.2", "", 200},            // another address
		{"p1", "203.0.113.3", annToken, 200},      // ann, by her id
		{"p1", "203.0.113.4", annToken, 200},      // ann from elsewhere: still ann
		{"p1", "203.0.113.1", "not-a-token", 200}, // an invalid token counts by IP
		{"p1", "203.0.113.2", bobToken, 200},      // a revoked token counts by IP
		{"nope", "203.0.113.6", "", 404},          // not a 200: not counted
		{"p2", "203.0.113.1", "", 200},
	}
	for _, r := range reads {
		if got := f.read(t, r.sku, r.ip, r.token); got != r.status {
			t.Fatalf("%+v: status %d", r, got)
		}
	}
	f.s.flush(context.Background(), 10*time.Second)
	today := time.Now().UTC().Format(dateLayout)
	p1 := f.report(t, "/api/v1/admin/products/p1/visitors")
	// Visitors of p1: .1, .2 and ann.
	if p1.SKU != "p1" || p1.UniqueVisitors != 3 || p1.Views != 7 || p1.From != today || p1.To != today ||
		len(p1.Days) != 1 || p1.Days[0] != (DayCount{today, 3, 7}) {
		t.Fatalf("p1: %+v", p1)
	}
	site := f.report(t, "/api/v1/admin/visitors")
	if site.SKU != "" || site.UniqueVisitors != 3 || site.Views != 8 {
		t.Fatalf("storefront: %+v", site)
	}
	// Ann counted by her id: adding it again changes nothing.
	if changed, _ := f.r.Client.PFAdd(context.Background(), f.s.hllKey("p1", today), "user:"+ann).Result(); changed != 0 {
		t.Fatal("ann was not counted by her user id")
	}
}

// A range merges its days: a visitor of several days counts once.
func TestRangeCountsAVisitorOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.product(t, "p")
	base := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	for d := range 3 {
		f.s.now = func() time.Time { return base.AddDate(0, 0, d) }
		for v := range 2 + d { // visitors v0..v(1+d) on day d
			f.s.Count("p", fmt.Sprintf("v%d", v))
			f.s.Count("p", fmt.Sprintf("v%d", v))
		}
	}
	f.s.flush(context.Background(), 10*time.Second)
	rep := f.report(t, "/api/v1/admin/products/p/visitors?from=2026-11-19&to=2026-11-23")
	want := []DayCount{{"2026-11-19", 0, 0}, {"2026-11-20", 2, 4}, {"2026-11-21", 3, 6}, {"2026-11-22", 4, 8}, {"2026-11-23", 0, 0}}
	if rep.UniqueVisitors != 4 || rep.Views != 18 || fmt.Sprint(rep.Days) != fmt.Sprint(want) {
		t.Fatalf("report %+v", rep)
	}
	// Each day's keys go 400 days after the day.
	exp := f.r.Client.ExpireTime(context.Background(), f.s.hllKey("p", "2026-11-21")).Val()
	if want := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC).Add(retention); exp != time.Duration(want.Unix())*time.Second {
		t.Fatalf("expires at %v, want %v", exp, want)
	}
	if ttl := f.r.Client.TTL(context.Background(), f.s.viewsKey(siteTag, "2026-11-21")).Val(); ttl <= 0 {
		t.Fatalf("storefront views TTL %v", ttl)
	}
}

func TestEstimateOfManyVisitors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.s.queue = make(chan view, 30000)
	for _, n := range []int{1, 2, 3, 10, 50} { // small counts are exact
		sku := fmt.Sprintf("small-%d", n)
		for i := range n {
			f.s.Count(sku, fmt.Sprintf("v%d", i))
		}
	}
	const distinct = 10000
	for i := range distinct {
		f.s.Count("big", fmt.Sprintf("user:%d", i))
		if i%3 == 0 {
			f.s.Count("big", fmt.Sprintf("user:%d", i)) // repeats count once
		}
	}
	f.s.flush(context.Background(), time.Minute)
	ctx := context.Background()
	day := time.Now()
	for _, n := range []int{1, 2, 3, 10, 50} {
		r, err := f.s.Report(ctx, fmt.Sprintf("small-%d", n), day, day)
		if err != nil || r.UniqueVisitors != int64(n) || r.Views != int64(n) {
			t.Errorf("%d visitors: %+v, %v", n, r, err)
		}
	}
	r, err := f.s.Report(ctx, "big", day, day)
	if err != nil {
		t.Fatal(err)
	}
	if miss := math.Abs(float64(r.UniqueVisitors-distinct)) / distinct; miss > 0.02 || r.Views != distinct+3334 {
		t.Fatalf("%d distinct visitors estimated %d (%.2f %% off), %d views", distinct, r.UniqueVisitors, 100*miss, r.Views)
	}
	t.Logf("%d distinct visitors estimated %d", distinct, r.UniqueVisitors)
}

// The count never holds the read up or fails it: a full queue drops views,
// a Redis that does not answer drops its batch, and both are counted.
func TestCountingNeverFailsTheRead(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	f := newFixture(t, dead)
	f.s.queue = make(chan view, 2)
	f.product(t, "p")
	for i := range 5 {
		if got := f.read(t, "p", fmt.Sprintf("203.0.113.%d", i), ""); got != 200 {
			t.Fatalf("read %d: %d", i, got)
		}
	}
	if got := dropped(f.s, "queue_full"); got != 3 {
		t.Fatalf("dropped for a full queue: %v, want 3", got)
	}
	f.s.flush(context.Background(), 10*time.Second)
	if got := dropped(f.s, "redis_error"); got != 2 {
		t.Fatalf("dropped for Redis: %v, want 2", got)
	}
}

func TestRunWritesUntilStopped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.s.Run(ctx); close(done) }()
	for i := range 100 {
		f.s.Count("p", fmt.Sprint(i))
	}
	cancel()
	<-done // what was still queued is written before Run returns
	r, err := f.s.Report(context.Background(), "p", time.Now(), time.Now())
	if err != nil || r.Views != 100 || r.UniqueVisitors != 100 {
		t.Fatalf("%+v, %v", r, err)
	}
}

func TestReportRefusesBadRanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.product(t, "p")
	for _, path := range []string{"/api/v1/admin/visitors", "/api/v1/admin/products/p/visitors"} {
		for name, q := range map[string]string{
			"bad_from":       "?from=yesterday",
			"bad_to":         "?to=2026-13-01",
			"no_leading_0":   "?from=2026-1-01&to=2026-01-02",
			"not_a_day":      "?from=2026-02-30&to=2026-03-01",
			"to_before_from": "?from=2026-03-02&to=2026-03-01",
			"93_days":        "?from=2026-01-01&to=2026-04-03",
			"both_bad":       "?from=x&to=y",
			"datetime":       "?from=2026-01-01T00:00:00Z",
		} {
			r := openapitest.Do(t, f.app, http.MethodGet, path+q, "", "", "X-Test-Role", "admin")
			openapitest.WantProblem(t, r, http.StatusBadRequest, "invalid_request")
			_ = name
		}
		if rep := f.report(t, path+"?from=2026-01-01&to=2026-04-02"); len(rep.Days) != 92 {
			t.Fatalf("92 days: %d", len(rep.Days))
		}
	}
	for _, sku := range []string{"nope", "not%20a%20sku"} {
		r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/admin/products/"+sku+"/visitors", "", "", "X-Test-Role", "admin")
		openapitest.WantProblem(t, r, http.StatusNotFound, "not_found")
	}
	r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/admin/visitors", "", "")
	openapitest.WantProblem(t, r, http.StatusUnauthorized, "unauthorized")
}

// cmdCounter counts the counting commands a client sends inside
// pipelines (not the connection's set-up, which go-redis pipelines too).
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			switch cmd.Name() {
			case "pfadd", "incr", "incrby", "expireat":
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// A batch is summed per product and day: a hot product's views cost four
// commands for the product and four for the storefront, and the counts are
// exact, across a UTC midnight too.
func TestBatchSummedPerProductAndDay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	spy := &cmdCounter{}
	f.r.Client.AddHook(spy)
	night := time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC)
	var views []view
	for i := range 60 { // hot: 60 views by 20 visitors, the day before midnight
		views = append(views, view{sku: "hot", visitor: fmt.Sprint("v", i%20), at: night})
	}
	views = append(views, // and after it: 3 views, 2 of them by a visitor seen before
		view{sku: "hot", visitor: "v1", at: night.Add(2 * time.Second)},
		view{sku: "hot", visitor: "v1", at: night.Add(3 * time.Second)},
		view{sku: "cold", visitor: "w", at: night.Add(2 * time.Second)})
	f.s.write(context.Background(), views)

	// Days: hot and * on the 1st; hot, cold and * on the 2nd: 5 keys pairs.
	if got := spy.n.Load(); got != 5*4 {
		t.Fatalf("%d commands for %d views, want %d", got, len(views), 5*4)
	}
	for _, c := range []struct {
		sku             string
		day             time.Time
		views, visitors int64
	}{
		{"hot", night, 60, 20},
		{"hot", night.Add(time.Hour), 2, 1},
		{"cold", night.Add(time.Hour), 1, 1},
		{siteTag, night, 60, 20},
		{siteTag, night.Add(time.Hour), 3, 2},
	} {
		date := c.day.Format(dateLayout)
		n, err := f.r.Client.Get(context.Background(), f.s.viewsKey(c.sku, date)).Int64()
		if err != nil || n != c.views {
			t.Fatalf("%s %s: views %d (%v), want %d", c.sku, date, n, err, c.views)
		}
		u, err := f.r.Client.PFCount(context.Background(), f.s.hllKey(c.sku, date)).Result()
		if err != nil || u != c.visitors {
			t.Fatalf("%s %s: visitors %d (%v), want %d", c.sku, date, u, err, c.visitors)
		}
		ttl := f.r.Client.ExpireTime(context.Background(), f.s.hllKey(c.sku, date)).Val()
		if want := time.Duration(dayOf(c.day).Add(retention).Unix()) * time.Second; ttl != want {
			t.Fatalf("%s %s: expires at %v, want %v", c.sku, date, ttl, want)
		}
	}
}

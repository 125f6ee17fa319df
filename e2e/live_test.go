package e2e

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/openapitest"
)

// liveEnv raises the per-IP stream limit: every stream of these tests
// comes from 127.0.0.1.
func liveEnv(t *testing.T) env {
	e := newEnv(t)
	e["SHOP_LIVE_MAX_STREAMS_PER_IP"] = "2000"
	return e
}

// A purchase on one `shop serve` is seen on another's stream within a
// second (Redis Pub/Sub between the instances): five purchases, one after
// the other, each waited for; the median delay must be under a second,
// and every delay is logged.
func TestLiveAcrossInstances(t *testing.T) {
	t.Parallel()
	s := newShop(t, liveEnv(t))
	other := s.startServer(t)
	s.product(t, "live-x", 500, map[string]any{"quantity": 50, "per_user_limit": 0})
	tok := s.shoppers(t, 1, "live-x")[0]
	st := stream(t, other.URL, "live-x")
	if e, ok := st.Next(10 * time.Second); !ok || e.Available != 50 || e.Sale != "open" {
		t.Fatalf("first event on the other instance: %+v %v", e, ok)
	}
	var delays []time.Duration
	for i := range 5 {
		start := time.Now()
		if o := s.purchase(t, tok, "live-x", 1, fmt.Sprintf("x-%d", i)); o.status != http.StatusAccepted {
			t.Fatalf("purchase: %+v", o)
		}
		want := int64(49 - i)
		e, ok := st.Until(10*time.Second, func(e openapitest.StockEvent) bool { return e.Available == want })
		if !ok {
			t.Fatalf("purchase %d (available %d) never reached the other instance's stream", i, want)
		}
		delays = append(delays, e.At.Sub(start))
	}
	slices.Sort(delays)
	t.Logf("purchase on one instance to event on the other: %v", delays)
	if delays[len(delays)/2] > time.Second {
		t.Errorf("median delay %s, want under a second", delays[len(delays)/2])
	}
}

// 1,000 concurrent subscribers of one SKU all get the final state after a
// sell-out by concurrent buyers.
func TestLiveThousandSubscribersSeeTheSellOut(t *testing.T) {
	t.Parallel()
	s := newShop(t, liveEnv(t))
	s.product(t, "live-k", 100, map[string]any{"quantity": 60, "per_user_limit": 0})
	toks := s.shoppers(t, 6, "live-k")
	streams := openMany(t, s.URL, "live-k", 1000)
	var wg sync.WaitGroup
	for i, tok := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				if o := s.purchase(t, tok, "live-k", 1, fmt.Sprintf("k-%d-%d", i, j)); o.status != http.StatusAccepted {
					t.Errorf("purchase: %+v", o)
				}
			}
		}()
	}
	wg.Wait()
	for i, st := range streams {
		if _, ok := st.Until(30*time.Second, func(e openapitest.StockEvent) bool {
			return e.Sale == "sold_out" && e.Available == 0
		}); !ok {
			t.Fatalf("subscriber %d never saw the sell-out", i)
		}
	}
}

// openMany opens n streams of sku, 16 at a time.
func openMany(t *testing.T, base, sku string, n int) []*openapitest.Stream {
	t.Helper()
	out := make([]*openapitest.Stream, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = stream(t, base, sku)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// Subscribers that stop reading do not slow purchases: the same run of
// sequential purchases is timed without and then with 300 stalled streams
// (connections that sent their GET and never read again, with a small
// receive buffer), and a reading stream still sees every change. The
// medians are logged; the bound is generous (3x plus 20 ms), since the
// point is that nothing waits on a stalled client.
func TestLiveStalledSubscribersDoNotSlowPurchases(t *testing.T) {
	t.Parallel()
	s := newShop(t, liveEnv(t))
	s.product(t, "live-s", 100, map[string]any{"quantity": 1000, "per_user_limit": 0})
	tok := s.shoppers(t, 1, "live-s")[0]
	reader := stream(t, s.URL, "live-s")
	timed := func(tag string) time.Duration {
		var ds []time.Duration
		for i := range 100 {
			start := time.Now()
			if o := s.purchase(t, tok, "live-s", 1, fmt.Sprintf("%s-%d", tag, i)); o.status != http.StatusAccepted {
				t.Fatalf("purchase: %+v", o)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	timed("warm")
	before := timed("before")
	for range 300 {
		stall(t, s.URL, "live-s")
	}
	during := timed("during")
	t.Logf("purchase p50 without stalled streams %s, with 300: %s", before, during)
	if during > 3*before+20*time.Millisecond {
		t.Errorf("purchases slowed by stalled streams: p50 %s, was %s", during, before)
	}
	if _, ok := reader.Until(10*time.Second, func(e openapitest.StockEvent) bool { return e.Available == 700 }); !ok {
		t.Error("the reading stream did not follow the purchases")
	}
}

// stall opens a stream on a raw connection with a 4 KiB receive buffer
// and never reads it.
func stall(t *testing.T, base, sku string) {
	t.Helper()
	c, err := net.Dial("tcp", base[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := fmt.Fprintf(c, "GET /api/v1/products/%s/events HTTP/1.1\r\nHost: shop\r\nAccept: text/event-stream\r\n\r\n", sku); err != nil {
		t.Fatal(err)
	}
}

// On SIGTERM every stream is told to reconnect (retry:) and closed, and
// the server exits 0 without waiting out its shutdown timeout.
func TestLiveStreamsEndOnSIGTERM(t *testing.T) {
	t.Parallel()
	e := liveEnv(t)
	e["SHOP_SHUTDOWN_TIMEOUT"] = "8s"
	s := newShop(t, e)
	s.product(t, "live-t", 100, map[string]any{"quantity": 5})
	streams := openMany(t, s.URL, "live-t", 20)
	for _, st := range streams {
		if _, ok := st.Next(10 * time.Second); !ok {
			t.Fatal("no first event")
		}
	}
	start := time.Now()
	if err := s.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	took := time.Since(start)
	for i, st := range streams {
		retries, clean := st.Ended(10 * time.Second)
		if !clean || len(retries) < 2 {
			t.Fatalf("stream %d: clean end %v, retry fields %v", i, clean, retries)
		}
	}
	t.Logf("SIGTERM to exit with 20 open streams: %s", took)
	if took > 6*time.Second {
		t.Errorf("shutdown took %s: it waited on the streams", took)
	}
}

package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The load test against the whole shop (Run with and without a payment
// phase, on partitioned orders, ReadStore after a lifecycle) is
// internal/shop/loadtesttest; these need no shop, only a stand-in server.

// A payment answered 409 order_pending (not persisted yet) is tried again
// after its Retry-After, and given up after payAttempts tries; a 409
// order_not_payable is an answer, not retried.
func TestPayOneRetriesPendingOrders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		n := calls[r.URL.Path]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/late/"):
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"status":409,"code":"order_not_payable"}`)
		case strings.Contains(r.URL.Path, "/never/") || n <= 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"status":409,"code":"order_pending"}`)
		default:
			fmt.Fprint(w, `{"status":"paid"}`)
		}
	}))
	t.Cleanup(srv.Close)
	tgt, err := resolveTarget(context.Background(), srv.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(tgt, time.Second, false)
	for _, tc := range []struct {
		id, outcome string
		retries     int
	}{
		{"soon", "200 paid", 2},
		{"late", "409 order_not_payable", 0},
		{"never", "409 order_pending", payAttempts - 1},
	} {
		outcome, retries, err := payOne(context.Background(), c, tc.id, "token")
		if err != nil || outcome != tc.outcome || retries != tc.retries {
			t.Errorf("%s: %q after %d retries (%v), want %q after %d", tc.id, outcome, retries, err, tc.outcome, tc.retries)
		}
	}
}

// A sampled order read back pending is read again until the deadline: the
// drain's confirmed count is the writer's PostgreSQL commit, and the
// status is marked confirmed just after it. One pending for good is
// reported once the deadline passes.
func TestSampledOrderPendingIsReadAgain(t *testing.T) {
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		status := "confirmed"
		if strings.HasSuffix(r.URL.Path, "/never") || strings.HasSuffix(r.URL.Path, "/soon") && reads.Add(1) <= 2 {
			status = "pending"
		}
		fmt.Fprintf(w, `{"status":%q,"items":[{"sku":"s","quantity":1}]}`, status)
	}))
	t.Cleanup(srv.Close)
	tgt, err := resolveTarget(context.Background(), srv.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(tgt, time.Second, false)
	fx := &fixture{sku: "s", shoppers: []shopper{{token: "t"}}}
	bad, err := checkSample(context.Background(), c, fx, []sampled{{orderID: "soon"}}, time.Now().Add(time.Minute))
	if err != nil || len(bad) != 0 || reads.Load() != 3 {
		t.Fatalf("soon: bad %v (%v) after %d reads, want none after 3", bad, err, reads.Load())
	}
	bad, err = checkSample(context.Background(), c, fx, []sampled{{orderID: "never"}}, time.Now().Add(3*drainPoll))
	if err != nil || len(bad) != 1 || !strings.Contains(bad[0], "status pending") {
		t.Fatalf("never: bad %v (%v), want it reported pending", bad, err)
	}
}

package loadtest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeReads counts what a read load sends.
type fakeReads struct {
	mu        sync.Mutex
	requests  int
	bad       []string
	forwarded map[string]int
	status    int
}

func (f *fakeReads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if r.Method != http.MethodGet || r.URL.RequestURI() != "/api/v1/products/p-1?x=1" {
		f.bad = append(f.bad, r.Method+" "+r.URL.RequestURI())
	}
	f.forwarded[r.Header.Get("X-Forwarded-For")]++
	w.WriteHeader(f.status)
	_, _ = w.Write([]byte(`{"sku":"p-1"}`))
}

func startReads(t *testing.T, status int) (*fakeReads, string) {
	t.Helper()
	f := &fakeReads{forwarded: map[string]int{}, status: status}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func readConfig(url string) GetConfig {
	return GetConfig{Target: url, Path: "/api/v1/products/p-1?x=1", Connections: 4, Duration: time.Second, Timeout: 5 * time.Second, Addresses: 3}
}

// TestGet: every request is a GET of the path, spread over exactly the
// X-Forwarded-For addresses asked for, and the report counts each answer.
func TestGet(t *testing.T) {
	f, url := startReads(t, http.StatusOK)
	rep, err := Get(context.Background(), readConfig(url))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Fatalf("unexpected requests: %v", f.bad[:min(len(f.bad), 5)])
	}
	if !rep.OK || rep.Requests == 0 || int(rep.Requests) != f.requests || rep.StatusCodes["200"] != f.requests {
		t.Fatalf("report %+v for %d requests served", rep, f.requests)
	}
	want := map[string]bool{"198.18.0.1": true, "198.18.0.2": true, "198.18.0.3": true}
	if len(f.forwarded) != len(want) {
		t.Fatalf("X-Forwarded-For addresses %v, want %v", f.forwarded, want)
	}
	for a := range f.forwarded {
		if !want[a] {
			t.Fatalf("X-Forwarded-For addresses %v, want %v", f.forwarded, want)
		}
	}
}

// TestGetWrongStatus: an answer other than the expected one fails the
// report, and without --addresses no X-Forwarded-For is sent.
func TestGetWrongStatus(t *testing.T) {
	f, url := startReads(t, http.StatusNotFound)
	cfg := readConfig(url)
	cfg.Addresses = 0
	rep, err := Get(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.StatusCodes["404"] != int(rep.Requests) {
		t.Fatalf("report %+v: want not OK, every answer 404", rep)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.forwarded) != 1 || f.forwarded[""] == 0 {
		t.Fatalf("X-Forwarded-For sent without --addresses: %v", f.forwarded)
	}
}

// TestGetRefuses: paths that could name another host, and non-loopback
// targets, are refused before anything is sent.
func TestGetRefuses(t *testing.T) {
	for _, p := range []string{"", "healthz", "//evil.example/x", "http://evil.example/x", "/x#frag"} {
		cfg := readConfig("http://127.0.0.1:1")
		cfg.Path = p
		if _, err := Get(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "--path") {
			t.Errorf("path %q: err = %v, want a --path error", p, err)
		}
	}
	cfg := readConfig("http://10.0.0.8:8080")
	if _, err := Get(context.Background(), cfg); !errors.Is(err, errNotLoopback) {
		t.Errorf("remote target: err = %v, want %v", err, errNotLoopback)
	}
	cfg = readConfig("http://127.0.0.1:1")
	cfg.Connections = 0
	if _, err := Get(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "--connections") {
		t.Errorf("no connections: err = %v", err)
	}
}

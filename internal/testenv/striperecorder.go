package testenv

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// StripeRecorder passes requests to Stripe's mock and keeps each one, so
// that a test checks what the shop asked of Stripe, one by one.
type StripeRecorder struct {
	mu   sync.Mutex
	seen []StripeRequest
}

// StripeRequest is one request a StripeRecorder passed on.
type StripeRequest struct {
	Method, Path, Key string // Key: the Idempotency-Key
	Form              url.Values
}

// Proxy starts the recording proxy in front of to (a StripeMock URL) and
// returns its URL; it stops when t ends.
func (r *StripeRecorder) Proxy(t testing.TB, to string) string {
	t.Helper()
	target, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
		form, _ := url.ParseQuery(string(raw))
		r.mu.Lock()
		r.seen = append(r.seen, StripeRequest{req.Method, req.URL.Path, req.Header.Get("Idempotency-Key"), form})
		r.mu.Unlock()
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Seen is every request passed on so far, in order.
func (r *StripeRecorder) Seen() []StripeRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]StripeRequest(nil), r.seen...)
}

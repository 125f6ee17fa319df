package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"
)

// HTTP-edge drills: what a client behind (or pretending to be behind) a
// proxy can and cannot do to the limits.

// Drill 25: 100 wrong passwords for one account, each from another client
// IP (X-Forwarded-For set by a trusted proxy), trip the account's failure
// budget; then the right password from a fresh IP gets 429 too, until the
// window slides.
func TestDrillLoginGuessingFromManyIPs(t *testing.T) {
	t.Parallel()
	const budget, window = 10, 15 * time.Second
	e := newEnv(t)
	e["SHOP_RATE_LIMIT"] = "1000/1m" // on, as in production: per IP, which each guess changes
	e["SHOP_TRUSTED_PROXIES"] = "127.0.0.1"
	e["SHOP_LOGIN_FAILURES"] = fmt.Sprintf("%d/%s", budget, window)
	s := startServer(t, e)
	api := s.URL + "/api/v1"
	creds := map[string]string{"email": "victim@example.com", "password": "the right password"}
	if r := call(t, http.MethodPost, api+"/auth/register", creds); r.Status != http.StatusCreated {
		t.Fatalf("register = %d %s", r.Status, r.Body)
	}

	// Released together, so all 100 fall in one window however slowly the
	// machine hashes.
	got := map[int]int{}
	var mu sync.Mutex
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := bulk(t, http.MethodPost, api+"/auth/login",
				map[string]string{"email": creds["email"], "password": "guess-" + strconv.Itoa(i)},
				"X-Forwarded-For", fmt.Sprintf("198.51.%d.%d", i/250, i%250+1))
			if r.Status == http.StatusTooManyRequests && r.Header.Get("X-RateLimit-Remaining") != "999" {
				r.Status = -1 // the per-IP limiter's 429, not the account's
			}
			mu.Lock()
			got[r.Status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if got[http.StatusUnauthorized] != budget || got[http.StatusTooManyRequests] != 100-budget {
		t.Fatalf("answers %v, want %d × 401 and %d × 429 (account throttle, each IP's first request)", got, budget, 100-budget)
	}

	// The owner, from an address never seen, with the right password.
	fresh := []string{"X-Forwarded-For", "192.0.2.77"}
	r := call(t, http.MethodPost, api+"/auth/login", creds, fresh...)
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.Status != http.StatusTooManyRequests || err != nil || ra < 1 || ra > int(window/time.Second) {
		t.Fatalf("right password after the guesses = %d Retry-After %q, want 429 within the window: %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	deadline := time.Now().Add(window + time.Minute) // generous on a loaded machine
	for {
		time.Sleep(time.Duration(ra) * time.Second)
		r = call(t, http.MethodPost, api+"/auth/login", creds, fresh...)
		if r.Status == http.StatusOK {
			return
		}
		if r.Status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("right password after the window = %d %s, want 200 once it slid", r.Status, r.Body)
		}
		ra, _ = strconv.Atoi(r.Header.Get("Retry-After"))
		ra = max(ra, 1)
	}
}

// Drill 26: a real reverse proxy on loopback, trusted by shop, with two
// clients behind it on their own source addresses (127.0.0.2, 127.0.0.3).
// Like some proxies, it adds its own X-Forwarded-For line after the
// client's lines instead of appending to them. Each client gets its own
// window, whatever X-Forwarded-For lines it forges; a client that bypasses
// the proxy is its own socket address.
func TestDrillClientsBehindARealProxy(t *testing.T) {
	t.Parallel()
	const limit = 5
	e := newEnv(t)
	e["SHOP_RATE_LIMIT"] = strconv.Itoa(limit) + "/1m"
	e["SHOP_TRUSTED_PROXIES"] = "127.0.0.1"
	s := startServer(t, e)
	proxy := startProxy(t, s.URL, "127.0.0.1")

	a, b, direct := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.3"), clientFrom(t, "127.0.0.4")
	products := "/api/v1/products?limit=1"
	forge := func(i int) []string { return []string{fmt.Sprintf("203.0.113.%d", i+1), "10.0.0." + strconv.Itoa(i+1)} }
	if n := allowedOf(t, a, proxy+products, 3*limit, forge); n != limit {
		t.Errorf("client 127.0.0.2 through the proxy, forging two X-Forwarded-For lines: %d of %d allowed, want %d", n, 3*limit, limit)
	}
	if n := allowedOf(t, b, proxy+products, 2*limit, nil); n != limit {
		t.Errorf("client 127.0.0.3 through the proxy: %d of %d allowed, want its own %d", n, 2*limit, limit)
	}
	if n := allowedOf(t, direct, s.URL+products, 2*limit, forge); n != limit {
		t.Errorf("client 127.0.0.4 straight to shop, forging X-Forwarded-For: %d of %d allowed, want %d", n, 2*limit, limit)
	}
}

// startProxy runs an httputil.ReverseProxy on 127.0.0.1 that connects to
// target from source and adds the client's address as a line of its own.
func startProxy(t *testing.T, target, source string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 10 * time.Second}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			host, _, _ := net.SplitHostPort(pr.In.RemoteAddr)
			pr.Out.Header["X-Forwarded-For"] = append(pr.In.Header.Values("X-Forwarded-For"), host)
		},
		Transport: &http.Transport{DialContext: dialer.DialContext},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// clientFrom is an HTTP client whose connections come from source.
func clientFrom(t *testing.T, source string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// allowedOf sends n GETs with c, each with the X-Forwarded-For lines of
// xff(i) (none when nil), and counts the 200s. Anything but 200 or 429 fails.
func allowedOf(t *testing.T, c *http.Client, url string, n int, xff func(int) []string) int {
	t.Helper()
	ok := 0
	for i := range n {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if xff != nil {
			req.Header["X-Forwarded-For"] = xff(i)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("GET %s = %d %s", url, resp.StatusCode, body)
		}
	}
	return ok
}

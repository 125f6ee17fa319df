package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/shop-oss/shop/internal/testenv"
)

// serveFrom runs one GET /api/v1/ping through the app's handler as if it
// came from the socket peer, with one X-Forwarded-For line per xff
// element. app.Test cannot choose its peer (always 0.0.0.0).
func serveFrom(t *testing.T, app *fiber.App, peer string, xff ...string) int {
	t.Helper()
	ip := net.ParseIP(peer)
	if ip == nil {
		t.Fatalf("bad peer %q", peer)
	}
	var req fasthttp.Request
	req.Header.SetMethod(fiber.MethodGet)
	req.SetRequestURI("/api/v1/ping")
	for _, x := range xff {
		req.Header.Add(fiber.HeaderXForwardedFor, x)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: ip, Port: 40000}, nil)
	app.Handler()(&ctx)
	return ctx.Response.StatusCode()
}

// allowed counts the 200s of n requests from peer.
func allowed(t *testing.T, app *fiber.App, n int, peer func(i int) string, xff func(i int) []string) int {
	t.Helper()
	ok := 0
	for i := range n {
		var x []string
		if xff != nil {
			x = xff(i)
		}
		if serveFrom(t, app, peer(i), x...) == 200 {
			ok++
		}
	}
	return ok
}

func fixed(s string) func(int) string { return func(int) string { return s } }

// A proxy that adds its own X-Forwarded-For line beside the client's
// (rather than appending to it) must not let the client's forged first
// line decide: the lines are one list, read from the right.
func TestForwardedForLinesAreOneList(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	app := limitedApp(t, r.Client, r.Prefix, 3, []string{"10.0.0.1"})
	forged := func(i int) []string { return []string{fmt.Sprintf("198.51.100.%d", i+1), "192.0.2.1"} }
	if got := allowed(t, app, 10, fixed("10.0.0.1"), forged); got != 3 {
		t.Fatalf("one client behind a proxy that adds its own line: %d of 10 allowed, want 3", got)
	}
	// Another client of the same proxy has its own window.
	other := func(int) []string { return []string{"192.0.2.1", "192.0.2.2"} }
	if got := allowed(t, app, 1, fixed("10.0.0.1"), other); got != 1 {
		t.Fatalf("second client: %d allowed, want 1", got)
	}
}

// serveRaw runs one request, read from raw as it came on the wire, through
// the app's handler as if it came from the socket peer.
func serveRaw(t *testing.T, app *fiber.App, peer, raw string) int {
	t.Helper()
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 40000}, nil)
	app.Handler()(&ctx)
	return ctx.Response.StatusCode()
}

// Header names are case-insensitive on the wire: lines spelt in any case
// are read as X-Forwarded-For lines, and empty elements are skipped.
func TestForwardedForLinesInAnyCase(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	app := limitedApp(t, r.Client, r.Prefix, 3, []string{"10.0.0.1"})
	ok := 0
	for i := range 10 {
		raw := fmt.Sprintf("GET /api/v1/ping HTTP/1.1\r\nHost: shop\r\n"+
			"x-forwarded-for: 198.51.100.%d,\r\nX-FORWARDED-FOR: , 192.0.2.1 ,\r\n\r\n", i+1)
		if serveRaw(t, app, "10.0.0.1", raw) == 200 {
			ok++
		}
	}
	if ok != 3 {
		t.Fatalf("one client behind a proxy, its lines in lower and upper case: %d of 10 allowed, want 3", ok)
	}
	// Not the proxy's window: another client's line gives it its own.
	raw := "GET /api/v1/ping HTTP/1.1\r\nHost: shop\r\nx-forwarded-for: 192.0.2.7\r\n\r\n"
	if got := serveRaw(t, app, "10.0.0.1", raw); got != 200 {
		t.Fatalf("another client behind the proxy: status %d, want 200", got)
	}
}

// IPv6 clients share a window per prefix (64 bits by default), as direct
// peers and as forwarded addresses; IPv4-mapped addresses are IPv4 (not
// all of IPv4 in one ::ffff:0:0/64).
func TestIPv6ClientsShareAPrefix(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	tests := []struct {
		name      string
		peer      func(int) string
		xff       func(int) []string
		n, wantOK int
	}{
		{"direct_one_64", func(i int) string { return fmt.Sprintf("2001:db8:1:2::%x", i+1) }, nil, 10, 3},
		{"direct_other_64", fixed("2001:db8:1:3::1"), nil, 1, 1},
		{"forwarded_one_64", fixed("10.0.0.1"), func(i int) []string { return []string{fmt.Sprintf("2001:db8:9:9:%x::1", i+1)} }, 10, 3},
		{"mapped_is_ipv4", func(i int) string { return fmt.Sprintf("::ffff:192.0.2.%d", i+1) }, nil, 10, 10},
		{"forwarded_mapped_is_ipv4", fixed("10.0.0.1"), func(i int) []string { return []string{fmt.Sprintf("::ffff:203.0.113.%d", i+1)} }, 10, 10},
	}
	app := limitedApp(t, r.Client, r.Prefix, 3, []string{"10.0.0.1"})
	for _, tc := range tests {
		if got := allowed(t, app, tc.n, tc.peer, tc.xff); got != tc.wantOK {
			t.Errorf("%s: %d of %d allowed, want %d", tc.name, got, tc.n, tc.wantOK)
		}
	}
	// A mapped address and its IPv4 form are one client.
	if got := serveFrom(t, app, "192.0.2.1"); got != 200 {
		t.Fatalf("192.0.2.1 after one request as ::ffff:192.0.2.1: %d", got)
	}
	serveFrom(t, app, "::ffff:192.0.2.1")
	if got := serveFrom(t, app, "192.0.2.1"); got != fiber.StatusTooManyRequests {
		t.Errorf("192.0.2.1's 4th request (two as ::ffff:192.0.2.1) = %d, want 429", got)
	}
}

func TestIPv6PrefixIsConfigurable(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	app := limitedAppWith(t, r.Client, r.Prefix, 3, nil, 48, slog.New(slog.DiscardHandler))
	if got := allowed(t, app, 10, func(i int) string { return fmt.Sprintf("2001:db8:1:%x::1", i+1) }, nil); got != 3 {
		t.Errorf("ten /64s of one /48: %d allowed, want 3", got)
	}
	app = limitedAppWith(t, r.Client, r.Prefix+"128:", 3, nil, 128, slog.New(slog.DiscardHandler))
	if got := allowed(t, app, 10, func(i int) string { return fmt.Sprintf("2001:db8::%x", i+1) }, nil); got != 10 {
		t.Errorf("prefix 128: %d of 10 addresses allowed, want 10", got)
	}
}

// The access log names the client the limiter counted: behind a trusted
// proxy the rightmost untrusted hop, not the forged leftmost one.
func TestAccessLogNamesTheLimitedClient(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	app := limitedAppWith(t, r.Client, r.Prefix, 5, []string{"10.0.0.1"}, 0, log)
	serveFrom(t, app, "10.0.0.1", "6.6.6.6, 192.0.2.7")
	serveFrom(t, app, "192.0.2.8", "6.6.6.6")
	var ips []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l struct{ Msg, IP string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Msg == "request" {
			ips = append(ips, l.IP)
		}
	}
	if len(ips) != 2 || ips[0] != "192.0.2.7" || ips[1] != "192.0.2.8" {
		t.Errorf("access log ips = %v, want [192.0.2.7 192.0.2.8]", ips)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer starts a redis-server private to t, with args added to its
// command line (e.g. "--maxmemory-policy", "allkeys-lru"), and returns its
// URL. It is for tests that need server settings the shared test Redis must
// never be given, since other packages use it at the same time. The server
// is killed when t ends. Without redis-server on PATH, t is skipped, or fails
// when CI is set.
func RedisServer(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	switch {
	case err != nil && os.Getenv("CI") != "":
		t.Fatalf("no redis-server on PATH (CI is set, so this fails instead of skipping)")
	case err != nil:
		t.Skip("no redis-server on PATH")
	}
	// The free port can be taken again before redis-server binds it; then
	// the server exits (or another answers), and we try another port.
	var lastOut string
	for range 5 {
		url, out, ok := startRedisServer(t, bin, args)
		if ok {
			return url
		}
		lastOut = out
	}
	t.Fatalf("redis-server %s did not start:\n%s", strings.Join(args, " "), lastOut)
	return ""
}

func startRedisServer(t testing.TB, bin string, args []string) (url, output string, ok bool) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, append([]string{"--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	url = "redis://127.0.0.1:" + port + "/0"
	opts, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	// Ours is the one whose process_id is our child's, not a server of some
	// other test that got the port first.
	want := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return "", out.String(), false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := rdb.Info(ctx, "server").Result()
		cancel()
		if err == nil && strings.Contains(info, want) {
			t.Cleanup(stop)
			return url, "", true
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return "", fmt.Sprintf("not ready after 10s on port %s\n%s", port, out.String()), false
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

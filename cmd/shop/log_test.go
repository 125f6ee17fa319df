package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/testenv"
)

// lockedBuffer is a bytes.Buffer the serving command and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeLogsReachStdout: shop serve batches its log lines, yet they
// reach stdout while it serves (the listening line, an access-log line)
// and every one is out when the command returns, the last one included.
func TestServeLogsReachStdout(t *testing.T) {
	t.Parallel()
	db, r := testenv.NewDatabase(t), testenv.NewRedis(t)
	env := map[string]string{
		"SHOP_DATABASE_URL": db.URL, "SHOP_REDIS_URL": r.URL, "SHOP_KEY_PREFIX": r.Prefix,
		"SHOP_ENV": "dev", "SHOP_ADDR": "127.0.0.1:0", "SHOP_LOG_LEVEL": "info",
	}
	var out, errb lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--writer=false"}, func(k string) string { return env[k] }, &out, &errb)
	}()
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	addr := waitFor(t, &out, done, func(s string) string {
		if m := listening.FindStringSubmatch(s); m != nil {
			return m[1]
		}
		return ""
	})
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	waitFor(t, &out, done, func(s string) string {
		if strings.Contains(s, "route=/healthz") {
			return "ok"
		}
		return ""
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, errb.String())
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); !strings.Contains(lines[len(lines)-1], "msg=stopped") {
		t.Fatalf("the last line on stdout is %q, want the stopped line", lines[len(lines)-1])
	}
}

// waitFor polls out until found returns something, or the command ends,
// or a generous deadline passes.
func waitFor(t *testing.T, out *lockedBuffer, done chan error, found func(string) string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v := found(out.String()); v != "" {
			return v
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended early: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not on stdout within 30s:\n%s", out.String())
		}
	}
}

// TestRedisLoggerKeepsMsg: a line go-redis logs keeps its message, "redis
// client", and carries go-redis's text under a key of its own, not a
// second "msg" that would override it.
func TestRedisLoggerKeepsMsg(t *testing.T) {
	var buf bytes.Buffer
	redisLogger{slog.New(slog.NewJSONHandler(&buf, nil))}.Printf(context.Background(), "pool: %s", "retrying")
	line := buf.String()
	if n := strings.Count(line, `"msg":`); n != 1 {
		t.Fatalf("%d msg keys in %s", n, line)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	if got["msg"] != "redis client" || got["detail"] != "pool: retrying" {
		t.Errorf("logged %s", line)
	}
}

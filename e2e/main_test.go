// Package e2e tests the built `shop` binary as a black box over HTTP,
// against the real Redis and PostgreSQL that internal/testenv finds.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/testenv"
)

// shopBin is the binary under test, built once by TestMain.
var shopBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shop-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shopBin = filepath.Join(dir, "shop")
	// Built as users build it, without -race: the race detector slows the
	// server tenfold, and the load tests here then measure the detector
	// (requests time out in the Redis pool queue). The same handlers run
	// under -race in the in-process tests of their packages.
	build := exec.Command("go", "build", "-o", shopBin, "../cmd/shop")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build shop:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is the environment of one shop process: a private database and key
// prefix on the test services, a random port, a fixed JWT secret.
type env map[string]string

func newEnv(t *testing.T) env {
	t.Helper()
	db := testenv.NewDatabase(t)
	rdb := testenv.NewRedis(t)
	return env{
		"SHOP_ADDR":         "127.0.0.1:0",
		"SHOP_REDIS_URL":    rdb.URL,
		"SHOP_DATABASE_URL": db.URL,
		"SHOP_KEY_PREFIX":   rdb.Prefix,
		"SHOP_JWT_SECRET":   "e2e-secret-0123456789abcdef0123456789abcdef",
		"SHOP_RATE_LIMIT":   "0",
		"SHOP_LOG_LEVEL":    "warn",
	}
}

func (e env) list() []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range e {
		if strings.HasPrefix(k, "E2E_") { // for the test's own use
			continue
		}
		out = append(out, k+"="+v)
	}
	return out
}

// server is a running `shop serve`.
type server struct {
	URL    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
	exited chan struct{}
	// warnings are the server's first warning and error log lines, shown
	// when the test fails.
	warnings []string
}

// startServer runs `shop serve` (plus args) and waits until it listens. The
// process is stopped when t ends.
func startServer(t *testing.T, e env, args ...string) *server {
	t.Helper()
	e["SHOP_LOG_LEVEL"] = "info" // the "listening" line carries the address
	cmd := exec.Command(shopBin, append([]string{"serve"}, args...)...)
	cmd.Env = e.list()
	s := &server{cmd: cmd, done: make(chan error, 1), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &s.mu, w: &s.stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go scanLogs(stdout, addr, s)
	go func() { err := cmd.Wait(); close(s.exited); s.done <- err }()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			s.mu.Lock()
			for _, w := range s.warnings[:min(len(s.warnings), 20)] {
				t.Log("server:", w)
			}
			s.mu.Unlock()
		}
	})
	select {
	case a := <-addr:
		s.URL = "http://" + a
	case err := <-s.done:
		t.Fatalf("shop serve exited before listening: %v\n%s", err, s.stderrText())
	case <-time.After(30 * time.Second):
		t.Fatalf("shop serve did not listen within 30s\n%s", s.stderrText())
	}
	return s
}

var textListening = regexp.MustCompile(`msg=listening addr=(\S+)`)

func scanLogs(r io.Reader, addr chan<- string, s *server) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	sent := false
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if line := sc.Text(); strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") {
			s.mu.Lock()
			if len(s.warnings) < 200 {
				s.warnings = append(s.warnings, line)
			}
			s.mu.Unlock()
		}
		if sent {
			continue
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
			addr <- line.Addr
			sent = true
		} else if m := textListening.FindSubmatch(sc.Bytes()); m != nil { // SHOP_ENV=dev logs text
			addr <- string(m[1])
			sent = true
		}
	}
}

// alive reports whether the process is still running.
func (s *server) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

func (s *server) stderrText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// stop sends SIGTERM and returns the exit error (nil for exit 0).
func (s *server) stop(t *testing.T) error {
	if s.cmd.ProcessState != nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		return err
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("shop did not stop within 15s of SIGTERM")
		return <-s.done
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runShop runs a one-shot shop command and returns its output and error.
func runShop(t *testing.T, e env, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shopBin, args...)
	cmd.Env = e.list()
	var o, eb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &eb
	err = cmd.Run()
	return o.String(), eb.String(), err
}

// response is one HTTP exchange, already checked against openapi.yaml.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) JSON(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// call sends one request and checks the exchange against the OpenAPI
// document. headers are name, value pairs.
func call(t *testing.T, method, url string, body any, headers ...string) response {
	t.Helper()
	return send(t, true, method, url, body, headers...)
}

// bulk is call without the OpenAPI check, for the thousands of identical
// exchanges of a load: under -race the check costs more than the request,
// and other tests check the same exchanges.
func bulk(t *testing.T, method, url string, body any, headers ...string) response {
	t.Helper()
	return send(t, false, method, url, body, headers...)
}

func send(t *testing.T, check bool, method, url string, body any, headers ...string) response {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if check && !strings.HasSuffix(url, "/metrics") {
		openapitest.Check(t, req, raw, resp, out)
	}
	return response{resp.StatusCode, resp.Header, out}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

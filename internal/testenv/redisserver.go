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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProcess is a redis-server private to one test, for settings the
// shared test Redis must never be given (other packages use it at the same
// time) and for crashes: Kill is a SIGKILL, Restart starts it again on the
// same port and directory, so it reloads whatever it persisted.
type RedisProcess struct {
	URL  string
	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    bytes.Buffer
}

// RedisServer starts a private redis-server with args added to its command
// line (e.g. "--maxmemory-policy", "allkeys-lru") and returns its URL.
func RedisServer(t testing.TB, args ...string) string {
	t.Helper()
	return StartRedis(t, args...).URL
}

// StartRedis starts a private redis-server: no persistence unless args
// turn it on (later options win), its own directory, a free port. It is
// killed when t ends. Without redis-server on PATH, t is skipped, or fails
// when CI is set.
func StartRedis(t testing.TB, args ...string) *RedisProcess {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	switch {
	case err != nil && os.Getenv("CI") != "":
		t.Fatalf("no redis-server on PATH (CI is set, so this fails instead of skipping)")
	case err != nil:
		t.Skip("no redis-server on PATH")
	}
	dir := t.TempDir()
	// The free port can be taken again before redis-server binds it; then
	// the server exits (or another answers), and we try another port.
	var lastOut string
	for range 5 {
		port := freePort(t)
		p := &RedisProcess{
			URL: "redis://127.0.0.1:" + port + "/0", bin: bin,
			args: append([]string{"--bind", "127.0.0.1", "--port", port,
				"--save", "", "--appendonly", "no", "--dir", dir}, args...),
		}
		out, ok := p.start()
		if ok {
			t.Cleanup(p.Kill)
			return p
		}
		lastOut = out
	}
	t.Fatalf("redis-server %s did not start:\n%s", strings.Join(args, " "), lastOut)
	return nil
}

// Kill sends SIGKILL: no shutdown, no last fsync, as a crash.
func (p *RedisProcess) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
}

// down is whether the server was killed and not restarted.
func (p *RedisProcess) down() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

// Pause sends SIGSTOP: the server hangs, as under a long stall of its
// machine. Connections stay open and new ones are accepted by the kernel,
// but nothing is answered until Resume. It is resumed when t ends, so that
// Kill can end it.
func (p *RedisProcess) Pause(t testing.TB) {
	t.Helper()
	if err := p.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("redis-server: SIGSTOP: %v", err)
	}
	t.Cleanup(func() { _ = p.signal(syscall.SIGCONT) })
}

// Resume sends SIGCONT: the server goes on with whatever was sent to it
// meanwhile.
func (p *RedisProcess) Resume(t testing.TB) {
	t.Helper()
	if err := p.signal(syscall.SIGCONT); err != nil {
		t.Errorf("redis-server: SIGCONT: %v", err)
	}
}

func (p *RedisProcess) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	return cmd.Process.Signal(sig)
}

// Restart starts the killed server again on its port and directory, and
// waits until it has loaded its data and answers. It may be called from
// any goroutine, so it returns an error rather than failing a test.
func (p *RedisProcess) Restart() error {
	if out, ok := p.start(); !ok {
		return fmt.Errorf("redis-server did not restart:\n%s", out)
	}
	return nil
}

// start runs the server and waits until it answers as our child (not a
// server of some other test that got the port first).
func (p *RedisProcess) start() (output string, ok bool) {
	cmd := exec.Command(p.bin, p.args...)
	p.out.Reset()
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := cmd.Start(); err != nil {
		return err.Error(), false
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()

	opts, _ := redis.ParseURL(p.URL)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	want := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return p.out.String(), false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := rdb.Info(ctx, "server").Result()
		cancel()
		if err == nil && strings.Contains(info, want) {
			return "", true
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Kill()
	return fmt.Sprintf("not ready after 15s on %s\n%s", p.URL, p.out.String()), false
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

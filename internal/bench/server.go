package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	adminEmail    = "bench-admin@loadtest.invalid"
	adminPassword = "bench-admin-password"
)

func (b *bench) base() string { return "http://127.0.0.1:" + strconv.Itoa(b.cfg.Port) }

// header prints the machine, its load and the tools' versions.
func (b *bench) header(ctx context.Context) {
	b.loadStart = loadAvg()
	b.stealStart = steal()
	b.printf("== machine: %d cores, %s, load %s\n", runtime.NumCPU(), cpuModel(), b.loadStart)
	b.printf("== Redis: %s\n", b.redisDesc)
	versions := []string{runtime.Version(), field(output(ctx, "redis-server", "--version"), 2), psqlVersion(ctx)}
	_, err := exec.LookPath("wrk")
	b.haveWrk = err == nil
	if b.haveWrk {
		w := strings.Fields(firstLine(output(ctx, "wrk", "-v")))
		versions = append(versions, strings.Join(w[:min(2, len(w))], " "))
	}
	b.printf("== %s\n", strings.Join(versions, ", "))
	if !b.haveWrk {
		b.printf("== wrk not installed: purchases, their p99 at half rate and the product reads are measured with shop loadtest only (apt-get install wrk adds the second client)\n")
	}
}

func psqlVersion(ctx context.Context) string {
	f := strings.Fields(output(ctx, "psql", "-V"))
	if len(f) < 3 {
		return "psql n/a"
	}
	return strings.Join(f[2:], " ")
}

func output(ctx context.Context, name string, args ...string) string {
	out, _ := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out)
}

func field(s string, i int) string {
	f := strings.Fields(s)
	if i < len(f) {
		return f[i]
	}
	return ""
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// steal is the time the hypervisor ran something else on our cores, in
// core-seconds: a busy host slows every figure of a run.
func steal() float64 {
	b, _ := os.ReadFile("/proc/stat")
	m, _ := parseProcStat(string(b))
	return m.steal / clockTicks
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown cpu"
}

// stores is the environment of every shop process the bench runs.
func (b *bench) stores() []string {
	return []string{"SHOP_JWT_SECRET=" + b.secret, "SHOP_REDIS_URL=" + b.redisURL, "SHOP_DATABASE_URL=" + b.dbURL,
		"SHOP_KEY_PREFIX=" + b.prefix, "SHOP_LOG_LEVEL=" + b.cfg.LogLevel}
}

// shop runs a shop command to its end, its output to stdout (a file or
// nil); its stderr is the bench's, where a load test draws its progress.
func (b *bench) shop(ctx context.Context, stdout io.Writer, env []string, args ...string) error {
	return b.shopTo(ctx, stdout, b.warn, env, args...)
}

func (b *bench) shopTo(ctx context.Context, stdout, stderr io.Writer, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, b.cfg.Bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Dir = b.cfg.Dir
	return cmd.Run()
}

// startServer makes a fresh shop_bench with an admin and starts a private
// `shop serve` over it with the rate limiter on (a limit no client
// reaches, keyed per client through X-Forwarded-For), so every request
// pays what it pays in production.
func (b *bench) startServer(ctx context.Context) error {
	var err error
	if b.dbURL, err = benchDB(b.cfg.PostgresURL); err != nil {
		return err
	}
	if err := b.dropDatabase(ctx); err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	b.secret = hex.EncodeToString(key)
	if err := b.shop(ctx, nil, b.stores(), "migrate", "--create-db"); err != nil {
		return fmt.Errorf("bench: shop migrate: %w", err)
	}
	if err := b.shop(ctx, io.Discard, b.stores(), "user", "add", "--email", adminEmail, "--password", adminPassword, "--role", "admin"); err != nil {
		return fmt.Errorf("bench: shop user add: %w", err)
	}
	args := []string{"serve"}
	if b.cfg.Profile {
		args = append(args, "--pprof-addr", "127.0.0.1:"+strconv.Itoa(b.cfg.Port+1))
	}
	args = append(args, b.cfg.ServerArgs...)
	if b.cfg.WriterNice != "" {
		args = append(args, "--writer=false")
	}
	env := append(append([]string{}, b.cfg.ServerEnv...), b.stores()...)
	env = append(env, "SHOP_ADDR=127.0.0.1:"+strconv.Itoa(b.cfg.Port), "SHOP_RATE_LIMIT=100000/10s", "SHOP_TRUSTED_PROXIES=127.0.0.1")
	if b.server, err = b.background(b.cfg.Bin, args, env, "server.log"); err != nil {
		return err
	}
	// The order writer in a process of its own at a nice value: on shared
	// cores the purchases then go before its batches. Its CPU counts as
	// the server's.
	if b.cfg.WriterNice != "" {
		nice := []string{"-n", b.cfg.WriterNice, b.cfg.Bin, "writer"}
		if b.writer, err = b.background("nice", nice, b.stores(), "writer.log"); err != nil {
			return err
		}
	}
	for range 100 {
		if b.get(ctx, "/healthz") == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("bench: server did not start, see %s", b.path("server.log"))
}

func (b *bench) background(name string, args, env []string, logName string) (*exec.Cmd, error) {
	log, err := os.Create(b.path(logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = b.cfg.Dir
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); _ = log.Close() }()
	return cmd, nil
}

// stopServer ends the server and the writer, waiting for them.
func (b *bench) stopServer() {
	for _, c := range []**exec.Cmd{&b.writer, &b.server} {
		if *c == nil {
			continue
		}
		p := (*c).Process
		_ = p.Signal(syscall.SIGTERM)
		for range 300 { // the server drains its writer first
			if p.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		*c = nil
	}
}

// serverPids are the processes whose CPU is the server's.
func (b *bench) serverPids() map[int]bool {
	m := map[int]bool{}
	for _, c := range []*exec.Cmd{b.server, b.writer} {
		if c != nil {
			m[c.Process.Pid] = true
		}
	}
	return m
}

func (b *bench) get(ctx context.Context, path string) error {
	_, err := b.fetch(ctx, b.base()+path, nil)
	return err
}

// fetch GETs a URL and returns its body; a status other than 200 is an
// error.
func (b *bench) fetch(ctx context.Context, url string, header map[string]string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// snapshot is the server's own account so far, with PostgreSQL's commits.
func (b *bench) snapshot(ctx context.Context) snapshot {
	body, _ := b.fetch(ctx, b.base()+"/metrics", nil)
	s := parseMetrics(string(body))
	s.commits = b.commits(ctx)
	return s
}

// reserveCalls is how many reserve script calls the server has made.
func (b *bench) reserveCalls(ctx context.Context) float64 {
	body, _ := b.fetch(ctx, b.base()+"/metrics", nil)
	s := parseMetrics(string(body))
	return s.script["+Inf"]
}

// profileAttack takes the server's CPU profile of seconds of the attack
// that is starting, once its purchases have begun (the reserve script's
// calls move) and ProfileDelay more have passed: the shoppers' set-up
// (argon2 each) takes 5 to 13 s by the host's speed.
func (b *bench) profileAttack(ctx context.Context, file string, seconds int) {
	calls := b.reserveCalls(ctx)
	for range 600 {
		if b.reserveCalls(ctx) != calls {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(b.cfg.ProfileDelay)
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", b.cfg.Port+1, seconds)
	if body, err := b.fetch(ctx, url, nil); err == nil {
		_ = os.WriteFile(b.path(file), body, 0o644)
	}
}

// profileTops prints the tops of the profiles taken.
func (b *bench) profileTops(ctx context.Context) {
	for _, p := range []struct{ file, what string }{
		{"cpu.pprof", "10 s of the first attack"},
		{"cpu-half.pprof", "8 s of the first half-rate attack"},
	} {
		if st, err := os.Stat(b.path(p.file)); !b.cfg.Profile || err != nil || st.Size() == 0 {
			continue
		}
		b.printf("\n== server CPU profile (%s): go tool pprof -top %s %s\n", p.what, b.cfg.Bin, b.path(p.file))
		raw, _ := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=35", b.cfg.Bin, b.path(p.file)).Output()
		top := string(raw)
		lines := strings.Split(top, "\n")
		b.printf("%s\n", strings.Join(lines[:min(45, len(lines))], "\n"))
	}
}

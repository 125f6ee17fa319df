package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fault drills: the sale goes on while parts of the system fail, and
// afterwards nothing accepted is lost or written twice.

// writer runs `shop writer` as its own process (--claim-idle 1s unless
// args say otherwise), watched by the check.
func (s *shop) writer(t *testing.T, consumer string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(shopBin, append([]string{"writer", "--consumer", consumer, "--claim-idle", "1s"}, args...)...)
	cmd.Env = s.watch.env.list()
	p := startProc(t, "shop writer "+consumer, cmd)
	s.watch.process(p.name, p.alive, p.killed.Load)
	return p
}

// The order writer is killed with SIGKILL again and again during the sale
// and restarted (alternately under its old name, which reads its own
// pending entries, and a new one, which claims the dead one's).
func TestDrillWriterKilledRepeatedly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	const units, buyers, tries = 300, 100, 4
	s.product(t, "drill-kill", 100, map[string]any{"quantity": units, "per_user_limit": 3})
	tokens := s.shoppers(t, buyers, "kill")

	// Kill at least minKills times, and until the attack is over: some
	// writers die with a batch committed and not acked, or half read.
	const minKills = 6
	stop := make(chan struct{})
	killed := make(chan int)
	go func() {
		kills, stopping, stopCh := 0, false, stop
		w := s.writer(t, "drill-0")
		for i := 1; ; i++ {
			select {
			case <-stopCh:
				stopping, stopCh = true, nil // a nil channel: keep the 150 ms pace
			case <-time.After(150 * time.Millisecond):
			}
			w.kill()
			if stopping && kills >= minKills {
				killed <- kills
				return
			}
			kills++
			w = s.writer(t, "drill-"+strconv.Itoa(i%3))
		}
	}()
	tally := attack(t, buyers, func(b, a int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], "drill-kill", 1, "k"+strconv.Itoa(a))
	}, tries)
	close(stop)
	if n := <-killed; n < minKills {
		t.Fatalf("the writer was killed only %d times", n)
	}
	s.writer(t, "drill-final")
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-kill", units, tally, 3)
}

// SCRIPT FLUSH empties Redis's script cache mid-sale (as a restart or a
// failover does): no client ever sees NOSCRIPT, nothing is lost.
func TestDrillScriptFlush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e)
	const units, buyers, tries = 80, 100, 2
	s.product(t, "drill-flush", 100, map[string]any{"quantity": units, "per_user_limit": 1})
	tokens := s.shoppers(t, buyers, "flush")
	opts, _ := redis.ParseURL(e["SHOP_REDIS_URL"])
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	stop := make(chan struct{})
	flushed := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				flushed <- n
				return
			case <-time.After(20 * time.Millisecond):
				if rdb.ScriptFlush(context.Background()).Err() == nil {
					n++
				}
			}
		}
	}()
	tally := attack(t, buyers, func(b, a int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], "drill-flush", 1, "f"+strconv.Itoa(a))
	}, tries)
	close(stop)
	if n := <-flushed; n == 0 {
		t.Fatal("the script cache was never flushed")
	}
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-flush", units, tally, 1)
}

// PostgreSQL stops mid-sale (immediate shutdown, as a crash) and comes back:
// purchases go on being accepted meanwhile (they need Redis only), and
// every one of them is confirmed once it is back.
func TestDrillPostgresRestartMidSale(t *testing.T) {
	t.Parallel()
	pg := privatePostgres(t)
	e := newEnv(t)
	e["SHOP_DATABASE_URL"] = pg.url
	s := newShop(t, e)
	const units, buyers = 120, 60
	s.product(t, "drill-pg", 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "pg")

	first := attack(t, buyers, func(b, a int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], "drill-pg", 1, "before")
	}, 1)
	pg.stop(t)
	during := attack(t, buyers, func(b, a int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], "drill-pg", 1, "during")
	}, 1)
	if orders, _ := during.accepted(); orders != buyers {
		t.Fatalf("with PostgreSQL down, %d of %d purchases were accepted (refused %v)", orders, buyers, during.refused)
	}
	time.Sleep(time.Second) // the writer meets the outage and backs off
	pg.start(t)
	for id, q := range during.units {
		first.units[id] = q
	}
	verify(t, s, pg.url, "drill-pg", units, first, 0)
}

// pgCluster is a PostgreSQL server private to one test, which the test may
// stop and start.
type pgCluster struct {
	bin, dir string
	port     int
	url      string
	runAs    []string
}

// privatePostgres creates and starts a throwaway cluster from the machine's
// PostgreSQL binaries (skipped where there are none, failing in CI).
func privatePostgres(t *testing.T) *pgCluster {
	t.Helper()
	bin := pgBinDir()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no initdb on this machine: the PostgreSQL drill cannot run")
		}
		t.Skip("no initdb on this machine")
	}
	c := &pgCluster{bin: bin, port: freePort(t)}
	dir, err := os.MkdirTemp("", "shop-drill-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 { // PostgreSQL refuses to run as root
		u, err := osuser.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	c.run(t, filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8")
	c.start(t)
	t.Cleanup(func() { c.ctl("stop", "-m", "immediate") })
	c.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	return c
}

func (c *pgCluster) start(t *testing.T) {
	t.Helper()
	if out, err := c.ctl("start", "-w", "-t", "30", "-l", filepath.Join(c.dir, "pg.log"),
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, c.dir)); err != nil {
		t.Fatalf("pg_ctl start: %v %s", err, out)
	}
}

func (c *pgCluster) stop(t *testing.T) {
	t.Helper()
	if out, err := c.ctl("stop", "-m", "immediate", "-w"); err != nil {
		t.Fatalf("pg_ctl stop: %v %s", err, out)
	}
}

func (c *pgCluster) ctl(args ...string) ([]byte, error) {
	full := append(append([]string{}, c.runAs...), filepath.Join(c.bin, "pg_ctl"), "-D", filepath.Join(c.dir, "data"))
	cmd := exec.Command(full[0], append(full[1:], args...)...)
	return cmd.CombinedOutput()
}

func (c *pgCluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	full := append(append(append([]string{}, c.runAs...), name), args...)
	if out, err := exec.Command(full[0], full[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", name, err, out)
	}
}

func pgBinDir() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

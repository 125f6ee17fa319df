package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Where the cores go: a sampler notes every second the clock ticks each
// shop, wrk, redis-server and postgres process has used so far, the
// time its threads waited runnable for a core, and the machine's busy
// and total ticks; a phase's window divided by its length gives the
// cores each kind of process kept busy.

// machineTicks is /proc/stat's first line: busy (user, nice, system, irq,
// softirq, steal) and total (busy with idle and iowait) ticks, and steal.
type machineTicks struct {
	busy, total, steal float64
}

// parseProcStat reads the "cpu " line of /proc/stat.
func parseProcStat(text string) (machineTicks, bool) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var v [8]float64
		for i := range v {
			v[i], _ = strconv.ParseFloat(f[i+1], 64)
		}
		busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
		return machineTicks{busy: busy, total: busy + v[3] + v[4], steal: v[7]}, true
	}
	return machineTicks{}, false
}

// parsePidStat reads /proc/PID/stat: the command name and utime + stime.
// The name is in parentheses and may hold spaces.
func parsePidStat(text string) (comm string, ticks float64, ok bool) {
	open, shut := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || shut < open {
		return "", 0, false
	}
	f := strings.Fields(text[shut+1:])
	if len(f) < 13 { // state is field 3 of the file, utime 14, stime 15
		return "", 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	return text[open+1 : shut], u + s, err1 == nil && err2 == nil
}

// parseSchedWait is a thread's schedstat: the ns it waited runnable.
func parseSchedWait(text string) float64 {
	f := strings.Fields(text)
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[1], 64)
	return v
}

var watched = map[string]bool{"shop": true, "wrk": true, "redis-server": true, "postgres": true}

// procSample is one process at one sample.
type procSample struct {
	comm         string
	ticks, waitN float64
}

type cpuSample struct {
	at    float64 // epoch seconds
	m     machineTicks
	procs map[int]procSample
}

// sampler keeps the samples of a run; self (this process, a shop too)
// counts as other, as the shell's sampler did.
type sampler struct {
	self    int
	mu      sync.Mutex
	samples []cpuSample
	stop    chan struct{}
	done    chan struct{}
}

func startSampler() *sampler {
	s := &sampler{self: os.Getpid(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			s.take()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) Stop() []cpuSample {
	if s == nil {
		return nil
	}
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// take reads one sample; a process may exit between the listing and
// its read, and is then left out.
func (s *sampler) take() {
	at := float64(time.Now().UnixNano()) / 1e9
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return
	}
	m, _ := parseProcStat(string(b))
	c := cpuSample{at: at, m: m, procs: map[int]procSample{}}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == s.self {
			continue
		}
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		comm, ticks, ok := parsePidStat(string(b))
		if !ok || !watched[comm] {
			continue
		}
		p := procSample{comm: comm, ticks: ticks}
		tasks, _ := filepath.Glob(d + "/task/*/schedstat")
		for _, t := range tasks {
			if b, err := os.ReadFile(t); err == nil {
				p.waitN += parseSchedWait(string(b))
			}
		}
		c.procs[pid] = p
	}
	s.mu.Lock()
	s.samples = append(s.samples, c)
	s.mu.Unlock()
}

// phase is one measured window: requests/s and its start and end.
type phase struct {
	Run      int
	Name     string
	Rate     float64
	From, To float64 // epoch seconds
}

// kinds of process, in the report's order.
var kinds = []string{"server", "client", "redis", "postgres"}

// cpuRow is a phase's cores busy per kind, then the rest of the
// machine's busy time (the kernel's threads, this process) and idle,
// then each kind's runnable-but-waiting seconds per second.
type cpuRow struct {
	phase
	Secs        float64
	Busy        map[string]float64
	Other, Idle float64
	Wait        map[string]float64
}

// kindOf names a process by its role: the server (and its writer), the
// load generator (any other shop, or wrk), Redis or PostgreSQL.
func kindOf(pid int, comm string, server map[int]bool) string {
	switch {
	case server[pid]:
		return "server"
	case comm == "shop" || comm == "wrk":
		return "client"
	case comm == "redis-server":
		return "redis"
	}
	return "postgres"
}

// cpuReport divides each kind's ticks over each phase's window by its
// length; phases the samples do not cover are left out.
func cpuReport(samples []cpuSample, phases []phase, ticksPerSec float64, server map[int]bool) []cpuRow {
	var rows []cpuRow
	for _, ph := range phases {
		a, b := -1, -1
		for j, s := range samples {
			if a < 0 && s.at >= ph.From {
				a = j
			}
			if s.at <= ph.To {
				b = j
			}
		}
		if a < 0 || b <= a {
			continue
		}
		sa, sb := samples[a], samples[b]
		secs := sb.at - sa.at
		row := cpuRow{phase: ph, Secs: secs, Busy: map[string]float64{}, Wait: map[string]float64{}}
		known := 0.0
		for pid, p := range sb.procs {
			k := kindOf(pid, p.comm, server)
			before := sa.procs[pid] // a process born in the window starts at zero
			row.Busy[k] += (p.ticks - before.ticks) / ticksPerSec / secs
			row.Wait[k] += (p.waitN - before.waitN) / 1e9 / secs
			known += p.ticks - before.ticks
		}
		row.Other = (sb.m.busy - sa.m.busy - known) / ticksPerSec / secs
		row.Idle = ((sb.m.total - sa.m.total) - (sb.m.busy - sa.m.busy)) / ticksPerSec / secs
		rows = append(rows, row)
	}
	return rows
}

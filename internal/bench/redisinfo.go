package bench

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// parseInfo reads an INFO section's "name:value" lines.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// cmdStat is one command's cumulative calls and microseconds in Redis.
type cmdStat struct {
	calls, usec float64
}

// parseCommandStats reads INFO commandstats
// ("cmdstat_evalsha:calls=N,usec=M,..."), by lower-case command name.
func parseCommandStats(s string) map[string]cmdStat {
	out := map[string]cmdStat{}
	for k, v := range parseInfo(s) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var st cmdStat
		for _, kv := range strings.Split(v, ",") {
			f, val, _ := strings.Cut(kv, "=")
			x, err := strconv.ParseFloat(val, 64)
			if err != nil {
				continue
			}
			switch f {
			case "calls":
				st.calls = x
			case "usec":
				st.usec = x
			}
		}
		out[name] = st
	}
	return out
}

// perCall is one command's share of a window: calls and µs per purchase.
type perCall struct {
	name        string
	calls, usec float64
}

// perPurchase divides what each command did between two commandstats
// snapshots by the purchases made meanwhile, the costliest first. Redis
// counts a command a script calls under its own name and inside the
// script's EVALSHA µs too.
func perPurchase(before, after map[string]cmdStat, n float64) []perCall {
	if n <= 0 {
		return nil
	}
	var out []perCall
	for name, a := range after {
		b := before[name]
		if dc := a.calls - b.calls; dc > 0 {
			out = append(out, perCall{name, dc / n, (a.usec - b.usec) / n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].usec != out[j].usec {
			return out[i].usec > out[j].usec
		}
		return out[i].name < out[j].name
	})
	return out
}

func writePerPurchase(w io.Writer, rows []perCall, most int) {
	for i, r := range rows {
		if i == most {
			break
		}
		fmt.Fprintf(w, "%-22s %8.3f %8.2f\n", r.name, r.calls, r.usec)
	}
}

// slowEntry is one slow-log entry: the command and Redis's own µs for it.
type slowEntry struct {
	command string
	at      int64 // epoch seconds
	usec    float64
}

// redisTail is Redis's own clock on a window: its script calls (EVALSHA)
// and their mean µs, how many took over 1 ms and 10 ms and the longest
// (ms), then the other commands over 1 ms and the longest of them (ms).
type redisTail struct {
	Phase                string
	Calls, MeanUsec      float64
	Over1, Over10, MaxMs float64
	Others, OthersMaxMs  float64
}

// tailOf makes the window's redisTail from the commandstats around it and
// the slow-log entries of the attack's seconds (from..to); false when no
// script ran in it.
func tailOf(phase string, before, after map[string]cmdStat, slow []slowEntry, from, to int64) (redisTail, bool) {
	t := redisTail{Phase: phase}
	t.Calls = after["evalsha"].calls - before["evalsha"].calls
	if t.Calls <= 0 {
		return t, false
	}
	t.MeanUsec = (after["evalsha"].usec - before["evalsha"].usec) / t.Calls
	for _, e := range slow {
		if e.at < from || e.at > to {
			continue
		}
		if e.command == "evalsha" {
			t.Over1++
			if e.usec > 10000 {
				t.Over10++
			}
			t.MaxMs = max(t.MaxMs, e.usec/1000)
			continue
		}
		t.Others++
		t.OthersMaxMs = max(t.OthersMaxMs, e.usec/1000)
	}
	return t, true
}

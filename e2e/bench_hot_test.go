package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The hot SKU part of `make bench-cluster` (issue 49): one SKU bought by
// every worker on the 3-master cluster, its round seeded with `buckets: 3`
// and with `buckets: 1`, in the same run. This host's two cores cannot
// show the growth by wall clock, so the figures are work counters per
// purchase on each master over the attack: Redis core-µs (INFO cpu),
// commands (INFO commandstats) and the purchases it decided (its XADDs:
// a purchase appends its order on its bucket's master, nothing else
// appends while the load runs), and the ceiling on paper they give:
// one SKU's purchases/s = Σ over the masters that decide purchases of
// 1e6 / (core-µs per purchase decided there).

type hotResult struct {
	buckets              int
	perSec               float64
	accepted, other      int64
	cpuUS, cmds, decided []float64 // per master, over the attack
	ceiling              float64
}

// benchHot measures one SKU of buckets on a fresh 3-master cluster.
func benchHot(t *testing.T, cfg benchConfig, buckets int) hotResult {
	e, c := clusterEnv(t, 3)
	var nodes []string
	for _, m := range c.Masters {
		nodes = append(nodes, m.URL)
	}
	s := newShop(t, e)
	sku := "hot-" + strconv.Itoa(buckets)
	s.product(t, sku, 100, map[string]any{"quantity": 10_000_000, "per_user_limit": 0, "buckets": buckets})
	tokens := s.shoppers(t, cfg.users, "hot")
	cpu0, st0 := cpuOf(t, nodes), commandStats(t, nodes)
	r := purchaseLoad(t, s, cfg, []string{sku}, tokens)
	cpu1, st1 := cpuOf(t, nodes), commandStats(t, nodes)
	h := hotResult{buckets: buckets, perSec: r.perSec, accepted: r.accepted, other: r.other}
	for i := range nodes {
		h.cpuUS = append(h.cpuUS, (cpu1[i]-cpu0[i])*1e6)
		h.cmds = append(h.cmds, float64(st1[i]["total"]-st0[i]["total"]))
		h.decided = append(h.decided, float64(st1[i]["xadd"]-st0[i]["xadd"]))
		if d := h.decided[i]; d > 0 {
			h.ceiling += 1e6 / (h.cpuUS[i] / d)
		}
	}
	if r.other > 0 {
		t.Errorf("buckets %d: %d purchases not answered 202", buckets, r.other)
	}
	if sold := s.stock(t, sku).Sold; sold < r.accepted || sold > r.accepted+r.other {
		t.Errorf("buckets %d: %d units sold, %d purchases accepted and %d not", buckets, sold, r.accepted, r.other)
	}
	return h
}

// commandStats is each node's command calls so far: "total" and per
// command (INFO commandstats), scripts' own calls included.
func commandStats(t *testing.T, nodes []string) []map[string]int64 {
	var out []map[string]int64
	for _, u := range nodes {
		info, err := client(t, u).Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, line := range strings.Split(info, "\r\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			m[name] += n
			m["total"] += n
		}
		out = append(out, m)
	}
	return out
}

// hotTable prints the hot SKU's figures: per purchase (all of them) the
// core-µs and commands each master spent, the share of purchases each
// decided, and the ceiling.
func hotTable(cfg benchConfig, results []hotResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n== one hot SKU on the 3-master cluster: %d connections, %s, %d shoppers\n", cfg.conns, cfg.duration, cfg.users)
	fmt.Fprintf(&b, "%-8s %12s %8s  %-26s %-22s %-22s %14s\n", "buckets", "purchases/s", "non-202",
		"core-µs/purchase per master", "commands/purchase", "purchases decided", "ceiling/s")
	for _, h := range results {
		n := float64(max(h.accepted, 1))
		per := func(v []float64) []float64 {
			out := make([]float64, len(v))
			for i, x := range v {
				out[i] = x / n
			}
			return out
		}
		fmt.Fprintf(&b, "%-8d %12.0f %8d  %-26s %-22s %-22s %14.0f\n", h.buckets, h.perSec, h.other,
			floats(per(h.cpuUS), "%.0f"), floats(per(h.cmds), "%.1f"), floats(per(h.decided), "%.2f"), h.ceiling)
	}
	return b.String()
}

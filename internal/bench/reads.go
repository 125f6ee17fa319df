package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// reads is the product (a live round, `available` read live) against
// /healthz with each client: same connections, same addresses.
func (b *bench) reads(ctx context.Context, run int, sku string) {
	product := "/api/v1/products/" + sku
	body, err := b.fetch(ctx, b.base()+product, map[string]string{"X-Forwarded-For": "198.18.0.1"})
	if err != nil || !strings.Contains(string(body), `"available":`) {
		b.warnf("GET %s has no live available: %s", product, body)
	}
	pr, ps := b.getLoad(ctx, fmt.Sprintf("get-%d-product.json", run), product, 1, 0, b.cfg.ReadDuration)
	b.markGet(run, "product-loadtest", ps, pr)
	hr, hs := b.getLoad(ctx, fmt.Sprintf("get-%d-healthz.json", run), "/healthz", 1, 0, b.cfg.ReadDuration)
	b.markGet(run, "healthz-loadtest", hs, hr)
	r := readRun{run: run, Client: "loadtest"}
	r.Product, r.ProductP99 = getFigures(pr)
	r.Healthz, r.HealthP99 = getFigures(hr)
	r.Ratio = ratio(r.Product, r.Healthz)
	b.readRuns = append(b.readRuns, r)
	if !b.haveWrk {
		return
	}
	w := readRun{run: run, Client: "wrk"}
	w.Product, w.ProductP99 = b.wrkRead(ctx, run, "product", product)
	w.Healthz, w.HealthP99 = b.wrkRead(ctx, run, "healthz", "/healthz")
	w.Ratio = ratio(w.Product, w.Healthz)
	b.readRuns = append(b.readRuns, w)
}

// wrkRead is wrk, one thread (one core, like --procs 1), the same
// connections and X-Forwarded-For addresses: requests/s and p99 (ms).
func (b *bench) wrkRead(ctx context.Context, run int, name, path string) (float64, float64) {
	file := fmt.Sprintf("wrk-%d-%s.txt", run, name)
	start := now()
	r := b.wrk(ctx, file, []string{"WRK_ADDRESSES=" + strconv.Itoa(b.cfg.Users)}, b.cfg.ReadDuration,
		"scripts/wrk-forwarded.lua", b.base()+path)
	b.markInner(run, name+"-wrk", r.PerSec, start, now())
	if r.Non2xx {
		b.warnf("wrk %s had answers other than 2xx (see %s)", path, b.path(file))
	}
	return r.PerSec, r.P99
}

// wrk runs wrk -t1 with a Lua script for d, its report to file.
func (b *bench) wrk(ctx context.Context, file string, env []string, d time.Duration, script, url string) wrkReport {
	cmd := exec.CommandContext(ctx, "wrk", "-t1", "-c", strconv.Itoa(b.cfg.Connections), "-d", seconds(d),
		"--timeout", "10s", "--latency", "-s", filepath.Join(b.cfg.Dir, script), url)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(b.path(file), out, 0o644)
	if err != nil {
		b.warnf("wrk %s failed (see %s)", url, b.path(file))
	}
	return parseWrk(string(out))
}

// seconds is a duration as wrk reads one.
func seconds(d time.Duration) string { return strconv.Itoa(int(d.Round(time.Second).Seconds())) + "s" }

package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/shop"
)

// Every shop_* metric the dashboard and the alert rules of
// deploy/monitoring query is one that `shop serve` or `shop writer`
// registers, so a renamed metric cannot leave a panel blank or an alert
// silent. The names come from the registries as the commands build them
// (Describe lists every metric, observed yet or not).
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	t.Parallel()
	_, env, _ := onTestStores(t)
	cfg, err := config.Load(env)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := openMigrated(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	serve := newRegistry()
	sh := shop.New(cfg, st.shop(), log, serve)
	newWriter(st, cfg, log, serve, writerFlags{}, sh.Bestsellers)
	writerOnly := newRegistry()
	newWriter(st, cfg, log, writerOnly, writerFlags{}, nil)
	shop.NewSweeper(st.shop(), cfg, shop.NewStock(st.shop(), cfg), sh.Locks, log, writerOnly)
	exported := described(serve, writerOnly)

	queried := map[string][]string{} // metric -> where
	for where, expr := range monitoringQueries(t) {
		for _, m := range regexp.MustCompile(`\bshop_[a-z0-9_]+`).FindAllString(expr, -1) {
			queried[m] = append(queried[m], where)
		}
	}
	if len(queried) < 10 {
		t.Fatalf("only %d shop metrics found in deploy/monitoring: %v", len(queried), queried)
	}
	for m, where := range queried {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && exported[b] {
				base = b
			}
		}
		if !exported[base] {
			t.Errorf("%s (queried by %s) is not exported by shop serve or shop writer", m, strings.Join(where, ", "))
		}
	}
}

// described is the name of every metric the registries describe.
func described(regs ...*prometheus.Registry) map[string]bool {
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for _, reg := range regs {
		ch := make(chan *prometheus.Desc)
		go func() { reg.Describe(ch); close(ch) }()
		for d := range ch {
			if m := name.FindStringSubmatch(d.String()); m != nil {
				out[m[1]] = true
			}
		}
	}
	return out
}

// monitoringQueries reads every PromQL expression of the dashboard and
// the alert rules, keyed by panel or alert.
func monitoringQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile("../../deploy/monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			out["panel "+p.Title+" "+q.RefID] = q.Expr
		}
	}
	b, err = os.ReadFile("../../deploy/monitoring/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	return out
}

package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// promtool finds Prometheus's promtool (Debian's prometheus package). A
// laptop without it skips the rule checks; CI fails, so the rules can
// never pass unchecked.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("promtool is not installed (apt-get install prometheus); CI must check the alert rules")
	}
	t.Skip("promtool is not installed (apt-get install prometheus): alert rules not checked")
	return ""
}

// The alert rules are valid and behave as monitoring/alerts_test.yml
// says: each alert fires on the series that should wake someone and stays
// quiet on a healthy sale.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "monitoring"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// The dashboard is a Grafana dashboard whose every panel queries the
// Prometheus the importer picks (the datasource variable), and shows
// what the operator's guide promises: purchases, latency, stock, the
// room, the writer, 5xx and the audit. Its metric names are checked
// against the binary's in cmd/shop (TestMonitoringUsesExportedMetrics).
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard.json: no title, uid or panels: %+v", d)
	}
	var all strings.Builder
	for _, p := range d.Panels {
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q, %d queries", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, q := range p.Targets {
			if q.Expr == "" {
				t.Errorf("panel %q: an empty query", p.Title)
			}
			all.WriteString(q.Expr + "\n")
		}
	}
	for _, m := range []string{"shop_purchases_total", "shop_http_request_duration_seconds_bucket",
		"shop_sale_available", "shop_room_waiting", "shop_room_admitted", "shop_order_writer_lag_seconds",
		"shop_order_stream_length", `status=~"5.."`, "shop_audit_problems"} {
		if !strings.Contains(all.String(), m) {
			t.Errorf("no panel queries %s", m)
		}
	}
}

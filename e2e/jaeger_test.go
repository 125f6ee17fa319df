package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A purchase through `shop serve`, its order persisted by a separate
// `shop writer`, both exporting over OTLP to a real Jaeger: Jaeger's
// query API shows one trace holding the purchase's server span and the
// reserve script's span under it, and the writer's span that persisted
// the order linked to that trace.
func TestJaegerTraceOfAPurchase(t *testing.T) {
	t.Parallel()
	j := startJaeger(t)
	e := newEnv(t)
	e["OTEL_EXPORTER_OTLP_ENDPOINT"] = j.otlp
	// Spans leave each process every 100 ms, not every 5 s.
	e["OTEL_BSP_SCHEDULE_DELAY"] = "100"
	s := newShop(t, e, "--writer=false")
	const sku = "traced"
	s.product(t, sku, 100, map[string]any{"quantity": 5, "per_user_limit": 0})
	token := s.shoppers(t, 1, "traced")[0]
	// The writer under a service name of its own: its spans can only
	// have come from that process.
	we := maps.Clone(e)
	we["OTEL_SERVICE_NAME"] = "shop-writer"
	s.writerVia(t, we, "traced-writer")

	o := s.purchase(t, token, sku, 1, "traced-1")
	if o.status != http.StatusAccepted {
		t.Fatalf("purchase: %d %s", o.status, o.code)
	}
	s.waitConfirmed(t, sku, 1)

	// The purchase's trace, found by its service and operation, as a
	// person would in Jaeger's search.
	const route = "POST /api/v1/products/:sku/purchase"
	var purchase jaegerTrace
	var server jaegerSpan
	j.poll(t, "the purchase's trace", func() bool {
		for _, tr := range j.traces(t, "shop", route) {
			for _, sp := range tr.Spans {
				if sp.OperationName == route && sp.tag("url.path") == "/api/v1/products/"+sku+"/purchase" {
					purchase, server = tr, sp
					return true
				}
			}
		}
		return false
	})
	if k := server.tag("span.kind"); k != "server" {
		t.Errorf("the purchase's span is of kind %q, want server", k)
	}
	if code := server.tag("http.response.status_code"); code != "202" {
		t.Errorf("the purchase's span says status %s, want 202", code)
	}
	if p := purchase.service(server); p != "shop" {
		t.Errorf("the purchase's span came from service %q, want shop", p)
	}
	// The reserve script's call (an auto-pipelined EVALSHA, or EVAL on a
	// cold script cache) under the server span.
	var script *jaegerSpan
	for _, sp := range purchase.Spans {
		if (sp.OperationName == "evalsha" || sp.OperationName == "eval") && purchase.descends(sp, server) {
			script = &sp
			break
		}
	}
	if script == nil {
		t.Fatalf("no script span under the purchase's server span in trace %s: %v", purchase.TraceID, purchase.names())
	}
	if sys := script.tag("db.system.name"); sys != "redis" {
		t.Errorf("the script span's db.system.name is %q, want redis", sys)
	}

	// The writer's span that persisted the order: in a trace of its own,
	// with a link (a FOLLOWS_FROM reference) to a span of the purchase's.
	const persist = "order writer: persist orders"
	var writer jaegerSpan
	var writerTrace jaegerTrace
	j.poll(t, "the writer's span linked to the purchase", func() bool {
		for _, tr := range j.traces(t, "shop-writer", persist) {
			for _, sp := range tr.Spans {
				if sp.OperationName != persist {
					continue
				}
				for _, r := range sp.References {
					if r.RefType == "FOLLOWS_FROM" && r.TraceID == purchase.TraceID && purchase.span(r.SpanID) != nil {
						writer, writerTrace = sp, tr
						return true
					}
				}
			}
		}
		return false
	})
	if p := writerTrace.service(writer); p != "shop-writer" {
		t.Errorf("the persist span came from service %q, want shop-writer", p)
	}
	if n := writer.tag("shop.orders_written"); n != "1" {
		t.Errorf("the persist span wrote %s orders, want 1", n)
	}
	t.Logf("purchase trace %s: %s; persisted in trace %s by span %s", purchase.TraceID, strings.Join(purchase.names(), ", "), writerTrace.TraceID, writer.SpanID)
}

// jaeger is a Jaeger all-in-one private to a test, keeping spans in
// memory.
type jaeger struct {
	otlp  string // OTLP/HTTP endpoint, for OTEL_EXPORTER_OTLP_ENDPOINT
	query string // the query service's base URL (its HTTP API and UI)
}

// jaegerConfig is Jaeger's (an OpenTelemetry Collector's) configuration:
// OTLP/HTTP in, memory storage, the query service; every port given, so
// that tests may run several at once, and no internal metrics listener.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// startJaeger runs the Jaeger binary SHOP_TEST_JAEGER names
// (scripts/test.sh builds it into its tools cache). Without it the test is
// skipped, or fails when CI is set.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := os.Getenv("SHOP_TEST_JAEGER")
	switch {
	case bin == "" && os.Getenv("CI") != "":
		t.Fatal("no Jaeger: set SHOP_TEST_JAEGER (scripts/test.sh builds it; CI is set, so this fails instead of skipping)")
	case bin == "":
		t.Skip("no Jaeger: set SHOP_TEST_JAEGER (scripts/test.sh builds it into its tools cache)")
	}
	// A free port may be taken again before Jaeger binds it: then it
	// exits, and other ports are tried.
	var mu sync.Mutex
	var out bytes.Buffer
	for range 3 {
		queryPort, grpcPort, otlpPort := freePort(t), freePort(t), freePort(t)
		cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
		if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, queryPort, grpcPort, otlpPort), 0o600); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		out.Reset()
		mu.Unlock()
		cmd := exec.Command(bin, "--config", cfg)
		cmd.Stdout = &lockedWriter{mu: &mu, w: &out}
		cmd.Stderr = cmd.Stdout
		p := startProc(t, "jaeger", cmd)
		j := &jaeger{otlp: "http://127.0.0.1:" + strconv.Itoa(otlpPort), query: "http://127.0.0.1:" + strconv.Itoa(queryPort)}
		for deadline := time.Now().Add(30 * time.Second); p.alive() && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if resp, err := httpClient.Get(j.query + "/api/services"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return j
				}
			}
		}
		p.kill()
	}
	mu.Lock()
	defer mu.Unlock()
	t.Fatalf("Jaeger did not start:\n%s", out.String())
	return nil
}

// traces asks the query API for the recent traces of service's operation.
func (j *jaeger) traces(t *testing.T, service, operation string) []jaegerTrace {
	t.Helper()
	q := url.Values{"service": {service}, "operation": {operation}, "lookback": {"1h"}, "limit": {"20"}}
	resp, err := httpClient.Get(j.query + "/api/traces?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("Jaeger's /api/traces: %d: %v", resp.StatusCode, err)
	}
	return body.Data
}

// poll calls found until it says true, for at most 30 s (spans reach
// Jaeger in batches).
func (j *jaeger) poll(t *testing.T, what string, found func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !found(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger has not shown %s within 30 s", what)
		}
	}
}

// jaegerTrace is a trace as Jaeger's query API (/api/traces) shows it:
// an OpenTelemetry parent is a CHILD_OF reference, a link FOLLOWS_FROM.
type jaegerTrace struct {
	TraceID   string       `json:"traceID"`
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// tag is the value of the span's tag key, as text ("" when absent).
func (s jaegerSpan) tag(key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// parent is the span's parent in its own trace ("" for a root).
func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

func (tr jaegerTrace) span(id string) *jaegerSpan {
	for i := range tr.Spans {
		if tr.Spans[i].SpanID == id {
			return &tr.Spans[i]
		}
	}
	return nil
}

// descends tells whether s is under root in the trace.
func (tr jaegerTrace) descends(s, root jaegerSpan) bool {
	for cur := &s; cur != nil; cur = tr.span(cur.parent()) {
		if cur.parent() == root.SpanID {
			return true
		}
	}
	return false
}

func (tr jaegerTrace) service(s jaegerSpan) string { return tr.Processes[s.ProcessID].ServiceName }

func (tr jaegerTrace) names() []string {
	var out []string
	for _, s := range tr.Spans {
		out = append(out, s.OperationName)
	}
	return out
}

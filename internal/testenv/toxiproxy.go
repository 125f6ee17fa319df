package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

func init() { toxics.Register("commit_cut", new(CommitCut)) }

// Toxic is one of toxiproxy's faults on a proxy: Type is "latency"
// (attributes latency, jitter in ms), "reset_peer" (timeout), "timeout"
// (timeout; 0 holds the data forever), "limit_data" (bytes), "bandwidth",
// "slow_close", "slicer". Stream is "downstream" (server to client, the
// default) or "upstream"; Toxicity is the share of connections it applies
// to (default 1).
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream,omitempty"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// ToxiProxy is a proxy of Shopify's toxiproxy, run inside the test process
// (its Go packages, no separate server or HTTP API) between the code under
// test and a real server, on a free loopback port. A test adds and removes
// toxics while traffic flows, without touching the shared server.
type ToxiProxy struct {
	p *toxiproxy.Proxy
}

// NewToxiProxy starts a proxy to upstream (host:port); it is stopped when
// t ends.
func NewToxiProxy(t testing.TB, upstream string) *ToxiProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, t.Name(), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy to %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &ToxiProxy{p: p}
}

// Addr is the proxy's host:port, for the client under test.
func (x *ToxiProxy) Addr() string {
	x.p.Lock()
	defer x.p.Unlock()
	return x.p.Listen
}

// Add adds a toxic (Toxicity 0 means 1) and returns toxiproxy's own, for
// a test that reads its state (a *CommitCut's Fired).
func (x *ToxiProxy) Add(t testing.TB, tx Toxic) toxics.Toxic {
	t.Helper()
	if tx.Toxicity == 0 {
		tx.Toxicity = 1
	}
	if tx.Stream == "" {
		tx.Stream = "downstream"
	}
	raw, err := json.Marshal(tx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := x.p.Toxics.AddToxicJson(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("add toxic %s: %v", tx.Name, err)
	}
	return w.Toxic
}

// Remove removes the toxic named name.
func (x *ToxiProxy) Remove(t testing.TB, name string) {
	t.Helper()
	if err := x.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// Reset removes every toxic.
func (x *ToxiProxy) Reset() { x.p.Toxics.ResetToxics(context.Background()) }

// Cut closes every open connection (the client sees them reset) and
// accepts new ones on the same address.
func (x *ToxiProxy) Cut(t testing.TB) {
	t.Helper()
	x.p.Stop()
	if err := x.p.Start(); err != nil {
		t.Fatalf("toxiproxy restart: %v", err)
	}
}

// CommitCut is a toxic of our own for PostgreSQL's wire protocol (type
// "commit_cut", on the upstream stream, attribute "times"): it lets a
// COMMIT through to the server and then cuts the connection, so that the
// client never learns whether its transaction committed (pgx reports such
// an error as not safe to retry). At most Times commits are cut, over all
// connections; the others pass.
type CommitCut struct {
	Times int64 `json:"times"`
	seen  atomic.Int64
	fired atomic.Int64
}

// commitMsg is the simple-query message pgx sends to commit (pgx's
// tx.go): 'Q', the length (4 + len("commit") + 1), "commit", NUL.
var commitMsg = []byte("Q\x00\x00\x00\x0bcommit\x00")

// Fired is how many commits were cut.
func (c *CommitCut) Fired() int64 { return c.fired.Load() }

// Pipe passes everything on until a COMMIT goes through, then closes.
func (c *CommitCut) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case chunk := <-stub.Input:
			if chunk == nil {
				stub.Close()
				return
			}
			stub.Output <- chunk
			if bytes.Contains(chunk.Data, commitMsg) && c.seen.Add(1) <= c.Times {
				c.fired.Add(1)
				stub.Close()
				return
			}
		}
	}
}

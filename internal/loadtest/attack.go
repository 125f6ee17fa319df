package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Why an attack ended.
const (
	stopDuration    = "duration"
	stopSoldOut     = "sold_out"
	stopLimits      = "all_at_limit"
	stopInterrupted = "interrupted"
)

// shopperHeader carries the shopper's index on each purchase, copied onto
// its response by tagging: a vegeta Result has the response's headers but
// not the request's, and the per-user check needs to know whose each
// accepted purchase was.
const shopperHeader = "X-Loadtest-Shopper"

// maxBody is how much of an answer is kept: the 202 and problem documents
// are a few hundred bytes.
const maxBody = 4096

// attackResult is what the attack measured.
type attackResult struct {
	tally     *tally
	metrics   vegeta.Metrics
	stoppedBy string
	elapsed   time.Duration
}

// attack fires purchases until the duration ends or nothing more can be
// sold, and tallies every answer. It returns an error only when ctx ends
// (interrupted): a half-run test proves nothing.
func attack(ctx context.Context, tgt target, cfg Config, fx *fixture) (*attackResult, error) {
	atk := vegeta.NewAttacker(attackerOptions(tgt, cfg)...)
	res := &attackResult{tally: newTally(len(fx.shoppers), cfg.PerUserLimit, cfg.Sample), stoppedBy: stopDuration}
	pacer := vegeta.ConstantPacer{Freq: cfg.Rate, Per: time.Second} // Freq 0: no pacing
	bar := newAttackBar(cfg.Progress)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	results := atk.Attack(targeter(tgt, fx, cfg.ForwardedFor), pacer, cfg.Duration, "shop-loadtest")
	interrupted := collect(ctx, atk, results, func(r *vegeta.Result) {
		res.add(r)
		if res.stoppedBy == stopDuration && res.tally.exhausted() {
			res.stoppedBy = stopReason(res.tally)
			atk.Stop() // in-flight requests still finish and are counted
		}
	}, tick.C, func() {
		bar.attackProgress(time.Since(start), cfg.Duration, res.tally.accepted, cfg.Units, res.tally.requests)
	})
	if interrupted {
		res.stoppedBy = stopInterrupted
	}
	bar.finish()
	res.metrics.Close()
	res.elapsed = time.Since(start)
	if res.stoppedBy == stopInterrupted {
		return nil, fmt.Errorf("attack interrupted after %d requests: %w", res.tally.requests, ctx.Err())
	}
	warnLimited(cfg.Warn, res.tally.limited)
	return res, nil
}

// collect hands each result of atk's attack to add until the attack ends,
// and runs every on each tick (a nil tick: never). ctx ending stops the
// attacker once; the loop goes on until the requests in flight end, so
// they are counted too. It tells whether ctx ended the attack.
func collect(ctx context.Context, atk *vegeta.Attacker, results <-chan *vegeta.Result, add func(*vegeta.Result),
	tick <-chan time.Time, every func()) (interrupted bool) {
	interrupt := ctx.Done()
	for results != nil {
		select {
		case r, ok := <-results:
			if !ok {
				results = nil
				continue
			}
			add(r)
		case <-tick:
			every()
		case <-interrupt:
			interrupt, interrupted = nil, true
			atk.Stop()
		}
	}
	return interrupted
}

// warnLimited says what to do when the server's rate limiter answered: a
// load test from one address measures the limiter, not the sale.
func warnLimited(w io.Writer, n int) {
	if n > 0 {
		fmt.Fprintf(w, "warning: %d purchases were rate-limited (429): run the server with SHOP_RATE_LIMIT=0 or a high limit "+
			"(or --forwarded-for with SHOP_TRUSTED_PROXIES=127.0.0.1) to measure the sale, not the limiter\n", n)
	}
}

func (r *attackResult) add(v *vegeta.Result) {
	r.metrics.Add(v)
	shopper, err := strconv.Atoi(v.Headers.Get(shopperHeader))
	if err != nil {
		shopper = -1
	}
	r.tally.add(shopper, int(v.Code), v.Body)
	if v.Code == 0 || v.Code >= 500 {
		r.tally.serverError(shopper, int(v.Code), v.Timestamp, v.Timestamp.Add(v.Latency))
	}
}

func stopReason(t *tally) string {
	if t.soldOut {
		return stopSoldOut
	}
	return stopLimits
}

// attackerOptions: exactly Connections workers with no pacing, or up to
// Connections workers keeping the constant rate. Vegeta spawns workers
// without bound unless capped.
func attackerOptions(tgt target, cfg Config) []func(*vegeta.Attacker) {
	workers := uint64(cfg.Connections)
	if cfg.Rate > 0 {
		workers = min(workers, 10)
	}
	hc := &http.Client{
		Transport: tagging{next: tgt.transport(cfg.Connections)},
		Timeout:   cfg.Timeout,
		// A purchase is never redirected; following one would hide a bug.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return []func(*vegeta.Attacker){
		vegeta.Client(hc),
		vegeta.Workers(workers),
		vegeta.MaxWorkers(uint64(cfg.Connections)),
		vegeta.MaxBody(maxBody),
	}
}

// targeter hands out purchases round-robin over the shoppers, each with a
// fresh Idempotency-Key (a retry is not what is measured). Shoppers keep
// trying after reaching their limit, as real ones do, so the limit is
// tested under load.
func targeter(tgt target, fx *fixture, forwardedFor bool) vegeta.Targeter {
	url := tgt.url("/api/v1/products/" + fx.sku + "/purchase")
	body := []byte(`{"quantity":1}`)
	bearers := make([]string, len(fx.shoppers))
	for i, s := range fx.shoppers {
		bearers[i] = "Bearer " + s.token
	}
	var seq atomic.Uint64
	return func(t *vegeta.Target) error {
		n := seq.Add(1)
		i := int(n % uint64(len(fx.shoppers)))
		t.Method, t.URL, t.Body = http.MethodPost, url, body
		t.Header = http.Header{
			"Authorization":   {bearers[i]},
			"Content-Type":    {"application/json"},
			"Idempotency-Key": {fx.run + "-" + strconv.FormatUint(n, 36)},
			shopperHeader:     {strconv.Itoa(i)},
		}
		if forwardedFor {
			t.Header["X-Forwarded-For"] = []string{fx.shoppers[i].addr}
		}
		return nil
	}
}

// tagging copies the shopper header of each request onto its response.
type tagging struct{ next http.RoundTripper }

func (t tagging) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		resp.Header.Set(shopperHeader, req.Header.Get(shopperHeader))
	}
	return resp, err
}

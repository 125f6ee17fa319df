package loadtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"golang.org/x/sync/errgroup"

	"github.com/shop-oss/shop/internal/room/roomrule"
)

// A waiting-room run (--waiting-room RATE): the round gets a room that
// opens JoinWindow before the sale, every shopper joins (solving the
// challenge when there is one), follows its ticket's event stream (or
// reads its ticket again and again, Wait "poll") until admitted, and
// buys with its pass; a few first try without one. Afterwards the early
// order is checked against the published seed and the entry list.

// RoomConfig is a waiting-room run's settings.
type RoomConfig struct {
	AdmitPerSecond int
	ChallengeBits  int
	PassTTL        time.Duration
	// JoinWindow is how long before the sale starts the room opens: who
	// joins in it is early (shuffled).
	JoinWindow time.Duration
	// MaxPoll is the longest a waiting shopper waits between two reads
	// of its ticket (0: maxTicketPoll).
	MaxPoll time.Duration
	// Wait is how a waiting shopper learns of its turn: WaitEvents (also
	// "") or WaitPoll.
	Wait string
}

// RoomConfig.Wait's values.
const (
	// WaitEvents follows the ticket's event stream (events_url).
	WaitEvents = "events"
	// WaitPoll reads the ticket again about when its turn is due.
	WaitPoll = "poll"
)

// A waiting shopper reads its ticket again after about the time its
// turn is due (eta_seconds, or position / admit_per_second), at least
// minTicketPoll and at most maxTicketPoll later: thousands of shoppers
// polling every 250 ms were a load of their own, larger than the
// purchases the room lets through. Before starts_at (no position yet) it
// waits until the sale starts plus its own share of the longest wait, at
// most that wait: every early shopper reading at starts_at, just as
// the first admitted ones buy, was a burst of thousands of reads.
const (
	minTicketPoll = 100 * time.Millisecond // the room admits on ticks of about this
	// maxTicketPoll is the default of RoomConfig.MaxPoll.
	maxTicketPoll = 2 * time.Second
)

// passlessTries is how many shoppers, once admitted, first try to buy
// without their pass (each must be refused 403 pass_required, buying
// nothing).
const passlessTries = 10

// RoomStats is what the room did, for the report.
type RoomStats struct {
	AdmitPerSecond int     `json:"admit_per_second"`
	ChallengeBits  int     `json:"challenge_bits"`
	Joined         int     `json:"joined"`
	Early          int     `json:"early"`
	JoinMs         Latency `json:"join_latency_ms"`
	// JoinRetries counts joins sent again after a 503 or 429.
	JoinRetries int `json:"join_retries"`
	// Timeline is the purchases by when they were sent, in spans of
	// 250 ms from starts_at: where a slow tail came from.
	Timeline    []Span  `json:"purchase_timeline"`
	TicketReads uint64  `json:"ticket_reads"`
	TicketMs    Latency `json:"ticket_latency_ms"`
	// Wait is RoomConfig.Wait; StreamOpens and StreamEvents count the
	// ticket streams opened and the events they brought, FirstEventMs the
	// time from opening a stream to its first event.
	Wait         string  `json:"wait"`
	StreamOpens  int     `json:"stream_opens"`
	StreamEvents int     `json:"stream_events"`
	FirstEventMs Latency `json:"first_event_latency_ms"`
	// SolveMs is the load generator's time per challenge solved.
	SolveMs  float64 `json:"solve_ms"`
	Admitted int     `json:"admitted"`
	// AdmittedPerSec is the admissions over the span from starts_at to
	// the last admission, as the server's entry list dates them.
	AdmittedPerSec float64 `json:"admitted_per_sec"`
	// PasslessRefused counts purchases without a pass answered 403
	// pass_required, of PasslessTries.
	PasslessTries   int  `json:"passless_tries"`
	PasslessRefused int  `json:"passless_refused"`
	FairOrder       bool `json:"fair_order"`
}

// roomRun carries the room phase's measurements.
type roomRun struct {
	mu           sync.Mutex
	join, ticket vegeta.Metrics
	joinRetries  int
	firstEvent   vegeta.Metrics
	// timeline holds each purchase's send time from starts_at and its
	// latency (guarded by roomAttack's mu, as its tally).
	timeline            []timed
	opens, events       int
	solve               time.Duration
	solved              int
	passless, refusedNP int
	startsAt            time.Time
}

func seedRoom(ctx context.Context, c *client, fx *fixture, cfg Config) (time.Time, error) {
	starts := time.Now().Add(cfg.Room.JoinWindow).UTC().Truncate(time.Second).Add(time.Second)
	settings := map[string]any{"admit_per_second": cfg.Room.AdmitPerSecond, "challenge_bits": cfg.Room.ChallengeBits,
		"pass_ttl_seconds": int(cfg.Room.PassTTL / time.Second)}
	body := map[string]any{"quantity": cfg.Units, "per_user_limit": cfg.PerUserLimit,
		"starts_at": starts.Format(time.RFC3339), "waiting_room": settings}
	var s stock
	if err := c.do(ctx, http.MethodPut, stockPath(fx.sku), fx.admin, body, &s); err != nil {
		return starts, fmt.Errorf("seed stock with a waiting room: %w", explainLimited(err))
	}
	return starts, nil
}

// roomTicket is the part of a ticket the shoppers read.
type roomTicket struct {
	EntryID    string   `json:"entry_id"`
	State      string   `json:"state"`
	Position   *int64   `json:"position"`
	ETASeconds *float64 `json:"eta_seconds"`
	Pass       *string  `json:"pass"`
	EventsURL  string   `json:"events_url"`
}

// ended says whether t is final: nothing more to wait for.
func ended(t roomTicket) bool {
	return t.State == "admitted" || t.State == "sold_out" || t.State == "expired"
}

// ticketWait is how long a waiting shopper waits before reading its
// ticket t again, at now, in a room admitting admit a second whose sale
// starts at starts; spread (0 to 1) is the shopper's own share of
// maxPoll, added to the wait for starts_at.
// A maxPoll of 0 is maxTicketPoll.
func ticketWait(t roomTicket, admit int, starts, now time.Time, spread float64, maxPoll time.Duration) time.Duration {
	if maxPoll <= 0 {
		maxPoll = maxTicketPoll
	}
	switch {
	case t.ETASeconds != nil:
		return min(max(time.Duration(*t.ETASeconds*float64(time.Second)), minTicketPoll), maxPoll)
	case t.Position != nil && admit > 0:
		return min(max(time.Duration(*t.Position)*time.Second/time.Duration(admit), minTicketPoll), maxPoll)
	case now.Before(starts):
		return min(starts.Sub(now)+time.Duration(spread*float64(maxPoll)), maxPoll)
	default:
		return minTicketPoll
	}
}

// spreadOf is shopper i's share (0 to 1) of a spread: the same each run,
// even over the shoppers whatever their number.
func spreadOf(i int) float64 { return math.Mod(float64(i)*0.6180339887498949, 1) }

type roomChallenge struct {
	Challenge string `json:"challenge"`
	Bits      int    `json:"bits"`
}

// timed is one purchase: sent at from starts_at, answered in latency.
type timed struct{ at, latency time.Duration }

// Span is the purchases sent in one span of time of a room run.
type Span struct {
	FromMs    int64   `json:"from_ms"` // from starts_at
	Purchases int     `json:"purchases"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
}

// timelineSpan is the length of the room report's timeline spans.
const timelineSpan = 250 * time.Millisecond

// timeline groups ts by send time into spans of w from starts_at: when
// the slow purchases of a room run were sent.
func timeline(ts []timed, w time.Duration) []Span {
	by := map[int64][]time.Duration{}
	for _, t := range ts {
		k := int64(math.Floor(float64(t.at) / float64(w)))
		by[k] = append(by[k], t.latency)
	}
	keys := make([]int64, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Span, 0, len(keys))
	for _, k := range keys {
		l := by[k]
		slices.Sort(l)
		q := func(p float64) float64 { return ms(l[int(math.Ceil(p*float64(len(l))))-1]) }
		out = append(out, Span{FromMs: (time.Duration(k) * w).Milliseconds(), Purchases: len(l), P50: q(0.5), P99: q(0.99),
			Max: ms(l[len(l)-1])})
	}
	return out
}

// roomAttack runs every shopper through the room and its purchases, and
// tallies the purchases as attack does. Every shopper waits at once; at
// most Connections requests are in flight, over as many connections. A
// shopper following its ticket's stream also holds a connection of its
// own while it waits, on the streams' own transport, so that thousands
// of streams never take the requests' connections.
func roomAttack(ctx context.Context, tgt target, cfg Config, fx *fixture, starts time.Time) (*attackResult, *roomRun, error) {
	res := &attackResult{tally: newTally(len(fx.shoppers), cfg.PerUserLimit, cfg.Sample), stoppedBy: stopDuration}
	rr := &roomRun{startsAt: starts}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc := &http.Client{Transport: tgt.transport(cfg.Connections), Timeout: cfg.Timeout, CheckRedirect: noRedirect}
	// No Timeout: a stream lasts the whole wait, bounded by the deadline.
	streams := &http.Client{Transport: tgt.transport(len(fx.shoppers)), CheckRedirect: noRedirect}
	deadline := starts.Add(cfg.Duration)
	var mu sync.Mutex // guards res
	g, gctx := errgroup.WithContext(ctx)
	begin := time.Now()
	for i := range fx.shoppers {
		g.Go(func() error {
			return shopperInRoom(gctx, hc, streams, tgt, cfg, fx, i, deadline, rr, func(v *vegeta.Result) {
				mu.Lock()
				defer mu.Unlock()
				res.add(v)
				rr.timeline = append(rr.timeline, timed{at: v.Timestamp.Sub(starts), latency: v.Latency})
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	res.metrics.Close()
	rr.join.Close()
	rr.ticket.Close()
	rr.firstEvent.Close()
	res.elapsed = time.Since(begin)
	if res.tally.soldOut {
		res.stoppedBy = stopSoldOut
	}
	warnLimited(cfg.Warn, res.tally.limited)
	return res, rr, nil
}

// shopperInRoom is one shopper: join, wait for its turn, buy with the pass.
func shopperInRoom(ctx context.Context, hc, streams *http.Client, tgt target, cfg Config, fx *fixture, i int,
	deadline time.Time, rr *roomRun, purchase func(*vegeta.Result)) error {
	s := fx.shoppers[i]
	call := func(method, path string, body any, header http.Header) (*vegeta.Result, error) {
		return roomCall(ctx, hc, tgt, s, i, cfg.ForwardedFor, method, path, body, header)
	}
	queue := "/api/v1/products/" + fx.sku + "/queue"
	join := map[string]any{} // the server wants a JSON object, empty without a challenge
	if cfg.Room.ChallengeBits > 0 {
		r, err := call(http.MethodGet, queue+"/challenge", nil, nil)
		if err != nil || r.Code != http.StatusOK {
			return fmt.Errorf("shopper %d: challenge: %v %s", i, err, bodyOf(r))
		}
		var ch roomChallenge
		_ = json.Unmarshal(r.Body, &ch)
		t0 := time.Now()
		nonce := roomrule.Solve(ch.Challenge, ch.Bits) // this process pays, not the server
		rr.mu.Lock()
		rr.solve += time.Since(t0)
		rr.solved++
		rr.mu.Unlock()
		join = map[string]any{"challenge": ch.Challenge, "nonce": nonce}
	}
	r, err := joinRoom(ctx, call, queue, join, i, rr)
	if err != nil || (r.Code != http.StatusCreated && r.Code != http.StatusOK) {
		return fmt.Errorf("shopper %d: join: %v %s", i, err, bodyOf(r))
	}
	rr.mu.Lock()
	rr.join.Add(r)
	rr.mu.Unlock()
	var joined roomTicket
	_ = json.Unmarshal(r.Body, &joined)
	w := ticketWaiter{cfg: cfg, i: i, queue: queue, deadline: deadline, rr: rr, call: call,
		open: func(ctx context.Context, url string) (*http.Response, error) {
			return openStream(ctx, streams, tgt, s, cfg.ForwardedFor, url)
		}}
	var t roomTicket
	if cfg.Room.Wait == WaitPoll || joined.EventsURL == "" {
		t, err = w.poll(ctx)
	} else {
		t, err = w.follow(ctx, joined.EventsURL)
	}
	if err != nil || t.State != "admitted" {
		return err
	}
	if i < passlessTries { // while the sale is open: refused for want of the pass alone
		if err := buyWithoutPass(fx, rr, call, purchase); err != nil {
			return err
		}
	}
	return buyWithPass(ctx, cfg, fx, i, *t.Pass, call, purchase)
}

// joinTries bounds a shopper's joins answered 503 or 429: a crowd
// joining at once can outrun the server for a moment, and a real client
// tries again shortly, as the answer asks.
const joinTries = 5

// joinRoom joins the room, again after a spread, doubling backoff while
// the answer is 503 or 429; the same body each time (a join that did run
// answers the same ticket).
func joinRoom(ctx context.Context, call func(string, string, any, http.Header) (*vegeta.Result, error),
	queue string, body any, i int, rr *roomRun) (*vegeta.Result, error) {
	for try := 0; ; try++ {
		r, err := call(http.MethodPost, queue, body, nil)
		busy := err == nil && (r.Code == http.StatusServiceUnavailable || r.Code == http.StatusTooManyRequests)
		if !busy || try == joinTries-1 {
			return r, err
		}
		rr.mu.Lock()
		rr.joinRetries++
		rr.mu.Unlock()
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(time.Duration(float64(200*time.Millisecond<<try) * (1 + spreadOf(i)))):
		}
	}
}

// buyWithoutPass tries to buy without the pass: it must be refused 403
// pass_required and buy nothing.
func buyWithoutPass(fx *fixture, rr *roomRun, call func(string, string, any, http.Header) (*vegeta.Result, error),
	purchase func(*vegeta.Result)) error {
	r, err := call(http.MethodPost, "/api/v1/products/"+fx.sku+"/purchase", map[string]int{"quantity": 1}, nil)
	if err != nil {
		return err
	}
	rr.mu.Lock()
	rr.passless++
	if r.Code == http.StatusForbidden && problemCode(r.Body) == "pass_required" {
		rr.refusedNP++
	}
	rr.mu.Unlock()
	if r.Code == http.StatusAccepted {
		purchase(r) // counted, so the invariants see the unit it took
	}
	return nil
}

// buyWithPass buys one unit at a time with the pass until a refusal.
func buyWithPass(ctx context.Context, cfg Config, fx *fixture, i int, pass string,
	call func(string, string, any, http.Header) (*vegeta.Result, error), purchase func(*vegeta.Result)) error {
	for n := 0; cfg.PerUserLimit == 0 || n < cfg.PerUserLimit; n++ {
		h := http.Header{"X-Queue-Pass": {pass}, "Idempotency-Key": {fx.run + "-r" + strconv.Itoa(i) + "-" + strconv.Itoa(n)}}
		r, err := call(http.MethodPost, "/api/v1/products/"+fx.sku+"/purchase", map[string]int{"quantity": 1}, h)
		if err != nil {
			return err
		}
		purchase(r)
		if r.Code != http.StatusAccepted || ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// roomCall sends one request as shopper s and returns it as a vegeta
// result (its latency, status and body), tagged with the shopper.
func roomCall(ctx context.Context, hc *http.Client, tgt target, s shopper, i int, forwardedFor bool,
	method, path string, body any, header http.Header) (*vegeta.Result, error) {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, tgt.url(path), in)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if forwardedFor {
		req.Header.Set("X-Forwarded-For", s.addr)
	}
	start := time.Now()
	resp, err := hc.Do(req)
	r := &vegeta.Result{Method: method, URL: path, Timestamp: start, Headers: http.Header{shopperHeader: {strconv.Itoa(i)}}}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.Latency, r.Error = time.Since(start), err.Error()
		return r, nil
	}
	defer resp.Body.Close()
	r.Body, _ = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	r.Latency, r.Code = time.Since(start), uint16(resp.StatusCode)
	return r, nil
}

func bodyOf(r *vegeta.Result) string {
	if r == nil {
		return ""
	}
	return strconv.Itoa(int(r.Code)) + " " + string(r.Body)
}

func problemCode(body []byte) string {
	var p problem
	_ = json.Unmarshal(body, &p)
	return p.Code
}

type roomFairness struct {
	SeedSHA256       string  `json:"seed_sha256"`
	Seed             *string `json:"seed"`
	EarlyEntries     int     `json:"early_entries"`
	EarlyOrderSHA256 *string `json:"early_order_sha256"`
}

// roomEntry is what the check reads of an entry of the room's entry list.
type roomEntry struct {
	EntryID    string     `json:"entry_id"`
	Early      bool       `json:"early"`
	JoinedAt   time.Time  `json:"joined_at"`
	AdmittedAt *time.Time `json:"admitted_at"`
}

// checkRoom reads the entry list and the fairness answer and judges the
// room: the early order is the seed's, admissions kept to the rate, and
// no purchase went through without a pass.
func checkRoom(ctx context.Context, c *client, cfg Config, fx *fixture, rr *roomRun) (*RoomStats, []Invariant, error) {
	var entries []roomEntry
	cursor := ""
	for {
		var page struct {
			Items      []roomEntry `json:"items"`
			NextCursor *string     `json:"next_cursor"`
		}
		path := "/api/v1/admin/products/" + fx.sku + "/queue/entries?limit=1000"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if err := c.do(ctx, http.MethodGet, path, fx.admin, nil, &page); err != nil {
			return nil, nil, fmt.Errorf("room entries: %w", err)
		}
		entries = append(entries, page.Items...)
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	var fair roomFairness
	if err := c.do(ctx, http.MethodGet, "/api/v1/products/"+fx.sku+"/queue/fairness", "", nil, &fair); err != nil {
		return nil, nil, fmt.Errorf("room fairness: %w", err)
	}
	st := &RoomStats{AdmitPerSecond: cfg.Room.AdmitPerSecond, ChallengeBits: cfg.Room.ChallengeBits,
		Joined: len(entries), TicketReads: rr.ticket.Requests,
		JoinMs: latencyOf(rr.join), JoinRetries: rr.joinRetries, Timeline: timeline(rr.timeline, timelineSpan), TicketMs: latencyOf(rr.ticket),
		Wait: orDefault(cfg.Room.Wait, WaitEvents), StreamOpens: rr.opens, StreamEvents: rr.events, FirstEventMs: latencyOf(rr.firstEvent),
		PasslessTries: rr.passless, PasslessRefused: rr.refusedNP}
	if rr.solved > 0 {
		st.SolveMs = ms(rr.solve / time.Duration(rr.solved))
	}
	fairOK, fairDetail := fairOrder(entries, fair)
	st.FairOrder = fairOK
	var last time.Time
	admittedPerSecond := map[int64]int{} // admissions per second since starts_at
	for _, e := range entries {
		if e.Early {
			st.Early++
		}
		if e.AdmittedAt != nil {
			st.Admitted++
			if e.AdmittedAt.After(last) {
				last = *e.AdmittedAt
			}
			admittedPerSecond[int64(e.AdmittedAt.Sub(rr.startsAt)/time.Second)]++
		}
	}
	span := last.Sub(rr.startsAt).Seconds()
	if span > 0 {
		st.AdmittedPerSec = round(float64(st.Admitted) / span)
	}
	bound := roomrule.RateBound(admittedPerSecond, cfg.Room.AdmitPerSecond)
	inv := []Invariant{
		{Name: "R1 early order is the seed's", OK: fairOK, Detail: fairDetail},
		{Name: "R2 admissions within the rate", OK: bound == "", Detail: orDefault(bound,
			fmt.Sprintf("%d admitted over %.1fs at %d/s; no span of T s above rate x (T+1)", st.Admitted, span, cfg.Room.AdmitPerSecond))},
		{Name: "R3 no purchase without a pass", OK: rr.refusedNP == rr.passless,
			Detail: fmt.Sprintf("%d of %d pass-less purchases refused 403 pass_required", rr.refusedNP, rr.passless)},
	}
	return st, inv, nil
}

// fairOrder recomputes the early order from the published seed.
func fairOrder(entries []roomEntry, f roomFairness) (bool, string) {
	if f.Seed == nil || f.EarlyOrderSHA256 == nil {
		return false, "the seed is not published"
	}
	if sum := sha256.Sum256([]byte(*f.Seed)); hex.EncodeToString(sum[:]) != f.SeedSHA256 {
		return false, "the seed does not hash to seed_sha256"
	}
	var early []string
	for _, e := range entries {
		if e.Early {
			early = append(early, e.EntryID)
		}
	}
	want := append([]string(nil), early...)
	key := func(id string) string {
		s := sha256.Sum256([]byte(*f.Seed + ":" + id))
		return hex.EncodeToString(s[:])
	}
	sort.Slice(want, func(i, j int) bool { return key(want[i]) < key(want[j]) })
	h := sha256.New()
	for i, id := range want {
		if early[i] != id {
			return false, fmt.Sprintf("early position %d holds %s, the seed puts %s there", i+1, early[i], id)
		}
		h.Write([]byte(id + "\n"))
	}
	if hex.EncodeToString(h.Sum(nil)) != *f.EarlyOrderSHA256 || len(early) != f.EarlyEntries {
		return false, "early_order_sha256 or early_entries differ from the entry list"
	}
	for i := len(early) + 1; i < len(entries); i++ {
		if entries[i].JoinedAt.Before(entries[i-1].JoinedAt) {
			return false, fmt.Sprintf("late position %d joined before position %d", i+1, i)
		}
	}
	return true, fmt.Sprintf("%d early entries in the seed's order; later ones by arrival", len(early))
}

func latencyOf(m vegeta.Metrics) Latency {
	return Latency{P50: ms(m.Latencies.P50), P90: ms(m.Latencies.P90), P99: ms(m.Latencies.P99),
		Max: ms(m.Latencies.Max), Mean: ms(m.Latencies.Mean)}
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

package e2e

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/testenv"
)

// Waiting-room drills: a roomed sale goes on while Redis restarts or an
// instance running the admitter dies, and afterwards no entry moved, no
// admission was lost or made twice, the rate held, and the sale ends
// with I1–I7 and a clean `shop audit` (whose room checks cover the rate,
// the passes of the buyers and the early order).

// queueTicket is a shopper's ticket as the room answers it.
type queueTicket struct {
	EntryID       string     `json:"entry_id"`
	State         string     `json:"state"`
	Position      *int64     `json:"position"`
	JoinedAt      time.Time  `json:"joined_at"`
	Pass          *string    `json:"pass"`
	PassExpiresAt *time.Time `json:"pass_expires_at"`
}

// queueEntry is one row of the admin's entry list.
type queueEntry struct {
	EntryID    string     `json:"entry_id"`
	UserID     string     `json:"user_id"`
	Position   int64      `json:"position"`
	Early      bool       `json:"early"`
	JoinedAt   time.Time  `json:"joined_at"`
	AdmittedAt *time.Time `json:"admitted_at"`
}

// roomSale is a roomed round and its shoppers. Its calls are bulk ones
// (no OpenAPI check): they are the drill's load, and internal/shop/roomtest
// checks the same exchanges against openapi.yaml.
type roomSale struct {
	s      *shop
	sku    string
	rate   int
	starts time.Time
	tokens []string

	mu     sync.Mutex
	passes map[int]string // shopper → the pass its ticket showed
	done   chan struct{}  // closed when the test ends: shoppers stop
	wg     sync.WaitGroup // the shoppers
}

// roomProduct opens sku with units units (one per shopper) behind a room
// admitting rate a second, starting lead from now (whole seconds).
func roomProduct(t *testing.T, s *shop, sku string, units, rate int, lead time.Duration, tokens []string) *roomSale {
	t.Helper()
	starts := time.Now().Add(lead).UTC().Truncate(time.Second).Add(time.Second)
	s.product(t, sku, 100, map[string]any{"quantity": units, "per_user_limit": 1,
		"starts_at": starts.Format(time.RFC3339), "waiting_room": map[string]any{"admit_per_second": rate}})
	r := &roomSale{s: s, sku: sku, rate: rate, starts: starts, tokens: tokens, passes: map[int]string{},
		done: make(chan struct{})}
	t.Cleanup(func() { close(r.done); r.wg.Wait() }) // before the servers stop
	return r
}

// join enters shopper b in the room.
func (r *roomSale) join(t *testing.T, b int) queueTicket {
	t.Helper()
	res := bulk(t, http.MethodPost, r.s.api+"/products/"+r.sku+"/queue", nil, "Authorization", "Bearer "+r.tokens[b])
	if res.Status != http.StatusCreated {
		t.Fatalf("shopper %d joins: %d %s", b, res.Status, res.Body)
	}
	var tk queueTicket
	res.JSON(t, &tk)
	return tk
}

// ticket reads shopper b's ticket (ok false: a 5xx, recorded for I6).
func (r *roomSale) ticket(t *testing.T, b int) (queueTicket, bool) {
	var tk queueTicket
	sent := time.Now()
	res := bulk(t, http.MethodGet, r.s.api+"/products/"+r.sku+"/queue", nil, "Authorization", "Bearer "+r.tokens[b])
	switch {
	case res.Status >= 500:
		r.s.watch.serverError(sent, res.Status, "ticket of "+r.sku)
		return tk, false
	case res.Status != http.StatusOK:
		t.Errorf("shopper %d's ticket: %d %s", b, res.Status, res.Body)
		return tk, false
	}
	res.JSON(t, &tk)
	return tk, true
}

// admitted reads the room's admitted counter.
func (r *roomSale) admitted(t *testing.T) int64 {
	t.Helper()
	res := bulk(t, http.MethodGet, r.s.api+"/admin/products/"+r.sku+"/queue", nil, "Authorization", "Bearer "+r.s.admin)
	if res.Status != http.StatusOK {
		t.Fatalf("room of %s: %d %s", r.sku, res.Status, res.Body)
	}
	var v struct {
		Admitted int64 `json:"admitted"`
	}
	res.JSON(t, &v)
	return v.Admitted
}

// entries reads the whole entry list, in admission order.
func (r *roomSale) entries(t *testing.T) []queueEntry {
	t.Helper()
	var out []queueEntry
	for cursor := ""; ; {
		u := r.s.api + "/admin/products/" + r.sku + "/queue/entries?limit=1000"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		res := bulk(t, http.MethodGet, u, nil, "Authorization", "Bearer "+r.s.admin)
		if res.Status != http.StatusOK {
			t.Fatalf("entries of %s: %d %s", r.sku, res.Status, res.Body)
		}
		var page struct {
			Items      []queueEntry `json:"items"`
			NextCursor *string      `json:"next_cursor"`
		}
		res.JSON(t, &page)
		out = append(out, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return out
		}
		cursor = *page.NextCursor
	}
}

// buy is shopper b's purchase of one unit with pass, retried with the
// same key while the answer is a 5xx.
func (r *roomSale) buy(t *testing.T, b int, pass string) outcome {
	key := "room-" + strconv.Itoa(b)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var body struct {
			OrderID string `json:"order_id"`
			Code    string `json:"code"`
		}
		sent := time.Now()
		res := bulk(t, http.MethodPost, r.s.api+"/products/"+r.sku+"/purchase", map[string]int{"quantity": 1},
			"Authorization", "Bearer "+r.tokens[b], "Idempotency-Key", key, "X-Queue-Pass", pass)
		res.JSON(t, &body)
		o := outcome{status: res.Status, code: body.Code, orderID: body.OrderID, buyer: b}
		if res.Status < 500 || time.Now().After(deadline) {
			return o
		}
		r.s.watch.serverError(sent, res.Status, "purchase of "+r.sku+" ("+body.Code+")")
	}
}

// run starts every shopper (shopper, below).
func (r *roomSale) run(t *testing.T, tally *sale, gate func(b int)) {
	for b := range r.tokens {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.shopper(t, b, tally, gate) }()
	}
}

// shopper waits in line (reading its ticket every 100 ms) and, once
// admitted, calls gate and buys one unit with its pass; it stops at
// sold_out.
func (r *roomSale) shopper(t *testing.T, b int, tally *sale, gate func(b int)) {
	for deadline := time.Now().Add(50 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-r.done:
			return
		default:
		}
		tk, ok := r.ticket(t, b)
		if !ok {
			continue
		}
		switch tk.State {
		case "admitted":
			r.mu.Lock()
			r.passes[b] = *tk.Pass
			r.mu.Unlock()
			gate(b)
			tally.add(b, 1, r.buy(t, b, *tk.Pass))
			return
		case "sold_out":
			return
		case "expired":
			t.Errorf("shopper %d: the pass expired before it was used", b)
			return
		}
	}
	t.Errorf("shopper %d: still waiting after 50 s", b)
}

// settled reads every ticket and the entry list while no admission
// happens (the admitted counter the same before and after), so that a
// waiting ticket's place in line is position + admitted.
func (r *roomSale) settled(t *testing.T) (admitted int64, tickets []queueTicket, entries []queueEntry) {
	t.Helper()
	for range 50 {
		a := r.admitted(t)
		tickets = make([]queueTicket, len(r.tokens))
		var wg sync.WaitGroup
		var bad atomic.Bool
		for b := range r.tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tk, ok := r.ticket(t, b)
				tickets[b] = tk
				if !ok {
					bad.Store(true)
				}
			}()
		}
		wg.Wait()
		entries = r.entries(t)
		if !bad.Load() && r.admitted(t) == a {
			return a, tickets, entries
		}
	}
	t.Fatal("admissions never paused long enough to read the room")
	return 0, nil, nil
}

// place is a ticket's place in line (1 first), given admitted, or 0 for
// an admitted ticket.
func place(tk queueTicket, admitted int64) int64 {
	if tk.State != "waiting" || tk.Position == nil {
		return 0
	}
	return *tk.Position + admitted
}

// rateHeld checks the entry list's admissions against rate × (T + 1) over
// every span of T seconds (the bucket's bound, exact to the millisecond)
// and that admitted_at is set for exactly the first admitted positions.
func rateHeld(t *testing.T, es []queueEntry, admitted int64, rate int) {
	t.Helper()
	var at []time.Time
	ids := map[string]bool{}
	for i, e := range es {
		if e.Position != int64(i+1) {
			t.Fatalf("entry %d has position %d", i+1, e.Position)
		}
		if ids[e.EntryID] {
			t.Fatalf("entry %s listed twice", e.EntryID)
		}
		ids[e.EntryID] = true
		if (e.AdmittedAt != nil) != (e.Position <= admitted) {
			t.Fatalf("position %d: admitted_at %v with %d admitted", e.Position, e.AdmittedAt, admitted)
		}
		if e.AdmittedAt != nil {
			at = append(at, *e.AdmittedAt)
		}
	}
	if !sort.SliceIsSorted(at, func(i, j int) bool { return at[i].Before(at[j]) }) {
		t.Fatal("admissions are not dated in admission order")
	}
	for i := range at {
		for j := i; j < len(at); j++ {
			span := at[j].Sub(at[i]).Seconds()
			if n := j - i + 1; float64(n) > float64(rate)*(span+1)+1e-9 {
				t.Fatalf("%d admitted within %.3f s at %d/s (bound %.1f)", n, span, rate, float64(rate)*(span+1))
			}
		}
	}
}

// auditClean runs `shop audit` (the rooms' checks included) and wants it
// clean.
func auditClean(t *testing.T, e env) {
	t.Helper()
	if out, stderr, err := runShop(t, e, "audit"); err != nil {
		t.Fatalf("shop audit: %v\n%s%s", err, out, stderr)
	}
}

// Redis (AOF, appendfsync always, as deploy/redis.conf) is killed with
// SIGKILL while a roomed sale is admitting, and restarted on its files
// 2 s later. 20 shoppers joined before starts_at (shuffled), 20 after;
// 30 units at 4 admissions a second. Some admitted shoppers hold their
// pass over the restart. Afterwards every entry reads the same entry id,
// joined_at and place in line, every admission and pass survives (the
// held passes buy), the admitted count is not lower, admission resumes,
// and the sale sells out with I1–I7 and a clean audit.
func TestDrillRoomRedisRestart(t *testing.T) {
	t.Parallel()
	rs := startRedisAOF(t)
	e := newEnv(t)
	e["SHOP_REDIS_URL"] = rs.URL
	s := newShop(t, e)
	const sku, units, early, late, rate = "drill-room-restart", 30, 20, 20, 4
	tokens := s.shoppers(t, early+late, "room-restart")
	r := roomProduct(t, s, sku, units, rate, 2*time.Second, tokens)
	for b := range early {
		if tk := r.join(t, b); tk.Position != nil {
			t.Fatalf("an early entry has a position before starts_at: %+v", tk)
		}
	}
	time.Sleep(time.Until(r.starts.Add(200 * time.Millisecond)))
	for b := early; b < early+late; b++ {
		r.join(t, b)
	}

	// Shoppers with b%3 == 0 admitted before the crash keep their pass
	// until Redis is back.
	var crashed atomic.Bool
	restarted := make(chan struct{})
	var heldMu sync.Mutex
	held := map[int]bool{}
	gate := func(b int) {
		if b%3 == 0 && !crashed.Load() {
			heldMu.Lock()
			held[b] = true
			heldMu.Unlock()
			select {
			case <-restarted:
			case <-r.done:
			}
		}
	}
	tally := newSale()
	r.run(t, tally, gate)

	for r.admitted(t) < 10 {
		time.Sleep(50 * time.Millisecond)
	}
	before, tickets, entries := r.settled(t)
	crashed.Store(true)
	end := s.watch.fault(5 * time.Second)
	rs.Kill()
	killedAt := time.Now()
	time.Sleep(2 * time.Second)
	if err := rs.Restart(); err != nil {
		t.Fatal(err)
	}
	end()
	after, again, entriesAgain := r.settled(t)
	t.Logf("%d admitted before the crash, %d read %s after it", before, after, time.Since(killedAt).Round(time.Millisecond))
	if after < before {
		t.Fatalf("admitted %d after the restart, %d before", after, before)
	}
	for b, tk := range tickets {
		tk2 := again[b]
		if tk2.EntryID != tk.EntryID || !tk2.JoinedAt.Equal(tk.JoinedAt) {
			t.Errorf("shopper %d: entry %s joined %s before, %s joined %s after", b, tk.EntryID, tk.JoinedAt, tk2.EntryID, tk2.JoinedAt)
		}
		switch p := place(tk, before); {
		case tk.State == "admitted":
			if tk2.State != "admitted" || *tk2.Pass != *tk.Pass || !tk2.PassExpiresAt.Equal(*tk.PassExpiresAt) {
				t.Errorf("shopper %d: admitted with pass %s before, %+v after", b, *tk.Pass, tk2)
			}
		case tk.State != "waiting":
			t.Errorf("shopper %d: %s before the crash", b, tk.State)
		case p <= after && tk2.State != "admitted":
			t.Errorf("shopper %d: place %d, %d admitted, but reads %s", b, p, after, tk2.State)
		case p > after && place(tk2, after) != p:
			t.Errorf("shopper %d: place %d before, %d after", b, p, place(tk2, after))
		}
	}
	for i, e := range entries {
		e2 := entriesAgain[i]
		same := e2.EntryID == e.EntryID && e2.UserID == e.UserID && e2.Position == e.Position &&
			e2.Early == e.Early && e2.JoinedAt.Equal(e.JoinedAt)
		if e.AdmittedAt != nil {
			same = same && e2.AdmittedAt != nil && e2.AdmittedAt.Equal(*e.AdmittedAt)
		}
		if !same {
			t.Errorf("entry %d: %+v before, %+v after", i+1, e, e2)
		}
	}
	if len(entriesAgain) != len(entries) {
		t.Errorf("%d entries before, %d after", len(entries), len(entriesAgain))
	}
	if t.Failed() {
		t.FailNow()
	}
	close(restarted)
	for deadline := time.Now().Add(5 * time.Second); r.admitted(t) == after; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no admission within 5 s of the restart (%d admitted)", after)
		}
	}
	r.wg.Wait()
	heldMu.Lock()
	if len(held) == 0 {
		t.Fatal("no shopper held a pass over the restart")
	}
	for b := range held {
		if orders := tally.perBuyer[b]; orders != 1 {
			t.Errorf("shopper %d's pass from before the restart bought %d units", b, orders)
		}
	}
	t.Logf("%d passes held over the restart bought", len(held))
	heldMu.Unlock()
	verify(t, s, e["SHOP_DATABASE_URL"], sku, units, tally, 1)
	rateHeld(t, r.entries(t), r.admitted(t), rate)
	auditClean(t, e)
}

// startRedisAOF is a private redis-server persisting as deploy/redis.conf
// does.
func startRedisAOF(t *testing.T) *testenv.RedisProcess {
	t.Helper()
	return testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "yes",
		"--aof-load-truncated", "yes", "--maxmemory-policy", "noeviction")
}

// Two `shop serve` instances, both running the admitter, admit a roomed
// sale at 10 a second (80 shoppers, 60 units); the second is killed with
// SIGKILL while admissions flow. No entry is admitted twice (admitted_at
// set for exactly positions 1..admitted, every pass distinct), no span of
// T seconds admitted more than rate × (T + 1) over the whole run, the
// survivor keeps admitting, and the sale ends with I1–I7 and a clean
// audit.
func TestDrillRoomServeKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e)
	other, killed := watchedServer(t, s, "admitter")
	const sku, units, shoppers, rate = "drill-room-serve", 60, 80, 10
	tokens := s.shoppers(t, shoppers, "room-serve")
	r := roomProduct(t, s, sku, units, rate, time.Second, tokens)
	for b := range shoppers / 2 {
		r.join(t, b)
	}
	time.Sleep(time.Until(r.starts.Add(200 * time.Millisecond)))
	for b := shoppers / 2; b < shoppers; b++ {
		r.join(t, b)
	}
	tally := newSale()
	r.run(t, tally, func(int) {})
	for r.admitted(t) < 20 {
		time.Sleep(20 * time.Millisecond)
	}
	killed.Store(true)
	_ = other.cmd.Process.Kill()
	<-other.exited
	at := r.admitted(t)
	for deadline := time.Now().Add(2 * time.Second); r.admitted(t) < at+rate; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the survivor admitted %d in 2 s after the kill (at %d/s)", r.admitted(t)-at, rate)
		}
	}
	r.wg.Wait()
	admitted := r.admitted(t)
	t.Logf("%d admitted when the second instance was killed, %d in all", at, admitted)
	rateHeld(t, r.entries(t), admitted, rate)
	seen := map[string]int{}
	for b, p := range r.passes {
		if o, dup := seen[p]; dup {
			t.Fatalf("shoppers %d and %d hold the same pass", o, b)
		}
		seen[p] = b
	}
	if int64(len(r.passes)) > admitted {
		t.Fatalf("%d shoppers saw a pass, %d admitted", len(r.passes), admitted)
	}
	verify(t, s, e["SHOP_DATABASE_URL"], sku, units, tally, 1)
	auditClean(t, e)
}

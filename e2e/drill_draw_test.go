package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A draw whose `shop serve` is killed (SIGKILL) in the middle of its
// captures, at the worst point: the provider has captured a winner and its
// order is written, the entry does not record it yet. A new process
// resumes the draw, and it ends as an uninterrupted draw would by the
// contract's rule, computed here on its own: the same ranks, winners and
// winners_sha256, one paid order per winner persisted once, every loser's
// authorisation cancelled and none captured, then I1–I7.

const (
	drawSKU       = "drill-draw"
	drawUnits     = 30
	drawLimit     = 2
	drawEntrants  = 50
	drawKillAfter = 5 // the capture that kills the first process
)

// drawRow is an entry as PostgreSQL holds it after the draw.
type drawRow struct {
	state                 string
	quantity, rank, won   int
	captured              int64
	cancelled             bool
	orderID               string
	orderRows, orderUnits int
	orderStatus           string
}

// expectedDraw is the contract's outcome of a draw on seed: entries ranked
// by the hex SHA-256 of seed:id, units down the ranks, the winners' digest.
func expectedDraw(seed string, quantity map[string]int, units int) (rank map[string]int, won map[string]int, winners string) {
	ids := make([]string, 0, len(quantity))
	for id := range quantity {
		ids = append(ids, id)
	}
	key := func(id string) string { h := sha256.Sum256([]byte(seed + ":" + id)); return hex.EncodeToString(h[:]) }
	sort.Slice(ids, func(i, j int) bool { return key(ids[i]) < key(ids[j]) })
	rank, won = map[string]int{}, map[string]int{}
	h := sha256.New()
	for i, id := range ids {
		rank[id] = i + 1
		if n := min(quantity[id], units); n > 0 {
			won[id], units = n, units-n
			h.Write([]byte(id + "\n"))
		}
	}
	return rank, won, hex.EncodeToString(h.Sum(nil))
}

func TestDrillDrawKilledMidCapture(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--draw-fault", fmt.Sprintf("after-capture:%d", drawKillAfter))
	s.watch.expectKilled("shop serve")
	s.product(t, drawSKU, 100, map[string]any{"quantity": drawUnits, "per_user_limit": drawLimit,
		"draw": map[string]any{"closes_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	quantity := s.enterDraw(t, s.shoppers(t, drawEntrants, "draw"))

	// The close runs the draw in its request: the process dies under it.
	req, _ := http.NewRequest(http.MethodPost, s.api+"/admin/products/"+drawSKU+"/draw/close", nil)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the close answered %d: the fault never killed the process", resp.StatusCode)
	}
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("shop serve still alive after its fault")
	}
	db := openPool(t, e)
	ctx := context.Background()
	var won int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM draw_entries WHERE state = 'won'`).Scan(&won); err != nil {
		t.Fatal(err)
	}
	if won != drawKillAfter-1 {
		t.Fatalf("%d entries recorded won at the kill, want the %d captures before the killing one", won, drawKillAfter-1)
	}
	// The dead process's runner lock, if it held it, lapses within its
	// TTL (30 s): the new process waits for it, as it would in earnest.
	if ttl, err := s.watch.rdb.PTTL(ctx, e["SHOP_KEY_PREFIX"]+"lock:draws").Result(); err == nil && ttl > 0 {
		t.Logf("the dead process's runner lock lapses in %s", ttl)
	}

	s.server = s.startServer(t)
	s.api = s.server.URL + "/api/v1"
	pub := s.waitDrawn(t)
	rank, wantWon, winners := expectedDraw(pub.Seed, quantity, drawUnits)
	if pub.WinnersSHA256 != winners {
		t.Fatalf("winners_sha256 %s, want %s", pub.WinnersSHA256, winners)
	}
	tally := newSale()
	for id, r := range drawRows(t, db, len(wantWon)) {
		w := wantWon[id]
		switch {
		case r.rank != rank[id]:
			t.Errorf("entry %s: rank %d, want %d", id, r.rank, rank[id])
		case w > 0 && (r.state != "won" || r.won != w || r.captured != int64(w)*100 || r.cancelled):
			t.Errorf("entry %s: %+v, want won %d units, captured %d cents once, not cancelled", id, r, w, w*100)
		case w > 0 && (r.orderRows != 1 || r.orderUnits != w || r.orderStatus != "paid"):
			t.Errorf("entry %s: its order %s has %d rows of %d units, %q, want one of %d, paid", id, r.orderID,
				r.orderRows, r.orderUnits, r.orderStatus, w)
		case w == 0 && (r.state != "lost" || r.captured != 0 || !r.cancelled):
			t.Errorf("entry %s: %+v, want lost, cancelled, nothing captured", id, r)
		}
		if w > 0 {
			tally.units[r.orderID] = w
			tally.paid = append(tally.paid, r.orderID)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	s.check(t, drawSKU, drawUnits, drawLimit, tally)
}

// expectKilled tells the check that the process named name dies on
// purpose.
func (w *watch) expectKilled(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.procs {
		if w.procs[i].name == name {
			w.procs[i].killed = func() bool { return true }
		}
	}
}

// enterDraw enters each shopper in drawSKU's draw, for 1 to drawLimit
// units, and returns the entries' quantities by id.
func (s *shop) enterDraw(t *testing.T, tokens []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i, tok := range tokens {
		q := 1 + i%drawLimit
		r := bulk(t, http.MethodPost, s.api+"/products/"+drawSKU+"/draw/entries",
			map[string]any{"quantity": q, "payment_token": "tok_visa"}, "Authorization", "Bearer "+tok)
		var entry struct {
			ID    string `json:"entry_id"`
			State string `json:"state"`
		}
		r.JSON(t, &entry)
		if r.Status != http.StatusCreated || entry.State != "entered" {
			t.Fatalf("entry %d: %d %s", i, r.Status, r.Body)
		}
		out[entry.ID] = q
	}
	return out
}

type drawAnswer struct {
	State         string `json:"state"`
	Seed          string `json:"seed"`
	WinnersSHA256 string `json:"winners_sha256"`
}

// waitDrawn polls drawSKU's public draw until it is drawn.
func (s *shop) waitDrawn(t *testing.T) drawAnswer {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var d drawAnswer
		call(t, http.MethodGet, s.api+"/products/"+drawSKU+"/draw", nil).JSON(t, &d)
		if d.State == "drawn" {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the draw is %q 90 s after the restart (the runner lock's TTL is 30 s)", d.State)
		}
	}
}

// drawRows waits until the writer has persisted want paid orders, then reads
// every entry of the draw with its order's rows.
func drawRows(t *testing.T, db *pgxpool.Pool, want int) map[string]drawRow {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// A won order reaches the writer as two events, the order and its
		// paid transition: wait for both.
		var n, paid int
		if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE EXISTS (
			SELECT 1 FROM order_transitions t WHERE t.order_id = o.id AND t.status = 'paid')) FROM orders o`).Scan(&n, &paid); err != nil {
			t.Fatal(err)
		}
		if n == want && paid == want {
			break
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("%d orders in PostgreSQL, want one per winner: %d", n, want)
		}
	}
	rows, err := db.Query(ctx, `
SELECT e.id::text, e.state, e.quantity, coalesce(e.rank, 0), e.won_units, e.captured_cents, e.cancelled_at IS NOT NULL,
       coalesce(e.order_id::text, ''), (SELECT count(*) FROM orders o WHERE o.id = e.order_id),
       coalesce((SELECT sum(i.quantity) FROM order_items i WHERE i.order_id = e.order_id), 0),
       coalesce((SELECT t.status FROM order_transitions t WHERE t.order_id = e.order_id), '')
FROM draw_entries e`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]drawRow{}
	var id string
	var r drawRow
	_, err = pgx.ForEachRow(rows, []any{&id, &r.state, &r.quantity, &r.rank, &r.won, &r.captured, &r.cancelled,
		&r.orderID, &r.orderRows, &r.orderUnits, &r.orderStatus}, func() error {
		out[id] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

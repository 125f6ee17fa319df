package roomtest

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/room"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A roomed round over HTTP: the seeding's echo, joins and repeats, the
// ticket, the admin's view and new rate, the entry list's pages before
// the shuffle (in order of joining, no positions: the early order is
// secret until then) and after it, and the fairness answer before and
// after the shuffle, recomputed from the list.
func TestRoomOverHTTP(t *testing.T) {
	f := newFixture(t)
	starts := nextSecond(2 * time.Second)
	rep := f.seed(t, "drop", `{"quantity":10,"starts_at":"`+stamp(starts)+
		`","waiting_room":{"admit_per_second":1,"pass_ttl_seconds":60}}`)
	wr := rep.WaitingRoom
	if wr == nil || wr.AdmitPerSecond != 1 || wr.PassTTLSeconds != 60 || wr.ChallengeBits != 0 ||
		wr.Waiting != 0 || wr.Admitted != 0 || !hex64.MatchString(wr.SeedSHA256) {
		t.Fatalf("seeding's waiting_room %+v", wr)
	}
	round := *rep.RoundID

	before := f.fairness(t, "drop")
	if before.Seed != nil || before.EarlyOrderSHA256 != nil || before.SeedSHA256 != wr.SeedSHA256 ||
		before.RoundID != round || before.SKU != "drop" || before.EarlyEntries != 0 {
		t.Fatalf("fairness before the shuffle %+v, want seed and digest null, seed_sha256 %s", before, wr.SeedSHA256)
	}

	// Five join early, each once; a repeat answers the same ticket.
	var tokens, joined []string
	tickets := map[string]room.Ticket{}
	for range 5 {
		_, tok := f.shopper(t)
		tk := f.join(t, "drop", tok, "", http.StatusCreated)
		if tk.State != "waiting" || tk.Position != nil || tk.Pass != nil || tk.EntryID == "" ||
			!strings.HasPrefix(tk.EventsURL, "/api/v1/products/drop/queue/events/") {
			t.Fatalf("early ticket %+v", tk)
		}
		again := f.join(t, "drop", tok, `{}`, http.StatusOK)
		if again.EntryID != tk.EntryID || again.EventsURL != tk.EventsURL || !again.JoinedAt.Equal(tk.JoinedAt) {
			t.Fatalf("repeat join %+v, want the ticket %+v", again, tk)
		}
		if got := f.ticket(t, "drop", tok); got.EntryID != tk.EntryID || got.State != "waiting" {
			t.Fatalf("GET ticket %+v, want %+v", got, tk)
		}
		if _, dup := tickets[tk.EntryID]; dup {
			t.Fatalf("two shoppers share entry %s", tk.EntryID)
		}
		tokens = append(tokens, tok)
		joined = append(joined, tk.EntryID)
		tickets[tk.EntryID] = tk
	}
	if wr := f.report(t, "drop").WaitingRoom; wr == nil || wr.Waiting != 5 || wr.Admitted != 0 {
		t.Fatalf("report's room after five joins %+v", wr)
	}
	v := f.adminView(t, "drop")
	if v.RoundID != round || v.AdmitPerSecond != 1 || v.Waiting != 5 || v.Admitted != 0 || v.SeedSHA256 != wr.SeedSHA256 {
		t.Fatalf("admin view %+v", v)
	}

	// A new rate is in force at once, in every view.
	var patched room.View
	f.Do(t, http.MethodPatch, "/api/v1/admin/products/drop/queue", f.admin, `{"admit_per_second":2}`).
		Decode(t, http.StatusOK, &patched)
	if patched.AdmitPerSecond != 2 || patched.RoundID != round || patched.Waiting != 5 {
		t.Fatalf("PATCH answered %+v", patched)
	}
	if v := f.adminView(t, "drop"); v.AdmitPerSecond != 2 {
		t.Fatalf("admin view after PATCH %+v", v)
	}
	if wr := f.report(t, "drop").WaitingRoom; wr == nil || wr.AdmitPerSecond != 2 {
		t.Fatalf("report after PATCH %+v", wr)
	}

	// The list pages: 2 + 2 + 1, with a cursor until the last page.
	var p1 entryPage
	f.Do(t, http.MethodGet, "/api/v1/admin/products/drop/queue/entries?limit=2", f.admin, "").Decode(t, http.StatusOK, &p1)
	if len(p1.Items) != 2 || p1.NextCursor == nil {
		t.Fatalf("first page %+v", p1)
	}
	listed := f.allEntries(t, "drop", 2)
	if len(listed) != 5 || !sameEntries(listed[:1], p1.Items[:1]) {
		t.Fatalf("entries %+v", listed)
	}
	if all := f.allEntries(t, "drop", 1000); !sameEntries(all, listed) {
		t.Fatalf("one page %+v, pages of two %+v", all, listed)
	}
	// A page that ends the list has no cursor.
	var whole entryPage
	f.Do(t, http.MethodGet, "/api/v1/admin/products/drop/queue/entries?limit=5", f.admin, "").Decode(t, http.StatusOK, &whole)
	if len(whole.Items) != 5 || whole.NextCursor != nil {
		t.Fatalf("a page of all five: %d entries, next_cursor %v", len(whole.Items), whole.NextCursor)
	}
	var past entryPage
	ofRound, _, _ := strings.Cut(*p1.NextCursor, ".") // "j<round>"
	f.Do(t, http.MethodGet, "/api/v1/admin/products/drop/queue/entries?cursor="+ofRound+".5", f.admin, "").Decode(t, http.StatusOK, &past)
	if len(past.Items) != 0 || past.NextCursor != nil {
		t.Fatalf("past the end: %+v", past)
	}
	// A cursor counts entries in its list's order: one of the other
	// order is refused, not read in this one.
	openapitest.WantProblem(t, f.Do(t, http.MethodGet, "/api/v1/admin/products/drop/queue/entries?cursor="+
		strings.TrimPrefix(ofRound, "j")+".2", f.admin, ""), 400, "invalid_request")
	for i, e := range listed {
		if e.Position != nil || e.EntryID != joined[i] || !e.Early || e.AdmittedAt != nil ||
			!e.JoinedAt.Equal(tickets[e.EntryID].JoinedAt) {
			t.Fatalf("entry %d before the shuffle: %s at position %s, want %s (order of joining) at null",
				i, e.EntryID, position(e.Position), joined[i])
		}
	}

	// After starts_at: the seed is out and the order checks.
	time.Sleep(time.Until(starts) + 1500*time.Millisecond)
	after := f.fairness(t, "drop")
	if after.Seed == nil || after.EarlyOrderSHA256 == nil || !hex64.MatchString(*after.Seed) {
		t.Fatalf("fairness after the shuffle %+v", after)
	}
	if sha(*after.Seed) != wr.SeedSHA256 || after.SeedSHA256 != wr.SeedSHA256 || after.EarlyEntries != 5 {
		t.Fatalf("fairness %+v: sha256(seed) %s, committed %s", after, sha(*after.Seed), wr.SeedSHA256)
	}
	openapitest.WantProblem(t, f.Do(t, http.MethodGet, "/api/v1/admin/products/drop/queue/entries?cursor="+*p1.NextCursor,
		f.admin, ""), 400, "invalid_request")
	listed = f.allEntries(t, "drop", 2)
	ids := make([]string, len(listed))
	for i, e := range listed {
		if e.Position == nil || *e.Position != int64(i+1) {
			t.Fatalf("entry %d after the shuffle: position %s, want %d", i, position(e.Position), i+1)
		}
		ids[i] = e.EntryID
	}
	want := slices.Clone(ids)
	slices.SortFunc(want, func(a, b string) int { return strings.Compare(sha(*after.Seed+":"+a), sha(*after.Seed+":"+b)) })
	if !slices.Equal(ids, want) {
		t.Fatalf("entries in order %v, the seed orders them %v", ids, want)
	}
	var digest strings.Builder
	for _, id := range want {
		digest.WriteString(id + "\n")
	}
	if sha(digest.String()) != *after.EarlyOrderSHA256 {
		t.Fatalf("early_order_sha256 %s, recomputed %s", *after.EarlyOrderSHA256, sha(digest.String()))
	}

	// A late joiner follows the early ones; the admitter lets all in, in
	// order, with passes.
	_, late := f.shopper(t)
	lt := f.join(t, "drop", late, "", http.StatusCreated)
	tokens = append(tokens, late)
	eventually(t, 15*time.Second, "everyone admitted", func() bool {
		wr := f.report(t, "drop").WaitingRoom
		return wr != nil && wr.Admitted == 6 && wr.Waiting == 0
	})
	for _, tok := range tokens {
		tk := f.ticket(t, "drop", tok)
		if tk.State != "admitted" || tk.Pass == nil || *tk.Pass == "" || tk.PassExpiresAt == nil ||
			tk.PassExpiresAt.Before(time.Now().Add(30*time.Second)) {
			t.Fatalf("ticket after admission %+v", tk)
		}
	}
	listed = f.allEntries(t, "drop", 4)
	if len(listed) != 6 || listed[5].EntryID != lt.EntryID || listed[5].Early {
		t.Fatalf("entries %+v, want the late joiner sixth", listed)
	}
	for i, e := range listed {
		if e.AdmittedAt == nil || e.AdmittedAt.Before(starts) || (i > 0 && e.AdmittedAt.Before(*listed[i-1].AdmittedAt)) {
			t.Fatalf("entry %d admitted at %v (starts_at %v)", i, e.AdmittedAt, starts)
		}
	}
	// At most rate × (T + 1) over any span: 2/s here.
	if span := listed[5].AdmittedAt.Sub(*listed[0].AdmittedAt); span < 2*time.Second-100*time.Millisecond {
		t.Errorf("six admitted within %s at 2 a second", span)
	}
}

// A ticket's stream lasts as long as its wait: the server's write
// timeout (10 s for a whole response) does not cut it.
func TestTicketStreamOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := f.Serve(t)
	starts := nextSecond(15 * time.Second)
	f.seed(t, "long", `{"quantity":3,"starts_at":"`+stamp(starts)+`","waiting_room":{"admit_per_second":1}}`)
	_, tok := f.shopper(t)
	tk := f.join(t, "long", tok, "", http.StatusCreated)
	s := openQueueStream(t, base, tk.EventsURL)
	opened := time.Now()
	// Waiting before starts_at, the ticket's eta falls by a second each
	// second: an event a second.
	for time.Since(opened) < 12*time.Second {
		if e := s.next(t, 3*time.Second); e.State != "waiting" {
			t.Fatalf("event %+v", e)
		}
	}
}

// A ticket's events_url streams `event: queue` with the ticket at once,
// and a new event as soon as the entry is admitted.
func TestTicketEvents(t *testing.T) {
	f := newFixture(t)
	base := f.Serve(t)
	starts := nextSecond(2 * time.Second)
	f.seed(t, "live", `{"quantity":3,"starts_at":"`+stamp(starts)+`","waiting_room":{"admit_per_second":1}}`)
	_, tok := f.shopper(t)
	tk := f.join(t, "live", tok, "", http.StatusCreated)

	s := openQueueStream(t, base, tk.EventsURL)
	first := s.next(t, 2*time.Second)
	if first.EntryID != tk.EntryID || first.State != "waiting" || first.Pass != nil || first.EventsURL != tk.EventsURL {
		t.Fatalf("first event %+v, want the ticket %+v", first, tk)
	}
	var admitted room.Ticket
	deadline := time.Now().Add(10 * time.Second)
	for admitted.State != "admitted" {
		if time.Now().After(deadline) {
			t.Fatal("no admission event")
		}
		admitted = s.next(t, time.Until(deadline))
		if admitted.EntryID != tk.EntryID {
			t.Fatalf("event for entry %s, want %s", admitted.EntryID, tk.EntryID)
		}
	}
	if admitted.Pass == nil || admitted.PassExpiresAt == nil {
		t.Fatalf("admission event %+v", admitted)
	}
	// At once: within the admitter's turn and the stream's fast poll.
	now := f.ticket(t, "live", tok)
	if now.Pass == nil || *now.Pass != *admitted.Pass {
		t.Fatalf("ticket %+v, event %+v", now, admitted)
	}
	if time.Since(starts) > 3*time.Second {
		t.Errorf("admitted %s after starts_at", time.Since(starts))
	}

	// Another's stream URL is not this ticket's.
	_, other := f.shopper(t)
	ot := f.join(t, "live", other, "", http.StatusCreated)
	if ot.EventsURL == tk.EventsURL {
		t.Fatal("two shoppers share a stream URL")
	}
	r, err := http.Get(base + tk.EventsURL[:len(tk.EventsURL)-1] + "x")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("a forged token: %d", r.StatusCode)
	}
}

// With challenge_bits, a join answering its challenge gets in (201); its
// repeat needs none (200); the used challenge cannot let another in.
func TestChallengedJoin(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "gated", `{"quantity":5,"starts_at":"`+stamp(nextSecond(time.Hour))+`","waiting_room":{"admit_per_second":5,"challenge_bits":6}}`)
	_, tok := f.shopper(t)
	var c struct {
		Challenge string    `json:"challenge"`
		Bits      int       `json:"bits"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	f.Do(t, http.MethodGet, "/api/v1/products/gated/queue/challenge", tok, "").Decode(t, http.StatusOK, &c)
	if c.Bits != 6 || c.ExpiresAt.Before(time.Now().Add(time.Minute)) || c.ExpiresAt.After(time.Now().Add(2*time.Minute+time.Second)) {
		t.Fatalf("challenge %+v", c)
	}
	body := `{"challenge":"` + c.Challenge + `","nonce":"` + solve(c.Challenge, 6) + `"}`
	tk := f.join(t, "gated", tok, body, http.StatusCreated)
	if again := f.join(t, "gated", tok, "", http.StatusOK); again.EntryID != tk.EntryID {
		t.Fatalf("repeat %+v, want %+v", again, tk)
	}
	if again := f.join(t, "gated", tok, body, http.StatusOK); again.EntryID != tk.EntryID {
		t.Fatalf("repeat with the used challenge %+v, want %+v", again, tk)
	}
	if wr := f.report(t, "gated").WaitingRoom; wr == nil || wr.Waiting != 1 || wr.ChallengeBits != 6 {
		t.Fatalf("report %+v", wr)
	}
}

// A challenge is its round's: one issued before a reseeding is refused
// by the new round's room (403, no entry) though its nonce answers the
// new difficulty, and a round without a room issues none (404), however
// recently the instance served the roomed round before it.
func TestChallengeOfAnotherRound(t *testing.T) {
	f := newFixture(t)
	later := stamp(nextSecond(time.Hour))
	_, tok := f.shopper(t)
	challenge := func(bits int) string {
		var c struct {
			Challenge string `json:"challenge"`
			Bits      int    `json:"bits"`
		}
		f.Do(t, http.MethodGet, "/api/v1/products/turn/queue/challenge", tok, "").Decode(t, http.StatusOK, &c)
		if c.Bits != bits {
			t.Fatalf("challenge %+v, want %d bits", c, bits)
		}
		return c.Challenge
	}
	f.seed(t, "turn", `{"quantity":5,"starts_at":"`+later+`","waiting_room":{"admit_per_second":5,"challenge_bits":6}}`)
	old := challenge(6)
	f.seed(t, "turn", `{"quantity":5,"starts_at":"`+later+`","waiting_room":{"admit_per_second":5,"challenge_bits":2}}`)
	body := `{"challenge":"` + old + `","nonce":"` + solve(old, 6) + `"}` // 6 bits answer 2 too
	openapitest.WantProblem(t, f.Do(t, http.MethodPost, "/api/v1/products/turn/queue", tok, body), 403, "challenge_failed")
	openapitest.WantProblem(t, f.Do(t, http.MethodGet, "/api/v1/products/turn/queue", tok, ""), 404, "not_found")
	if wr := f.report(t, "turn").WaitingRoom; wr == nil || wr.Waiting != 0 {
		t.Fatalf("room after a refused join %+v", wr)
	}

	f.seed(t, "turn", `{"quantity":5,"waiting_room":{"admit_per_second":5}}`)
	challenge(0)
	f.seed(t, "turn", `{"quantity":5}`)
	openapitest.WantProblem(t, f.Do(t, http.MethodGet, "/api/v1/products/turn/queue/challenge", tok, ""), 404, "not_found")
}

// A cursor belongs to its round's list: one given before a new round
// opened is refused, not read in the new room's list.
func TestEntryCursorOfAnotherRound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := `{"quantity":10,"starts_at":"` + stamp(nextSecond(time.Hour)) + `","waiting_room":{"admit_per_second":1}}`
	joinThree := func() {
		for range 3 {
			_, tok := f.shopper(t)
			f.join(t, "rr", tok, `{}`, http.StatusCreated)
		}
	}
	f.seed(t, "rr", body)
	joinThree()
	var p1 entryPage
	f.Do(t, http.MethodGet, "/api/v1/admin/products/rr/queue/entries?limit=2", f.admin, "").Decode(t, http.StatusOK, &p1)
	if p1.NextCursor == nil {
		t.Fatalf("first page %+v", p1)
	}
	f.seed(t, "rr", body)
	joinThree()
	openapitest.WantProblem(t, f.Do(t, http.MethodGet, "/api/v1/admin/products/rr/queue/entries?cursor="+*p1.NextCursor,
		f.admin, ""), http.StatusBadRequest, "invalid_request")
}

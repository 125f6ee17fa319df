package roomtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/openapitest"
)

// Every bad request to the room's routes answers a problem document with
// its status and code, and changes nothing: not the stock report, not the
// room's counters, not its entries.
func TestBadRequestsChangeNothing(t *testing.T) {
	f := newFixture(t)
	later := stamp(nextSecond(time.Hour))
	// room-a: an open room with one entry; room-c: behind a challenge;
	// plain: a round without a room; bare: a product without a round.
	f.seed(t, "room-a", `{"quantity":5,"starts_at":"`+later+`","waiting_room":{"admit_per_second":5}}`)
	f.seed(t, "room-c", `{"quantity":5,"starts_at":"`+later+`","waiting_room":{"admit_per_second":5,"challenge_bits":4}}`)
	f.seed(t, "plain", `{"quantity":5}`)
	f.Product(t, "bare", 1000)
	_, in := f.shopper(t)
	outID, out := f.shopper(t)
	_, other := f.shopper(t)
	inTicket := f.join(t, "room-a", in, "", http.StatusCreated)

	// challenge issues a challenge of room-c to token.
	challenge := func(token string) string {
		var c struct {
			Challenge string `json:"challenge"`
			Bits      int    `json:"bits"`
		}
		f.Do(t, http.MethodGet, "/api/v1/products/room-c/queue/challenge", token, "").Decode(t, http.StatusOK, &c)
		if c.Bits != 4 || len(c.Challenge) != 32 {
			t.Fatalf("challenge %+v, want 32 hex digits of 4 bits", c)
		}
		return c.Challenge
	}
	// wrongNonce is a nonce that does not answer ch.
	wrongNonce := func(ch string) string {
		for i := 0; ; i++ {
			n := fmt.Sprintf("w%d", i)
			if !solves(ch, n, 4) {
				return n
			}
		}
	}
	proof := func(ch, nonce string) string { return fmt.Sprintf(`{"challenge":%q,"nonce":%q}`, ch, nonce) }

	stock := func(sku, body string) func() (string, string, string) {
		return func() (string, string, string) { return "/api/v1/admin/products/" + sku + "/stock", f.admin, body }
	}
	room := func(wr string) func() (string, string, string) {
		return stock("room-a", `{"quantity":7,"waiting_room":`+wr+`}`)
	}
	get := func(path, token string) func() (string, string, string) {
		return func() (string, string, string) { return path, token, "" }
	}
	joinC := func(body func() string) func() (string, string, string) {
		return func() (string, string, string) { return "/api/v1/products/room-c/queue", out, body() }
	}
	fixed := func(path, token, body string) func() (string, string, string) {
		return func() (string, string, string) { return path, token, body }
	}
	const admin = "/api/v1/admin/products/"
	const prod = "/api/v1/products/"
	patch := func(body string) func() (string, string, string) { return fixed(admin+"room-a/queue", f.admin, body) }
	entries := func(q string) func() (string, string, string) { return get(admin+"room-a/queue/entries?"+q, f.admin) }
	goodToken := strings.TrimPrefix(inTicket.EventsURL, "/api/v1/products/room-a/queue/events/")

	cases := []struct {
		name   string
		method string
		req    func() (path, token, body string)
		status int
		code   string
	}{
		{"rate 0", http.MethodPut, room(`{"admit_per_second":0}`), 400, "invalid_request"},
		{"rate 100001", http.MethodPut, room(`{"admit_per_second":100001}`), 400, "invalid_request"},
		{"rate a string", http.MethodPut, room(`{"admit_per_second":"x"}`), 400, "invalid_request"},
		{"rate a fraction", http.MethodPut, room(`{"admit_per_second":1.5}`), 400, "invalid_request"},
		{"rate missing", http.MethodPut, room(`{}`), 400, "invalid_request"},
		{"rate null", http.MethodPut, room(`{"admit_per_second":null}`), 400, "invalid_request"},
		{"pass ttl 9", http.MethodPut, room(`{"admit_per_second":5,"pass_ttl_seconds":9}`), 400, "invalid_request"},
		{"pass ttl 3601", http.MethodPut, room(`{"admit_per_second":5,"pass_ttl_seconds":3601}`), 400, "invalid_request"},
		{"pass ttl a string", http.MethodPut, room(`{"admit_per_second":5,"pass_ttl_seconds":"60"}`), 400, "invalid_request"},
		{"bits -1", http.MethodPut, room(`{"admit_per_second":5,"challenge_bits":-1}`), 400, "invalid_request"},
		{"bits 25", http.MethodPut, room(`{"admit_per_second":5,"challenge_bits":25}`), 400, "invalid_request"},
		{"bits a bool", http.MethodPut, room(`{"admit_per_second":5,"challenge_bits":true}`), 400, "invalid_request"},
		{"room a string", http.MethodPut, room(`"fast"`), 400, "invalid_request"},
		{"room an array", http.MethodPut, room(`[5]`), 400, "invalid_request"},
		{"room a number", http.MethodPut, room(`5`), 400, "invalid_request"},
		{"unknown member", http.MethodPut, room(`{"admit_per_second":5,"pass_ttl":30}`), 400, "invalid_request"},
		{"member misspelt by case", http.MethodPut, room(`{"Admit_Per_Second":5}`), 400, "invalid_request"},
		{"room on an unknown sku", http.MethodPut, stock("nope", `{"quantity":1,"waiting_room":{"admit_per_second":5}}`), 404, "not_found"},

		{"patch rate 0", http.MethodPatch, patch(`{"admit_per_second":0}`), 400, "invalid_request"},
		{"patch rate 100001", http.MethodPatch, patch(`{"admit_per_second":100001}`), 400, "invalid_request"},
		{"patch rate -3", http.MethodPatch, patch(`{"admit_per_second":-3}`), 400, "invalid_request"},
		{"patch rate a string", http.MethodPatch, patch(`{"admit_per_second":"5"}`), 400, "invalid_request"},
		{"patch rate a fraction", http.MethodPatch, patch(`{"admit_per_second":2.5}`), 400, "invalid_request"},
		{"patch rate null", http.MethodPatch, patch(`{"admit_per_second":null}`), 400, "invalid_request"},
		{"patch empty object", http.MethodPatch, patch(`{}`), 400, "invalid_request"},
		{"patch no body", http.MethodPatch, patch(``), 400, "invalid_request"},
		{"patch an array", http.MethodPatch, patch(`[5]`), 400, "invalid_request"},
		{"patch bad JSON", http.MethodPatch, patch(`{"admit_per_second":`), 400, "invalid_request"},
		{"patch two objects", http.MethodPatch, patch(`{"admit_per_second":5}{}`), 400, "invalid_request"},
		{"patch another setting", http.MethodPatch, patch(`{"admit_per_second":5,"challenge_bits":8}`), 400, "invalid_request"},
		{"patch the seed", http.MethodPatch, patch(`{"admit_per_second":5,"seed":"00"}`), 400, "invalid_request"},
		{"patch a room-less round", http.MethodPatch, fixed(admin+"plain/queue", f.admin, `{"admit_per_second":5}`), 404, "not_found"},
		{"patch a product without a round", http.MethodPatch, fixed(admin+"bare/queue", f.admin, `{"admit_per_second":5}`), 404, "not_found"},

		{"entries limit 0", http.MethodGet, entries("limit=0"), 400, "invalid_request"},
		{"entries limit 1001", http.MethodGet, entries("limit=1001"), 400, "invalid_request"},
		{"entries limit x", http.MethodGet, entries("limit=x"), 400, "invalid_request"},
		{"entries limit -1", http.MethodGet, entries("limit=-1"), 400, "invalid_request"},
		{"entries cursor abc", http.MethodGet, entries("cursor=abc"), 400, "invalid_request"},
		{"entries cursor -1", http.MethodGet, entries("cursor=-1"), 400, "invalid_request"},
		{"entries cursor 01", http.MethodGet, entries("cursor=01"), 400, "invalid_request"},
		{"entries cursor +1", http.MethodGet, entries("cursor=%2B1"), 400, "invalid_request"},
		{"entries cursor huge", http.MethodGet, entries("cursor=99999999999999999999"), 400, "invalid_request"},
		{"entries cursor j", http.MethodGet, entries("cursor=j"), 400, "invalid_request"},
		{"entries cursor j01", http.MethodGet, entries("cursor=j01"), 400, "invalid_request"},
		{"entries cursor j-1", http.MethodGet, entries("cursor=j-1"), 400, "invalid_request"},
		{"entries cursor jj1", http.MethodGet, entries("cursor=jj1"), 400, "invalid_request"},
		{"entries cursor without its round", http.MethodGet, entries("cursor=1"), 400, "invalid_request"},
		{"entries cursor round 0", http.MethodGet, entries("cursor=0.1"), 400, "invalid_request"},
		{"entries cursor .01", http.MethodGet, entries("cursor=1.01"), 400, "invalid_request"},
		{"entries cursor two dots", http.MethodGet, entries("cursor=1.1.1"), 400, "invalid_request"},

		{"join challenge a number", http.MethodPost, joinC(func() string { return `{"challenge":1,"nonce":"a"}` }), 400, "invalid_request"},
		{"join nonce a number", http.MethodPost, joinC(func() string { return `{"challenge":"` + challenge(out) + `","nonce":5}` }), 400, "invalid_request"},
		{"join nonce an array", http.MethodPost, joinC(func() string { return `{"nonce":["a"]}` }), 400, "invalid_request"},
		{"join body an array", http.MethodPost, joinC(func() string { return `[]` }), 400, "invalid_request"},
		{"join no challenge", http.MethodPost, joinC(func() string { return `` }), 403, "challenge_failed"},
		{"join empty object", http.MethodPost, joinC(func() string { return `{}` }), 403, "challenge_failed"},
		{"join nonce only", http.MethodPost, joinC(func() string { return `{"nonce":"a"}` }), 403, "challenge_failed"},
		{"join challenge only", http.MethodPost, joinC(func() string { return `{"challenge":"` + challenge(out) + `"}` }), 403, "challenge_failed"},
		{"join never issued", http.MethodPost, joinC(func() string { return proof(strings.Repeat("ab", 16), "x") }), 403, "challenge_failed"},
		{"join malformed challenge", http.MethodPost, joinC(func() string { return proof("../x", "x") }), 403, "challenge_failed"},
		{"join wrong nonce", http.MethodPost, joinC(func() string { ch := challenge(out); return proof(ch, wrongNonce(ch)) }), 403, "challenge_failed"},
		{"join nonce of 65", http.MethodPost, joinC(func() string {
			ch := challenge(out)
			return proof(ch, strings.Repeat("a", 65))
		}), 403, "challenge_failed"},
		{"join nonce with a space", http.MethodPost, joinC(func() string { return proof(challenge(out), "a b") }), 403, "challenge_failed"},
		{"join empty nonce", http.MethodPost, joinC(func() string { return proof(challenge(out), "") }), 403, "challenge_failed"},
		{"join another's challenge", http.MethodPost, joinC(func() string { ch := challenge(other); return proof(ch, solve(ch, 4)) }), 403, "challenge_failed"},
		{"join expired challenge", http.MethodPost, joinC(func() string {
			ch := challenge(out)
			f.Redis.Client.Del(context.Background(), f.Rooms.Keys().Challenge("room-c", ch))
			return proof(ch, solve(ch, 4))
		}), 403, "challenge_failed"},
		{"join reused challenge", http.MethodPost, joinC(func() string {
			ch := challenge(out)
			openapitest.WantProblem(t, f.Do(t, http.MethodPost, "/api/v1/products/room-c/queue", out, proof(ch, wrongNonce(ch))), 403, "challenge_failed")
			return proof(ch, solve(ch, 4))
		}), 403, "challenge_failed"},
		{"join another sku's challenge", http.MethodPost, func() (string, string, string) {
			ch := challenge(out)
			return "/api/v1/products/room-a/queue", out, proof(ch, solve(ch, 4))
		}, 201, ""}, // room-a asks for none: an ordinary join (undone below)

		{"ticket not in the room", http.MethodGet, get(prod+"room-c/queue", out), 404, "not_found"},
		{"ticket no room", http.MethodGet, get(prod+"plain/queue", in), 404, "not_found"},
		{"ticket no round", http.MethodGet, get(prod+"bare/queue", in), 404, "not_found"},
		{"join no round", http.MethodPost, fixed(prod+"bare/queue", out, ``), 409, "sale_not_active"},
		{"join a room-less round", http.MethodPost, fixed(prod+"plain/queue", out, ``), 404, "not_found"},
		{"challenge no room", http.MethodGet, get(prod+"plain/queue/challenge", out), 404, "not_found"},
		{"challenge no round", http.MethodGet, get(prod+"bare/queue/challenge", out), 404, "not_found"},
		{"fairness no room", http.MethodGet, get(prod+"plain/queue/fairness", ""), 404, "not_found"},
		{"admin view no room", http.MethodGet, get(admin+"plain/queue", f.admin), 404, "not_found"},
		{"entries no room", http.MethodGet, get(admin+"bare/queue/entries", f.admin), 404, "not_found"},

		{"stream token short", http.MethodGet, get(prod+"room-a/queue/events/zzz", ""), 404, "not_found"},
		{"stream token not hex", http.MethodGet, get(prod+"room-a/queue/events/"+strings.Repeat("z", 64), ""), 404, "not_found"},
		{"stream token wrong mac", http.MethodGet, get(prod+"room-a/queue/events/"+goodToken[:32]+strings.Repeat("0", 32), ""), 404, "not_found"},
		{"stream token of another room", http.MethodGet, get(prod+"room-c/queue/events/"+goodToken, ""), 404, "not_found"},
		{"stream token no room", http.MethodGet, get(prod+"plain/queue/events/"+goodToken, ""), 404, "not_found"},
		{"stream token too long", http.MethodGet, get(prod+"room-a/queue/events/"+goodToken+"00", ""), 404, "not_found"},
	}
	for _, route := range []struct{ method, path, token, body string }{
		{http.MethodGet, prod + "%s/queue/challenge", out, ""},
		{http.MethodPost, prod + "%s/queue", out, ""},
		{http.MethodGet, prod + "%s/queue", in, ""},
		{http.MethodGet, prod + "%s/queue/fairness", "", ""},
		{http.MethodGet, prod + "%s/queue/events/" + goodToken, "", ""},
		{http.MethodGet, admin + "%s/queue", f.admin, ""},
		{http.MethodPatch, admin + "%s/queue", f.admin, `{"admit_per_second":5}`},
		{http.MethodGet, admin + "%s/queue/entries", f.admin, ""},
	} {
		for _, sku := range []string{"nope", "..", "-x"} {
			cases = append(cases, struct {
				name   string
				method string
				req    func() (path, token, body string)
				status int
				code   string
			}{"unknown sku " + sku + ": " + route.method + " " + route.path, route.method,
				fixed(fmt.Sprintf(route.path, sku), route.token, route.body), 404, "not_found"})
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.state(t, "room-a", "room-c", "plain")
			path, token, body := c.req()
			r := f.Do(t, c.method, path, token, body)
			if c.status == 201 {
				if r.Status != 201 {
					t.Fatalf("got %d %s, want 201", r.Status, r.Body)
				}
				// Undo the entry (an early member holds the user id's
				// bytes at 32..48) so the state check holds.
				early := f.Rooms.Keys().Early("room-a", *f.report(t, "room-a").RoundID)
				u := uuid.MustParse(outID)
				members, err := f.Redis.Client.ZRange(context.Background(), early, 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range members {
					if m[32:48] == string(u[:]) {
						f.Redis.Client.ZRem(context.Background(), early, m)
					}
				}
				if after := f.state(t, "room-a", "room-c", "plain"); after != before {
					t.Errorf("the state changed:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				return
			}
			openapitest.WantProblem(t, r, c.status, c.code)
			if after := f.state(t, "room-a", "room-c", "plain"); after != before {
				t.Errorf("the state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	// The shopper who failed every challenge is in no room; the one who
	// joined is where it was.
	openapitest.WantProblem(t, f.Do(t, http.MethodGet, prod+"room-c/queue", out, ""), 404, "not_found")
	if got := f.ticket(t, "room-a", in); got.EntryID != inTicket.EntryID {
		t.Errorf("ticket %+v, want entry %s", got, inTicket.EntryID)
	}
}

// A join after the round ended is refused and makes no entry.
func TestJoinAfterTheRoundEnded(t *testing.T) {
	f := newFixture(t)
	ends := nextSecond(time.Second)
	f.seed(t, "brief", `{"quantity":5,"ends_at":"`+stamp(ends)+`","waiting_room":{"admit_per_second":5}}`)
	_, early := f.shopper(t)
	_, late := f.shopper(t)
	f.join(t, "brief", early, "", http.StatusCreated)
	time.Sleep(time.Until(ends) + 100*time.Millisecond)
	before := f.report(t, "brief")
	openapitest.WantProblem(t, f.Do(t, http.MethodPost, "/api/v1/products/brief/queue", late, ""), 409, "sale_not_active")
	openapitest.WantProblem(t, f.Do(t, http.MethodGet, "/api/v1/products/brief/queue", late, ""), 404, "not_found")
	after := f.report(t, "brief")
	if before.WaitingRoom == nil || after.WaitingRoom == nil ||
		after.WaitingRoom.Waiting+after.WaitingRoom.Admitted != 1 {
		t.Errorf("room before %+v, after %+v: want the one entry", before.WaitingRoom, after.WaitingRoom)
	}
	// Once the room is recorded (its entries leave Redis) the report's
	// counters still count its one entry, admitted or not.
	eventually(t, 15*time.Second, "the room recorded", func() bool {
		var n int
		err := f.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM queue_rooms WHERE round_id = $1`, *after.RoundID).Scan(&n)
		return err == nil && n == 1
	})
	time.Sleep(200 * time.Millisecond) // the Redis side follows the record
	recorded := f.report(t, "brief").WaitingRoom
	if recorded == nil || recorded.Waiting < 0 || recorded.Admitted < 0 || recorded.Waiting+recorded.Admitted != 1 {
		t.Errorf("room once recorded %+v, want its one entry counted", recorded)
	}
}

// PATCH changes the admission rate and nothing else, so a body with any
// other member (a setting it cannot change, a misspelling) is refused
// with each such member named, rather than answered 200 having quietly
// changed nothing; the room is as it was.
func TestPatchRefusesOtherFields(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "knobs", `{"quantity":5,"starts_at":"`+stamp(nextSecond(time.Hour))+`","waiting_room":{"admit_per_second":5}}`)
	for _, c := range []struct {
		name, body string
		fields     []string
	}{
		{"seed", `{"admit_per_second":7,"seed":"00"}`, []string{"seed"}},
		{"challenge_bits", `{"admit_per_second":7,"challenge_bits":8}`, []string{"challenge_bits"}},
		{"pass_ttl_seconds", `{"admit_per_second":7,"pass_ttl_seconds":60}`, []string{"pass_ttl_seconds"}},
		{"misspelt by case", `{"Admit_Per_Second":7}`, []string{"Admit_Per_Second"}},
		{"two others", `{"admit_per_second":7,"x":null,"a":{}}`, []string{"a", "x"}},
		{"another alone", `{"paused":true}`, []string{"admit_per_second", "paused"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.state(t, "knobs")
			r := f.Do(t, http.MethodPatch, "/api/v1/admin/products/knobs/queue", f.admin, c.body)
			openapitest.WantProblem(t, r, 400, "invalid_request")
			var p struct{ Errors []struct{ Field string } }
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.fields) {
				t.Errorf("errors name %v, want %v: %s", got, c.fields, r.Body)
			}
			if after := f.state(t, "knobs"); after != before {
				t.Errorf("the state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

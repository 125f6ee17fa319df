package room

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/room/roomrule"
)

var (
	//go:embed join.lua
	joinLua    string
	joinScript = redis.NewScript(joinLua)
)

// Ticket states (docs/api.md).
const (
	StateWaiting  = "waiting"
	StateAdmitted = "admitted"
	StateExpired  = "expired"
	StateSoldOut  = "sold_out"
)

// Ticket is a shopper's view of its entry.
type Ticket struct {
	EntryID       string     `json:"entry_id"`
	State         string     `json:"state"`
	Position      *int64     `json:"position"`
	ETASeconds    *int64     `json:"eta_seconds"`
	JoinedAt      time.Time  `json:"joined_at"`
	Pass          *string    `json:"pass"`
	PassExpiresAt *time.Time `json:"pass_expires_at"`
	EventsURL     string     `json:"events_url"`

	// at is the entry's place; round the room's; pass the pass hash's
	// record of its pass, expired too (place.go).
	at    place
	round int64
	pass  passInfo
}

// Proof is a join's answer to its challenge.
type Proof struct {
	Challenge, Nonce string
}

// joinTrip is a join's or a ticket read's one trip: the request's
// checks, then join.lua.
var joinTrip = onetrip.NewStep(joinLua)

// JoinLua is join.lua, as it runs alone.
func JoinLua() string { return joinLua }

// Join enters user in the room of sku's live round, or answers the entry
// it has (created false). checks, when set, run in the same script call
// (onetrip.Of). Errors: ErrNoRoom, ErrSaleNotActive, ErrChallengeFailed, a
// refusal of the checks, or a 503.
func (s *Service) Join(ctx context.Context, sku, user string, proof *Proof, checks *onetrip.Checks) (Ticket, bool, error) {
	return s.entry(ctx, sku, user, "join", proof, checks)
}

// TicketOf answers user's entry in the room of sku's live round (checks
// as for Join). Errors: ErrNoRoom, ErrNotInRoom, a refusal of the
// checks, or a 503.
func (s *Service) TicketOf(ctx context.Context, sku, user string, checks *onetrip.Checks) (Ticket, error) {
	t, _, err := s.entry(ctx, sku, user, "read", nil, checks)
	return t, err
}

// entry runs join.lua once, or twice when the instance's view of the
// live round was stale.
func (s *Service) entry(ctx context.Context, sku, user, mode string, proof *Proof, checks *onetrip.Checks) (Ticket, bool, error) {
	u, err := parseUser(user)
	if err != nil {
		return Ticket{}, false, err
	}
	for attempt := 0; ; attempt++ {
		live, ok, err := s.live(ctx, sku, attempt > 0)
		if err != nil {
			return Ticket{}, false, err
		}
		if !ok {
			if mode == "join" {
				return Ticket{}, false, ErrSaleNotActive
			}
			return Ticket{}, false, ErrNoRoom
		}
		if live.Room == nil {
			return Ticket{}, false, ErrNoRoom
		}
		if t, ok := s.fromSnapshot(sku, u, live); ok {
			// Far back, or admitted with a pass this instance has read:
			// what Redis would answer is the snapshot's; only the request's
			// checks need Redis.
			if err := checks.Settle(); err != nil {
				return Ticket{}, false, err
			}
			return t, false, nil
		}
		keys, args := s.joinCall(sku, live, u, user, mode, proof)
		reply, err := s.runJoin(ctx, checks, keys, args)
		if err != nil {
			return Ticket{}, false, err
		}
		switch reply[0] {
		case "stale":
			if attempt == 0 {
				continue
			}
			return Ticket{}, false, errUnavailable
		case "no_room":
			s.state.forget(sku)
			return Ticket{}, false, ErrNoRoom
		case "ended":
			return Ticket{}, false, ErrSaleNotActive
		case "none":
			return Ticket{}, false, ErrNotInRoom
		case "challenge":
			return Ticket{}, false, ErrChallengeFailed
		case "ok":
			t, err := s.ticket(sku, u, live, reply)
			if err == nil {
				s.placed(sku, live, u, t.at, t.pass)
			}
			return t, reply[1] == "1", err
		}
		return Ticket{}, false, fmt.Errorf("waiting room: join answered %q", reply)
	}
}

// runJoin runs join.lua: after checks in the same call when they have
// not run, else alone.
func (s *Service) runJoin(ctx context.Context, checks *onetrip.Checks, keys []string, args []any) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if checks != nil {
		reply, ran, err := checks.Run(ctx, joinTrip, keys, args)
		if ran {
			if r := checks.Refusal(); r != nil && errors.Is(err, r) {
				return nil, r // the window's or the session's answer
			}
			if err != nil {
				return nil, storeError("join", err)
			}
			return replyStrings(reply)
		}
	}
	reply, err := joinScript.Run(ctx, s.rdb, keys, args...).StringSlice()
	if err != nil {
		return nil, storeError("join", err)
	}
	return reply, nil
}

// replyStrings reads a script reply of strings, as StringSlice does.
func replyStrings(reply any) ([]string, error) {
	vals, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("waiting room: join answered %v", reply)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		if out[i], ok = v.(string); !ok {
			return nil, fmt.Errorf("waiting room: join answered %v", reply)
		}
	}
	return out, nil
}

// joinCall is the KEYS and ARGV of join.lua for user in live's room.
func (s *Service) joinCall(sku string, live inventory.LiveRound, u uuid.UUID, user, mode string,
	proof *Proof) ([]string, []any) {
	keys := append(s.roomKeys(sku, live.Round), s.keys.Challenge(sku, "none"), s.keys.Joined(sku, live.Round))
	const challengeKey = 6 // KEYS[7] of join.lua
	work := ""
	if proof != nil && mode == "join" {
		work = "bad"
		// Only the form of an issued challenge names a key: another string
		// is refused as one that was never issued.
		if validChallenge(proof.Challenge) {
			keys[challengeKey] = s.keys.Challenge(sku, proof.Challenge)
			if roomrule.Solves(proof.Challenge, proof.Nonce, live.Room.ChallengeBits) {
				work = "ok"
			}
		}
	}
	return keys, []any{live.Round, mode, u[:], user, s.idsOf(sku, live, u).prefix, work}
}

// fromSnapshot answers u's ticket from the instance's snapshot of the
// room when the instance has seen the entry and it is early with the
// shuffle still to come (no position yet), too far back to have been
// admitted since the snapshot was read (sold out or not), or admitted
// with a pass this instance has read.
func (s *Service) fromSnapshot(sku string, u uuid.UUID, live inventory.LiveRound) (Ticket, bool) {
	v := s.state.snapshot(sku, live.Round)
	if v == nil {
		return Ticket{}, false
	}
	d, sh := s.idsOf(sku, live, u), v.shared()
	switch {
	case d.at.rank >= 0 && d.at.rank < v.turn.Total && d.pass.pass != "":
		return s.build(sku, u, live, d.at, sh, d.pass), true
	case d.at.early && d.at.rank < 0 && sh.now < v.starts:
		return s.build(sku, u, live, d.at, sh, passInfo{}), true
	case v.farBack(d.at):
		return s.build(sku, u, live, d.at, sh, passInfo{}), true
	}
	return Ticket{}, false
}

// ticket reads join.lua's answer.
func (s *Service) ticket(sku string, u uuid.UUID, live inventory.LiveRound, r []string) (Ticket, error) {
	if len(r) != 12 {
		return Ticket{}, fmt.Errorf("waiting room: join answered %q", r)
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(r[i], 10, 64); return v }
	sh := shared{early: n(5), admitted: n(6), available: n(7), now: n(8)}
	p := place{early: r[2] == "1", joinedMs: n(3), rank: n(4)}
	if !p.early {
		p.rank += sh.early
	} else if sh.now < startsMs(live) {
		p.rank = -1 // the shuffle has not happened: no position yet
	}
	return s.build(sku, u, live, p, sh, passInfo{pass: r[9], round: r[10], expires: n(11)}), nil
}

// startsMs is live's starts_at in ms (0: none).
func startsMs(live inventory.LiveRound) int64 {
	if live.StartsAt.IsZero() {
		return 0
	}
	return live.StartsAt.UnixMilli()
}

// build is the ticket of u's entry at p when the room is at sh.
func (s *Service) build(sku string, u uuid.UUID, live inventory.LiveRound, p place, sh shared, ps passInfo) Ticket {
	ids := s.idsOf(sku, live, u)
	t := Ticket{
		EntryID:   ids.entryID,
		JoinedAt:  time.UnixMilli(p.joinedMs).UTC(),
		EventsURL: ids.eventsURL,
		round:     live.Round, at: p,
	}
	switch {
	case p.rank >= 0 && p.rank < sh.admitted:
		// Admitted: the pass hash outlives the last pass by a minute, so a
		// missing pass is one that expired.
		t.State = StateExpired
		if ps.pass != "" && ps.round == strconv.FormatInt(live.Round, 10) {
			t.pass = ps
			expires := time.UnixMilli(ps.expires).UTC()
			t.PassExpiresAt = &expires
			if sh.now < ps.expires {
				t.State, t.Pass = StateAdmitted, &ps.pass
				zero := int64(0)
				t.ETASeconds = &zero
			}
		}
	case sh.available <= 0:
		t.State = StateSoldOut
	default:
		t.State = StateWaiting
		wait := max(startsMs(live)-sh.now, 0) / 1000 // the shuffle and the first admission
		if p.rank >= 0 {
			pos := p.rank - sh.admitted + 1
			t.Position = &pos
			wait += int64(math.Ceil(float64(pos) / float64(live.Room.AdmitPerSecond)))
		}
		t.ETASeconds = &wait
	}
	return t
}

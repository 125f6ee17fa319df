package inventory

import (
	"time"

	"github.com/shop-oss/shop/internal/apperr"
)

// A round may be a draw (docs/design/draws.md): its entries and the draw
// itself are internal/draw's; this file seeds and reports it. While a
// round is a draw its sale hash carries draw = 1, and the reservation
// rule refuses it, so nobody buys its units first come, first served.

// MaxDrawWindow is the longest a draw's entries stay open: a card
// authorisation's lifetime.
const MaxDrawWindow = 7 * 24 * time.Hour

// DrawSettings are a draw's settings as seeded.
type DrawSettings struct {
	ClosesAt time.Time
	Seed     string // 32 random bytes in lowercase hex, fixed at seeding
}

// DrawReport is the stock report's "draw".
type DrawReport struct {
	ClosesAt   time.Time `json:"closes_at"`
	State      string    `json:"state"`
	Entries    int64     `json:"entries"`
	Winners    int64     `json:"winners"`
	SeedSHA256 string    `json:"seed_sha256"`
}

// Draw states as reported (the stored draw_state is open, closed or
// drawn; upcoming is an open draw before starts_at, and an open one past
// its closes_at reads closed: it is being drawn).
const (
	DrawUpcoming = "upcoming"
	DrawOpen     = "open"
	DrawClosed   = "closed"
	DrawDrawn    = "drawn"
)

// DrawStateAt is the state of a draw stored as stored, at now.
func DrawStateAt(stored string, startsAt, closesAt, now time.Time) string {
	switch {
	case stored != DrawOpen:
		return stored
	case !startsAt.IsZero() && now.Before(startsAt):
		return DrawUpcoming
	case !now.Before(closesAt):
		return DrawClosed
	}
	return DrawOpen
}

// drawArgs are the seed and restore scripts' room arguments of a draw:
// no room (rate 0), and "draw" where a room's secret goes. A draw has no
// room (the stock PUT refuses both), so the slot is free, and the
// scripts keep their arity.
var drawArgs = []any{0, 0, 0, "", "", "draw"}

type drawBody struct {
	ClosesAt *string `json:"closes_at"`
	unknown  []string
}

var drawMembers = []string{"closes_at"}

// UnmarshalJSON reads the settings and notes any other member.
func (b *drawBody) UnmarshalJSON(data []byte) error {
	type plain drawBody // without this method, so decoding does not recurse
	return decodeSettings(data, (*plain)(b), &b.unknown, drawMembers)
}

// validate reads a draw's settings, reporting each bad field under draw;
// the window's rules are checkDraw's.
func (b *drawBody) validate(bad func(field, msg string)) *DrawSettings {
	if b == nil {
		return nil
	}
	for _, k := range b.unknown {
		bad("draw."+k, "is not a draw setting")
	}
	if b.ClosesAt == nil {
		bad("draw.closes_at", "is required")
		return &DrawSettings{}
	}
	return &DrawSettings{ClosesAt: parseTime(b.ClosesAt, "draw.closes_at", bad)}
}

// checkDraw lists what is wrong with a draw's window and its company:
// closes_at after the entries open (starts_at, or now), before ends_at,
// at most MaxDrawWindow after the opening; no waiting room, one bucket.
func (s Seed) checkDraw(now time.Time) []apperr.FieldError {
	if s.Draw == nil {
		return nil
	}
	var errs []apperr.FieldError
	bad := func(field, msg string) { errs = append(errs, apperr.FieldError{Field: field, Message: msg}) }
	if s.Room != nil {
		bad("draw", "a round cannot be a draw and have a waiting room")
	}
	if s.Buckets > 1 {
		bad("buckets", "a draw's units are not bought first come, first served: buckets must be 1")
	}
	closes := s.Draw.ClosesAt
	if closes.IsZero() {
		return errs // reported by validate
	}
	opens := s.StartsAt
	if opens.IsZero() {
		opens = now
	}
	switch {
	case !closes.After(opens) && s.StartsAt.IsZero():
		bad("draw.closes_at", "must be in the future")
	case !closes.After(opens):
		bad("draw.closes_at", "must be after starts_at")
	case !s.EndsAt.IsZero() && !closes.Before(s.EndsAt):
		bad("draw.closes_at", "must be before ends_at")
	case closes.Sub(opens) > MaxDrawWindow:
		bad("draw.closes_at", "must be at most 7 days after the entries open (starts_at, or now)")
	}
	return errs
}

// columns are a round row's draw_closes_at and draw_seed (NULL: no draw).
func (d *DrawSettings) columns() []any {
	if d == nil {
		return []any{nil, nil}
	}
	return []any{d.ClosesAt, d.Seed}
}

// sameDraw tells whether two seeds ask for the same draw (or none).
func sameDraw(a, b *DrawSettings) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ClosesAt.Truncate(time.Microsecond).Equal(b.ClosesAt.Truncate(time.Microsecond))
}

// report is the draw's part of a stock report (nil: no draw).
func (d *DrawSettings) report(startsAt time.Time, stored string, entries, winners int64, now time.Time) *DrawReport {
	if d == nil {
		return nil
	}
	return &DrawReport{ClosesAt: d.ClosesAt.UTC(), State: DrawStateAt(stored, startsAt, d.ClosesAt, now),
		Entries: entries, Winners: winners, SeedSHA256: SeedSHA(d.Seed)}
}

// drawRow is a round row's draw columns and counts, as Report reads them.
type drawRow struct {
	closes           *time.Time
	seed, state      *string
	entries, winners int64
}

func (r drawRow) report(startsAt time.Time, now time.Time) *DrawReport {
	if r.closes == nil || r.seed == nil || r.state == nil {
		return nil
	}
	d := DrawSettings{ClosesAt: *r.closes, Seed: *r.seed}
	return d.report(startsAt, *r.state, r.entries, r.winners, now)
}

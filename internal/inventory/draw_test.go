package inventory

import (
	"encoding/json"
	"testing"
	"time"
)

// The draw member of a seeding: every rule of its window, its company (no
// waiting room, one bucket) and its shape is a 400 naming the field; good
// ones pass with their closes_at.
func TestDrawBodyValidation(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return `"` + now.Add(d).Format(time.RFC3339) + `"` }
	const day = 24 * time.Hour
	for _, c := range []struct {
		name, body string
		fields     []string // nil: valid
	}{
		{"none", `{"quantity":1}`, nil},
		{"null", `{"quantity":1,"draw":null}`, nil},
		{"in an hour", `{"quantity":1,"draw":{"closes_at":` + at(time.Hour) + `}}`, nil},
		{"7 days from now", `{"quantity":1,"draw":{"closes_at":` + at(7*day) + `}}`, nil},
		{"7 days from starts_at", `{"quantity":1,"starts_at":` + at(day) + `,"draw":{"closes_at":` + at(8*day) + `}}`, nil},
		{"before ends_at", `{"quantity":1,"ends_at":` + at(2*day) + `,"draw":{"closes_at":` + at(day) + `}}`, nil},
		{"limit 0 is 1", `{"quantity":1,"per_user_limit":0,"draw":{"closes_at":` + at(time.Hour) + `}}`, nil},
		{"missing closes_at", `{"quantity":1,"draw":{}}`, []string{"draw.closes_at"}},
		{"null closes_at", `{"quantity":1,"draw":{"closes_at":null}}`, []string{"draw.closes_at"}},
		{"not a time", `{"quantity":1,"draw":{"closes_at":"tomorrow"}}`, []string{"draw.closes_at"}},
		{"out of range", `{"quantity":1,"draw":{"closes_at":"0001-01-01T00:00:00Z"}}`, []string{"draw.closes_at"}},
		{"in the past", `{"quantity":1,"draw":{"closes_at":` + at(-time.Minute) + `}}`, []string{"draw.closes_at"}},
		{"now", `{"quantity":1,"draw":{"closes_at":` + at(0) + `}}`, []string{"draw.closes_at"}},
		{"at starts_at", `{"quantity":1,"starts_at":` + at(day) + `,"draw":{"closes_at":` + at(day) + `}}`, []string{"draw.closes_at"}},
		{"before starts_at", `{"quantity":1,"starts_at":` + at(day) + `,"draw":{"closes_at":` + at(time.Hour) + `}}`, []string{"draw.closes_at"}},
		{"at ends_at", `{"quantity":1,"ends_at":` + at(day) + `,"draw":{"closes_at":` + at(day) + `}}`, []string{"draw.closes_at"}},
		{"after ends_at", `{"quantity":1,"ends_at":` + at(day) + `,"draw":{"closes_at":` + at(2*day) + `}}`, []string{"draw.closes_at"}},
		{"over 7 days", `{"quantity":1,"draw":{"closes_at":` + at(7*day+time.Second) + `}}`, []string{"draw.closes_at"}},
		{"over 7 days from starts_at", `{"quantity":1,"starts_at":` + at(day) + `,"draw":{"closes_at":` + at(8*day+time.Second) + `}}`, []string{"draw.closes_at"}},
		{"with a room", `{"quantity":1,"waiting_room":{"admit_per_second":5},"draw":{"closes_at":` + at(time.Hour) + `}}`, []string{"draw"}},
		{"with buckets", `{"quantity":1,"buckets":2,"draw":{"closes_at":` + at(time.Hour) + `}}`, []string{"buckets"}},
		{"unknown member", `{"quantity":1,"draw":{"closes_at":` + at(time.Hour) + `,"opens_at":` + at(0) + `}}`, []string{"draw.opens_at"}},
		{"misspelt", `{"quantity":1,"draw":{"Closes_At":` + at(time.Hour) + `}}`, []string{"draw.Closes_At"}},
	} {
		b, seed, err := decodeAndValidate(t, c.body, now)
		if c.fields == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			if (seed.Draw != nil) != (b.Draw != nil) {
				t.Errorf("%s: draw %+v", c.name, seed.Draw)
			}
			continue
		}
		wantInvalidFields(t, c.name, err, c.fields)
	}
	for _, body := range []string{`{"quantity":1,"draw":5}`, `{"quantity":1,"draw":{"closes_at":5}}`, `{"quantity":1,"draw":[]}`} {
		var b seedBody
		if err := json.Unmarshal([]byte(body), &b); err == nil {
			t.Errorf("%s: decoded, want a type error", body)
		}
	}
}

// The reported state of a draw at each moment of its life.
func TestDrawStateAt(t *testing.T) {
	t.Parallel()
	starts := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	closes := starts.Add(time.Hour)
	for _, c := range []struct {
		stored string
		starts time.Time
		now    time.Time
		want   string
	}{
		{DrawOpen, starts, starts.Add(-time.Second), DrawUpcoming},
		{DrawOpen, starts, starts, DrawOpen},
		{DrawOpen, time.Time{}, starts, DrawOpen},
		{DrawOpen, starts, closes, DrawClosed},
		{DrawClosed, starts, starts, DrawClosed},
		{DrawDrawn, starts, closes, DrawDrawn},
	} {
		if got := DrawStateAt(c.stored, c.starts, closes, c.now); got != c.want {
			t.Errorf("%s at %v: %s, want %s", c.stored, c.now, got, c.want)
		}
	}
}

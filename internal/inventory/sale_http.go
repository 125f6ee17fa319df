package inventory

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/server"
)

// Bounds of a seeding request.
const (
	maxSeedQuantity = 10_000_000
	maxUserLimit    = 1_000_000
)

// Routes registers the admin stock routes; requireAdmin guards them.
func (s *Sales) Routes(r fiber.Router, requireAdmin fiber.Handler) {
	h := handler{sales: s}
	r.Put("/admin/products/:sku/stock", requireAdmin, h.putStock)
	r.Get("/admin/products/:sku/stock", requireAdmin, h.getStock)
}

type seedBody struct {
	Quantity     *int64  `json:"quantity"`
	PerUserLimit *int64  `json:"per_user_limit"`
	Buckets      *int64  `json:"buckets"`
	StartsAt     *string `json:"starts_at"`
	EndsAt       *string `json:"ends_at"`
	// WaitingRoom: null or absent for none.
	WaitingRoom *roomBody `json:"waiting_room"`
	// Draw: null or absent for none.
	Draw *drawBody `json:"draw"`
}

type roomBody struct {
	AdmitPerSecond *int64 `json:"admit_per_second"`
	PassTTLSeconds *int64 `json:"pass_ttl_seconds"`
	ChallengeBits  *int64 `json:"challenge_bits"`
	// unknown are the object's other members: a misspelt setting must
	// not silently take its default (docs/api.md: anything else is 400).
	unknown []string
}

// roomMembers are the members a waiting_room object may have, spelt
// exactly (encoding/json alone would also take "Admit_Per_Second").
var roomMembers = []string{"admit_per_second", "pass_ttl_seconds", "challenge_bits"}

// UnmarshalJSON reads the settings and notes any other member.
func (b *roomBody) UnmarshalJSON(data []byte) error {
	type plain roomBody // without this method, so decoding does not recurse
	return decodeSettings(data, (*plain)(b), &b.unknown, roomMembers)
}

// decodeSettings decodes a settings member (waiting_room, draw) into v and
// notes in unknown the members not in known, so that validate reports a
// misspelt setting rather than let it quietly take its default.
func decodeSettings(data []byte, v any, unknown *[]string, known []string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err // encoding/json names the field from the body's root
	}
	var err error
	*unknown, err = server.UnknownMembers(data, known...)
	return err
}

// validate reads a room's settings, reporting each bad field under
// waiting_room.
func (b *roomBody) validate(bad func(field, msg string)) *RoomSettings {
	if b == nil {
		return nil
	}
	r := RoomSettings{PassTTL: DefaultPassTTL}
	for _, k := range b.unknown {
		bad("waiting_room."+k, "is not a waiting room setting")
	}
	switch {
	case b.AdmitPerSecond == nil:
		bad("waiting_room.admit_per_second", "is required")
	case *b.AdmitPerSecond < MinAdmitPerSecond || *b.AdmitPerSecond > MaxAdmitPerSecond:
		bad("waiting_room.admit_per_second", admitRateRule)
	default:
		r.AdmitPerSecond = int(*b.AdmitPerSecond)
	}
	if t := b.PassTTLSeconds; t != nil {
		if *t < int64(MinPassTTL/time.Second) || *t > int64(MaxPassTTL/time.Second) {
			bad("waiting_room.pass_ttl_seconds", "must be an integer from 10 to 3600")
		} else {
			r.PassTTL = time.Duration(*t) * time.Second
		}
	}
	if c := b.ChallengeBits; c != nil {
		if *c < 0 || *c > MaxChallengeBits {
			bad("waiting_room.challenge_bits", "must be an integer from 0 to 24")
		} else {
			r.ChallengeBits = int(*c)
		}
	}
	return &r
}

func (h handler) putStock(c *fiber.Ctx) error {
	sku, err := PathSKU(c)
	if err != nil {
		return err
	}
	var b seedBody
	if err := server.Decode(c, &b); err != nil {
		return err
	}
	seed, err := b.validate(time.Now())
	if err != nil {
		return err
	}
	rep, err := h.sales.Open(c.UserContext(), sku, seed)
	if err != nil {
		return err
	}
	return c.Status(http.StatusOK).JSON(rep)
}

func (h handler) getStock(c *fiber.Ctx) error {
	sku, err := PathSKU(c)
	if err != nil {
		return err
	}
	rep, err := h.sales.Report(c.UserContext(), sku)
	if err != nil {
		return err
	}
	return c.JSON(rep)
}

// validate checks every field and reports all that are wrong at once.
func (b seedBody) validate(now time.Time) (Seed, error) {
	var errs []apperr.FieldError
	bad := func(field, msg string) { errs = append(errs, apperr.FieldError{Field: field, Message: msg}) }
	seed := Seed{PerUserLimit: 1}
	switch {
	case b.Quantity == nil:
		bad("quantity", "is required")
	case *b.Quantity < 0 || *b.Quantity > maxSeedQuantity:
		bad("quantity", "must be an integer from 0 to 10000000")
	default:
		seed.Quantity = int(*b.Quantity)
	}
	if b.PerUserLimit != nil {
		if *b.PerUserLimit < 0 || *b.PerUserLimit > maxUserLimit {
			bad("per_user_limit", "must be an integer from 0 (unlimited) to 1000000")
		} else {
			seed.PerUserLimit = int(*b.PerUserLimit)
		}
	}
	seed.Buckets = 1
	if b.Buckets != nil {
		if *b.Buckets < 1 || *b.Buckets > MaxBuckets {
			bad("buckets", "must be an integer from 1 to 64")
		} else {
			seed.Buckets = int(*b.Buckets)
		}
	}
	seed.StartsAt = parseTime(b.StartsAt, "starts_at", bad)
	seed.EndsAt = parseTime(b.EndsAt, "ends_at", bad)
	seed.Room = b.WaitingRoom.validate(bad)
	seed.Draw = b.Draw.validate(bad)
	errs = append(errs, seed.check(now)...)
	if len(errs) > 0 {
		return Seed{}, apperr.Invalid(errs...)
	}
	return seed, nil
}

// The range of sale times (docs/api.md). Before 1970 the live state's Unix
// milliseconds would be negative, which the seed script refuses after the
// round is recorded; past 9999 a time has no RFC 3339 form to answer with.
var (
	minSaleTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	endSaleTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // exclusive
)

const saleTimeRule = "must lie between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"

func inSaleRange(t time.Time) bool { return !t.Before(minSaleTime) && t.Before(endSaleTime) }

// checkWindow lists what is wrong with the sale window; a zero time is an
// absent one.
func (s Seed) checkWindow(now time.Time) []apperr.FieldError {
	var errs []apperr.FieldError
	bad := func(field, msg string) { errs = append(errs, apperr.FieldError{Field: field, Message: msg}) }
	for _, w := range []struct {
		field string
		t     time.Time
	}{{"starts_at", s.StartsAt}, {"ends_at", s.EndsAt}} {
		if !w.t.IsZero() && !inSaleRange(w.t) {
			bad(w.field, saleTimeRule)
		}
	}
	if len(errs) > 0 || s.EndsAt.IsZero() {
		return errs
	}
	if !s.StartsAt.IsZero() && !s.EndsAt.After(s.StartsAt) {
		bad("ends_at", "must be after starts_at")
	} else if !s.EndsAt.After(now) {
		bad("ends_at", "must be in the future")
	}
	return errs
}

// parseTime reads an optional time; one out of range is reported here
// (and returned as absent), since year 1 is also the zero time.
func parseTime(s *string, field string, bad func(string, string)) time.Time {
	if s == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		bad(field, "must be an RFC 3339 time, like 2026-12-01T10:00:00Z")
		return time.Time{}
	}
	if t = t.UTC(); !inSaleRange(t) {
		bad(field, saleTimeRule)
		return time.Time{}
	}
	return t
}

// PathSKU returns the {sku} path parameter, copied (Fiber reuses its
// buffers); a SKU that cannot exist is answered 404 like a missing one.
// Every package serving /products/{sku}/… reads it here, so they all
// answer a bad SKU alike.
func PathSKU(c *fiber.Ctx) (string, error) {
	sku := param(c, "sku")
	if !ValidSKU(sku) {
		return "", ErrProductNotFound
	}
	return sku, nil
}

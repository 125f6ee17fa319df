package inventory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
)

// A round's waiting room settings are the round's: recorded with it,
// opened with it in the same seed script, and written in its sale hash
// (room_* fields), where the purchase scripts see at once that its buyers
// need a pass. The queue itself (entries, admissions, passes) is
// internal/room's. More in docs/design/room.md.

const admitRateRule = "must be an integer from 1 to 100000"

// Bounds of a room's settings (docs/api.md).
const (
	MinAdmitPerSecond = 1
	MaxAdmitPerSecond = 100_000
	MinPassTTL        = 10 * time.Second
	MaxPassTTL        = time.Hour
	DefaultPassTTL    = 2 * time.Minute
	MaxChallengeBits  = 24
)

// RoomSettings are a round's waiting room settings.
type RoomSettings struct {
	AdmitPerSecond int
	PassTTL        time.Duration
	ChallengeBits  int
}

// LiveRoom is the room of a live round, as its sale hash holds it: the
// settings, the committed seed (secret until the round starts) and the
// secret the entries' ids are made with.
type LiveRoom struct {
	RoomSettings
	Seed    string
	SeedSHA string // hex SHA-256 of Seed, public from the seeding
	Secret  string
}

// newLiveRoom draws a room's seed and secret (32 random bytes each, hex).
func newLiveRoom(s RoomSettings) (*LiveRoom, error) {
	seed, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	secret, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	return &LiveRoom{RoomSettings: s, Seed: seed, SeedSHA: SeedSHA(seed), Secret: secret}, nil
}

// SeedSHA is the published commitment to a room's seed: the hex SHA-256
// of the seed string.
func SeedSHA(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// roomArgs are the seed script's room arguments: rate 0 for no room.
func (r *LiveRoom) args() []any {
	if r == nil {
		return []any{0, 0, 0, "", "", ""}
	}
	return []any{r.AdmitPerSecond, r.PassTTL.Milliseconds(), r.ChallengeBits, r.Seed, r.SeedSHA, r.Secret}
}

// columns are a round row's room columns: rate, pass TTL (s), bits,
// seed, secret (all NULL for no room).
func (r *LiveRoom) columns() []any {
	if r == nil {
		return []any{nil, nil, nil, nil, nil}
	}
	return []any{r.AdmitPerSecond, int(r.PassTTL / time.Second), r.ChallengeBits, r.Seed, r.Secret}
}

// roomSettings reads a round row's room columns (nil: no room).
func roomSettings(rate, ttl, bits *int) *RoomSettings {
	if rate == nil || ttl == nil || bits == nil {
		return nil
	}
	return &RoomSettings{AdmitPerSecond: *rate, PassTTL: time.Duration(*ttl) * time.Second, ChallengeBits: *bits}
}

// sameRoom tells whether two seeds ask for the same room (or none).
func sameRoom(a, b *RoomSettings) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// liveRoom reads the room fields of a sale hash (nil: no room).
func liveRoom(m map[string]string) *LiveRoom {
	rate, _ := strconv.Atoi(m["room_rate"])
	if rate <= 0 {
		return nil
	}
	ttl, _ := strconv.ParseInt(m["room_pass_ttl_ms"], 10, 64)
	bits, _ := strconv.Atoi(m["room_bits"])
	return &LiveRoom{
		RoomSettings: RoomSettings{AdmitPerSecond: rate, PassTTL: time.Duration(ttl) * time.Millisecond, ChallengeBits: bits},
		Seed:         m["room_seed"], SeedSHA: m["room_seed_sha"], Secret: m["room_secret"],
	}
}

// RoomReport is the stock report's "waiting_room": the settings and the
// room's counters.
type RoomReport struct {
	AdmitPerSecond int    `json:"admit_per_second"`
	PassTTLSeconds int    `json:"pass_ttl_seconds"`
	ChallengeBits  int    `json:"challenge_bits"`
	Waiting        int64  `json:"waiting"`
	Admitted       int64  `json:"admitted"`
	SeedSHA256     string `json:"seed_sha256"`
}

// Rooms is what the sales ask of the waiting rooms (internal/room's
// Service, handed to NewSalesWithRooms).
type Rooms interface {
	// Counters reads the room of sku's round: entries not yet admitted,
	// and admitted so far (the stock report's).
	Counters(ctx context.Context, sku string, round int64) (waiting, admitted int64, err error)
	// Track learns of a round just opened, with a room or without, so
	// the room's admitter runs it. Open answers its error as a 503 with
	// the round open; the retry of the seeding tells the rooms again.
	Track(ctx context.Context, sku string, r LiveRound) error
}

// roomReport makes the report's room part for round (nil: no room).
func (s *Sales) roomReport(ctx context.Context, sku string, round int64, r *LiveRoom) (*RoomReport, error) {
	if r == nil {
		return nil, nil
	}
	rep := &RoomReport{AdmitPerSecond: r.AdmitPerSecond, PassTTLSeconds: int(r.PassTTL / time.Second),
		ChallengeBits: r.ChallengeBits, SeedSHA256: r.SeedSHA}
	if s.rooms != nil && round > 0 {
		var err error
		if rep.Waiting, rep.Admitted, err = s.rooms.Counters(ctx, sku, round); err != nil {
			return nil, unavailable("waiting room", err)
		}
	}
	return rep, nil
}

// ErrNoRoom: the SKU's live round has no waiting room (or it has no live
// round).
var ErrNoRoom = apperr.NewError(apperr.CodeNotFound, "this product's sale has no waiting room")

// setRoomRateSQL also keeps the highest rate the room has had, which
// shop audit bounds its admissions by.
const setRoomRateSQL = `
UPDATE sale_rounds SET room_admit_per_second = $2,
  room_admit_per_second_max = greatest(coalesce(room_admit_per_second_max, room_admit_per_second), $2)
WHERE id = $1 AND room_admit_per_second IS NOT NULL RETURNING 1`

// setRoomRateScript changes the admission rate of the live round KEYS[1]
// if it is round ARGV[1] and has a room. Returns 1, or 0.
var setRoomRateScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'round') ~= ARGV[1] or not redis.call('HGET', KEYS[1], 'room_rate') then
  return 0
end
redis.call('HSET', KEYS[1], 'room_rate', ARGV[2])
return 1`)

// SetAdmitRate changes the admission rate of sku's live room, in force at
// once: recorded in PostgreSQL, then in the sale hash the admitter reads.
// Errors: ErrProductNotFound, ErrNoRoom, an invalid_request error for a
// rate out of range, ErrRoundSuperseded, or a 503.
func (s *Sales) SetAdmitRate(ctx context.Context, sku string, rate int) error {
	if rate < MinAdmitPerSecond || rate > MaxAdmitPerSecond {
		return apperr.Invalid(apperr.FieldError{Field: "admit_per_second", Message: admitRateRule})
	}
	conn, unlock, err := lockSale(ctx, s.db, sku)
	if err != nil {
		return err
	}
	defer unlock()
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	live, ok, err := s.stock.Live(rctx, sku)
	cancel()
	if err != nil {
		return unavailable("live stock", err)
	}
	if !ok || live.Room == nil {
		if exists, err := s.ProductExists(ctx, sku); err != nil {
			return unavailable("product", err)
		} else if !exists {
			return ErrProductNotFound
		}
		return ErrNoRoom
	}
	dctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var one int
	if err := conn.QueryRow(dctx, setRoomRateSQL, live.Round, rate).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
		return ErrNoRoom
	} else if err != nil {
		return unavailable("record the admission rate", err)
	}
	rctx, cancel = context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	set, err := setRoomRateScript.Run(rctx, s.stock.rdb, []string{s.stock.SaleKey(sku)}, live.Round, rate).Int()
	if err != nil {
		return unavailable("set the admission rate", err)
	}
	if set == 0 {
		return ErrRoundSuperseded
	}
	return nil
}

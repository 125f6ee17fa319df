package room

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/inventory"
)

// Fairness is the public answer that lets anyone check the early order.
type Fairness struct {
	SKU              string  `json:"sku"`
	RoundID          int64   `json:"round_id"`
	SeedSHA256       string  `json:"seed_sha256"`
	Seed             *string `json:"seed"`
	EarlyEntries     int64   `json:"early_entries"`
	EarlyOrderSHA256 *string `json:"early_order_sha256"`
	// Live tells whether this is the room of the SKU's live round (a page
	// shows "join the queue" then), not the last roomed round's.
	Live bool `json:"live"`
}

// clockSlack is how long after starts_at, by this instance's clock, the
// seed is published: by then Redis's clock has passed starts_at too, so
// the early entries are final.
const clockSlack = time.Second

// roundRoom is a roomed round as the reads need it.
type roundRoom struct {
	round        int64
	seed, secret string
	starts       time.Time
	live         *inventory.LiveRoom // nil: not the live round
	settings     inventory.RoomSettings
}

const latestRoomSQL = `
SELECT id, room_seed, room_secret, coalesce(starts_at, seeded_at),
       room_admit_per_second, room_pass_ttl_seconds, room_challenge_bits
FROM sale_rounds WHERE sku = $1 AND room_seed IS NOT NULL AND opened_at IS NOT NULL
ORDER BY id DESC LIMIT 1`

// latestRoom is sku's live room, or else the room of its latest roomed
// round (ErrNoRoom: none ever).
func (s *Service) latestRoom(ctx context.Context, sku string) (roundRoom, error) {
	live, ok, err := s.live(ctx, sku, false)
	if err != nil {
		return roundRoom{}, err
	}
	if ok && live.Room != nil {
		return roundRoom{round: live.Round, seed: live.Room.Seed, secret: live.Room.Secret,
			starts: live.StartsAt, live: live.Room, settings: live.Room.RoomSettings}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var r roundRoom
	var ttl int
	err = s.db.QueryRow(ctx, latestRoomSQL, sku).Scan(&r.round, &r.seed, &r.secret, &r.starts,
		&r.settings.AdmitPerSecond, &ttl, &r.settings.ChallengeBits)
	if errors.Is(err, pgx.ErrNoRows) {
		return roundRoom{}, ErrNoRoom
	}
	if err != nil {
		return roundRoom{}, storeError("room record", err)
	}
	r.settings.PassTTL = time.Duration(ttl) * time.Second
	return r, nil
}

const recordedRoomSQL = `SELECT early_entries, early_order_sha256 FROM queue_rooms WHERE round_id = $1`

// Fairness answers the fairness of sku's room (the live one, else the
// latest). Errors: ErrNoRoom, or a 503.
func (s *Service) Fairness(ctx context.Context, sku string) (Fairness, error) {
	r, err := s.latestRoom(ctx, sku)
	if err != nil {
		return Fairness{}, err
	}
	f := Fairness{SKU: sku, RoundID: r.round, SeedSHA256: inventory.SeedSHA(r.seed)}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := s.view(rctx, sku, r.round, r.secret)
	if err != nil {
		return Fairness{}, err
	}
	f.Live = r.live != nil && !v.recorded
	// Over (replaced or recorded): the early entries are final.
	shuffled := r.live == nil || v.recorded || time.Now().After(r.starts.Add(clockSlack))
	if r.live == nil || v.recorded {
		dctx, cancel := context.WithTimeout(ctx, dbTimeout)
		var digest string
		err := s.db.QueryRow(dctx, recordedRoomSQL, r.round).Scan(&f.EarlyEntries, &digest)
		cancel()
		switch {
		case err == nil:
			f.Seed, f.EarlyOrderSHA256 = &r.seed, &digest
			return f, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return Fairness{}, storeError("room record", err)
		}
	}
	f.EarlyEntries = v.earlyN
	if !shuffled {
		return f, nil
	}
	digest, err := s.earlyDigestCached(rctx, v)
	if err != nil {
		return Fairness{}, err
	}
	f.Seed, f.EarlyOrderSHA256 = &r.seed, &digest
	return f, nil
}

// earlyDigestCached is earlyDigest, kept in the room's state once made:
// the early entries no longer change after the shuffle.
func (s *Service) earlyDigestCached(ctx context.Context, v roomView) (string, error) {
	state := s.keys.State(v.sku, v.round)
	got, err := s.rdb.HMGet(ctx, state, "early_sha", "early_n").Result()
	if err != nil {
		return "", storeError("room", err)
	}
	if d, ok := got[0].(string); ok && got[1] == strconv.FormatInt(v.earlyN, 10) {
		return d, nil
	}
	d, err := s.earlyDigest(ctx, v)
	if err != nil {
		return "", err
	}
	if err := s.rdb.HSet(ctx, state, "early_sha", d, "early_n", v.earlyN).Err(); err != nil {
		return "", storeError("room", err)
	}
	return d, nil
}

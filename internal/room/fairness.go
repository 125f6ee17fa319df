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

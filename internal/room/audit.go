package room

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/room/roomrule"
)

// The rooms' part of `shop audit`: for every room, live or recorded, the
// admissions kept to the rate, every buyer of a roomed round was
// admitted (a purchase without a pass would show as a buyer who was
// not), and the early order is the seed's.

// Finding is one violation in a room.
type Finding struct {
	// Kind: room_rate, room_pass or room_order.
	Kind    string
	SKU     string
	RoundID int64
	Users   []string
	Detail  string
}

const (
	recordedRoomsSQL = `
SELECT r.sku, r.id, r.room_seed, r.room_secret, coalesce(r.room_admit_per_second_max, r.room_admit_per_second),
       coalesce(r.starts_at, r.seeded_at),
       q.early_order_sha256
FROM queue_rooms q JOIN sale_rounds r ON r.id = q.round_id ORDER BY r.id`

	// maxRateSQL: the highest rate round's room has had.
	maxRateSQL = `
SELECT coalesce(room_admit_per_second_max, room_admit_per_second) FROM sale_rounds WHERE id = $1`

	recordedEarlySQL = `
SELECT entry_id, user_id::text, early, admitted_at FROM queue_entries WHERE round_id = $1 ORDER BY position`

	// unadmittedBuyersSQL: buyers of the round's orders with no admitted
	// entry in its room.
	unadmittedBuyersSQL = `
SELECT DISTINCT o.user_id::text FROM orders o JOIN order_items i ON i.order_id = o.id
WHERE i.round_id = $1 AND NOT EXISTS (
  SELECT 1 FROM queue_entries q WHERE q.round_id = $1 AND q.user_id = o.user_id AND q.admitted_at IS NOT NULL)
ORDER BY 1 LIMIT 100`
)

// Audit checks every room. Its error is a store's.
func (s *Service) Audit(ctx context.Context) ([]Finding, error) {
	var out []Finding
	rooms, err := s.tracked(ctx)
	if err != nil {
		return nil, storeError("room index", err)
	}
	for _, t := range rooms {
		f, err := s.auditLive(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, f...)
	}
	f, err := s.auditRecorded(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, f...), nil
}

// auditLive checks a room still in Redis (the live round's, or one not
// yet recorded: then its buyers are checked from the record later).
func (s *Service) auditLive(ctx context.Context, t trackedRoom) ([]Finding, error) {
	live, ok, err := s.live(ctx, t.sku, true)
	if err != nil {
		return nil, err
	}
	if !ok || live.Round != t.round || live.Room == nil {
		return nil, nil // over: the recorder's, then auditRecorded's
	}
	v, err := s.view(ctx, t.sku, t.round, live.Room.Secret)
	if err != nil || v.recorded {
		return nil, err
	}
	var out []Finding
	perSecond := map[int64]int{}
	prev := int64(0)
	base := live.StartsAt
	if base.IsZero() {
		base = time.Unix(0, 0) // no starts_at: whole seconds of the clock
	}
	for _, a := range v.admissions {
		perSecond[int64(a.at.Sub(base)/time.Second)] += int(a.after - prev)
		prev = a.after
	}
	rate, err := s.maxRate(ctx, t.round, live.Room.AdmitPerSecond)
	if err != nil {
		return nil, err
	}
	if bad := roomrule.RateBound(perSecond, rate); bad != "" {
		out = append(out, Finding{Kind: "room_rate", SKU: t.sku, RoundID: t.round, Detail: bad})
	}
	es, err := s.entries(ctx, v, 0, v.earlyN, false)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.EntryID
	}
	if bad := earlyOrderProblem(live.Room.Seed, ids); bad != "" {
		out = append(out, Finding{Kind: "room_order", SKU: t.sku, RoundID: t.round, Detail: bad})
	}
	buyers, err := s.rdb.HKeys(ctx, s.stock.BuyersKey(t.sku)).Result()
	if err != nil {
		return nil, storeError("buyers", err)
	}
	var unadmitted []string
	for _, b := range buyers {
		tk, _, err := s.entry(ctx, t.sku, b, "read", nil, nil)
		if err != nil && err != ErrNotInRoom {
			return nil, err
		}
		if err == ErrNotInRoom || (tk.State != StateAdmitted && tk.State != StateExpired) {
			unadmitted = append(unadmitted, b)
		}
	}
	if len(unadmitted) > 0 {
		sort.Strings(unadmitted)
		out = append(out, Finding{Kind: "room_pass", SKU: t.sku, RoundID: t.round, Users: unadmitted,
			Detail: fmt.Sprintf("%d buyers of a roomed round were never admitted", len(unadmitted))})
	}
	return out, nil
}

// auditRecorded checks the rooms PostgreSQL holds.
func (s *Service) auditRecorded(ctx context.Context) ([]Finding, error) {
	rows, err := s.db.Query(ctx, recordedRoomsSQL)
	if err != nil {
		return nil, storeError("room records", err)
	}
	type rec struct {
		sku, seed, secret, digest string
		round                     int64
		rate                      int
		starts                    time.Time
	}
	recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rec, error) {
		var x rec
		err := r.Scan(&x.sku, &x.round, &x.seed, &x.secret, &x.rate, &x.starts, &x.digest)
		return x, err
	})
	if err != nil {
		return nil, storeError("room records", err)
	}
	var out []Finding
	for _, x := range recs {
		rows, err := s.db.Query(ctx, recordedEarlySQL, x.round)
		if err != nil {
			return nil, storeError("room entries", err)
		}
		perSecond := map[int64]int{}
		var early []string
		err = forEachRow(rows, func(id, user string, isEarly bool, admitted *time.Time) error {
			if EntryID(x.secret, user) != id {
				return fmt.Errorf("entry %s is not user %s's", id, user)
			}
			if isEarly {
				early = append(early, id)
			}
			if admitted != nil {
				perSecond[int64(admitted.Sub(x.starts)/time.Second)]++
			}
			return nil
		})
		if err != nil {
			out = append(out, Finding{Kind: "room_order", SKU: x.sku, RoundID: x.round, Detail: err.Error()})
			continue
		}
		if bad := earlyOrderProblem(x.seed, early); bad != "" || roomrule.EarlyOrderSHA(early) != x.digest {
			out = append(out, Finding{Kind: "room_order", SKU: x.sku, RoundID: x.round,
				Detail: orDefault(bad, "early_order_sha256 is not the digest of the recorded early entries")})
		}
		if bad := roomrule.RateBound(perSecond, x.rate); bad != "" {
			out = append(out, Finding{Kind: "room_rate", SKU: x.sku, RoundID: x.round, Detail: bad})
		}
		var users []string
		urows, err := s.db.Query(ctx, unadmittedBuyersSQL, x.round)
		if err == nil {
			users, err = pgx.CollectRows(urows, pgx.RowTo[string])
		}
		if err != nil {
			return nil, storeError("room buyers", err)
		}
		if len(users) > 0 {
			out = append(out, Finding{Kind: "room_pass", SKU: x.sku, RoundID: x.round, Users: users,
				Detail: fmt.Sprintf("%d buyers of a roomed round were never admitted", len(users))})
		}
	}
	return out, nil
}

func forEachRow(rows pgx.Rows, f func(id, user string, early bool, admitted *time.Time) error) error {
	defer rows.Close()
	for rows.Next() {
		var id, user string
		var early bool
		var admitted *time.Time
		if err := rows.Scan(&id, &user, &early, &admitted); err != nil {
			return err
		}
		if err := f(id, user, early, admitted); err != nil {
			return err
		}
	}
	return rows.Err()
}

// earlyOrderProblem says what is wrong with ids as an early order under
// seed ("" when they ascend by SHA-256(seed ":" id)).
func earlyOrderProblem(seed string, ids []string) string {
	for i := 1; i < len(ids); i++ {
		a, b := roomrule.OrderKey(seed, ids[i-1]), roomrule.OrderKey(seed, ids[i])
		if bytes.Compare(a[:], b[:]) >= 0 {
			return fmt.Sprintf("early positions %d and %d are out of the seed's order", i, i+1)
		}
	}
	return ""
}

// maxRate is the highest admission rate round's room has had: rate (in
// force now) or a higher one set before it.
func (s *Service) maxRate(ctx context.Context, round int64, rate int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var highest *int
	if err := s.db.QueryRow(ctx, maxRateSQL, round).Scan(&highest); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, storeError("room rate", err)
	}
	if highest != nil && *highest > rate {
		return *highest, nil
	}
	return rate, nil
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

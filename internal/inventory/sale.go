package inventory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/outage"
)

// Sale rounds: PostgreSQL records each seeding (what was put on sale, and,
// through the order writer, what was confirmed sold); Redis holds the live
// round.
// More in docs/design/inventory.md ("sale.go").
const (
	insertRoundSQL = `
WITH p AS (SELECT price_cents FROM products WHERE sku = $1 FOR SHARE)
INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents, starts_at, ends_at,
    room_admit_per_second, room_pass_ttl_seconds, room_challenge_bits, room_seed, room_secret, buckets,
    draw_closes_at, draw_seed, draw_state)
SELECT $1, $2, $3, p.price_cents, $4, $5, $6, $7, $8, $9, $10, $11,
    $12::timestamptz, $13::text, CASE WHEN $12::timestamptz IS NULL THEN NULL ELSE 'open' END FROM p
RETURNING id, price_cents, seeded_at`

	// paid reads the order package's tables (read only): the units of the
	// round's orders whose recorded final state is paid.
	selectRoundSQL = `
SELECT r.id, r.quantity, r.sold, r.per_user_limit, r.starts_at, r.ends_at,
       r.room_admit_per_second, r.room_pass_ttl_seconds, r.room_challenge_bits, r.room_seed, r.buckets,
       (SELECT coalesce(sum(i.quantity), 0) FROM order_items i
        JOIN order_transitions t ON t.order_id = i.order_id AND t.status = 'paid'
        WHERE i.round_id = r.id),
       r.draw_closes_at, r.draw_seed, r.draw_state,
       (SELECT count(*) FILTER (WHERE e.state <> 'withdrawn') FROM draw_entries e WHERE e.round_id = r.id),
       (SELECT count(*) FILTER (WHERE e.state = 'won') FROM draw_entries e WHERE e.round_id = r.id)
FROM sale_rounds r WHERE r.sku = $1 AND (r.id = $2 OR $2 = 0 AND r.opened_at IS NOT NULL)
ORDER BY r.id DESC LIMIT 1`

	productExistsSQL = `SELECT EXISTS (SELECT 1 FROM products WHERE sku = $1)`

	// The SKU's newest round; settled: its seeding's deadlines have passed,
	// so a seed of it still waiting in a stalled Redis can no longer apply.
	// sold > 0: orders of it were persisted, so it went live.
	latestRoundSQL = `
SELECT id, quantity, per_user_limit, starts_at, ends_at,
       room_admit_per_second, room_pass_ttl_seconds, room_challenge_bits, buckets, draw_closes_at,
       opened_at IS NOT NULL, sold > 0, now() - seeded_at > make_interval(secs => $2::float8)
FROM sale_rounds WHERE sku = $1 ORDER BY id DESC LIMIT 1`

	// A round that never went live takes the new seeding's parameters.
	reuseRoundSQL = `
WITH p AS (SELECT price_cents FROM products WHERE sku = $1 FOR SHARE)
UPDATE sale_rounds r SET quantity = $3, per_user_limit = $4, price_cents = p.price_cents,
       starts_at = $5, ends_at = $6, room_admit_per_second = $7, room_pass_ttl_seconds = $8,
       room_challenge_bits = $9, room_seed = $10, room_secret = $11, buckets = $12,
       draw_closes_at = $13::timestamptz, draw_seed = $14::text,
       draw_state = CASE WHEN $13::timestamptz IS NULL THEN NULL ELSE 'open' END, seeded_at = now()
FROM p WHERE r.id = $2 AND r.opened_at IS NULL
RETURNING r.id, r.price_cents`

	markOpenedSQL = `UPDATE sale_rounds SET opened_at = now() WHERE id = $1 AND opened_at IS NULL RETURNING 1`
)

// settleAfter is how long after a seeding its Redis step may still apply:
// the record's and the script's deadlines, and a second for the clocks.
const settleAfter = dbTimeout + redisTimeout + time.Second

// Errors of a seeding whose round is left not live, for a retry.
var (
	errSeedSettling = apperr.Unavailable("a previous seeding of this product is still settling; retry shortly")
	errMarkOpened   = apperr.Unavailable("the round opened but was not recorded as open; retry the same request")
)

// ErrRoundSuperseded is returned when a newer round of the same SKU was
// opened while this one was being seeded: the newer one stands.
var ErrRoundSuperseded = apperr.NewError(apperr.CodeConflict, "a newer sale round was seeded at the same time")

// Sales seeds sale rounds and reports on them.
type Sales struct {
	db    *pgxpool.Pool
	stock *Stock

	rooms Rooms // nil: rooms count 0, and none is told of an opening

	// afterRecord, for fault drills, is called between an opening round's
	// PostgreSQL record and its Redis step (InjectAfterRecord).
	afterRecord func()
}

// InjectAfterRecord makes Open call f between an opening round's
// PostgreSQL record and its Redis step (nil: nothing), for the fault
// drills: set it before Open runs, or from f itself.
func (s *Sales) InjectAfterRecord(f func()) { s.afterRecord = f }

// NewSales returns the sale-round service, which tells no waiting room
// of what it opens (the CLI's seeding, the tests of other domains).
func NewSales(db *pgxpool.Pool, stock *Stock) *Sales { return NewSalesWithRooms(db, stock, nil) }

// NewSalesWithRooms returns the sale-round service that tells rooms of
// each round it opens and counts their entries in its reports.
func NewSalesWithRooms(db *pgxpool.Pool, stock *Stock, rooms Rooms) *Sales {
	return &Sales{db: db, stock: stock, rooms: rooms}
}

// Seed is an admin's request to open a sale round.
type Seed struct {
	Quantity     int
	PerUserLimit int           // 0: unlimited
	StartsAt     time.Time     // zero: open now
	EndsAt       time.Time     // zero: no end
	Room         *RoomSettings // nil: no waiting room
	Buckets      int           // the stock buckets, 1 to MaxBuckets (0 reads as 1)
	Draw         *DrawSettings // nil: no draw
}

// check lists what is wrong with the seed's window and its draw.
func (s Seed) check(now time.Time) []apperr.FieldError {
	return append(s.checkWindow(now), s.checkDraw(now)...)
}

// StockReport is the state of a SKU's current sale round.
type StockReport struct {
	SKU          string      `json:"sku"`
	Quantity     int64       `json:"quantity"`
	Available    int64       `json:"available"`
	Sold         int64       `json:"sold"`
	Confirmed    int64       `json:"confirmed"`
	Paid         int64       `json:"paid"`
	Released     int64       `json:"released"`
	PerUserLimit int         `json:"per_user_limit"`
	Buckets      int         `json:"buckets"`
	StartsAt     *time.Time  `json:"starts_at"`
	EndsAt       *time.Time  `json:"ends_at"`
	RoundID      *int64      `json:"round_id"`
	WaitingRoom  *RoomReport `json:"waiting_room"`
	Draw         *DrawReport `json:"draw"`
}

// Open records a new round for sku and opens it: available becomes the
// quantity, per-user counts start from zero, the unit price is the
// product's. Errors: an invalid_request error for a sale window out of
// range (checked before anything is recorded), ErrProductNotFound,
// ErrRoundSuperseded, or a 503.
func (s *Sales) Open(ctx context.Context, sku string, seed Seed) (StockReport, error) {
	if errs := seed.check(time.Now()); len(errs) > 0 {
		return StockReport{}, apperr.Invalid(errs...)
	}
	conn, unlock, err := lockSale(ctx, s.db, sku)
	if err != nil {
		return StockReport{}, err
	}
	defer unlock()
	var room *LiveRoom
	if seed.Room != nil {
		if room, err = newLiveRoom(*seed.Room); err != nil {
			return StockReport{}, err
		}
	}
	if seed.Draw != nil {
		draw := *seed.Draw
		if draw.Seed, err = randomHex(32); err != nil {
			return StockReport{}, err
		}
		seed.Draw = &draw
	}
	round, price, done, err := s.roundFor(ctx, conn, sku, seed, room)
	switch {
	case err != nil:
		return StockReport{}, err
	case done:
		// The retry of a seeding whose answer was lost: the round is
		// live, but the rooms may not have been told.
		if err := s.tellRooms(ctx, sku); err != nil {
			return StockReport{}, err
		}
		return s.Report(ctx, sku)
	}
	if s.afterRecord != nil {
		s.afterRecord()
	}
	live := LiveRound{
		Round: round, Quantity: int64(seed.Quantity), Available: int64(seed.Quantity),
		PerUserLimit: seed.PerUserLimit, StartsAt: seed.StartsAt, EndsAt: seed.EndsAt, PriceCents: price,
		Room: room, Buckets: seed.buckets(), Draw: seed.Draw != nil,
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	switch err := s.stock.OpenRound(rctx, sku, live); {
	case errors.Is(err, errStaleRound):
		return StockReport{}, ErrRoundSuperseded
	case errors.Is(err, errTooLate):
		return StockReport{}, fmt.Errorf("open sale round: %w: %w", apperr.Unavailable("the store is unavailable"), err)
	case err != nil:
		return StockReport{}, unavailable("open sale round", err)
	}
	if err := s.markOpened(ctx, conn, round); err != nil {
		return StockReport{}, fmt.Errorf("open sale round: %w: %w", errMarkOpened, err)
	}
	if s.rooms != nil {
		if err := s.rooms.Track(ctx, sku, live); err != nil {
			return StockReport{}, unavailable("open the waiting room", err)
		}
	}
	rep := report(sku, live, 0)
	rep.Draw = seed.Draw.report(seed.StartsAt, DrawOpen, 0, 0, time.Now())
	if rep.WaitingRoom, err = s.roomReport(ctx, sku, round, room); err != nil {
		return StockReport{}, err
	}
	return rep, nil
}

// tellRooms tells the rooms of sku's live round.
func (s *Sales) tellRooms(ctx context.Context, sku string) error {
	if s.rooms == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	live, ok, err := s.stock.Live(rctx, sku)
	cancel()
	if err == nil && ok {
		err = s.rooms.Track(ctx, sku, live)
	}
	if err != nil {
		return unavailable("open the waiting room", err)
	}
	return nil
}

// roundFor returns the round a seeding of sku opens: the SKU's newest
// round when it never went live (its seeding failed), else a new one.
// done means the newest round went live after all (its answer was lost)
// with this very seed: the retry converged, and there is nothing to open.
// Errors: ErrProductNotFound, errSeedSettling, or a 503.
func (s *Sales) roundFor(ctx context.Context, q rowQuerier, sku string, seed Seed, room *LiveRoom) (round, price int64, done bool, err error) {
	prev, found, err := s.latest(ctx, q, sku)
	if err != nil {
		return 0, 0, false, err
	}
	if found && !prev.opened {
		rctx, cancel := context.WithTimeout(ctx, redisTimeout)
		live, ok, err := s.stock.Live(rctx, sku)
		cancel()
		if err != nil {
			return 0, 0, false, unavailable("live stock", err)
		}
		liveNow := ok && live.Round == prev.id
		switch {
		case liveNow || prev.sold: // it went live (sold: Redis lost it since); only the mark is missing
			if err := s.markOpened(ctx, q, prev.id); err != nil {
				return 0, 0, false, fmt.Errorf("open sale round: %w: %w", errMarkOpened, err)
			}
			if liveNow && prev.seed.same(seed) {
				return 0, 0, true, nil
			}
		case ok && live.Round > prev.id: // older data: the open below is refused as stale
		case !prev.settled:
			return 0, 0, false, errSeedSettling
		default:
			round, price, err = s.reuse(ctx, q, sku, prev.id, seed, room)
			return round, price, false, err
		}
	}
	round, price, err = s.record(ctx, q, sku, seed, room)
	return round, price, false, err
}

// recordedRound is a round row as roundFor weighs it.
type recordedRound struct {
	id                    int64
	seed                  Seed
	opened, sold, settled bool
}

// latest reads sku's newest round row; found is false when it has none.
func (s *Sales) latest(ctx context.Context, q rowQuerier, sku string) (r recordedRound, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var starts, ends *time.Time
	var rate, ttl, bits *int
	var closes *time.Time
	err = q.QueryRow(ctx, latestRoundSQL, sku, settleAfter.Seconds()).Scan(&r.id, &r.seed.Quantity,
		&r.seed.PerUserLimit, &starts, &ends, &rate, &ttl, &bits, &r.seed.Buckets, &closes, &r.opened, &r.sold,
		&r.settled)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, unavailable("sale round", err)
	}
	r.seed.StartsAt, r.seed.EndsAt = deref(starts), deref(ends)
	r.seed.Room = roomSettings(rate, ttl, bits)
	if closes != nil {
		r.seed.Draw = &DrawSettings{ClosesAt: closes.UTC()}
	}
	return r, true, nil
}

// reuse gives the never-live round id the seed's parameters.
func (s *Sales) reuse(ctx context.Context, q rowQuerier, sku string, id int64, seed Seed, room *LiveRoom) (round, price int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	args := append([]any{sku, id, seed.Quantity, seed.PerUserLimit, nullTime(seed.StartsAt), nullTime(seed.EndsAt)},
		room.columns()...)
	args = append(args, seed.buckets())
	args = append(args, seed.Draw.columns()...)
	err = q.QueryRow(ctx, reuseRoundSQL, args...).Scan(&round, &price)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrProductNotFound
	}
	if err != nil {
		return 0, 0, unavailable("record sale round", err)
	}
	return round, price, nil
}

// markOpened records that round went live.
func (s *Sales) markOpened(ctx context.Context, q rowQuerier, round int64) error {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var one int
	err := q.QueryRow(ctx, markOpenedSQL, round).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // marked already
	}
	return err
}

// buckets is the seed's stock buckets, 1 when unset.
func (s Seed) buckets() int { return max(s.Buckets, 1) }

// same tells whether two seeds ask for the same round (PostgreSQL keeps
// times to the microsecond).
func (a Seed) same(b Seed) bool {
	return a.Quantity == b.Quantity && a.PerUserLimit == b.PerUserLimit && sameRoom(a.Room, b.Room) &&
		sameDraw(a.Draw, b.Draw) &&
		a.buckets() == b.buckets() &&
		a.StartsAt.Truncate(time.Microsecond).Equal(b.StartsAt.Truncate(time.Microsecond)) &&
		a.EndsAt.Truncate(time.Microsecond).Equal(b.EndsAt.Truncate(time.Microsecond))
}

// record inserts the round's row and returns its id and unit price.
func (s *Sales) record(ctx context.Context, q rowQuerier, sku string, seed Seed, room *LiveRoom) (round, price int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var seededAt time.Time
	args := append([]any{sku, seed.Quantity, seed.PerUserLimit, nullTime(seed.StartsAt), nullTime(seed.EndsAt)},
		room.columns()...)
	args = append(args, seed.buckets())
	args = append(args, seed.Draw.columns()...)
	err = q.QueryRow(ctx, insertRoundSQL, args...).Scan(&round, &price, &seededAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrProductNotFound
	}
	if err != nil {
		return 0, 0, unavailable("record sale round", err)
	}
	return round, price, nil
}

// Report returns the state of sku's live round, or of its latest round
// that went live when none is live (all zero when it never had one). Errors:
// ErrProductNotFound, or a 503.
func (s *Sales) Report(ctx context.Context, sku string) (StockReport, error) {
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	live, ok, err := s.stock.Live(rctx, sku)
	cancel()
	if err != nil {
		return StockReport{}, unavailable("live stock", err)
	}
	ctx, cancel = context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var r LiveRound
	var confirmed, paid int64
	var starts, ends *time.Time
	var rate, ttl, bits *int
	var roomSeed *string
	var d drawRow
	err = s.db.QueryRow(ctx, selectRoundSQL, sku, live.Round).
		Scan(&r.Round, &r.Quantity, &confirmed, &r.PerUserLimit, &starts, &ends, &rate, &ttl, &bits, &roomSeed,
			&r.Buckets, &paid, &d.closes, &d.seed, &d.state, &d.entries, &d.winners)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s.noRound(ctx, sku)
	case err != nil:
		return StockReport{}, unavailable("sale round", err)
	}
	r.StartsAt, r.EndsAt = deref(starts), deref(ends)
	if ok {
		r.Available, r.Released = live.Available, live.Released
	} else {
		r.Available = 0 // recorded but not live: nothing can be bought
	}
	rep := report(sku, r, confirmed)
	rep.Paid = paid
	rep.Draw = d.report(r.StartsAt, time.Now())
	if settings := roomSettings(rate, ttl, bits); settings != nil && roomSeed != nil {
		room := &LiveRoom{RoomSettings: *settings, SeedSHA: SeedSHA(*roomSeed)}
		counted := int64(0) // a round no longer live has its counts in its record
		if ok && live.Round == r.Round {
			counted = r.Round
		}
		if rep.WaitingRoom, err = s.roomReport(ctx, sku, counted, room); err != nil {
			return StockReport{}, err
		}
	}
	return rep, nil
}

// ProductExists tells whether the catalog has sku.
func (s *Sales) ProductExists(ctx context.Context, sku string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var exists bool
	if err := s.db.QueryRow(ctx, productExistsSQL, sku).Scan(&exists); err != nil {
		return false, fmt.Errorf("product %s: %w", sku, err)
	}
	return exists, nil
}

func (s *Sales) noRound(ctx context.Context, sku string) (StockReport, error) {
	exists, err := s.ProductExists(ctx, sku)
	if err != nil {
		return StockReport{}, unavailable("product", err)
	}
	if !exists {
		return StockReport{}, ErrProductNotFound
	}
	return StockReport{SKU: sku}, nil
}

func report(sku string, r LiveRound, confirmed int64) StockReport {
	round := r.Round
	return StockReport{
		SKU: sku, Quantity: r.Quantity, Available: r.Available, Sold: r.Quantity - r.Available,
		Confirmed: confirmed, Released: r.Released, PerUserLimit: r.PerUserLimit, Buckets: max(r.Buckets, 1),
		StartsAt: timePtr(r.StartsAt), EndsAt: timePtr(r.EndsAt), RoundID: &round,
	}
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// unavailable reports a store outage (outage.Is) as a 503 and
// keeps the cause for logs; any other error is a bug, left for the 500
// handler to log.
func unavailable(op string, err error) error {
	return outage.Wrap(op, apperr.Unavailable("the store is unavailable"), err)
}

// addSoldSQL updates rounds in id order, so concurrent writers lock them in
// the same order and cannot deadlock. The CHECK (sold <= quantity +
// released_seen) on sale_rounds is the last guard against oversell.
const addSoldSQL = `
UPDATE sale_rounds AS r SET sold = r.sold + d.qty, released_seen = greatest(r.released_seen, d.released)
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS d(round_id, qty, released)
WHERE r.id = d.round_id`

// bucketsSoldSQL keeps the most units each bucket of a round had been
// given back as its lines saw them, and addSoldBucketsSQL raises a
// bucketed round's released_seen to their sum before the CHECK.
const (
	bucketsSoldSQL = `
INSERT INTO sale_round_bucket_released (round_id, bucket, released_seen)
SELECT * FROM unnest($1::bigint[], $2::smallint[], $3::bigint[]) ORDER BY 1, 2
ON CONFLICT (round_id, bucket) DO UPDATE
SET released_seen = greatest(sale_round_bucket_released.released_seen, excluded.released_seen)`
	addSoldBucketsSQL = `
UPDATE sale_rounds AS r SET sold = r.sold + d.qty, released_seen = greatest(r.released_seen, d.released,
  CASE WHEN d.bucketed THEN (SELECT sum(b.released_seen) FROM sale_round_bucket_released b WHERE b.round_id = r.id) ELSE 0 END)
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::boolean[]) AS d(round_id, qty, released, bucketed)
WHERE r.id = d.round_id`
)

// Sold is what a batch of persisted orders adds to one round: its units,
// and the most units the round had given back (Released, see the live
// stock format) when any of those orders was reserved. Units given back
// can be sold again, so the round may sell quantity + Released in all.
type Sold struct {
	Units    int64
	Released int64
	// Buckets, for a round of several stock buckets, is Released per
	// bucket the lines were taken from: each bucket counts its own
	// releases (on a cluster), so the round may sell quantity plus the
	// sum over its buckets (docs/design/buckets.md).
	Buckets map[int]int64
}

// RecordSold adds units (round id -> what was sold) to the rounds' sold
// counts in the caller's transaction, so that the orders and the counts
// they add to commit together. A round over its quantity plus the units it
// had given back fails the CHECK (SQLSTATE 23514): the transaction cannot
// commit.
func RecordSold(ctx context.Context, tx pgx.Tx, units map[int64]Sold) error {
	if len(units) == 0 {
		return nil
	}
	rounds := slices.Sorted(maps.Keys(units))
	qtys, released := make([]int64, len(rounds)), make([]int64, len(rounds))
	bucketed := make([]bool, len(rounds))
	var bRounds, bReleased []int64
	var bIndex []int16
	for i, r := range rounds {
		qtys[i], released[i] = units[r].Units, units[r].Released
		for _, b := range slices.Sorted(maps.Keys(units[r].Buckets)) {
			bucketed[i] = true
			bRounds, bIndex, bReleased = append(bRounds, r), append(bIndex, int16(b)), append(bReleased, units[r].Buckets[b])
		}
	}
	if len(bRounds) == 0 { // no bucketed round: the one statement of before
		if _, err := tx.Exec(ctx, addSoldSQL, rounds, qtys, released); err != nil {
			return fmt.Errorf("add to sold counts: %w", err)
		}
		return nil
	}
	if _, err := tx.Exec(ctx, bucketsSoldSQL, bRounds, bIndex, bReleased); err != nil {
		return fmt.Errorf("add to the buckets' releases seen: %w", err)
	}
	if _, err := tx.Exec(ctx, addSoldBucketsSQL, rounds, qtys, released, bucketed); err != nil {
		return fmt.Errorf("add to sold counts: %w", err)
	}
	return nil
}

package room

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/room/roomrule"
)

// A room is recorded in PostgreSQL when its round ends or is replaced:
// every entry in admission order and the early order's digest, in one
// transaction (a second recording of the same round changes nothing);
// then its Redis keys go.

const (
	roomSecretSQL = `SELECT room_secret FROM sale_rounds WHERE id = $1 AND sku = $2 AND room_secret IS NOT NULL`

	insertRoomSQL = `
INSERT INTO queue_rooms (round_id, early_entries, early_order_sha256, entries, admitted)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (round_id) DO NOTHING RETURNING 1`
)

// Track indexes the room of a round just opened, so that every
// instance's admitter runs it and, once it is over, records it
// (inventory.Rooms: the sales call it on each opening).
func (s *Service) Track(ctx context.Context, sku string, r inventory.LiveRound) error {
	s.state.forget(sku) // the round it read is replaced, with a room or without
	if r.Room == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return s.rdb.ZAdd(ctx, s.rooms, redisZ(r.Round, sku)).Err()
}

// tracked reads the index: round and SKU of every room to run or record.
func (s *Service) tracked(ctx context.Context) ([]trackedRoom, error) {
	ms, err := s.rdb.ZRange(ctx, s.rooms, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]trackedRoom, 0, len(ms))
	for _, m := range ms {
		r, sku, ok := strings.Cut(m, " ")
		round, err := strconv.ParseInt(r, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("waiting room index: member %q", m)
		}
		out = append(out, trackedRoom{round: round, sku: sku, member: m})
	}
	return out, nil
}

type trackedRoom struct {
	round  int64
	sku    string
	member string
}

// over tells whether t's round has ended or was replaced (or closed).
func (s *Service) over(ctx context.Context, t trackedRoom) (bool, error) {
	live, ok, err := s.live(ctx, t.sku, false)
	if err != nil {
		return false, err
	}
	if !ok || live.Round != t.round || live.Room == nil {
		return true, nil
	}
	return !live.EndsAt.IsZero() && time.Now().After(live.EndsAt.Add(clockSlack)), nil
}

// Record writes the room of sku's round to PostgreSQL and then drops its
// Redis keys and its index entry. It is safe to run twice, at once too.
func (s *Service) Record(ctx context.Context, sku string, round int64) error {
	dctx, cancel := context.WithTimeout(ctx, dbTimeout)
	var secret string
	err := s.db.QueryRow(dctx, roomSecretSQL, round, sku).Scan(&secret)
	cancel()
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("record waiting room %s/%d: no roomed round", sku, round)
	}
	if err != nil {
		return storeError("room record", err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := s.view(rctx, sku, round, secret)
	if err != nil {
		return err
	}
	if v.recorded {
		return s.rdb.ZRem(rctx, s.rooms, redisMember(round, sku)).Err()
	}
	total := v.earlyN + v.lateN
	rows := make([][]any, 0, total)
	var early []string
	for from := int64(0); from < total; from += readChunk {
		es, err := s.entries(rctx, v, from, min(readChunk, total-from), false)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Early {
				early = append(early, e.EntryID)
			}
			rows = append(rows, []any{round, e.Position, e.EntryID, e.UserID, e.Early, e.JoinedAt, e.AdmittedAt})
		}
	}
	if err := s.insert(rctx, round, v, early, rows); err != nil {
		return err
	}
	// The state stays a day as a tombstone, so readers that still see
	// the round live go to the record.
	state := s.keys.State(sku, round)
	_, err = s.rdb.TxPipelined(rctx, func(p redis.Pipeliner) error {
		p.Unlink(rctx, s.keys.Early(sku, round), s.keys.Joined(sku, round), s.keys.Late(sku, round),
			s.keys.Admissions(sku, round))
		p.HSet(rctx, state, "recorded", "1", "entries", total)
		p.Expire(rctx, state, 24*time.Hour)
		return nil
	})
	if err != nil {
		return storeError("drop recorded room", err)
	}
	return s.rdb.ZRem(rctx, s.rooms, redisMember(round, sku)).Err()
}

// insert writes the room's row and its entries in one transaction.
func (s *Service) insert(ctx context.Context, round int64, v roomView, early []string, rows [][]any) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return storeError("room record", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	var one int
	err = tx.QueryRow(ctx, insertRoomSQL, round, len(early), roomrule.EarlyOrderSHA(early), len(rows), v.admitted).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // recorded before
	}
	if err != nil {
		return storeError("room record", err)
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"queue_entries"},
		[]string{"round_id", "position", "entry_id", "user_id", "early", "joined_at", "admitted_at"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return storeError("room entries record", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return storeError("room record", err)
	}
	return nil
}

// redisMember is round's room of sku as the index holds it.
func redisMember(round int64, sku string) string { return strconv.FormatInt(round, 10) + " " + sku }

func redisZ(round int64, sku string) redis.Z {
	return redis.Z{Score: float64(time.Now().UnixMilli()), Member: redisMember(round, sku)}
}

package room

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Entry is one entry of a room, as the admin's list and the record show it.
type Entry struct {
	EntryID    string     `json:"entry_id"`
	UserID     string     `json:"user_id"`
	Position   int64      `json:"position"`
	Early      bool       `json:"early"`
	JoinedAt   time.Time  `json:"joined_at"`
	AdmittedAt *time.Time `json:"admitted_at"`
}

// readChunk is how many entries one read of a room's sets brings back.
const readChunk = 10_000

// roomView is what the entry reads need of a round's room.
type roomView struct {
	sku           string
	round         int64
	secret        string
	earlyN, lateN int64
	admitted      int64
	admissions    []admission
	// recorded: the room is in PostgreSQL and its entries left Redis.
	recorded bool
}

// admission is one admit turn that admitted someone: the count after it
// and when.
type admission struct {
	after int64
	at    time.Time
}

// view reads round's counters and admission log.
func (s *Service) view(ctx context.Context, sku string, round int64, secret string) (roomView, error) {
	v := roomView{sku: sku, round: round, secret: secret}
	pipe := s.rdb.Pipeline()
	e := pipe.ZCard(ctx, s.keys.Early(sku, round))
	l := pipe.ZCard(ctx, s.keys.Late(sku, round))
	st := pipe.HMGet(ctx, s.keys.State(sku, round), "admitted", "recorded")
	log := pipe.LRange(ctx, s.keys.Admissions(sku, round), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return v, storeError("room", err)
	}
	v.earlyN, v.lateN = e.Val(), l.Val()
	if a, ok := st.Val()[0].(string); ok {
		v.admitted, _ = strconv.ParseInt(a, 10, 64)
	}
	v.recorded = st.Val()[1] != nil
	for _, rec := range log.Val() {
		after, at, ok := strings.Cut(rec, " ")
		n, err1 := strconv.ParseInt(after, 10, 64)
		ms, err2 := strconv.ParseInt(at, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return v, fmt.Errorf("waiting room %s/%d: admission log entry %q", sku, round, rec)
		}
		v.admissions = append(v.admissions, admission{after: n, at: time.UnixMilli(ms).UTC()})
	}
	return v, nil
}

// admittedAt is when the entry of rank (from 0) was admitted (nil: not yet).
func (v roomView) admittedAt(rank int64) *time.Time {
	if rank >= v.admitted {
		return nil
	}
	i := sort.Search(len(v.admissions), func(i int) bool { return v.admissions[i].after > rank })
	if i == len(v.admissions) {
		return nil
	}
	t := v.admissions[i].at
	return &t
}

// entries reads the entries of ranks [from, from+n) in admission order.
func (s *Service) entries(ctx context.Context, v roomView, from, n int64) ([]Entry, error) {
	var out []Entry
	if from < v.earlyN {
		ms, err := s.rdb.ZRange(ctx, s.keys.Early(v.sku, v.round), from, min(v.earlyN, from+n)-1).Result()
		if err != nil {
			return nil, storeError("entries", err)
		}
		for i, m := range ms {
			e, err := v.early(m, from+int64(i))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	if left := n - int64(len(out)); left > 0 {
		start := max(from-v.earlyN, 0)
		zs, err := s.rdb.ZRangeWithScores(ctx, s.keys.Late(v.sku, v.round), start, start+left-1).Result()
		if err != nil {
			return nil, storeError("entries", err)
		}
		for i, z := range zs {
			e, err := v.late(z, v.earlyN+start+int64(i))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// early reads an early member (keys.go) at rank.
func (v roomView) early(m string, rank int64) (Entry, error) {
	if len(m) != 54 {
		return Entry{}, fmt.Errorf("waiting room %s/%d: early member of %d bytes", v.sku, v.round, len(m))
	}
	u, _ := uuid.FromBytes([]byte(m[32:48]))
	var t [8]byte
	copy(t[2:], m[48:54])
	ms := int64(binary.BigEndian.Uint64(t[:]))
	return v.entry(u.String(), rank, true, ms), nil
}

// late reads a late member at rank.
func (v roomView) late(z redis.Z, rank int64) (Entry, error) {
	m, _ := z.Member.(string)
	u, err := uuid.FromBytes([]byte(m))
	if err != nil {
		return Entry{}, fmt.Errorf("waiting room %s/%d: late member: %w", v.sku, v.round, err)
	}
	return v.entry(u.String(), rank, false, int64(z.Score)/1024), nil
}

func (v roomView) entry(user string, rank int64, early bool, joinedMs int64) Entry {
	return Entry{EntryID: EntryID(v.secret, user), UserID: user, Position: rank + 1, Early: early,
		JoinedAt: time.UnixMilli(joinedMs).UTC(), AdmittedAt: v.admittedAt(rank)}
}

// EarlyOrderSHA is the digest of the early entries' ids in admission
// order, each followed by "\n" (API.md's early_order_sha256).
func EarlyOrderSHA(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// earlyDigest reads every early entry in order and digests their ids.
func (s *Service) earlyDigest(ctx context.Context, v roomView) (string, error) {
	h := sha256.New()
	for from := int64(0); from < v.earlyN; from += readChunk {
		es, err := s.entries(ctx, v, from, min(readChunk, v.earlyN-from))
		if err != nil {
			return "", err
		}
		for _, e := range es {
			h.Write([]byte(e.EntryID + "\n"))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

const recordedEntriesSQL = `
SELECT entry_id, user_id::text, position, early, joined_at, admitted_at
FROM queue_entries WHERE round_id = $1 AND position > $2 ORDER BY position LIMIT $3`

// EntryList is a page of sku's room entries (the live room's, else the
// latest's) in admission order, from position from+1. Errors: ErrNoRoom,
// or a 503.
func (s *Service) EntryList(ctx context.Context, sku string, from, limit int64) (EntryPage, error) {
	r, err := s.latestRoom(ctx, sku)
	if err != nil {
		return EntryPage{}, err
	}
	page := EntryPage{Items: []Entry{}}
	rctx, cancel := context.WithTimeout(ctx, 2*redisTimeout)
	defer cancel()
	v, err := s.view(rctx, sku, r.round, r.secret)
	if err != nil {
		return EntryPage{}, err
	}
	if r.live == nil || v.recorded {
		recorded, err := s.recordedEntries(ctx, r.round, from, limit, &page)
		if err != nil || recorded {
			return page, err
		}
	}
	es, err := s.entries(rctx, v, from, limit)
	if err != nil {
		return EntryPage{}, err
	}
	page.Items = append(page.Items, es...)
	if next := from + int64(len(es)); len(es) == int(limit) && next < v.earlyN+v.lateN {
		c := strconv.FormatInt(next, 10)
		page.NextCursor = &c
	}
	return page, nil
}

// recordedEntries reads a page from PostgreSQL; recorded is false when
// the round's room has no record yet.
func (s *Service) recordedEntries(ctx context.Context, round, from, limit int64, page *EntryPage) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var total int64
	err := s.db.QueryRow(ctx, `SELECT entries FROM queue_rooms WHERE round_id = $1`, round).Scan(&total)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, storeError("room record", err)
	}
	rows, err := s.db.Query(ctx, recordedEntriesSQL, round, from, limit)
	if err != nil {
		return false, storeError("room record", err)
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := r.Scan(&e.EntryID, &e.UserID, &e.Position, &e.Early, &e.JoinedAt, &e.AdmittedAt)
		e.JoinedAt = e.JoinedAt.UTC()
		if e.AdmittedAt != nil {
			t := e.AdmittedAt.UTC()
			e.AdmittedAt = &t
		}
		return e, err
	})
	if err != nil {
		return false, storeError("room record", err)
	}
	page.Items = es
	if next := from + int64(len(es)); len(es) == int(limit) && next < total {
		c := strconv.FormatInt(next, 10)
		page.NextCursor = &c
	}
	return true, nil
}

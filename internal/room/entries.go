package room

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/server"
)

// Entry is one entry of a room, as the admin's list and the record show it.
type Entry struct {
	EntryID string `json:"entry_id"`
	UserID  string `json:"user_id"`
	// Position is the entry's place in admission order from 1; nil in a
	// list before the shuffle, whose order would give the early one away.
	Position   *int64     `json:"position"`
	Early      bool       `json:"early"`
	JoinedAt   time.Time  `json:"joined_at"`
	AdmittedAt *time.Time `json:"admitted_at"`
}

// readChunk is how many entries one read of a room's sets brings back.
const readChunk = 10_000

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

// EntryPage is one page of a room's entry list.
type EntryPage struct {
	Items      []Entry `json:"items"`
	NextCursor *string `json:"next_cursor"`
	// Joining: the list is in order of joining (before the shuffle).
	Joining bool `json:"-"`
	// Round is the round whose room the page lists.
	Round int64 `json:"-"`
}

// roomView is what the entry reads need of a round's room.
type roomView struct {
	sku           string
	round         int64
	secret        string
	earlyN, lateN int64
	joinedN       int64 // the early entries in the list of joining order
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
	j := pipe.LLen(ctx, s.keys.Joined(sku, round))
	st := pipe.HMGet(ctx, s.keys.State(sku, round), "admitted", "recorded")
	log := pipe.LRange(ctx, s.keys.Admissions(sku, round), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return v, storeError("room", err)
	}
	v.earlyN, v.lateN, v.joinedN = e.Val(), l.Val(), j.Val()
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

// entries reads the entries of ranks [from, from+n) in admission order,
// or, with joining, the entries [from, from+n) in order of joining and
// without positions (a list before the shuffle).
func (s *Service) entries(ctx context.Context, v roomView, from, n int64, joining bool) ([]Entry, error) {
	var out []Entry
	if from < v.earlyN {
		read := s.earlyEntries
		if joining {
			read = s.joinedEntries
		}
		es, err := read(ctx, v, from, min(v.earlyN, from+n))
		if err != nil {
			return nil, err
		}
		out = es
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
	if joining {
		for i := range out {
			out[i].Position = nil
		}
	}
	return out, nil
}

// earlyEntries reads the early entries of ranks [from, to).
func (s *Service) earlyEntries(ctx context.Context, v roomView, from, to int64) ([]Entry, error) {
	ms, err := s.rdb.ZRange(ctx, s.keys.Early(v.sku, v.round), from, to-1).Result()
	if err != nil {
		return nil, storeError("entries", err)
	}
	out := make([]Entry, 0, len(ms))
	for i, m := range ms {
		e, err := v.early(m, from+int64(i))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// joinedEntries reads the early entries [from, to) in order of joining
// (rank -1: nothing is admitted before the shuffle). A room whose list of
// joins misses some (joined through an older join.lua, which kept none)
// is sorted by join time from its early set instead, at the cost of
// reading all of it.
func (s *Service) joinedEntries(ctx context.Context, v roomView, from, to int64) ([]Entry, error) {
	if v.joinedN < v.earlyN { // read apart: joins may come between
		return s.sortedByJoining(ctx, v, from, to)
	}
	ms, err := s.rdb.LRange(ctx, s.keys.Joined(v.sku, v.round), from, to-1).Result()
	if err != nil {
		return nil, storeError("entries", err)
	}
	out := make([]Entry, 0, len(ms))
	for _, m := range ms {
		e, err := v.joined(m, -1)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// sortedByJoining reads every early entry and returns [from, to) of them
// in order of join time, ties by user id: never by the early set's own
// order, which is the secret one.
func (s *Service) sortedByJoining(ctx context.Context, v roomView, from, to int64) ([]Entry, error) {
	all := make([]Entry, 0, v.earlyN)
	for at := int64(0); at < v.earlyN; at += readChunk {
		es, err := s.earlyEntries(ctx, v, at, min(v.earlyN, at+readChunk))
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	slices.SortFunc(all, func(a, b Entry) int {
		return cmp.Or(a.JoinedAt.Compare(b.JoinedAt), strings.Compare(a.UserID, b.UserID))
	})
	for i := range all {
		all[i].AdmittedAt = nil
	}
	return all[min(from, int64(len(all))):min(to, int64(len(all)))], nil
}

// early reads an early member (roomkey.Keys.Early) at rank.
func (v roomView) early(m string, rank int64) (Entry, error) {
	if len(m) != 54 {
		return Entry{}, fmt.Errorf("waiting room %s/%d: early member of %d bytes", v.sku, v.round, len(m))
	}
	return v.joined(m[32:], rank)
}

// joined reads an element of the list of joins (an early member's last
// 22 bytes: user id, join time) at rank (-1: unknown).
func (v roomView) joined(m string, rank int64) (Entry, error) {
	if len(m) != 22 {
		return Entry{}, fmt.Errorf("waiting room %s/%d: joined element of %d bytes", v.sku, v.round, len(m))
	}
	u, _ := uuid.FromBytes([]byte(m[:16]))
	var t [8]byte
	copy(t[2:], m[16:22])
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

// entry is user's entry at rank (-1: none known, no position).
func (v roomView) entry(user string, rank int64, early bool, joinedMs int64) Entry {
	e := Entry{EntryID: EntryID(v.secret, user), UserID: user, Early: early, JoinedAt: time.UnixMilli(joinedMs).UTC()}
	if rank >= 0 {
		pos := rank + 1
		e.Position, e.AdmittedAt = &pos, v.admittedAt(rank)
	}
	return e
}

// earlyDigest reads every early entry in order and digests their ids.
func (s *Service) earlyDigest(ctx context.Context, v roomView) (string, error) {
	h := sha256.New()
	for from := int64(0); from < v.earlyN; from += readChunk {
		es, err := s.entries(ctx, v, from, min(readChunk, v.earlyN-from), false)
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
// latest's) from the from-th on: in admission order, or before the
// shuffle in order of joining without positions (page.Joining). Errors:
// ErrNoRoom, or a 503.
func (s *Service) EntryList(ctx context.Context, sku string, from, limit int64) (EntryPage, error) {
	r, err := s.latestRoom(ctx, sku)
	if err != nil {
		return EntryPage{}, err
	}
	page := EntryPage{Items: []Entry{}, Round: r.round}
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
	// Before the shuffle the early set's order is the secret one. It is
	// final once anyone is admitted (Redis's clock passed starts_at) or
	// when the seed is published (fairness.go's rule).
	page.Joining = r.live != nil && !v.recorded && v.admitted == 0 && !time.Now().After(r.starts.Add(clockSlack))
	es, err := s.entries(rctx, v, from, limit, page.Joining)
	if err != nil {
		return EntryPage{}, err
	}
	page.Items = append(page.Items, es...)
	if next := from + int64(len(es)); len(es) == int(limit) && next < v.earlyN+v.lateN {
		c := cursor{round: r.round, from: next, joining: page.Joining}.String()
		page.NextCursor = &c
	}
	return page, nil
}

// cursor is where a page of the entry list starts: its round, and the
// count of entries listed before it, in a list in order of joining or in
// admission order. A listing begun before the shuffle and continued
// after it would mix two orders, and one of another round would read
// another room, so either is refused.
type cursor struct {
	round, from int64
	joining     bool
}

// String is the cursor as the list gives it: "<round>.<from>", prefixed
// "j" in order of joining.
func (c cursor) String() string {
	s := strconv.FormatInt(c.round, 10) + "." + strconv.FormatInt(c.from, 10)
	if c.joining {
		return "j" + s
	}
	return s
}

// parseCursor reads a cursor of cursor.String's; ok is false for any
// other string.
func parseCursor(s string) (c cursor, ok bool) {
	rest, joining := strings.CutPrefix(s, "j")
	round, from, found := strings.Cut(rest, ".")
	r, rok := server.ParseQueryInt(round)
	f, fok := server.ParseQueryInt(from)
	if !found || !rok || !fok || r < 1 || f < 0 {
		return cursor{}, false
	}
	return cursor{round: r, from: f, joining: joining}, true
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

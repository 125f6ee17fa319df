package room

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed admit.lua
	admitLua    string
	admitScript = redis.NewScript(admitLua)
)

// maxAdmitPerCall bounds one admit turn's work in Redis; a faster rate
// is kept by more turns.
const maxAdmitPerCall = 5_000

// AdmitTurn runs one turn of sku's admitter: the entries the round's
// rate allows now get their passes. Any number of instances may run it
// at once; each token of the bucket admits one entry. What the turn read
// becomes the instance's view of the room (snapshot.go).
func (s *Service) AdmitTurn(ctx context.Context, sku string) (Turn, error) {
	for attempt := 0; ; attempt++ {
		live, ok, err := s.live(ctx, sku, attempt > 0)
		if err != nil {
			return Turn{}, err
		}
		if !ok || live.Room == nil {
			s.state.dropSnapshot(sku)
			return Turn{Status: "no_room"}, nil
		}
		nonce := make([]byte, 32)
		if _, err := rand.Read(nonce); err != nil {
			return Turn{}, fmt.Errorf("admit: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, redisTimeout)
		reply, err := admitScript.Run(rctx, s.rdb, s.roomKeys(sku, live.Round), live.Round,
			hex.EncodeToString(nonce), maxAdmitPerCall).StringSlice()
		cancel()
		if err != nil {
			return Turn{}, storeError("admit", err)
		}
		t := Turn{Status: reply[0]}
		switch {
		case t.Status == "stale" && attempt == 0:
			continue
		case t.Status == "stale":
			t.Status = "no_room"
		case len(reply) == 7:
			n := func(i int) int64 { v, _ := strconv.ParseInt(reply[i], 10, 64); return v }
			t.Admitted, t.Total, t.Early, t.Available, t.Now, t.Rate = n(1), n(2), n(3), n(4), n(5), n(6)
			s.state.keepSnapshot(sku, newSnapshot(live, t))
			return t, nil
		}
		s.state.dropSnapshot(sku) // ended or gone: tickets are read from Redis again
		return t, nil
	}
}

// Counters reads the room of sku's round: entries not yet admitted, and
// admitted so far (the stock report's and the admin view's counters).
func (s *Service) Counters(ctx context.Context, sku string, round int64) (waiting, admitted int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	e := pipe.ZCard(ctx, s.keys.Early(sku, round))
	l := pipe.ZCard(ctx, s.keys.Late(sku, round))
	st := pipe.HMGet(ctx, s.keys.State(sku, round), "admitted", "recorded", "entries")
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return 0, 0, storeError("counters", err)
	}
	num := func(i int) int64 {
		v, _ := st.Val()[i].(string)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	admitted, entries := num(0), e.Val()+l.Val()
	switch {
	case st.Val()[1] != nil:
		// Recorded: the entries left Redis; the tombstone counts them.
		entries = max(num(2), admitted)
	case st.Val()[0] == nil && entries == 0:
		// Nothing in Redis: a room nobody has joined, or one recorded more
		// than a day ago whose tombstone has gone: its record says which.
		return s.recordedCounters(ctx, round)
	}
	return entries - admitted, admitted, nil
}

const recordedCountersSQL = `SELECT entries, admitted FROM queue_rooms WHERE round_id = $1`

// recordedCounters reads round's recorded room (0, 0 when there is none).
func (s *Service) recordedCounters(ctx context.Context, round int64) (waiting, admitted int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var entries int64
	err = s.db.QueryRow(ctx, recordedCountersSQL, round).Scan(&entries, &admitted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, 0, nil
	case err != nil:
		return 0, 0, storeError("recorded counters", err)
	}
	return entries - admitted, admitted, nil
}

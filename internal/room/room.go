// Package room owns the waiting room of a sale round: its entries in
// Redis (who joined, in which order), the admitter that hands out passes
// at the round's rate, the challenge that gates a join, and the record of
// a finished room in PostgreSQL. The round's settings are inventory's;
// the pass is checked by the purchase scripts (order's lines.lua).
// More in docs/design/room.md.
package room

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/outage"
	"github.com/shop-oss/shop/internal/room/roomkey"
)

// Errors of the room's routes.
var (
	ErrNoRoom          = inventory.ErrNoRoom
	ErrNotInRoom       = apperr.NewError(apperr.CodeNotFound, "you are not in this round's waiting room")
	ErrSaleNotActive   = apperr.NewError(apperr.CodeSaleNotActive, "the sale is not open to join")
	ErrChallengeFailed = apperr.NewError(apperr.CodeChallengeFailed, "the challenge is missing, wrong, expired or already used")
	errUnavailable     = apperr.Unavailable("the waiting room is unavailable; retry shortly")
)

// Timeouts: a stalled store answers 503 within seconds.
const (
	redisTimeout = time.Second
	dbTimeout    = 3 * time.Second
)

// infoTTL is how long an instance trusts what it read of a SKU's live
// round; the scripts check the round, and a stale read is read again.
const infoTTL = time.Second

// Service runs the waiting rooms.
type Service struct {
	rdb   redis.UniversalClient
	db    *pgxpool.Pool
	stock *inventory.Stock
	sales *inventory.Sales // the round's room settings, and whether a product exists
	keys  roomkey.Keys
	log   *slog.Logger
	// rooms is the index of rooms to run or record (record.go's Track;
	// run.go's Run reads it).
	rooms string
	state *state        // the instance's live state of its rooms (state.go)
	done  chan struct{} // closed by Close: event streams end
	once  sync.Once
}

// Options are the optional parts of a Service.
type Options struct{}

// New returns the room service on the live stock's Redis (its keys under
// prefix) and the database that records finished rooms.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger,
	_ Options) *Service {
	// The room's own Sales: it changes a room's rate and tells a missing
	// product from a missing room, and needs no rooms of its own.
	return &Service{rdb: rdb, db: db, stock: stock, sales: inventory.NewSales(db, stock), keys: roomkey.New(stock),
		log: log, rooms: prefix + "rooms", state: newState(), done: make(chan struct{})}
}

// Close ends the event streams (the server is shutting down).
func (s *Service) Close() { s.once.Do(func() { close(s.done) }) }

// Keys are the service's room keys.
func (s *Service) Keys() roomkey.Keys { return s.keys }

// live returns sku's live round (cached for infoTTL unless fresh is set).
func (s *Service) live(ctx context.Context, sku string, fresh bool) (inventory.LiveRound, bool, error) {
	if c, hit := s.state.liveRound(sku); hit && !fresh && time.Since(c.read) < infoTTL {
		return c.r, c.ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	r, ok, err := s.stock.Live(ctx, sku)
	if err != nil {
		return r, ok, storeError("live round", err)
	}
	s.state.keepLive(sku, cachedInfo{r: r, ok: ok, read: time.Now()})
	return r, ok, nil
}

// storeError answers a store outage 503 and leaves anything else a bug.
func storeError(op string, err error) error {
	if ae := (*apperr.Error)(nil); errors.As(err, &ae) {
		return err
	}
	return outage.Wrap("waiting room: "+op, errUnavailable, err)
}

// roomKeys are the KEYS of join.lua and admit.lua (without the
// challenge's).
func (s *Service) roomKeys(sku string, round int64) []string {
	return []string{s.stock.SaleKey(sku), s.keys.State(sku, round), s.keys.Early(sku, round),
		s.keys.Late(sku, round), s.keys.Passes(sku), s.keys.Admissions(sku, round)}
}

func parseUser(id string) (uuid.UUID, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return u, fmt.Errorf("waiting room: user id %q: %w", id, err)
	}
	return u, nil
}

// Package room owns the waiting room of a sale round: its entries in
// Redis (who joined, in which order), the admitter that hands out passes
// at the round's rate, the challenge that gates a join, and the record of
// a finished room in PostgreSQL. The round's settings are inventory's;
// the pass is checked by the purchase scripts (order's lines.lua).
// More in docs/design/room.md.
package room

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
	keys  Keys
	log   *slog.Logger
	// rooms is the index of rooms to run or record (admitter.go).
	rooms string
	done  chan struct{} // closed by Close: event streams end
	once  sync.Once

	mu    sync.Mutex
	infos map[string]cachedInfo
	ids   map[idsKey]derivedIDs // what a shopper's entry derives from the room's secrets
	snaps map[string]*snapshot  // by SKU: what the admitter last read of its room (snapshot.go)
	ranks map[rankKey]*rankWait // the streams waiting on their admission (admitwait.go)
}

// idsKey names one shopper's entry in one round's room.
type idsKey struct {
	sku   string
	round int64
	user  uuid.UUID
}

// derivedIDs are the HMACs and digests of a shopper's entry: the same for
// every request of the round, and a tenth of a ticket read's CPU when
// made anew each time. at is the entry's place once a read has seen it:
// an early one before starts_at with rank -1, then from the first read
// after starts_at the final place (rank >= 0); pass the pass once a read
// has seen its admission, which is for good.
type derivedIDs struct {
	entryID, prefix, eventsURL string
	at                         place
	pass                       passInfo
}

// maxIDs bounds the derived ids kept (about 200 bytes each).
const maxIDs = 200_000

// idsOf returns user u's derived ids in sku's live round.
func (s *Service) idsOf(sku string, live inventory.LiveRound, u uuid.UUID) derivedIDs {
	k := idsKey{sku: sku, round: live.Round, user: u}
	s.mu.Lock()
	d, ok := s.ids[k]
	s.mu.Unlock()
	if ok {
		return d
	}
	id := EntryID(live.Room.Secret, u.String())
	key := OrderKey(live.Room.Seed, id)
	d = derivedIDs{entryID: id, prefix: string(key[:]) + string(u[:]), eventsURL: s.eventsURL(sku, u.String(), live.Room),
		at: place{rank: -1}}
	s.mu.Lock()
	if len(s.ids) >= maxIDs {
		clear(s.ids)
	}
	s.ids[k] = d
	s.mu.Unlock()
	return d
}

// placed keeps p as user u's place in sku's live round: an early one
// before the shuffle (rank -1) until its rank is known, then the final
// one; and pass once it is known.
func (s *Service) placed(sku string, live inventory.LiveRound, u uuid.UUID, p place, pass passInfo) {
	if p.rank < 0 && !p.early {
		return
	}
	k := idsKey{sku: sku, round: live.Round, user: u}
	s.mu.Lock()
	if d, ok := s.ids[k]; ok {
		// An answer read before the shuffle that comes back after one read
		// since must not take the rank away.
		if p.rank >= 0 || d.at.rank < 0 {
			d.at = p
		}
		if pass.pass != "" {
			d.pass = pass
		}
		s.ids[k] = d
	}
	s.mu.Unlock()
}

type cachedInfo struct {
	r    inventory.LiveRound
	ok   bool
	read time.Time
}

// Options are the optional parts of a Service.
type Options struct{}

// New returns the room service on the live stock's Redis (its keys under
// prefix) and the database that records finished rooms.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger,
	_ Options) *Service {
	// The room's own Sales: it changes a room's rate and tells a missing
	// product from a missing room, and needs no rooms of its own.
	return &Service{rdb: rdb, db: db, stock: stock, sales: inventory.NewSales(db, stock), keys: NewKeys(stock), log: log,
		rooms: prefix + "rooms", done: make(chan struct{}), infos: map[string]cachedInfo{}, ids: map[idsKey]derivedIDs{},
		snaps: map[string]*snapshot{}, ranks: map[rankKey]*rankWait{}}
}

// Close ends the event streams (the server is shutting down).
func (s *Service) Close() { s.once.Do(func() { close(s.done) }) }

// Keys are the service's room keys.
func (s *Service) Keys() Keys { return s.keys }

// live returns sku's live round (cached for infoTTL unless fresh is set).
func (s *Service) live(ctx context.Context, sku string, fresh bool) (inventory.LiveRound, bool, error) {
	s.mu.Lock()
	c, hit := s.infos[sku]
	s.mu.Unlock()
	if hit && !fresh && time.Since(c.read) < infoTTL {
		return c.r, c.ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	r, ok, err := s.stock.Live(ctx, sku)
	if err != nil {
		return r, ok, storeError("live round", err)
	}
	s.mu.Lock()
	if len(s.infos) > 10_000 { // SKUs probed by anyone: keep the map bounded
		clear(s.infos)
	}
	s.infos[sku] = cachedInfo{r: r, ok: ok, read: time.Now()}
	s.mu.Unlock()
	return r, ok, nil
}

// forget drops what the instance read of sku's live round.
func (s *Service) forget(sku string) {
	s.mu.Lock()
	delete(s.infos, sku)
	s.mu.Unlock()
}

// EntryID is the public id of user's entry in a room whose secret is
// secret: an HMAC of the user id, so it is the same on every join and
// unguessable without the secret.
func EntryID(secret, user string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// OrderKey is an early entry's place in the shuffle: the hex SHA-256 of
// seed ":" entry_id (docs/api.md); early entries go in ascending order of it.
func OrderKey(seed, entryID string) [32]byte {
	return sha256.Sum256([]byte(seed + ":" + entryID))
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

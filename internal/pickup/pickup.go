// Package pickup keeps the shop's pickup stores: rows in PostgreSQL (the
// system of record) indexed in a Redis geo set for "stores near me"
// (GEOSEARCH FROMLONLAT BYRADIUS ASC WITHDIST COUNT, the seeds' geospatial
// pattern).
//
// The reasoning behind it is in docs/design/pickup.md.
package pickup

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/lock"
)

// Errors of the package (wrapped).
var (
	// ErrNotFound: no store has the id.
	ErrNotFound = apperr.NewError(apperr.CodeNotFound, "store not found")
	// errDatabaseDown: PostgreSQL did not answer.
	errDatabaseDown = apperr.Unavailable("the store database is unreachable; retry shortly")
	// errIndexDown: Redis did not answer.
	errIndexDown = apperr.Unavailable("the store index is unreachable; retry shortly")
	// errIndexLag: the row is written but the index may not show it yet.
	errIndexLag = apperr.Unavailable("the store was recorded but the nearby index was not updated; retry the same request")
	// errRebuildRaced: every rebuild attempt raced an admin write.
	errRebuildRaced = apperr.Unavailable("the store index is being rebuilt; retry shortly")
)

// Bounds of the API (docs/api.md).
const (
	MaxLng           = 180.0
	MaxLat           = 85.05112878
	DefaultRadiusKm  = 10.0
	MaxRadiusKm      = 1000.0
	DefaultLimit     = 10
	MaxLimit         = 50
	maxNameLen       = 200
	maxAddressLen    = 500
	reservedID       = "nearby"
	dbTimeout        = 3 * time.Second
	redisTimeout     = 2 * time.Second
	lockName         = "stores-index"
	lockTTL          = 30 * time.Second
	rebuildAttempts  = 5
	rebuildPause     = 100 * time.Millisecond
	copyTTL          = 10 * time.Minute
	rebuildChunk     = 500
	indexWaitTimeout = 5 * time.Second
)

// Store is a pickup store.
type Store struct {
	ID      string  `json:"id"`
	Name    string  `json:"name"`
	Address string  `json:"address"`
	Lng     float64 `json:"lng"`
	Lat     float64 `json:"lat"`
}

// Nearby is a store and its distance from the searched point.
type Nearby struct {
	Store
	DistanceKm float64 `json:"distance_km"`
}

// Query is a nearby search (checked by the handler).
type Query struct {
	Lng, Lat, RadiusKm float64
	Limit              int
}

// Service keeps the stores. Make it with New.
type Service struct {
	db     *pgxpool.Pool
	rdb    redis.UniversalClient
	locker *lock.Locker
	prefix string
	log    *slog.Logger
	// beforeSwap, when set, runs between a rebuild's snapshot and its swap
	// (tests put a racing write there).
	beforeSwap func()
}

// New returns the service on db, indexing in rdb under prefix, rebuilding
// under locker.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, locker *lock.Locker, prefix string, log *slog.Logger) *Service {
	return &Service{db: db, rdb: rdb, locker: locker, prefix: prefix, log: log}
}

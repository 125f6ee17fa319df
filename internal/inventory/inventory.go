// Package inventory owns the catalog: products in PostgreSQL, served through
// the Redis cache of internal/cache.
//
// # Reads
//
// Get and List read through the cache (cache-aside), and with the cache's
// near cache on (SHOP_NEAR_CACHE_TTL) through this process's copy of
// recent reads first, so a hot product costs no round trip at all. With
// a ReadGate (WithReadGate) and both off, Get reads the document and the
// live stock in the gate's script call (the shop's: the rate limiter's
// window), one round trip in all (oneread.go). A product entry is the
// product without its live stock. Listings are cached in chunks of 100
// rows at fixed offsets, whatever the limit, tagged "category:<c>", or
// "category:*" when unfiltered, beside one entry with every category's
// product count (tagged "category:*"), so anonymous reads can make the
// cache hold at most one copy of the catalog (see listing.go). A missing
// sku is cached briefly as not found.
//
// The cache may live in a Redis of its own (SHOP_CACHE_REDIS_URL), apart
// from the live stock, orders and sessions, and may evict there.
//
// # Writes
//
// Create, Update and Delete write PostgreSQL first, then write the product
// entry through (or drop it) and invalidate the listing tags the product
// belongs to: its old and new category and the unfiltered listings. The
// cache's generation fences keep a fill that loaded before the write from
// storing the old row afterwards (see internal/cache), so once a write
// returns every read, in any process sharing the Redis, sees it; with the
// near cache on, every read in the writing process, and in the others as
// soon as they hear the write's invalidation (Pub/Sub, normally within
// milliseconds; at worst, a lost message, after SHOP_NEAR_CACHE_TTL). When Redis
// fails after the database write has committed, the write still succeeds
// (PostgreSQL is the system of record), a warning is logged, and stale
// entries expire with their TTL.
//
// # Live stock
//
// A product's `available` is never cached with it: it is the sale state
// hash "<prefix>sale:{<sku>}", field "available", kept by the flash-sale
// code, and 0 when there is none. With a StockView (WithStockView; `shop
// serve` has one unless SHOP_NEAR_CACHE_TTL is 0) it comes from the
// instance's picture of the published stock changes, at most the view's
// TTL old (view.go); otherwise it is read from Redis on every request.
// It is display only: purchases check the live keys themselves.
// When Redis is down the catalog still answers from PostgreSQL and reports
// available 0 with a logged warning: a product page without stock beats no
// page, and the purchase path never trusts this number anyway.
//
// # Sale rounds and live stock
//
// Sales records each seeding in PostgreSQL and Stock opens it in Redis
// (stock.go documents the keys and their format). The sale rounds' sold
// counts are this package's too: the order writer adds to them through
// RecordSold, inside its own transaction. The order package's reserve
// script takes stock on the keys Stock hands it (SaleKey, BuyersKey);
// Release (release.lua) is its exact inverse for one order, once per
// order id. Every change of live stock (seeding, a reservation, a release,
// Close) publishes the state it leaves on the SKU's Pub/Sub channel in the
// same atomic step (changes.go): internal/live fans it out to the live
// stock streams.
//
// # Failures
//
// Every database call is bounded by dbTimeout, every cache call by the
// cache's own timeouts and every live stock read by redisTimeout. PostgreSQL unreachable (and the entry not
// cached) answers 503 unavailable, never a 500 or a hang.
package inventory

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/api"
	"github.com/shop-oss/shop/internal/cache"
)

// Errors returned by the Catalog's methods (wrapped).
var (
	// ErrProductNotFound: no product has the sku.
	ErrProductNotFound = api.NewError(api.CodeNotFound, "product not found")
	// ErrSKUTaken: Create was given a sku that already exists.
	ErrSKUTaken = api.NewError(api.CodeSKUTaken, "a product with this sku already exists")
	// errDatabaseDown: PostgreSQL did not answer.
	errDatabaseDown = api.Unavailable("the catalog database is unreachable; retry shortly")
	// errCacheDown: Redis did not answer an operation that needs it.
	errCacheDown = api.Unavailable("the catalog cache is unreachable; retry shortly")
)

// Bounds of list pages.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Timeouts of the stores, so that an outage answers 503 within seconds.
const (
	dbTimeout    = 3 * time.Second
	redisTimeout = time.Second
)

// Product is a catalog item as the API shows it.
type Product struct {
	SKU         string `json:"sku"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
	PriceCents  int64  `json:"price_cents"`
	// Available is the live stock; never cached with the product.
	Available int64     `json:"available"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ProductInput is what an admin sets on a product.
type ProductInput struct {
	Name        string
	Description string
	Category    string
	PriceCents  int64
}

// Page is one page of a listing. NextCursor is nil on the last page.
type Page struct {
	Items      []Product `json:"items"`
	NextCursor *string   `json:"next_cursor"`
}

// Catalog is the catalog service. Make it with NewCatalog.
type Catalog struct {
	db    *pgxpool.Pool
	stock *Stock
	cache *cache.Cache
	view  *StockView // nil: available is read from Redis every time
	// gate is the request's ReadGate (oneread.go); nil: none.
	gate func(context.Context) ReadGate
	log  *slog.Logger
}

// CatalogOption changes how NewCatalog builds the catalog.
type CatalogOption func(*Catalog)

// WithStockView makes reads take the available stock from v where it has
// it (see StockView); the instance's live stock subscription must feed v.
func WithStockView(v *StockView) CatalogOption { return func(s *Catalog) { s.view = v } }

// NewCatalog returns the catalog on db, reading live stock from rdb under
// the key prefix and caching through c (which may use another Redis).
func NewCatalog(db *pgxpool.Pool, rdb redis.UniversalClient, c *cache.Cache, prefix string, log *slog.Logger, opts ...CatalogOption) *Catalog {
	return NewCatalogOn(db, NewStock(rdb, prefix), c, log, opts...)
}

// NewCatalogOn returns the catalog on db whose live stock is stock (a
// partitioned one, on a cluster).
func NewCatalogOn(db *pgxpool.Pool, stock *Stock, c *cache.Cache, log *slog.Logger, opts ...CatalogOption) *Catalog {
	s := &Catalog{db: db, stock: stock, cache: c, log: log}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Package inventory owns the catalog: products in PostgreSQL, served through
// the Redis cache of internal/cache.
//
// The reasoning behind it is in docs/design/inventory.md.
package inventory

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/cache"
)

// Errors returned by the Catalog's methods (wrapped).
var (
	// ErrProductNotFound: no product has the sku.
	ErrProductNotFound = apperr.NewError(apperr.CodeNotFound, "product not found")
	// ErrSKUTaken: Create was given a sku that already exists.
	ErrSKUTaken = apperr.NewError(apperr.CodeSKUTaken, "a product with this sku already exists")
	// errDatabaseDown: PostgreSQL did not answer.
	errDatabaseDown = apperr.Unavailable("the catalog database is unreachable; retry shortly")
	// errCacheDown: Redis did not answer an operation that needs it.
	errCacheDown = apperr.Unavailable("the catalog cache is unreachable; retry shortly")
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
	// ImageURL is after UpdatedAt so that productJSON finds available
	// where it expects it.
	ImageURL ImageURL `json:"image_url"`
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
	log   *slog.Logger
}

// CatalogOptions are the optional parts of a Catalog; the zero value is
// the defaults.
type CatalogOptions struct {
	// View, when set, gives reads the available stock where it has it
	// (see StockView); the instance's live stock subscription must feed
	// it. Nil: available is read from Redis every time.
	View *StockView
}

// NewCatalog returns the catalog on db, reading live stock from rdb under
// the key prefix and caching through c (which may use another Redis).
func NewCatalog(db *pgxpool.Pool, rdb redis.UniversalClient, c *cache.Cache, prefix string, log *slog.Logger) *Catalog {
	return NewCatalogOn(db, NewStock(rdb, prefix), c, log, CatalogOptions{})
}

// NewCatalogOn returns the catalog on db whose live stock is stock (a
// partitioned one, on a cluster).
func NewCatalogOn(db *pgxpool.Pool, stock *Stock, c *cache.Cache, log *slog.Logger, o CatalogOptions) *Catalog {
	return &Catalog{db: db, stock: stock, cache: c, log: log, view: o.View}
}

package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/shop-oss/shop/internal/outage"
)

// The SQL the database sees.
const (
	productColumns = `sku, name, description, category, price_cents, updated_at, ` + imageColumn

	// The product's image hash, '' without one (images.go).
	imageColumn = `COALESCE((SELECT i.sha256 FROM product_images i WHERE i.sku = products.sku), '')`

	selectProductSQL = `SELECT ` + productColumns + ` FROM products WHERE sku = $1`

	// Keyset pagination: the page after the cursor's sku, one row more
	// than asked to learn whether another page follows.
	listAllSQL = `SELECT ` + productColumns + ` FROM products
WHERE sku > $1 ORDER BY sku LIMIT $2`
	listCategorySQL = `SELECT ` + productColumns + ` FROM products
WHERE category = $1 AND sku > $2 ORDER BY sku LIMIT $3`

	// A listing's chunk k (listing.go): rows at a fixed offset, one row
	// more than a chunk to learn whether another follows.
	chunkAllSQL = `SELECT ` + productColumns + ` FROM products
ORDER BY sku OFFSET $1 LIMIT $2`
	chunkCategorySQL = `SELECT ` + productColumns + ` FROM products
WHERE category = $1 ORDER BY sku OFFSET $2 LIMIT $3`

	// The product count of every category, by the (category, sku) index.
	listSizesSQL = `SELECT category, count(*) FROM products GROUP BY category`

	insertProductSQL = `INSERT INTO products (sku, name, description, category, price_cents)
VALUES ($1, $2, $3, $4, $5)
RETURNING ` + productColumns

	// The CTE locks the row and keeps its old category, whose listings
	// the update must invalidate too.
	updateProductSQL = `WITH old AS (SELECT sku, category FROM products WHERE sku = $1 FOR UPDATE)
UPDATE products p
SET name = $2, description = $3, category = $4, price_cents = $5, updated_at = now()
FROM old WHERE p.sku = old.sku
RETURNING p.sku, p.name, p.description, p.category, p.price_cents, p.updated_at,
	COALESCE((SELECT i.sha256 FROM product_images i WHERE i.sku = p.sku), ''), old.category`

	deleteProductSQL = `DELETE FROM products WHERE sku = $1 RETURNING category`
)

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

// record is a product row: what the cache holds (never the live stock).
type record struct {
	SKU         string    `json:"sku"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Category    string    `json:"category"`
	PriceCents  int64     `json:"price_cents"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Image is the hex SHA-256 of the product's image, "" without one.
	Image string `json:"image,omitempty"`
}

func (r record) product(available int64) Product {
	return Product{SKU: r.SKU, Name: r.Name, Description: r.Description, Category: r.Category,
		PriceCents: r.PriceCents, Available: available, UpdatedAt: r.UpdatedAt, ImageURL: imageURL(r.SKU, r.Image)}
}

func scanRecord(row pgx.Row, extra ...any) (record, error) {
	var r record
	dest := append([]any{&r.SKU, &r.Name, &r.Description, &r.Category, &r.PriceCents, &r.UpdatedAt, &r.Image}, extra...)
	err := row.Scan(dest...)
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r, err
}

// selectProduct returns the row of sku, or ErrProductNotFound.
func (s *Catalog) selectProduct(ctx context.Context, sku string) (record, error) {
	return s.selectProductOn(ctx, s.db, sku)
}

// selectProductOn is selectProduct on q (a connection holding the
// product's lock).
func (s *Catalog) selectProductOn(ctx context.Context, q rowQuerier, sku string) (record, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	r, err := scanRecord(q.QueryRow(ctx, selectProductSQL, sku))
	if errors.Is(err, pgx.ErrNoRows) {
		return record{}, fmt.Errorf("select product %s: %w", sku, ErrProductNotFound)
	}
	if err != nil {
		return record{}, dbError("select product "+sku, err)
	}
	return r, nil
}

// selectPage returns up to limit rows after the sku after, and whether
// more follow.
func (s *Catalog) selectPage(ctx context.Context, category, after string, limit int) ([]record, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, err := s.queryListing(ctx, category, listAllSQL, listCategorySQL, after, limit+1)
	return collectPage(rows, err, limit)
}

// queryListing runs a listing's query over every category, or its variant
// for one category, whose first parameter is the category.
func (s *Catalog) queryListing(ctx context.Context, category, allSQL, categorySQL string, args ...any) (pgx.Rows, error) {
	if category == "" {
		return s.db.Query(ctx, allSQL, args...)
	}
	return s.db.Query(ctx, categorySQL, append([]any{category}, args...)...)
}

// collectPage reads up to limit rows of a query that asked for one more,
// and whether that one came.
func collectPage(rows pgx.Rows, err error, limit int) ([]record, bool, error) {
	recs, err := collectRecords(rows, err)
	if err != nil {
		return nil, false, err
	}
	if len(recs) > limit {
		return recs[:limit], true, nil
	}
	return recs, false, nil
}

// collectRecords reads the rows of a listing query.
func collectRecords(rows pgx.Rows, err error) ([]record, error) {
	if err != nil {
		return nil, dbError("list products", err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (record, error) { return scanRecord(row) })
	if err != nil {
		return nil, dbError("list products", err)
	}
	return recs, nil
}

// selectChunk returns chunk k of a listing.
func (s *Catalog) selectChunk(ctx context.Context, category string, k int) (chunk, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	offset := k * chunkSize
	recs, err := collectRecords(s.queryListing(ctx, category, chunkAllSQL, chunkCategorySQL, offset, chunkSize+1))
	c := chunk{Items: recs}
	if len(recs) > chunkSize {
		c.Items, c.More, c.Next = recs[:chunkSize], true, recs[chunkSize].SKU
	}
	return c, err
}

// selectSizes counts the products of every category.
func (s *Catalog) selectSizes(ctx context.Context) (listSizes, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, err := s.db.Query(ctx, listSizesSQL)
	if err != nil {
		return listSizes{}, dbError("count products", err)
	}
	sizes := listSizes{Categories: map[string]int64{}}
	var category string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&category, &n}, func() error {
		sizes.Categories[category] = n
		sizes.Total += n
		return nil
	})
	if err != nil {
		return listSizes{}, dbError("count products", err)
	}
	return sizes, nil
}

// insertProduct returns the new row, or ErrSKUTaken.
func (s *Catalog) insertProduct(ctx context.Context, sku string, in ProductInput) (record, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	r, err := scanRecord(s.db.QueryRow(ctx, insertProductSQL, sku, in.Name, in.Description, in.Category, in.PriceCents))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
		return record{}, fmt.Errorf("insert product %s: %w", sku, ErrSKUTaken)
	}
	if err != nil {
		return record{}, dbError("insert product "+sku, err)
	}
	return r, nil
}

// updateProduct returns the updated row and the category it had before, or
// ErrProductNotFound.
func (s *Catalog) updateProduct(ctx context.Context, q rowQuerier, sku string, in ProductInput) (record, string, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var oldCategory string
	r, err := scanRecord(q.QueryRow(ctx, updateProductSQL, sku, in.Name, in.Description, in.Category, in.PriceCents), &oldCategory)
	if errors.Is(err, pgx.ErrNoRows) {
		return record{}, "", fmt.Errorf("update product %s: %w", sku, ErrProductNotFound)
	}
	if err != nil {
		return record{}, "", dbError("update product "+sku, err)
	}
	return r, oldCategory, nil
}

// deleteProduct returns the deleted product's category, or
// ErrProductNotFound.
func (s *Catalog) deleteProduct(ctx context.Context, q rowQuerier, sku string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var category string
	err := q.QueryRow(ctx, deleteProductSQL, sku).Scan(&category)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("delete product %s: %w", sku, ErrProductNotFound)
	}
	if err != nil {
		return "", dbError("delete product "+sku, err)
	}
	return category, nil
}

// dbError wraps err from PostgreSQL. An outage (outage.Is: no
// connection, a timeout, a server shutting down or overloaded) is a 503;
// anything else, such as an error the server reported about the
// statement, stays an internal error.
func dbError(op string, err error) error {
	if !outage.Is(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, errDatabaseDown, err)
}

package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/outage"
)

// Get returns the product with the sku. It returns ErrProductNotFound
// (also for a sku that is not well-formed) or a 503 error when PostgreSQL
// is unreachable and the product is not cached.
func (s *Catalog) Get(ctx context.Context, sku string) (Product, error) {
	return s.GetWith(ctx, sku, nil)
}

// GetWith is Get for a request whose checks wait to run with its read
// (onetrip.Of; nil: none). Errors: Get's, or the checks' refusal.
func (s *Catalog) GetWith(ctx context.Context, sku string, checks *onetrip.Checks) (Product, error) {
	if !ValidSKU(sku) {
		return Product{}, fmt.Errorf("get product %q: %w", sku, ErrProductNotFound)
	}
	if p, ok, err := s.getChecked(ctx, sku, checks); ok {
		return p, err
	}
	// A record holds no slice or map: near hits may share one.
	rec, err := cache.GetJSONShared(ctx, s.cache, productKey(sku), nil, s.loadProduct(sku))
	if err != nil {
		return Product{}, s.getError(sku, err)
	}
	return rec.product(s.available(ctx, []string{sku})[0]), nil
}

// List returns the page of products after cursor ("" for the first),
// ordered by sku, of one category or of all ("" ). limit 0 means
// DefaultLimit. It returns an invalid_request error naming every bad
// parameter, or a 503 error as Get does. How pages are cached: listing.go.
func (s *Catalog) List(ctx context.Context, category string, limit int, cursor string) (Page, error) {
	if err := invalid(validateList(category, limit, cursor)); err != nil {
		return Page{}, err
	}
	if limit == 0 {
		limit = DefaultLimit
	}
	cur, _ := decodeCursor(cursor)
	recs, next, err := s.listPage(ctx, category, cur, limit)
	if err != nil {
		return Page{}, readError("list products", err)
	}
	return s.page(ctx, recs, next), nil
}

// page adds the live stock to a page's rows.
func (s *Catalog) page(ctx context.Context, recs []record, next *listCursor) Page {
	skus := make([]string, len(recs))
	for i, r := range recs {
		skus[i] = r.SKU
	}
	avail := s.available(ctx, skus)
	p := Page{Items: make([]Product, len(recs))}
	for i, r := range recs {
		p.Items[i] = r.product(avail[i])
	}
	if next != nil {
		c := encodeCursor(*next)
		p.NextCursor = &c
	}
	return p
}

// Create adds a product. It returns an invalid_request error naming every
// bad field, ErrSKUTaken, or a 503 error when PostgreSQL is unreachable.
func (s *Catalog) Create(ctx context.Context, sku string, in ProductInput) (Product, error) {
	if err := invalid(append(checkCode("sku", sku), validateInput(in)...)); err != nil {
		return Product{}, err
	}
	f := s.cache.Fence(ctx, productKey(sku))
	rec, err := s.insertProduct(ctx, sku, in)
	if err != nil {
		return Product{}, err
	}
	s.afterWrite(ctx, f, &rec, rec.Category)
	return rec.product(s.available(ctx, []string{sku})[0]), nil
}

// Update replaces a product's fields. It returns ErrProductNotFound, an
// invalid_request error naming every bad field, or a 503 error.
func (s *Catalog) Update(ctx context.Context, sku string, in ProductInput) (Product, error) {
	if !ValidSKU(sku) {
		return Product{}, fmt.Errorf("update product %q: %w", sku, ErrProductNotFound)
	}
	if err := invalid(validateInput(in)); err != nil {
		return Product{}, err
	}
	conn, unlock, err := lockSale(ctx, s.db, sku)
	if err != nil {
		return Product{}, err
	}
	defer unlock()
	f := s.cache.Fence(ctx, productKey(sku))
	rec, oldCategory, err := s.updateProduct(ctx, conn, sku, in)
	if err != nil {
		return Product{}, err
	}
	s.afterWrite(ctx, f, &rec, oldCategory, rec.Category)
	// Purchases take the product's price at that moment: the live round
	// must follow. Unlike the cache this is not allowed to lag, so a
	// failure is the admin's to retry.
	if err := s.stock.SetPrice(context.WithoutCancel(ctx), sku, rec.PriceCents); err != nil {
		return Product{}, fmt.Errorf("update product %s: %w: %w", sku, errCacheDown, err)
	}
	return rec.product(s.available(ctx, []string{sku})[0]), nil
}

// Delete removes a product. It returns ErrProductNotFound or a 503 error.
func (s *Catalog) Delete(ctx context.Context, sku string) error {
	if !ValidSKU(sku) {
		return fmt.Errorf("delete product %q: %w", sku, ErrProductNotFound)
	}
	conn, unlock, err := lockSale(ctx, s.db, sku)
	if err != nil {
		return err
	}
	defer unlock()
	f := s.cache.Fence(ctx, productKey(sku))
	category, err := s.deleteProduct(ctx, conn, sku)
	if err != nil {
		return err
	}
	s.afterWrite(ctx, f, nil, category)
	// A deleted product cannot be bought: its live sale ends now. Orders
	// already reserved are still persisted by the writer.
	if err := s.stock.Close(context.WithoutCancel(ctx), sku); err != nil {
		return fmt.Errorf("delete product %s: %w: %w", sku, errCacheDown, err)
	}
	return nil
}

// InvalidateCategory drops the cached listings of category and the
// unfiltered listings (which show its products). It returns an
// invalid_request error for a malformed category, or a 503 error when
// Redis fails: the caller must retry, since nothing may have been dropped.
func (s *Catalog) InvalidateCategory(ctx context.Context, category string) error {
	if err := invalid(checkCode("category", category)); err != nil {
		return err
	}
	if err := s.invalidateListings(ctx, category); err != nil {
		return fmt.Errorf("invalidate category %s: %w: %w", category, errCacheDown, err)
	}
	return nil
}

// afterWrite brings the cache in line with a committed write: the product
// entry written through (or dropped when rec is nil) and the listings of
// the categories invalidated. It runs detached from the request's
// cancellation, since the database write is done whatever the client does;
// a failure is logged, not returned, and bounded by the TTL.
func (s *Catalog) afterWrite(ctx context.Context, f cache.Fence, rec *record, categories ...string) {
	ctx = context.WithoutCancel(ctx)
	var err error
	if rec != nil {
		err = cache.SetJSON(ctx, s.cache, f, *rec)
	} else {
		err = s.cache.Delete(ctx, f)
	}
	err = errors.Join(err, s.invalidateListings(ctx, categories...))
	if err != nil {
		s.log.WarnContext(ctx, "catalog write committed but the cache was not updated; stale reads until the TTL", "err", err)
	}
}

// invalidateListings drops the listing tags of categories (duplicates
// skipped) and of the unfiltered listings.
func (s *Catalog) invalidateListings(ctx context.Context, categories ...string) error {
	tags := []string{categoryTag("")}
	for _, c := range categories {
		if t := categoryTag(c); !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	var errs []error
	for _, t := range tags {
		errs = append(errs, s.cache.InvalidateTag(ctx, t))
	}
	return errors.Join(errs...)
}

// readError maps a failed read: the loader's errors are mapped already
// (dbError); an outage that reached us otherwise, such as a context that
// ran out while waiting for another request's load, is a 503 too.
func readError(op string, err error) error {
	var e *apperr.Error
	if errors.As(err, &e) || !outage.Is(err) {
		return err
	}
	return fmt.Errorf("%s: %w: %w", op, errDatabaseDown, err)
}

// Cache keys and tags of the catalog (the cache adds its own prefix).
func productKey(sku string) string { return "product:" + sku }

// listKey names chunk k of a listing (see listing.go).
func listKey(category string, k int) string {
	if category == "" {
		category = "*"
	}
	return "listing:" + category + ":" + strconv.Itoa(k)
}

// sizesKey names the entry of every category's product count; it is
// tagged categoryTag(""), which every write drops.
const sizesKey = "listing-sizes"

// categoryTag tags the listings of a category; "" is the unfiltered
// listing, "*" since no category can contain it.
func categoryTag(category string) string {
	if category == "" {
		return "category:*"
	}
	return "category:" + category
}

// Exists tells whether the catalog has sku, through the cache.
func (s *Catalog) Exists(ctx context.Context, sku string) (bool, error) {
	_, err := s.Get(ctx, sku)
	if errors.Is(err, ErrProductNotFound) {
		return false, nil
	}
	return err == nil, err
}

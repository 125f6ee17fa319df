package inventory

import (
	"context"
	"sort"

	"github.com/shop-oss/shop/internal/cache"
)

// Listings are cached in chunks of chunkSize rows at fixed offsets: chunk k
// of a listing holds its rows k·chunkSize+1 to (k+1)·chunkSize, whatever
// limit a client asks for, and a page is cut from one chunk or two.
// More in docs/design/inventory.md ("listing.go").
const chunkSize = MaxLimit

// chunk is a cached part of a listing: rows without live stock.
type chunk struct {
	Items []record `json:"items"`
	More  bool     `json:"more"` // rows follow the chunk
	// Next is the sku of the row after the chunk, when More: a page cut
	// from this chunk and the next one is whole only if the next one
	// starts there. Each chunk is one read of PostgreSQL, but two of them
	// may come from before and after a change of the listing (the first
	// read from the cache before an admin write dropped it, the second
	// loaded after), and then the rows at their boundary shifted.
	Next string `json:"next,omitempty"`
}

// listCursor is where a page starts: after the row with sku after, which
// lies in chunk k. k is -1 for a cursor that names no chunk (one handed
// out before chunks), which is always answered from PostgreSQL.
type listCursor struct {
	chunk int
	after string
}

// listSizes is the number of products of each category.
type listSizes struct {
	Total      int64            `json:"total"`
	Categories map[string]int64 `json:"categories"`
}

// listPage returns the rows of a page and the cursor of the next one (nil
// on the last page).
func (s *Catalog) listPage(ctx context.Context, category string, cur listCursor, limit int) ([]record, *listCursor, error) {
	sizes, err := cache.GetJSON(ctx, s.cache, sizesKey, []string{categoryTag("")}, s.selectSizes)
	if err != nil {
		return nil, nil, err
	}
	n := sizes.Total
	if category != "" {
		n = sizes.Categories[category]
	}
	switch {
	case n == 0:
		return nil, nil, nil
	case cur.chunk < 0 || int64(cur.chunk)*chunkSize >= n:
		return s.uncachedPage(ctx, category, cur, limit)
	}
	return s.chunkedPage(ctx, category, cur, limit)
}

// chunkedPage cuts the page from the cursor's chunk and, when the page
// runs past its end, the next one.
func (s *Catalog) chunkedPage(ctx context.Context, category string, cur listCursor, limit int) ([]record, *listCursor, error) {
	c, err := s.chunk(ctx, category, cur.chunk)
	if err != nil {
		return nil, nil, err
	}
	if !c.holds(cur) {
		return s.uncachedPage(ctx, category, cur, limit)
	}
	i := sort.Search(len(c.Items), func(i int) bool { return c.Items[i].SKU > cur.after })
	recs := append([]record(nil), c.Items[i:min(i+limit, len(c.Items))]...)
	k, more := cur.chunk, i+limit < len(c.Items) || c.More
	if len(recs) < limit && c.More {
		next, err := s.chunk(ctx, category, k+1)
		if err != nil {
			return nil, nil, err
		}
		if len(next.Items) == 0 || next.Items[0].SKU != c.Next {
			// The listing changed between the two chunks (or the first
			// was cached before chunks named their next row).
			return s.uncachedPage(ctx, category, cur, limit)
		}
		take := min(limit-len(recs), len(next.Items))
		recs = append(recs, next.Items[:take]...)
		if take > 0 {
			k, more = k+1, take < len(next.Items) || next.More
		}
	}
	if !more || len(recs) == 0 {
		return recs, nil, nil
	}
	return recs, &listCursor{chunk: k, after: recs[len(recs)-1].SKU}, nil
}

// holds tells whether the page after cur.after can be cut from c: the
// cursor's sku lies within the chunk (or before the first one), or past
// the listing's end. Otherwise rows between the cursor and the chunk
// would be skipped or repeated.
func (c chunk) holds(cur listCursor) bool {
	if cur.after == "" || len(c.Items) == 0 {
		return cur.chunk == 0
	}
	if cur.chunk > 0 && cur.after < c.Items[0].SKU {
		return false
	}
	return cur.after <= c.Items[len(c.Items)-1].SKU || !c.More
}

// chunk reads chunk k of a listing through the cache.
func (s *Catalog) chunk(ctx context.Context, category string, k int) (chunk, error) {
	return cache.GetJSON(ctx, s.cache, listKey(category, k), []string{categoryTag(category)},
		func(ctx context.Context) (chunk, error) { return s.selectChunk(ctx, category, k) })
}

// uncachedPage answers a page straight from PostgreSQL, by keyset. The
// next cursor keeps the chunk, so that a walk finds the cache again once
// it is back inside the chunks (or keeps asking PostgreSQL, which is
// always right).
func (s *Catalog) uncachedPage(ctx context.Context, category string, cur listCursor, limit int) ([]record, *listCursor, error) {
	recs, more, err := s.selectPage(ctx, category, cur.after, limit)
	if err != nil || !more || len(recs) == 0 {
		return recs, nil, err
	}
	return recs, &listCursor{chunk: cur.chunk, after: recs[len(recs)-1].SKU}, nil
}

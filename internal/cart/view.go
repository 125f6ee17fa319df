package cart

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
)

// lookupConcurrency bounds the parallel catalog reads of one cart view: a
// full cart costs a few round trips of latency instead of a hundred, and
// one request cannot take the whole connection pool.
const lookupConcurrency = 8

// read returns user's cart joined with the catalog.
func (s *Service) read(ctx context.Context, user string) (Cart, error) {
	lines, err := s.lines(ctx, user)
	if err != nil {
		return Cart{}, err
	}
	products, err := s.products(ctx, lines)
	if err != nil {
		return Cart{}, err
	}
	return price(lines, products), nil
}

// price builds the view: lines whose product is gone (nil) are reported
// apart and count for nothing.
func price(lines []order.Line, products []*inventory.Product) Cart {
	c := Cart{Items: make([]Item, 0, len(lines))}
	for i, l := range lines {
		p := products[i]
		if p == nil {
			c.UnavailableSKUs = append(c.UnavailableSKUs, l.SKU)
			continue
		}
		it := Item{SKU: l.SKU, Name: p.Name, PriceCents: p.PriceCents, Quantity: l.Quantity,
			LineTotalCents: p.PriceCents * int64(l.Quantity)}
		c.Items = append(c.Items, it)
		c.TotalCents += it.LineTotalCents
	}
	return c
}

// products looks up every line's product: nil where the catalog has none.
// Any other catalog error (a 503) fails the view.
func (s *Service) products(ctx context.Context, lines []order.Line) ([]*inventory.Product, error) {
	out := make([]*inventory.Product, len(lines))
	errs := make([]error, len(lines))
	sem := make(chan struct{}, lookupConcurrency)
	var wg sync.WaitGroup
	for i, l := range lines {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, err := s.catalog.Get(ctx, l.SKU)
			switch {
			case err == nil:
				out[i] = &p
			case !errors.Is(err, inventory.ErrProductNotFound):
				errs[i] = err
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("cart view: %w", err)
		}
	}
	return out, nil
}

package bestseller

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/outage"
)

//go:embed around.lua
var aroundLua string

var aroundScript = redis.NewScript(aroundLua)

// nameLookups bounds the catalog reads one answer makes at once.
const nameLookups = 8

// Top returns the first limit entries of the current board of period p
// (limit is trusted: the handler checks it). It returns a 503 error when
// Redis or the catalog does not answer.
func (s *Service) Top(ctx context.Context, p Period, limit int) (Board, error) {
	rctx, cancel := redisCtx(ctx)
	defer cancel()
	zs, err := s.rdb.ZRangeWithScores(rctx, s.keys.board(p, s.now()), 0, int64(limit-1)).Result()
	if err != nil {
		return Board{}, outage.Wrap(fmt.Sprintf("best sellers %s", p), errRedisDown, err)
	}
	items := entries(zs, 1)
	if err := s.name(ctx, items); err != nil {
		return Board{}, err
	}
	return Board{Period: p, Items: items}, nil
}

// Position returns sku's rank on the current board of period p and the
// around entries above and below it. It returns ErrNotRanked when sku sold
// nothing in the period, or a 503 error.
func (s *Service) Position(ctx context.Context, p Period, sku string, around int) (Position, error) {
	if !inventory.ValidSKU(sku) {
		return Position{}, fmt.Errorf("best seller %q: %w", sku, ErrNotRanked)
	}
	rctx, cancel := redisCtx(ctx)
	defer cancel()
	v, err := aroundScript.Run(rctx, s.rdb, []string{s.keys.board(p, s.now())}, sku, around).Slice()
	if errors.Is(err, redis.Nil) {
		return Position{}, fmt.Errorf("best seller %s in %s: %w", sku, p, ErrNotRanked)
	}
	if err != nil {
		return Position{}, outage.Wrap(fmt.Sprintf("best seller %s", sku), errRedisDown, err)
	}
	pos, err := parsePosition(p, sku, v)
	if err != nil {
		return Position{}, err
	}
	return pos, s.name(ctx, pos.Above, pos.Below)
}

// parsePosition reads around.lua's reply.
func parsePosition(p Period, sku string, v []any) (Position, error) {
	rank, _ := v[0].(int64)
	from, _ := v[1].(int64)
	flat, _ := v[2].([]any)
	var zs []redis.Z
	for i := 0; i+1 < len(flat); i += 2 {
		member, _ := flat[i].(string)
		raw, _ := flat[i+1].(string)
		score, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return Position{}, fmt.Errorf("best seller %s: score %q: %w", sku, raw, err)
		}
		zs = append(zs, redis.Z{Member: member, Score: score})
	}
	all := entries(zs, from+1)
	pos := Position{Period: p, SKU: sku, Rank: rank + 1, Above: []Entry{}, Below: []Entry{}}
	for _, e := range all {
		switch {
		case e.Rank < pos.Rank:
			pos.Above = append(pos.Above, e)
		case e.Rank > pos.Rank:
			pos.Below = append(pos.Below, e)
		default:
			pos.Units = e.Units
		}
	}
	return pos, nil
}

// entries turns board members into entries ranked from first on.
func entries(zs []redis.Z, first int64) []Entry {
	out := make([]Entry, len(zs))
	for i, z := range zs {
		sku, _ := z.Member.(string)
		out[i] = Entry{Rank: first + int64(i), SKU: sku, Units: int64(-z.Score)}
	}
	return out
}

// name fills in the entries' names from the cached catalog. A product
// deleted since it sold keeps its place with an empty name.
func (s *Service) name(ctx context.Context, lists ...[]Entry) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(nameLookups)
	for _, list := range lists {
		for i := range list {
			e := &list[i]
			g.Go(func() error {
				p, err := s.catalog.Get(gctx, e.SKU)
				if errors.Is(err, inventory.ErrProductNotFound) {
					return nil
				}
				e.Name = p.Name
				return err
			})
		}
	}
	return g.Wait()
}

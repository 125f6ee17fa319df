package cart

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/order"
)

// redisTimeout bounds every cart round trip: under an outage the shopper
// gets a quick 503, never a hang.
const redisTimeout = time.Second

var (
	//go:embed add.lua
	addLua    string
	addScript = redis.NewScript(addLua)

	//go:embed set.lua
	setLua    string
	setScript = redis.NewScript(setLua)
)

// Replies of the add and set scripts that refuse a change.
const (
	replyCartFull = -1
	replyLineFull = -2
)

// key is user's cart: the one name the cart scripts and the checkout's
// reserve script (as its CartKey) both use. The {user} hash tag keeps it
// in the slot of the buyer's other order keys.
func (s *Service) key(user string) string { return s.prefix + "cart:{" + user + "}" }

// change runs the add or set script for one line and maps a refusal to
// the invalid_request the shopper gets.
func (s *Service) change(ctx context.Context, script *redis.Script, user, sku string, quantity int) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	reply, err := script.Run(ctx, s.rdb, []string{s.key(user)},
		sku, quantity, MaxLines, MaxQuantity, TTL.Milliseconds()).Int()
	if err != nil {
		return s.unavailable("change cart", err)
	}
	switch reply {
	case replyCartFull:
		return apperr.Invalid(apperr.FieldError{Field: "sku",
			Message: fmt.Sprintf("the cart already holds %d lines, the most it may; remove one first", MaxLines)})
	case replyLineFull:
		return apperr.Invalid(apperr.FieldError{Field: "quantity",
			Message: fmt.Sprintf("a line may hold at most %d units", MaxQuantity)})
	}
	return nil
}

// lines reads user's cart, sorted by sku (none when it does not exist).
func (s *Service) lines(ctx context.Context, user string) ([]order.Line, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	m, err := s.rdb.HGetAll(ctx, s.key(user)).Result()
	if err != nil {
		return nil, s.unavailable("read cart", err)
	}
	return parseLines(m)
}

// parseLines turns the hash into lines. Only the scripts write it, so a
// field that is not a positive quantity is a bug, reported as one.
func parseLines(m map[string]string) ([]order.Line, error) {
	lines := make([]order.Line, 0, len(m))
	for sku, v := range m {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("cart line %q: bad quantity %q", sku, v)
		}
		lines = append(lines, order.Line{SKU: sku, Quantity: n})
	}
	slices.SortFunc(lines, func(a, b order.Line) int { return strings.Compare(a.SKU, b.SKU) })
	return lines, nil
}

package live

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/outage"
)

// ProductExists tells whether the catalog has a SKU; a stream asks it only
// for a SKU without live stock, to answer 404 for an unknown one.
type ProductExists func(ctx context.Context, sku string) (bool, error)

// ClientIP names the client a request comes from, as the rate limiter
// counts it (server.ClientIP).
type ClientIP func(*fiber.Ctx) string

var errNoProduct = apperr.NewError(apperr.CodeNotFound, "product not found")

// readTimeout bounds the first state's read, so that a stalled Redis
// answers 503 instead of holding the request.
const readTimeout = 2 * time.Second

// Routes registers the live stock stream on r (the /api/v1 router).
func (h *Hub) Routes(r fiber.Router, exists ProductExists, clientIP ClientIP) {
	hd := handler{hub: h, exists: exists, clientIP: clientIP}
	r.Get("/products/:sku/events", hd.events)
}

type handler struct {
	hub      *Hub
	exists   ProductExists
	clientIP ClientIP
}

// events answers a stream: registered first, so no change made while the
// first state is read is missed, then the first state, read from the live
// keys. The stream itself runs after the handler returns, in fasthttp's
// body stream writer.
func (h handler) events(c *fiber.Ctx) error {
	sku := strings.Clone(c.Params("sku"))
	if !inventory.ValidSKU(sku) {
		return errNoProduct
	}
	sub, err := h.hub.subscribe(sku, h.clientIP(c))
	if err != nil {
		return err
	}
	first, err := h.first(c.UserContext(), sku)
	if err != nil {
		h.hub.unsubscribe(sub)
		return err
	}
	h.hub.started(sub, first)
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no") // a buffering proxy would hold the events
	// The connection serves nothing after the stream: its watcher may read
	// it (see stream.watch).
	c.Context().Response.SetConnectionClose()
	s := &stream{h: h.hub, sub: sub, conn: c.Context().Conn()}
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		s.w = w
		s.run(first)
	})
	return nil
}

// first reads sku's live state; a SKU without one must be in the catalog.
func (h handler) first(ctx context.Context, sku string) (inventory.Change, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	c, err := h.hub.current(ctx, sku)
	if err != nil {
		return c, unavailable(err)
	}
	if c.Round != 0 {
		return c, nil
	}
	ok, err := h.exists(ctx, sku)
	switch {
	case err != nil:
		return c, unavailable(err)
	case !ok:
		return c, errNoProduct
	}
	return c, nil
}

// unavailable answers a store outage 503; anything else is a bug (500).
func unavailable(err error) error {
	if ae := (*apperr.Error)(nil); errors.As(err, &ae) {
		return err // already answered by the store (a 503)
	}
	if outage.Is(err) {
		return fmt.Errorf("live stock: %w: %w", apperr.Unavailable("the store is unavailable"), err)
	}
	return fmt.Errorf("live stock: %w", err)
}

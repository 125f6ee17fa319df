package room

import (
	"bufio"
	"context"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/server"
)

// Bounds of the entry list's pages (docs/api.md).
const (
	DefaultEntries = 100
	MaxEntries     = 1000
)

// OneTripRoutes registers the join and the ticket read, whose checks ride
// with join.lua: ride is their route-level check (internal/onetrip's
// Ride).
func (s *Service) OneTripRoutes(r fiber.Router, ride, requireUser fiber.Handler) {
	h := handler{s}
	r.Post("/products/:sku/queue", ride, requireUser, h.join)
	r.Get("/products/:sku/queue", ride, requireUser, h.ticket)
}

// Routes registers the room's routes: the shopper's behind requireUser,
// the admin's behind requireAdmin; the fairness answer and the ticket
// stream (its URL is its credential) are public.
func (s *Service) Routes(r fiber.Router, requireUser, requireAdmin fiber.Handler) {
	h := handler{s}
	r.Get("/products/:sku/queue/challenge", requireUser, h.challenge)
	r.Get("/products/:sku/queue/fairness", h.fairness)
	r.Get("/products/:sku/queue/events/:token", h.events)
	r.Get("/admin/products/:sku/queue", requireAdmin, h.adminView)
	r.Patch("/admin/products/:sku/queue", requireAdmin, h.setRate)
	r.Get("/admin/products/:sku/queue/entries", requireAdmin, h.entryList)
}

type handler struct{ svc *Service }

// notFound tells a room that is missing because the product is from one
// that is missing because the round has none: the first answers as the
// product's 404.
func (h handler) notFound(ctx context.Context, sku string, err error) error {
	if err != ErrNoRoom && err != ErrSaleNotActive {
		return err
	}
	exists, perr := h.svc.sales.ProductExists(ctx, sku)
	switch {
	case perr != nil:
		return storeError("product", perr)
	case !exists:
		return inventory.ErrProductNotFound
	}
	return err
}

func (h handler) challenge(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	ch, err := h.svc.IssueChallenge(c.UserContext(), sku, auth.MustUser(c).ID)
	if err != nil {
		return h.notFound(c.UserContext(), sku, err)
	}
	return c.JSON(ch)
}

type joinBody struct {
	Challenge *string `json:"challenge"`
	Nonce     *string `json:"nonce"`
}

func (h handler) join(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	var b joinBody
	if err := server.DecodeOptional(c, &b); err != nil {
		return err
	}
	var proof *Proof
	if b.Challenge != nil || b.Nonce != nil {
		proof = &Proof{}
		if b.Challenge != nil {
			proof.Challenge = *b.Challenge
		}
		if b.Nonce != nil {
			proof.Nonce = *b.Nonce
		}
	}
	t, created, err := h.svc.Join(c.UserContext(), sku, auth.MustUser(c).ID, proof, onetrip.Of(c))
	if err != nil {
		return h.notFound(c.UserContext(), sku, err)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.Status(status).JSON(t)
}

func (h handler) ticket(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	t, err := h.svc.TicketOf(c.UserContext(), sku, auth.MustUser(c).ID, onetrip.Of(c))
	if err != nil {
		return h.notFound(c.UserContext(), sku, err)
	}
	return c.JSON(t)
}

func (h handler) fairness(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	f, err := h.svc.Fairness(c.UserContext(), sku)
	if err != nil {
		return h.notFound(c.UserContext(), sku, err)
	}
	return c.JSON(f)
}

func (h handler) events(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	user, err := h.svc.streamUser(c.UserContext(), sku, strings.Clone(c.Params("token")))
	if err != nil {
		return err
	}
	first, err := h.svc.TicketOf(c.UserContext(), sku, user, nil)
	if err != nil {
		if err == ErrNotInRoom {
			return errNoStream
		}
		return err
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	c.Context().Response.SetConnectionClose()
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) { h.svc.stream(w, conn, sku, user, first) })
	return nil
}

// View is the admin's view of a live room: its SKU and round, then the
// same members as the stock report's "waiting_room" (embedded, so that
// they stay one list).
type View struct {
	SKU     string `json:"sku"`
	RoundID int64  `json:"round_id"`
	inventory.RoomReport
}

// AdminView reads sku's live room. Errors: ErrNoRoom, or a 503.
func (s *Service) AdminView(ctx context.Context, sku string) (View, error) {
	live, ok, err := s.live(ctx, sku, true)
	if err != nil {
		return View{}, err
	}
	if !ok || live.Room == nil {
		return View{}, ErrNoRoom
	}
	v := View{SKU: sku, RoundID: live.Round, RoomReport: inventory.RoomReport{AdmitPerSecond: live.Room.AdmitPerSecond,
		PassTTLSeconds: int(live.Room.PassTTL.Seconds()), ChallengeBits: live.Room.ChallengeBits,
		SeedSHA256: live.Room.SeedSHA}}
	if v.Waiting, v.Admitted, err = s.Counters(ctx, sku, live.Round); err != nil {
		return View{}, err
	}
	return v, nil
}

func (h handler) adminView(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	v, err := h.svc.AdminView(c.UserContext(), sku)
	if err != nil {
		return h.notFound(c.UserContext(), sku, err)
	}
	return c.JSON(v)
}

type rateBody struct {
	AdmitPerSecond *int64 `json:"admit_per_second"`
}

// check reports every field of a PATCH body that is wrong at once: a
// missing rate, and any other member, since the rate is all PATCH can
// change and one ignored would be answered 200 unchanged (docs/api.md: any
// other field is 400).
func (b rateBody) check(body []byte) error {
	unknown, err := server.UnknownMembers(body, "admit_per_second")
	if err != nil {
		return err
	}
	var errs []apperr.FieldError
	for _, k := range unknown {
		errs = append(errs, apperr.FieldError{Field: k, Message: "cannot be changed here; only admit_per_second can"})
	}
	if b.AdmitPerSecond == nil {
		errs = append(errs, apperr.FieldError{Field: "admit_per_second", Message: "is required"})
	}
	if len(errs) > 0 {
		return apperr.Invalid(errs...)
	}
	return nil
}

func (h handler) setRate(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	var b rateBody
	if err := server.Decode(c, &b); err != nil {
		return err
	}
	if err := b.check(c.Body()); err != nil {
		return err
	}
	// The range is SetAdmitRate's to judge; clamping keeps an int64 far
	// out of range from wrapping into it.
	rate := int(max(min(*b.AdmitPerSecond, inventory.MaxAdmitPerSecond+1), 0))
	if err := h.svc.sales.SetAdmitRate(c.UserContext(), sku, rate); err != nil {
		return err
	}
	h.svc.state.forget(sku)
	return h.adminView(c)
}

func (h handler) entryList(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	p, ferr := server.PageQuery(c, DefaultEntries, MaxEntries)
	var errs []apperr.FieldError
	if ferr != nil {
		errs = append(errs, *ferr)
	}
	var cur cursor
	if p.Cursor != "" {
		var ok bool
		if cur, ok = parseCursor(p.Cursor); !ok {
			errs = append(errs, apperr.FieldError{Field: "cursor", Message: "is not a cursor this list gave"})
		}
	}
	if len(errs) > 0 {
		return apperr.Invalid(errs...)
	}
	page, err := h.svc.EntryList(c.UserContext(), sku, cur.from, int64(p.Limit))
	if err != nil {
		return h.notFound(c.UserContext(), sku, err)
	}
	if p.Cursor != "" && (cur.joining != page.Joining || cur.round != page.Round) {
		// A cursor counts entries in the order it was given in: the
		// shuffle (or a new round) has changed the order since.
		return apperr.Invalid(apperr.FieldError{Field: "cursor",
			Message: "is from the list in another order (before the shuffle, or another round's); start again without one"})
	}
	return c.JSON(page)
}

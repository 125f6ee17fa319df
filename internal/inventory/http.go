package inventory

import (
	"errors"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/server"
)

// OneTripRoutes registers the product read, whose checks ride with the
// read: ride is its route-level check (internal/onetrip's RidePublic),
// optionalUser names a signed-in reader when they ran up front instead
// (auth's OptionalUser).
func (s *Catalog) OneTripRoutes(r fiber.Router, ride, optionalUser fiber.Handler) {
	h := handler{catalog: s, products: newProductJSON()}
	r.Get("/products/:sku", ride, optionalUser, h.get)
}

// Routes registers the rest of the catalog on r (the /api/v1 router): the
// listing always, and the admin writes behind requireAdmin. With a nil
// requireAdmin the admin routes are not registered at all, so a wiring
// mistake fails closed (404) instead of open.
func (s *Catalog) Routes(r fiber.Router, requireAdmin fiber.Handler) {
	h := handler{catalog: s}
	r.Get("/products", h.list)
	r.Get("/products/:sku/image/:hash", h.image)
	if requireAdmin == nil {
		return
	}
	r.Put("/admin/products/:sku/image", requireAdmin, h.putImage)
	r.Delete("/admin/products/:sku/image", requireAdmin, h.deleteImage)
	r.Post("/admin/products", requireAdmin, h.create)
	r.Put("/admin/products/:sku", requireAdmin, h.update)
	r.Delete("/admin/products/:sku", requireAdmin, h.delete)
	r.Post("/admin/categories/:category/invalidate", requireAdmin, h.invalidate)
}

// handler adapts HTTP to the Catalog's and the Sales' methods: one struct
// for the package's routes, one file per resource (http.go for products,
// sale_http.go for stock). Each Routes fills in the service it mounts.
type handler struct {
	catalog  *Catalog
	sales    *Sales
	products *productJSON // the product read's encoder
}

func (h handler) get(c *fiber.Ctx) error {
	p, err := h.catalog.GetWith(c.UserContext(), param(c, "sku"), onetrip.Of(c))
	if err != nil {
		return err
	}
	b, err := h.products.encode(p)
	if err != nil {
		return err
	}
	// What c.JSON(p) does with the app's encoder, json.Marshal.
	c.Response().SetBodyRaw(b)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	return nil
}

func (h handler) list(c *fiber.Ctx) error {
	// Fiber reuses its buffers: copy what outlives the handler (the
	// category and cursor end up in cache keys a fill may still use).
	category := strings.Clone(c.Query("category"))
	q, limitErr := server.PageQuery(c, DefaultLimit, MaxLimit)
	if limitErr != nil {
		// Report the limit with anything else wrong in one answer.
		return apperr.Invalid(append([]apperr.FieldError{*limitErr}, validateList(category, 0, q.Cursor)...)...)
	}
	page, err := h.catalog.List(c.UserContext(), category, q.Limit, q.Cursor)
	if err != nil {
		return err
	}
	return c.JSON(page)
}

func (h handler) create(c *fiber.Ctx) error {
	sku, in, err := parseProductBody(c, "")
	if err != nil {
		return err
	}
	p, err := h.catalog.Create(c.UserContext(), sku, in)
	if err != nil {
		return err
	}
	c.Location("/api/v1/products/" + url.PathEscape(p.SKU))
	return c.Status(fiber.StatusCreated).JSON(p)
}

func (h handler) update(c *fiber.Ctx) error {
	sku, err := PathSKU(c)
	if err != nil {
		return err
	}
	_, in, err := parseProductBody(c, sku)
	if err != nil {
		return err
	}
	p, err := h.catalog.Update(c.UserContext(), sku, in)
	if err != nil {
		return err
	}
	return c.JSON(p)
}

func (h handler) delete(c *fiber.Ctx) error {
	if err := h.catalog.Delete(c.UserContext(), param(c, "sku")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (h handler) invalidate(c *fiber.Ctx) error {
	if err := h.catalog.InvalidateCategory(c.UserContext(), param(c, "category")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// param is a path parameter, copied out of Fiber's reused buffer.
func param(c *fiber.Ctx, name string) string { return strings.Clone(c.Params(name)) }

// productBody is the JSON of a product write; nil marks an absent field.
type productBody struct {
	SKU         *string `json:"sku"`
	Name        *string `json:"name"`
	Description *string `json:"description"`
	Category    *string `json:"category"`
	PriceCents  *int64  `json:"price_cents"`
}

// parseProductBody decodes and validates a create body (pathSKU "") or an
// update body (pathSKU is the product's sku; every field is required, and a
// sku in the body must be the same). Every bad field is reported at once,
// including one of the wrong JSON type.
func parseProductBody(c *fiber.Ctx, pathSKU string) (string, ProductInput, error) {
	var b productBody
	var errs []apperr.FieldError
	if err := server.Decode(c, &b); err != nil {
		var e *apperr.Error
		if !errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Field == "body" {
			return "", ProductInput{}, err
		}
		errs = e.Fields
	}
	errs = append(errs, b.check(pathSKU, errs)...)
	if len(errs) > 0 {
		return "", ProductInput{}, apperr.Invalid(errs...)
	}
	in := ProductInput{Name: *b.Name, Category: *b.Category, PriceCents: *b.PriceCents}
	if b.Description != nil {
		in.Description = *b.Description
	}
	if pathSKU != "" {
		return pathSKU, in, nil
	}
	return *b.SKU, in, nil
}

// check lists the missing and invalid fields, skipping those already
// reported (a value of the wrong type).
func (b productBody) check(pathSKU string, reported []apperr.FieldError) []apperr.FieldError {
	create := pathSKU == ""
	var errs []apperr.FieldError
	add := func(name string, present, required bool, valid func() []apperr.FieldError) {
		for _, r := range reported {
			if r.Field == name {
				return
			}
		}
		switch {
		case !present && required:
			errs = append(errs, apperr.Field(name, "is required"))
		case present:
			errs = append(errs, valid()...)
		}
	}
	add("sku", b.SKU != nil, create, func() []apperr.FieldError {
		if !create && *b.SKU != pathSKU {
			return []apperr.FieldError{apperr.Field("sku", "must be the sku in the path (a sku cannot change)")}
		}
		return checkCode("sku", *b.SKU)
	})
	add("name", b.Name != nil, true, func() []apperr.FieldError { return apperr.CheckName("name", *b.Name, maxNameLen) })
	add("description", b.Description != nil, !create, func() []apperr.FieldError { return apperr.CheckText("description", *b.Description, maxDescriptionLen) })
	add("category", b.Category != nil, true, func() []apperr.FieldError { return checkCode("category", *b.Category) })
	add("price_cents", b.PriceCents != nil, true, func() []apperr.FieldError { return checkPrice(*b.PriceCents) })
	return errs
}

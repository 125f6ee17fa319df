package pickup

import (
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/server"
)

// Routes registers the public store reads on r (the /api/v1 router), and
// the admin writes behind requireAdmin (none when it is nil).
func (s *Service) Routes(r fiber.Router, requireAdmin fiber.Handler) {
	h := handler{s}
	r.Get("/stores", h.list)
	r.Get("/stores/nearby", h.nearby) // before /stores/:id
	r.Get("/stores/:id", h.get)
	if requireAdmin == nil {
		return
	}
	r.Put("/admin/stores/:id", requireAdmin, h.put)
	r.Delete("/admin/stores/:id", requireAdmin, h.delete)
}

type handler struct{ s *Service }

func (h handler) get(c *fiber.Ctx) error {
	st, err := h.s.Get(c.UserContext(), strings.Clone(c.Params("id")))
	if err != nil {
		return err
	}
	return c.JSON(st)
}

func (h handler) delete(c *fiber.Ctx) error {
	if err := h.s.Delete(c.UserContext(), strings.Clone(c.Params("id"))); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// storeBody is the JSON of a PUT; nil marks an absent field.
type storeBody struct {
	Name    *string  `json:"name"`
	Address *string  `json:"address"`
	Lng     *float64 `json:"lng"`
	Lat     *float64 `json:"lat"`
}

func (h handler) put(c *fiber.Ctx) error {
	st, err := parseStore(c)
	if err != nil {
		return err
	}
	out, err := h.s.Put(c.UserContext(), st)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// parseStore reads and checks a PUT, reporting every bad field at once
// (a value of the wrong JSON type included).
func parseStore(c *fiber.Ctx) (Store, error) {
	id := strings.Clone(c.Params("id"))
	errs := checkID(id)
	var b storeBody
	if err := server.Decode(c, &b); err != nil {
		var e *apperr.Error
		if !errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Field == "body" {
			return Store{}, err
		}
		errs = append(errs, e.Fields...)
	}
	reported := func(f string) bool {
		for _, e := range errs {
			if e.Field == f {
				return true
			}
		}
		return false
	}
	required := func(f string, present bool, check func() []apperr.FieldError) {
		switch {
		case reported(f):
		case !present:
			errs = append(errs, apperr.Field(f, "is required"))
		default:
			errs = append(errs, check()...)
		}
	}
	required("name", b.Name != nil, func() []apperr.FieldError { return apperr.CheckName("name", *b.Name, maxNameLen) })
	required("lng", b.Lng != nil, func() []apperr.FieldError { return checkCoord("lng", *b.Lng, MaxLng) })
	required("lat", b.Lat != nil, func() []apperr.FieldError { return checkCoord("lat", *b.Lat, MaxLat) })
	if b.Address != nil && !reported("address") {
		errs = append(errs, apperr.CheckText("address", *b.Address, maxAddressLen)...)
	}
	if len(errs) > 0 {
		return Store{}, apperr.Invalid(errs...)
	}
	st := Store{ID: id, Name: *b.Name, Lng: *b.Lng, Lat: *b.Lat}
	if b.Address != nil {
		st.Address = *b.Address
	}
	return st, nil
}

func (h handler) list(c *fiber.Ctx) error {
	q, bad := server.PageQuery(c, ListDefaultLimit, ListMaxLimit)
	if bad != nil { // every bad parameter in one answer
		errs := []apperr.FieldError{*bad}
		if _, ok := decodeListCursor(q.Cursor); !ok {
			errs = append(errs, badCursor)
		}
		return apperr.Invalid(errs...)
	}
	p, err := h.s.List(c.UserContext(), q.Limit, q.Cursor)
	if err != nil {
		return err
	}
	return c.JSON(p)
}

func (h handler) nearby(c *fiber.Ctx) error {
	q, err := parseQuery(c)
	if err != nil {
		return err
	}
	hits, err := h.s.Nearby(c.UserContext(), q)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"items": hits})
}

// parseQuery reads a nearby search, reporting every bad parameter at once;
// server.QueryFloat and QueryInt hold what a query number is.
func parseQuery(c *fiber.Ctx) (Query, error) {
	var errs []apperr.FieldError
	num := func(name string, def float64, required bool, in func(float64) bool, rule string) float64 {
		v, there := server.QueryFloat(c, name, in, rule, &errs)
		switch {
		case there:
			return v
		case required:
			errs = append(errs, apperr.Field(name, "%s", rule))
		}
		return def
	}
	within := func(limit float64) func(float64) bool {
		return func(v float64) bool { return len(checkCoord("", v, limit)) == 0 }
	}
	q := Query{
		Lng: num("lng", 0, true, within(MaxLng), "is required, a number from -180 to 180"),
		Lat: num("lat", 0, true, within(MaxLat), "is required, a number from -85.05112878 to 85.05112878"),
		RadiusKm: num("radius_km", DefaultRadiusKm, false, func(v float64) bool { return v > 0 && v <= MaxRadiusKm },
			"must be a number greater than 0 and at most 1000"),
		Limit: server.QueryInt(c, "limit", DefaultLimit, 1, MaxLimit, &errs),
	}
	if len(errs) > 0 {
		return Query{}, apperr.Invalid(errs...)
	}
	return q, nil
}

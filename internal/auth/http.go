package auth

import (
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/server"
)

// Routes registers the auth routes of docs/api.md on the /api/v1 router.
func (s *Service) Routes(r fiber.Router) {
	h := handler{s}
	r.Post("/auth/register", h.register)
	r.Post("/auth/login", h.login)
	r.Post("/auth/refresh", h.refresh)
	r.Post("/auth/logout", s.RequireUser(), h.logout)
	r.Get("/me", s.RequireUser(), h.me)
}

// handler adapts HTTP to the Service's methods.
type handler struct{ svc *Service }

// register creates a shopper. A role in the body is ignored: nobody
// makes themselves an admin over HTTP (admins come from `shop user add`).
func (h handler) register(c *fiber.Ctx) error {
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Name     string `json:"name"`
	}
	if err := server.Decode(c, &req); err != nil {
		return err
	}
	u, err := h.svc.CreateUser(c.UserContext(), req.Email, req.Password, req.Name, RoleShopper)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(u)
}

func (h handler) login(c *fiber.Ctx) error {
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Device   string `json:"device"`
	}
	if err := server.Decode(c, &req); err != nil {
		return err
	}
	t, err := h.svc.Login(c.UserContext(), req.Email, req.Password, req.Device)
	if err != nil {
		return err
	}
	return sendTokens(c, t)
}

func (h handler) refresh(c *fiber.Ctx) error {
	var req struct {
		RefreshToken string `json:"refresh_token"`
	}
	if err := server.Decode(c, &req); err != nil {
		return err
	}
	if req.RefreshToken == "" {
		return apperr.Invalid(apperr.FieldError{Field: "refresh_token", Message: "is required"})
	}
	t, err := h.svc.Refresh(c.UserContext(), req.RefreshToken)
	if err != nil {
		return err
	}
	return sendTokens(c, t)
}

// sendTokens answers with a token pair, which no cache may keep (RFC 6749 §5.1).
func sendTokens(c *fiber.Ctx, t Tokens) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(t)
}

// logout deletes the caller's session: this device only.
func (h handler) logout(c *fiber.Ctx) error {
	sid, ok := sessionFromContext(c.UserContext())
	if !ok {
		return fmt.Errorf("logout: %w", ErrUnauthorized)
	}
	if err := h.svc.sessions.revoke(c.UserContext(), sid); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// me answers from the session (Redis only), so it keeps working while
// PostgreSQL restarts; email and name cannot change after sign-up.
func (h handler) me(c *fiber.Ctx) error {
	return c.JSON(MustUser(c))
}

package auth

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/api"
)

// Routes registers the auth routes of API.md on the /api/v1 router.
func (s *Service) Routes(r fiber.Router) {
	r.Post("/auth/register", s.handleRegister)
	r.Post("/auth/login", s.handleLogin)
	r.Post("/auth/refresh", s.handleRefresh)
	r.Post("/auth/logout", s.RequireUser(), s.handleLogout)
	r.Get("/me", s.RequireUser(), s.handleMe)
}

// handleRegister creates a shopper. A role in the body is ignored: nobody
// makes themselves an admin over HTTP (admins come from `shop user add`).
func (s *Service) handleRegister(c *fiber.Ctx) error {
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Name     string `json:"name"`
	}
	if err := api.Decode(c, &req); err != nil {
		return err
	}
	u, err := s.CreateUser(c.UserContext(), req.Email, req.Password, req.Name, RoleShopper)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(u)
}

func (s *Service) handleLogin(c *fiber.Ctx) error {
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
		Device   string `json:"device"`
	}
	if err := api.Decode(c, &req); err != nil {
		return err
	}
	t, err := s.Login(c.UserContext(), req.Email, req.Password, req.Device)
	if err != nil {
		return err
	}
	return sendTokens(c, t)
}

func (s *Service) handleRefresh(c *fiber.Ctx) error {
	var req struct {
		RefreshToken string `json:"refresh_token"`
	}
	if err := api.Decode(c, &req); err != nil {
		return err
	}
	if req.RefreshToken == "" {
		return api.Invalid(api.FieldError{Field: "refresh_token", Message: "is required"})
	}
	t, err := s.Refresh(c.UserContext(), req.RefreshToken)
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

// handleLogout deletes the caller's session: this device only.
func (s *Service) handleLogout(c *fiber.Ctx) error {
	sid, ok := sessionFromContext(c.UserContext())
	if !ok {
		return fmt.Errorf("logout: %w", ErrUnauthorized)
	}
	if err := s.sessions.revoke(c.UserContext(), sid); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// handleMe answers from the session (Redis only), so it keeps working while
// PostgreSQL restarts; email and name cannot change after sign-up.
func (s *Service) handleMe(c *fiber.Ctx) error {
	return c.JSON(MustUser(c))
}

package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/shop-oss/shop/internal/apperr"
)

// CreateUser validates the input, hashes the password and stores the user.
// The email is trimmed, put in Unicode NFC and otherwise kept as typed;
// uniqueness ignores letter case.
// It returns an apperr.Invalid error naming each bad field (email, password,
// name, role), ErrEmailTaken, or an apperr.Unavailable error when PostgreSQL
// does not answer.
func (s *Service) CreateUser(ctx context.Context, email, password, name, role string) (User, error) {
	a := newAccount{email: email, password: password, name: name, role: role}
	if err := validateAccount(&a); err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	var hash string
	err := s.withHashSlot(ctx, func() (err error) {
		hash, err = hashPasswordAt(s.cost, a.password)
		return err
	})
	if err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	u := User{ID: uuid.NewString(), Email: a.email, Name: a.name, Role: a.role}
	if err := s.insertUser(ctx, u, hash); err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	return u, nil
}

// Login checks the credentials and opens a new session for device (a free
// label such as "iphone"; empty means "unknown"). It returns
// ErrInvalidCredentials for an unknown email and a wrong password alike,
// ErrLoginThrottled (with RetryAfter) once the email has spent its failure
// budget (Config.LoginFailures), whoever asks, an apperr.Invalid error for a
// missing email or password or a bad device, and an apperr.Unavailable error
// when PostgreSQL or Redis does not answer.
func (s *Service) Login(ctx context.Context, email, password, device string) (Tokens, error) {
	t, err := s.login(ctx, email, password, device)
	s.metrics.logins.WithLabelValues(loginOutcome(err)).Inc()
	return t, err
}

func (s *Service) login(ctx context.Context, email, password, device string) (Tokens, error) {
	legacy := legacyEmail(email)
	email = normalizeEmail(email)
	if err := requireCredentials(email, password); err != nil {
		return Tokens{}, fmt.Errorf("login: %w", err)
	}
	device, err := normalizeDevice(device)
	if err != nil {
		return Tokens{}, fmt.Errorf("login: %w", err)
	}
	attempt, err := s.throttle.take(ctx, email)
	if err != nil {
		return Tokens{}, fmt.Errorf("login: %w", err)
	}
	u, err := s.checkCredentials(ctx, email, legacy, password)
	s.throttle.settle(ctx, attempt, err)
	if err != nil {
		return Tokens{}, fmt.Errorf("login: %w", err)
	}
	now := time.Now()
	g, err := s.sessions.create(ctx, u, device, now)
	if err != nil {
		return Tokens{}, fmt.Errorf("login: %w", err)
	}
	if err := s.afterLogin(ctx, u, g); err != nil {
		return Tokens{}, fmt.Errorf("login: %w", err)
	}
	return s.issue(u, g, now)
}

func requireCredentials(email, password string) error {
	var missing []apperr.FieldError
	if email == "" {
		missing = append(missing, apperr.FieldError{Field: "email", Message: "is required"})
	}
	if password == "" {
		missing = append(missing, apperr.FieldError{Field: "password", Message: "is required"})
	}
	if len(missing) > 0 {
		return apperr.Invalid(missing...)
	}
	return nil
}

// checkCredentials returns the user whose email and password these are. An
// unknown email is verified against dummyHash, so it costs the same argon2
// work as a known one and timing does not reveal which emails exist.
func (s *Service) checkCredentials(ctx context.Context, email, legacy, password string) (User, error) {
	if len(password) > maxPasswordLen || len(email) > maxEmailLen {
		// No account can have these (CreateUser refuses them); never feed
		// argon2 an oversized input.
		return User{}, ErrInvalidCredentials
	}
	u, hash, err := s.userByEmail(ctx, email, legacy)
	if errors.Is(err, errUserNotFound) {
		hash = s.dummy
	} else if err != nil {
		return User{}, err
	}
	var ok bool
	err = s.withHashSlot(ctx, func() (err error) {
		ok, err = verifyPassword(hash, password)
		return err
	})
	if err != nil {
		return User{}, fmt.Errorf("verify password of user %s: %w", u.ID, err)
	}
	if !ok || u.ID == "" {
		return User{}, ErrInvalidCredentials
	}
	return u, nil
}

// Refresh swaps a refresh token for a new pair. The old refresh token and
// the session's previous access token stop working at once. It returns
// ErrInvalidToken for a malformed, forged, expired or revoked token,
// ErrRefreshReused (the session is then revoked) for an already used one,
// and an apperr.Unavailable error when Redis does not answer.
func (s *Service) Refresh(ctx context.Context, refreshToken string) (Tokens, error) {
	u, g, err := s.sessions.refresh(ctx, refreshToken)
	if errors.Is(err, ErrRefreshReused) {
		s.metrics.refreshReuse.Inc()
	}
	if err != nil {
		return Tokens{}, err
	}
	return s.issue(u, g, time.Now())
}

// issue makes the Tokens answer for a session's fresh grant.
func (s *Service) issue(u User, g grant, now time.Time) (Tokens, error) {
	access, err := s.tokens.issue(u, g.sid, g.jti, now)
	if err != nil {
		return Tokens{}, err
	}
	return Tokens{
		AccessToken:  access,
		RefreshToken: g.refresh,
		TokenType:    "Bearer",
		ExpiresIn:    int(s.cfg.AccessTTL / time.Second),
	}, nil
}

// loginOutcome is the metric label for a login's result.
func loginOutcome(err error) string {
	var e *apperr.Error
	switch {
	case err == nil:
		return outcomeSuccess
	case errors.Is(err, ErrInvalidCredentials):
		return outcomeInvalid
	case errors.Is(err, ErrLoginThrottled):
		return outcomeThrottled
	case errors.As(err, &e) && e.Code == apperr.CodeUnavailable:
		return outcomeUnavailable
	case errors.As(err, &e) && e.Code == apperr.CodeInvalidRequest:
		return outcomeInvalidRequest
	default:
		return outcomeError
	}
}

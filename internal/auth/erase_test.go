package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// Erasing a user revokes every session at once (both devices answer 401,
// refresh tokens too), keeps the row anonymised, refuses their login, and
// frees the email for a new account; a second erasure is not found.
func TestEraseUserRevokesEverySession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	u := h.mustCreate(t, "gone@example.com", RoleShopper)
	other := h.mustCreate(t, "stays@example.com", RoleShopper)
	phone, laptop := h.login(t, "gone@example.com", "phone"), h.login(t, "gone@example.com", "laptop")
	kept := h.login(t, "stays@example.com", "phone")
	ctx := context.Background()
	if _, err := h.svc.EraseUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []Tokens{phone, laptop} {
		h.me(t, tok.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
		h.refresh(t, tok.RefreshToken).want(t, http.StatusUnauthorized, "")
	}
	h.me(t, kept.AccessToken).want(t, http.StatusOK, "")
	h.do(t, http.MethodPost, "/api/v1/auth/login", map[string]string{"email": "gone@example.com", "password": testPassword}).
		want(t, http.StatusUnauthorized, "invalid_credentials")
	var email, name string
	if err := h.db.QueryRow(ctx, `SELECT email, name FROM users WHERE id = $1 AND deleted_at IS NOT NULL`, u.ID).Scan(&email, &name); err != nil ||
		email != "deleted+"+u.ID+"@invalid" || name != "" {
		t.Fatalf("erased row: %q %q %v", email, name, err)
	}
	h.do(t, http.MethodPost, "/api/v1/auth/register", map[string]string{"email": "gone@example.com", "password": testPassword}).
		want(t, http.StatusCreated, "")
	for _, id := range []string{u.ID, "not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		if _, err := h.svc.EraseUser(ctx, id); !errors.Is(err, ErrUserNotFound) {
			t.Errorf("erase %s: %v, want ErrUserNotFound", id, err)
		}
	}
	if id, err := h.svc.UserID(ctx, "STAYS@example.com"); err != nil || id != other.ID {
		t.Fatalf("UserID = %q %v", id, err)
	}
}

// A login that read the account before the erasure committed, and made
// its session after the erasure's scan of sessions, still ends refused,
// its session revoked.
func TestLoginRacingErasureIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	u := h.mustCreate(t, "racer@example.com", RoleShopper)
	h.svc.beforeLiveCheck = func() {
		h.svc.beforeLiveCheck = nil
		if _, err := h.svc.EraseUser(context.Background(), u.ID); err != nil {
			t.Error(err)
		}
	}
	h.do(t, http.MethodPost, "/api/v1/auth/login", map[string]string{"email": "racer@example.com", "password": testPassword}).
		want(t, http.StatusUnauthorized, "invalid_credentials")
	keys, err := h.rdb.Keys(context.Background(), h.prefix+"session:*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("sessions left: %v %v", keys, err)
	}
}

// A user id may be written in any case, with or without its dashes
// (docs/api.md): each spelling erases the same user and revokes every session
// of theirs, access and refresh tokens alike.
func TestEraseUserByAnySpellingRevokesEverySession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	spellings := map[string]func(string) string{
		"upper":          strings.ToUpper,
		"no dashes":      func(id string) string { return strings.ReplaceAll(id, "-", "") },
		"upper, no dash": func(id string) string { return strings.ToUpper(strings.ReplaceAll(id, "-", "")) },
		"mixed case":     func(id string) string { return strings.ToUpper(id[:9]) + id[9:] },
	}
	for name, spell := range spellings {
		email := strings.ReplaceAll(name, " ", "") + "@example.com"
		email = strings.ReplaceAll(email, ",", "")
		u, tok := h.shopper(t, email, "phone")
		if _, err := h.svc.EraseUser(context.Background(), spell(u.ID)); err != nil {
			t.Fatalf("%s: erase %s: %v", name, spell(u.ID), err)
		}
		h.me(t, tok.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
		h.refresh(t, tok.RefreshToken).want(t, http.StatusUnauthorized, "")
		if _, err := h.svc.EraseUser(context.Background(), u.ID); !errors.Is(err, ErrUserNotFound) {
			t.Errorf("%s: second erasure: %v, want ErrUserNotFound", name, err)
		}
	}
}

// Any other spelling of an id is not a user's: not found, nothing erased
// (uuid.Parse alone would take the URN and braced forms, which PostgreSQL
// then refuses to cast).
func TestEraseUserRefusesOtherSpellings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	u, tok := h.shopper(t, "kept@example.com", "phone")
	for _, id := range []string{
		"urn:uuid:" + u.ID, "URN:UUID:" + u.ID, "{" + u.ID + "}", " " + u.ID, u.ID + " ", u.ID + "\n",
		u.ID[:35], u.ID + "0", strings.ReplaceAll(u.ID, "-", "")[:31], "", "-" + strings.ReplaceAll(u.ID, "-", "")[1:],
		strings.Replace(u.ID, "-", "", 1), strings.Replace(u.ID, "-", "--", 1)[:36],
	} {
		if _, err := h.svc.EraseUser(context.Background(), id); !errors.Is(err, ErrUserNotFound) {
			t.Errorf("erase %q: %v, want ErrUserNotFound", id, err)
		}
	}
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
}

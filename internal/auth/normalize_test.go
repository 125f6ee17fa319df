package auth

import (
	"context"
	"net/http"
	"testing"
)

// The composed (NFC) and decomposed (NFD) spellings of one address look
// the same and are one account: the second registration is email_taken,
// and either spelling logs in.
func TestEmailSpellingsAreOneAccount(t *testing.T) {
	t.Parallel()
	const (
		nfc = "jos\u00e9@example.com"  // é as one code point
		nfd = "jose\u0301@example.com" // e and a combining acute accent
	)
	tests := []struct{ name, first, second string }{
		{"nfc_then_nfd", nfc, nfd},
		{"nfd_then_nfc", "Ren" + "e\u0301@example.com", "REN\u00e9@example.com"},
		{"fullwidth_then_ascii", "\uff41\uff4e\uff4e@example.com", "ann@example.com"}, // ａｎｎ
		{"ascii_then_fullwidth_domain", "bob@example.com", "bob@\uff45xample.com"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			register := func(email string) result {
				return h.do(t, http.MethodPost, "/api/v1/auth/register", map[string]string{"email": email, "password": testPassword})
			}
			register(tc.first).want(t, http.StatusCreated, "")
			register(tc.second).want(t, http.StatusConflict, "email_taken")
			h.login(t, tc.first, "")
			h.login(t, tc.second, "")
			var n int
			if err := h.db.QueryRow(context.Background(), "SELECT count(*) FROM users").Scan(&n); err != nil || n != 1 {
				t.Fatalf("users = %d (%v), want 1", n, err)
			}
		})
	}
}

// An address with an invisible format character looks like one without
// it: it is refused, not made a second account.
func TestEmailWithFormatCharacterRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, email := range []string{"a\u200bb@example.com", "ab@exa\u200dmple.com", "\ufeffab@example.com", "ab\u202e@example.com", "a\u00adb@example.com"} {
		h.do(t, http.MethodPost, "/api/v1/auth/register", map[string]string{"email": email, "password": testPassword}).
			want(t, http.StatusBadRequest, "invalid_request")
	}
}

// An account made before emails were kept in NFKC, with a fullwidth
// spelling kept as typed, still logs in with that spelling.
func TestLegacyEmailSpellingLogsIn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const typed = "\uff43\uff41\uff52\uff4c@example.com" // ｃａｒｌ
	h.do(t, http.MethodPost, "/api/v1/auth/register", map[string]string{"email": "tmp@example.com", "password": testPassword}).
		want(t, http.StatusCreated, "")
	if _, err := h.db.Exec(context.Background(), "UPDATE users SET email = $1", typed); err != nil {
		t.Fatal(err)
	}
	h.login(t, typed, "")
}

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

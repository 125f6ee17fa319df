package auth

import (
	"net/http"
	"testing"
)

// A carried session check answers for the token it checked, once it ran,
// and a revoked session is refused as through RequireUser's own check.
func TestSessionCheckAnswersOnlyItsToken(t *testing.T) {
	t.Parallel()
	claims := &accessClaims{SessionID: "s1"}
	claims.ID = "j1"
	for _, tc := range []struct {
		name string
		p    *SessionCheck
		want bool
	}{
		{"none", nil, false},
		{"prepared, not run", &SessionCheck{SessionID: "s1", TokenID: "j1"}, false},
		{"ran", &SessionCheck{SessionID: "s1", TokenID: "j1", Ran: true}, true},
		{"other session", &SessionCheck{SessionID: "s2", TokenID: "j1", Ran: true}, false},
		{"other token", &SessionCheck{SessionID: "s1", TokenID: "j2", Ran: true}, false},
	} {
		if got := tc.p.answered(claims); got != tc.want {
			t.Errorf("%s: answers = %v, want %v", tc.name, got, tc.want)
		}
	}

	h := newHarness(t)
	_, tok := h.shopper(t, "ada@example.com", "")
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
	h.do(t, http.MethodPost, "/api/v1/auth/logout", nil, bearer(tok.AccessToken)...).want(t, http.StatusNoContent, "")
	h.me(t, tok.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
}

package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

type tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
}

type user struct {
	ID, Email, Name, Role string
}

// TestAuthFlow: register → login → /me → refresh → logout over HTTP.
func TestAuthFlow(t *testing.T) {
	t.Parallel()
	s := startServer(t, newEnv(t))
	api := s.URL + "/api/v1"
	creds := map[string]string{"email": "ada@example.com", "password": "correct horse battery", "name": "Ada"}

	r := call(t, http.MethodPost, api+"/auth/register", creds)
	var u user
	r.JSON(t, &u)
	if r.Status != http.StatusCreated || u.Role != "shopper" || u.Email != creds["email"] {
		t.Fatalf("register = %d %s", r.Status, r.Body)
	}
	if r := call(t, http.MethodPost, api+"/auth/register", creds); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), `"email_taken"`) {
		t.Fatalf("second register = %d %s", r.Status, r.Body)
	}
	if r := call(t, http.MethodPost, api+"/auth/login", map[string]string{"email": "ada@example.com", "password": "wrong password"}); r.Status != http.StatusUnauthorized ||
		!strings.Contains(string(r.Body), `"invalid_credentials"`) || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("wrong password = %d %s", r.Status, r.Body)
	}

	first := login(t, api, creds["email"], creds["password"])
	if got := me(t, api, first.AccessToken); got.Status != http.StatusOK || !strings.Contains(string(got.Body), u.ID) {
		t.Fatalf("/me = %d %s", got.Status, got.Body)
	}
	r = call(t, http.MethodPost, api+"/auth/refresh", map[string]string{"refresh_token": first.RefreshToken})
	var second tokens
	r.JSON(t, &second)
	if r.Status != http.StatusOK || second.AccessToken == "" {
		t.Fatalf("refresh = %d %s", r.Status, r.Body)
	}
	if got := me(t, api, first.AccessToken).Status; got != http.StatusUnauthorized {
		t.Errorf("/me with the superseded access token = %d, want 401", got)
	}
	if got := me(t, api, second.AccessToken).Status; got != http.StatusOK {
		t.Errorf("/me after refresh = %d", got)
	}
	if r := call(t, http.MethodPost, api+"/auth/logout", nil, "Authorization", "Bearer "+second.AccessToken); r.Status != http.StatusNoContent {
		t.Fatalf("logout = %d %s", r.Status, r.Body)
	}
	if got := me(t, api, second.AccessToken).Status; got != http.StatusUnauthorized {
		t.Errorf("/me after logout = %d, want 401", got)
	}
	r = call(t, http.MethodPost, api+"/auth/refresh", map[string]string{"refresh_token": second.RefreshToken})
	if r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), `"invalid_token"`) {
		t.Errorf("refresh after logout = %d %s", r.Status, r.Body)
	}
	m := string(call(t, http.MethodGet, s.URL+"/metrics", nil).Body)
	if !strings.Contains(m, `shop_auth_logins_total{outcome="success"} 1`) || !strings.Contains(m, `shop_auth_logins_total{outcome="invalid_credentials"} 1`) {
		t.Errorf("/metrics does not count logins by outcome")
	}
}

// TestUserAddMakesAnAdmin: `shop user add --role admin` creates an account
// that logs in with the admin role; a second add of the email fails with
// one line.
func TestUserAddMakesAnAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, stderr, err := runShop(t, e, "user", "add", "--email", "root@example.com", "--password", "correct horse", "--role", "admin")
	if err != nil {
		t.Fatalf("user add: %v %s", err, stderr)
	}
	id := strings.TrimSpace(out)
	_, stderr, err = runShop(t, e, "user", "add", "--email", "ROOT@example.com", "--password", "correct horse")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("duplicate user add: err = %v, want a non-zero exit", err)
	}
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "already exists") {
		t.Errorf("stderr = %q, want one line saying the user exists", stderr)
	}

	s := startServer(t, e)
	tok := login(t, s.URL+"/api/v1", "root@example.com", "correct horse")
	r := me(t, s.URL+"/api/v1", tok.AccessToken)
	var u user
	r.JSON(t, &u)
	if u.ID != id || u.Role != "admin" {
		t.Errorf("/me = %s, want id %s with role admin", r.Body, id)
	}
}

// TestHugeAuthorizationHeader: a megabyte of dots in the header is refused
// (431 by the HTTP server, before any token parsing), never a 500 or a hang.
func TestHugeAuthorizationHeader(t *testing.T) {
	t.Parallel()
	s := startServer(t, newEnv(t))
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		// The server may answer and close before it has read everything.
		fmt.Fprintf(conn, "GET /api/v1/me HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer %s\r\n\r\n", strings.Repeat(".", 1<<20))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status = %d %s, want 431 or 401", resp.StatusCode, body)
	}
	if r := call(t, http.MethodGet, s.URL+"/healthz", nil); r.Status != http.StatusOK {
		t.Errorf("server unhealthy after the huge header: %d", r.Status)
	}
}

func login(t *testing.T, api, email, password string) tokens {
	t.Helper()
	r := call(t, http.MethodPost, api+"/auth/login", map[string]string{"email": email, "password": password, "device": "e2e"})
	var tok tokens
	r.JSON(t, &tok)
	if r.Status != http.StatusOK || tok.TokenType != "Bearer" || tok.ExpiresIn <= 0 {
		t.Fatalf("login = %d %s", r.Status, r.Body)
	}
	return tok
}

func me(t *testing.T, api, access string) response {
	t.Helper()
	return call(t, http.MethodGet, api+"/me", nil, "Authorization", "Bearer "+access)
}

package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Claims of every access token we issue.
const (
	issuer   = "shop"
	audience = "shop-api"
	// tokenType is the JWT "typ" header (RFC 9068): explicit typing, so no
	// other JWT signed with the same key can pass for an access token.
	tokenType = "at+jwt"
	// leeway absorbs clock skew between instances when checking exp and iat.
	leeway = 30 * time.Second
	// maxAuthorization caps the Authorization header before any parsing, so
	// a header of a megabyte of dots (CVE-2025-30204) costs nothing.
	maxAuthorization = 4096
)

// accessClaims are the claims of an access token. The role is informative
// (clients may read it); authorization uses the session's role.
type accessClaims struct {
	SessionID string `json:"sid"`
	Role      string `json:"role"`
	jwt.RegisteredClaims
}

// tokenCodec issues and verifies access tokens.
type tokenCodec struct {
	secret   []byte
	ttl      time.Duration
	parser   *jwt.Parser
	verified *verifiedCache
	now      func() time.Time // the clock expiry is checked against (tests move it)
}

func newTokenCodec(secret []byte, ttl time.Duration) *tokenCodec {
	tc := &tokenCodec{secret: secret, ttl: ttl, verified: newVerifiedCache(verifiedSize), now: time.Now}
	tc.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(issuer),
		jwt.WithAudience(audience),
		jwt.WithLeeway(leeway),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return tc.now() }),
	)
	return tc
}

// issue signs an access token for the user's session with a fresh jti.
func (tc *tokenCodec) issue(u User, sid, jti string, now time.Time) (string, error) {
	if len(tc.secret) == 0 {
		return "", ErrNoSecret
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, accessClaims{
		SessionID: sid,
		Role:      u.Role,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   u.ID,
			ID:        jti,
			Issuer:    issuer,
			Audience:  jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(tc.ttl)),
		},
	})
	t.Header["typ"] = tokenType
	s, err := t.SignedString(tc.secret)
	if err != nil {
		return "", fmt.Errorf("sign access token: %w", err)
	}
	return s, nil
}

var errNotBearer = errors.New("no bearer token")

// errNoBearer is parseBearer's answer to a request without a bearer
// token, made once: internal/onetrip asks it of every request (for the
// session check to carry), and most bear none (a product read), so wrapping anew would allocate
// on the hot path of every anonymous request.
var errNoBearer = fmt.Errorf("%w: %w", ErrUnauthorized, errNotBearer)

// parseBearer verifies the Authorization header value and returns the
// token's claims, which callers must not modify (they may be shared with
// other requests presenting the same token). Any failure (no header,
// another scheme, oversized, bad signature, wrong algorithm, type, issuer or
// audience, expired, missing claims) is an error wrapping ErrUnauthorized;
// the cause is for logs only.
func (tc *tokenCodec) parseBearer(header string) (*accessClaims, error) {
	raw, err := bearerToken(header)
	if err == errNotBearer {
		return nil, errNoBearer
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	if claims, ok := tc.verified.get(raw, tc.now()); ok {
		return claims, nil
	}
	claims, err := tc.verify(raw)
	if err != nil {
		return nil, err
	}
	tc.verified.put(raw, claims)
	return claims, nil
}

// verify checks a compact JWS completely.
func (tc *tokenCodec) verify(raw string) (*accessClaims, error) {
	claims := &accessClaims{}
	if _, err := tc.parser.ParseWithClaims(raw, claims, tc.key); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	if err := claims.complete(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return claims, nil
}

// bearerToken extracts the token of "Bearer <token>" (scheme in any case,
// RFC 9110 §11.1), refusing oversized headers before looking further.
func bearerToken(header string) (string, error) {
	if len(header) > maxAuthorization {
		return "", fmt.Errorf("authorization header over %d bytes", maxAuthorization)
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errNotBearer
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.Count(token, ".") != 2 {
		return "", errors.New("not a compact JWS")
	}
	return token, nil
}

// key is the parser's key function; the algorithm is already pinned by
// WithValidMethods, and the type header is checked here.
func (tc *tokenCodec) key(t *jwt.Token) (any, error) {
	if typ, _ := t.Header["typ"].(string); typ != tokenType {
		return nil, fmt.Errorf("token type %q, want %s", typ, tokenType)
	}
	if len(tc.secret) == 0 {
		return nil, ErrNoSecret
	}
	return tc.secret, nil
}

// complete checks the claims the library does not: ids present and well
// formed, and a known role.
func (c *accessClaims) complete() error {
	if !isUUID(c.Subject) || !isUUID(c.SessionID) || c.ID == "" {
		return errors.New("sub, sid or jti missing or malformed")
	}
	if c.Role != RoleShopper && c.Role != RoleAdmin {
		return fmt.Errorf("unknown role %q", c.Role)
	}
	return nil
}

// isUUID accepts only the canonical 36-character form, the one we issue, so
// an id is usable as part of a Redis key as it is.
func isUUID(s string) bool {
	return len(s) == 36 && uuid.Validate(s) == nil
}

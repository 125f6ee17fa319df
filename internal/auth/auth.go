// Package auth owns accounts and sessions: users in PostgreSQL with argon2id
// password hashes, short-lived HS256 access JWTs, revocable sessions in
// Redis with rotating refresh tokens, and the Fiber middleware that puts the
// authenticated user in the request's context.
//
// The reasoning behind it is in docs/design/auth.md.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"log/slog"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/metric"
)

// Roles a user may have.
const (
	RoleShopper = "shopper"
	RoleAdmin   = "admin"
)

// User is an account as the rest of the shop sees it. ID is a UUID string.
type User struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name"`
	Role  string `json:"role"`
}

// Tokens is the answer to a login or a refresh.
type Tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	// ExpiresIn is the access token's lifetime in seconds.
	ExpiresIn int `json:"expires_in"`
}

// Config is what the service needs beyond its stores.
type Config struct {
	// Secret signs access tokens and keys the refresh-token MAC. It must not
	// be empty: without it no token can be issued or verified.
	Secret []byte
	// AccessTTL is the access token's lifetime (default 15m).
	AccessTTL time.Duration
	// SessionTTL is the session's idle expiry, extended on every use
	// (default 720h).
	SessionTTL time.Duration
	// KeyPrefix starts every Redis key the service writes.
	KeyPrefix string
	// LoginFailures wrong passwords per email are allowed in any sliding
	// LoginWindow; further logins for that email answer ErrLoginThrottled
	// until the window slides. 0 turns the throttle off.
	LoginFailures int
	LoginWindow   time.Duration
	// FastHashing hashes new passwords at a tiny argon2 cost (1 MiB, one
	// pass) so load tests can create thousands of shoppers. Never in
	// production: the shop refuses it outside SHOP_ENV=dev.
	FastHashing bool
}

// Errors the service returns (wrapped with %w). They are api errors, so the
// HTTP layer answers them with their code and status.
var (
	// ErrInvalidCredentials: unknown email or wrong password, never saying which.
	ErrInvalidCredentials = apperr.NewError(apperr.CodeInvalidCredentials, "the email or password is wrong")
	// ErrInvalidToken: a refresh token that is malformed, forged, expired or used.
	ErrInvalidToken = apperr.NewError(apperr.CodeInvalidToken, "the refresh token is invalid, expired or revoked")
	// ErrRefreshReused: an already used refresh token; its session is now revoked.
	ErrRefreshReused = apperr.NewError(apperr.CodeInvalidToken, "the refresh token was already used: the session is revoked, log in again")
	// ErrUnauthorized: a missing, malformed, forged, expired or revoked access token.
	ErrUnauthorized = apperr.NewError(apperr.CodeUnauthorized, "a valid bearer access token is required")
	// ErrForbidden: an authenticated user without the role the route needs.
	ErrForbidden = apperr.NewError(apperr.CodeForbidden, "this needs the admin role")
	// ErrEmailTaken: an account with this email (in any letter case) exists.
	ErrEmailTaken = apperr.NewError(apperr.CodeEmailTaken, "an account with this email already exists")
	// ErrNoSecret: the service was built without a signing secret.
	ErrNoSecret = errors.New("auth: no signing secret configured")
)

// Defaults for a Config that leaves a duration unset.
const (
	defaultAccessTTL  = 15 * time.Minute
	defaultSessionTTL = 720 * time.Hour
)

// Service implements accounts, logins and sessions. It is safe for
// concurrent use.
type Service struct {
	db       *pgxpool.Pool
	rdb      redis.UniversalClient
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	tokens   *tokenCodec
	sessions *sessionStore
	throttle loginThrottle
	// hashSlots bounds concurrent argon2 work: each hash takes 19 MiB and a
	// core, so a burst of logins must queue rather than exhaust memory.
	hashSlots chan struct{}
	// cost is what new hashes cost; dummy is verified for unknown emails
	// and costs the same.
	cost  hashCost
	dummy string
	// beforeLiveCheck, for tests, runs between a login's new session and
	// its check that the account was not erased meanwhile.
	beforeLiveCheck func()
}

// New builds the service. reg receives the auth metrics (nil: none are
// registered). An empty cfg.Secret is not rejected here, so that commands
// that only create users need none, but then logins fail with ErrNoSecret
// and every bearer token is refused.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, cfg Config, log *slog.Logger, reg prometheus.Registerer) *Service {
	if cfg.AccessTTL <= 0 {
		cfg.AccessTTL = defaultAccessTTL
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = defaultSessionTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cost, dummy := owaspCost, dummyHash
	if cfg.FastHashing {
		cost = fastCost
		dummy, _ = hashPasswordAt(fastCost, "no password anyone knows") // cannot fail but for the OS random source
	}
	sessions := newSessionStore(rdb, cfg.KeyPrefix, cfg.SessionTTL, deriveKey(cfg.Secret, "shop refresh-token mac v1"), log)
	return &Service{
		cost:      cost,
		dummy:     dummy,
		db:        db,
		rdb:       rdb,
		cfg:       cfg,
		log:       log,
		metrics:   newMetrics(reg, log),
		tokens:    newTokenCodec(cfg.Secret, cfg.AccessTTL),
		sessions:  sessions,
		throttle:  newLoginThrottle(rdb, cfg, sessions, log),
		hashSlots: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
	}
}

// deriveKey makes a key for one purpose from the secret, so the refresh-token
// MAC never shares a key with the JWT signature.
func deriveKey(secret []byte, purpose string) []byte {
	if len(secret) == 0 {
		return nil
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// metrics are the service's Prometheus collectors.
type metrics struct {
	logins       *prometheus.CounterVec
	refreshReuse prometheus.Counter
}

// Login outcomes, the values of shop_auth_logins_total's label.
const (
	outcomeSuccess        = "success"
	outcomeInvalid        = "invalid_credentials"
	outcomeInvalidRequest = "invalid_request"
	outcomeThrottled      = "throttled"
	outcomeUnavailable    = "unavailable"
	outcomeError          = "error"
)

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		logins: metric.CounterVec("shop_auth_logins_total",
			"Login attempts by outcome (success, invalid_credentials, invalid_request, throttled, unavailable, error).", "outcome"),
		refreshReuse: metric.Counter("shop_auth_refresh_reuse_total",
			"Already used refresh tokens presented again; each revoked its session."),
	}
	for _, o := range []string{outcomeSuccess, outcomeInvalid, outcomeInvalidRequest, outcomeThrottled, outcomeUnavailable, outcomeError} {
		m.logins.WithLabelValues(o) // export zeros, so rate() works from the start
	}
	if reg != nil {
		m.logins = register(reg, log, m.logins)
		m.refreshReuse = register(reg, log, m.refreshReuse)
	}
	return m
}

// register adds c to reg, or reuses the collector already registered under
// the same name (two services sharing one registry share their counters).
// Any other conflict is logged and c counts unexported: metrics are not
// worth refusing to serve for.
func register[C prometheus.Collector](reg prometheus.Registerer, log *slog.Logger, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	log.Warn("auth metrics not registered", "err", err)
	return c
}

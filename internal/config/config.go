// Package config reads the shop's settings from SHOP_* environment variables
// (flags of the same name override them), validates them, and reports a bad
// setting by the name of its variable, so start-up fails with one clear line.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
)

// Config is every setting of the shop process. See docs/configuration.md's
// table for the contract; the extra fields are additions with safe defaults.
type Config struct {
	Env      string `env:"SHOP_ENV"`
	Addr     string `env:"SHOP_ADDR" envDefault:":8080"`
	RedisURL string `env:"SHOP_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0"`
	// RedisCluster: SHOP_REDIS_URL names a Redis Cluster (one seed node,
	// more as ?addr=host:port&addr=...).
	RedisCluster bool `env:"SHOP_REDIS_CLUSTER" envDefault:"false"`
	// OrderPartitions is how many streams the orders are spread over (by
	// SKU); on a cluster, also the slot groups the SKUs' keys fall in.
	// 0: 1 on a single Redis, DefaultClusterPartitions on a cluster.
	OrderPartitions int           `env:"SHOP_ORDER_PARTITIONS" envDefault:"0"`
	DatabaseURL     string        `env:"SHOP_DATABASE_URL" envDefault:"postgres://postgres@127.0.0.1:5432/shop?sslmode=disable"`
	JWTSecret       string        `env:"SHOP_JWT_SECRET"`
	KeyPrefix       string        `env:"SHOP_KEY_PREFIX" envDefault:"shop:"`
	RateLimit       RateLimit     `env:"SHOP_RATE_LIMIT" envDefault:"100/10s"`
	TrustedProxies  []string      `env:"SHOP_TRUSTED_PROXIES" envSeparator:","`
	AccessTTL       time.Duration `env:"SHOP_ACCESS_TTL" envDefault:"15m"`
	SessionTTL      time.Duration `env:"SHOP_SESSION_TTL" envDefault:"720h"`
	LogLevel        slog.Level    `env:"SHOP_LOG_LEVEL" envDefault:"info"`
	// RateLimitIPv6Prefix is how many leading bits of an IPv6 client
	// address share one rate-limit window.
	RateLimitIPv6Prefix int `env:"SHOP_RATE_LIMIT_IPV6_PREFIX" envDefault:"64"`
	// LoginFailures is the failed-login budget per account ("N/duration").
	LoginFailures RateLimit `env:"SHOP_LOGIN_FAILURES" envDefault:"10/15m"`
	// CacheRedisURL, when set, is a separate Redis for the catalog cache,
	// which may then evict (allkeys-lru) without touching live state.
	CacheRedisURL string `env:"SHOP_CACHE_REDIS_URL"`
	// PaymentTTL is the payment window of the orders this instance
	// accepts (0: none, orders never expire).
	PaymentTTL time.Duration `env:"SHOP_PAYMENT_TTL" envDefault:"15m"`
	// PaymentProvider names the payment provider: "test" (approves every
	// token but tok_declined) or "stripe" (the four settings below).
	PaymentProvider string `env:"SHOP_PAYMENT_PROVIDER" envDefault:"test"`
	// Stripe's settings, required with SHOP_PAYMENT_PROVIDER=stripe but
	// the URL (Stripe's own when empty; a stripe-mock in tests).
	StripeSecretKey     string `env:"SHOP_STRIPE_SECRET_KEY"`
	StripeWebhookSecret string `env:"SHOP_STRIPE_WEBHOOK_SECRET"`
	StripeAPIURL        string `env:"SHOP_STRIPE_API_URL"`
	Currency            string `env:"SHOP_CURRENCY" envDefault:"usd"`

	// Additions to the contract.
	BodyLimit       int           `env:"SHOP_BODY_LIMIT" envDefault:"65536"`
	ShutdownTimeout time.Duration `env:"SHOP_SHUTDOWN_TIMEOUT" envDefault:"8s"`
	// AuditInterval is how often the instances, between them, audit the
	// stores (0: only when asked), so the shop_audit_* metrics and their
	// alert see a violation without anyone asking.
	AuditInterval time.Duration `env:"SHOP_AUDIT_INTERVAL" envDefault:"1m"`
	RedisPoolSize int           `env:"SHOP_REDIS_POOL_SIZE" envDefault:"100"`
	// RedisPipeline auto-pipelines the purchase path's two scripts (the
	// limiter with the session check, and the reserve script): concurrent
	// purchases share round trips. RedisPipelineBatches, Delay and Adaptive
	// tune it (autopipe.Options). The defaults are the best of the
	// combinations measured (BENCHMARKS.md): go-redis's own (one batch, no
	// delay) was slower than no pipelining on a quiet machine.
	RedisPipeline         bool          `env:"SHOP_REDIS_PIPELINE" envDefault:"true"`
	RedisPipelineBatches  int           `env:"SHOP_REDIS_PIPELINE_BATCHES" envDefault:"16"`
	RedisPipelineDelay    time.Duration `env:"SHOP_REDIS_PIPELINE_DELAY" envDefault:"100us"`
	RedisPipelineAdaptive bool          `env:"SHOP_REDIS_PIPELINE_ADAPTIVE" envDefault:"true"`
	// RedisOneTrip runs a purchase's rate-limit window, session check and
	// reservation in one script call on a single Redis with the limiter on,
	// and an anonymous product read's window, cached document and live
	// stock too when they are in that Redis (no cache Redis of its own,
	// near cache off) (internal/onetrip; a cluster or the limiter
	// off keeps the separate steps). Off: two calls, and three for a
	// product read, as before (for A/B measurement).
	RedisOneTrip bool `env:"SHOP_REDIS_ONE_TRIP" envDefault:"true"`
	// PasswordHashing is "owasp" (argon2id at OWASP's cost) or "fast", a
	// tiny cost for load tests, allowed only with SHOP_ENV=dev.
	PasswordHashing string `env:"SHOP_PASSWORD_HASHING" envDefault:"owasp"`
	// LiveMaxStreams bounds the live stock event streams one instance
	// holds; LiveMaxStreamsPerIP those of one client IP (as the rate
	// limiter groups them).
	LiveMaxStreams      int `env:"SHOP_LIVE_MAX_STREAMS" envDefault:"10000"`
	LiveMaxStreamsPerIP int `env:"SHOP_LIVE_MAX_STREAMS_PER_IP" envDefault:"20"`
	// NearCacheTTL bounds how long a product read in this instance may
	// answer from its own memory: catalog entries (the near cache in front
	// of the Redis cache) and available stock (the stock view). Other
	// instances' writes normally reach it at once through Pub/Sub; the TTL
	// bounds a lost message. 0 (the default): every read goes to Redis, as
	// docs/api.md's Catalog section promises ("after a successful write, the
	// next read anywhere returns the new data"); a TTL trades that promise,
	// across instances, for reads without a round trip. On a Redis
	// Cluster the stock view keeps nothing (internal/live: the sharded
	// stock channels are heard only for the SKUs streamed), so there it
	// applies to the catalog entries only.
	NearCacheTTL time.Duration `env:"SHOP_NEAR_CACHE_TTL" envDefault:"0"`
	// NearCacheSize bounds the entries of each of the two (LRU).
	NearCacheSize int `env:"SHOP_NEAR_CACHE_SIZE" envDefault:"10000"`
	// SagaHoldTTL is how long a cross-shard saga's hold waits for its
	// commit before the sweeper may undo it (Redis Cluster only;
	// order.Options.HoldLifetime): how long a crash between hold and commit
	// keeps units out of stock and answers a repeat of its
	// Idempotency-Key 503. At least 3s: a placement takes up to 2s, and a
	// hold undone mid-placement costs that placement a 503.
	SagaHoldTTL time.Duration `env:"SHOP_SAGA_HOLD_TTL" envDefault:"30s"`
	// DrawCancelRate is how many holds a draw releases a second at most
	// (0: no limit): Stripe limits a live account's requests to about 100
	// a second, shared with every other call the shop makes.
	DrawCancelRate float64 `env:"SHOP_DRAW_CANCEL_RATE" envDefault:"20"`
}

// DefaultClusterPartitions is SHOP_ORDER_PARTITIONS's default on a
// cluster: divisible by 2, 3, 4 and 6 masters, so that the partitions
// spread evenly over slot ranges split as redis-cli --cluster create does.
const DefaultClusterPartitions = 12

// Partitions is the order stream's partitions as configured; on a cluster
// they also group the SKUs' keys (keyspace).
func (c *Config) Partitions() keyspace.Partitions {
	n := c.OrderPartitions
	if n == 0 {
		n = 1
		if c.RedisCluster {
			n = DefaultClusterPartitions
		}
	}
	return keyspace.NewPartitions(n, c.RedisCluster)
}

// Dev reports whether the process runs in development mode (SHOP_ENV=dev).
func (c *Config) Dev() bool { return c.Env == "dev" }

// RateLimit is SHOP_RATE_LIMIT (and SHOP_LOGIN_FAILURES): N requests per
// sliding window, or off.
type RateLimit struct {
	Limit  int
	Window time.Duration
}

// Off reports whether rate limiting is turned off (SHOP_RATE_LIMIT=0).
func (r RateLimit) Off() bool { return r.Limit == 0 }

// UnmarshalText parses "N/duration" (for example "100/10s") or "0".
func (r *RateLimit) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "0" {
		*r = RateLimit{}
		return nil
	}
	n, d, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf("%q is not N/duration (like 100/10s) or 0", s)
	}
	limit, err := strconv.Atoi(n)
	if err != nil || limit <= 0 {
		return fmt.Errorf("%q: N must be a positive integer", s)
	}
	window, err := time.ParseDuration(d)
	if err != nil || window < time.Millisecond {
		return fmt.Errorf("%q: the window must be a duration of at least 1ms", s)
	}
	*r = RateLimit{Limit: limit, Window: window}
	return nil
}

// String formats the limit the way it is configured.
func (r RateLimit) String() string {
	if r.Off() {
		return "0"
	}
	return fmt.Sprintf("%d/%s", r.Limit, r.Window)
}

// Load parses the settings from environ (variable name to value; a missing
// key means the variable is unset) and validates them. Errors name the
// variable.
func Load(environ map[string]string) (*Config, error) {
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: environ}); err != nil {
		return nil, nameVariables(err)
	}
	c.TrustedProxies = trimAll(c.TrustedProxies)
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Variables lists the names of every variable Load reads, so callers can
// collect them from the process environment or from flags.
func Variables() []string {
	t := reflect.TypeOf(Config{})
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("env"), ","); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// Defaults maps each variable that has a default to it, as Load applies
// it when the variable is unset (for help texts).
func Defaults() map[string]string {
	t := reflect.TypeOf(Config{})
	out := map[string]string{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("env"), ",")
		if def, ok := t.Field(i).Tag.Lookup("envDefault"); ok && name != "" {
			out[name] = def
		}
	}
	return out
}

func (c *Config) validate() error {
	checks := []struct {
		name string
		bad  bool
		why  string
	}{
		{"SHOP_ADDR", c.Addr == "", "must not be empty"},
		{"SHOP_REDIS_URL", c.RedisURL == "", "must not be empty"},
		{"SHOP_DATABASE_URL", c.DatabaseURL == "", "must not be empty"},
		{"SHOP_KEY_PREFIX", c.KeyPrefix == "" || len(c.KeyPrefix) > 64, "must be 1 to 64 characters"},
		{"SHOP_ACCESS_TTL", c.AccessTTL < time.Second || c.AccessTTL > 24*time.Hour, "must be between 1s and 24h"},
		{"SHOP_SESSION_TTL", c.SessionTTL < c.AccessTTL, "must be at least SHOP_ACCESS_TTL"},
		{"SHOP_RATE_LIMIT_IPV6_PREFIX", c.RateLimitIPv6Prefix < 1 || c.RateLimitIPv6Prefix > 128, "must be a prefix length from 1 to 128"},
		{"SHOP_PAYMENT_TTL", c.PaymentTTL < 0 || (c.PaymentTTL > 0 && c.PaymentTTL < time.Second) || c.PaymentTTL > 30*24*time.Hour,
			"must be 0 (no payment window) or between 1s and 720h"},
		{"SHOP_PAYMENT_PROVIDER", c.PaymentProvider != "test" && c.PaymentProvider != "stripe", "must be test or stripe"},
		{"SHOP_STRIPE_SECRET_KEY", c.PaymentProvider == "stripe" && c.StripeSecretKey == "",
			"is required with SHOP_PAYMENT_PROVIDER=stripe (an sk_ or rk_ key)"},
		{"SHOP_STRIPE_WEBHOOK_SECRET", c.PaymentProvider == "stripe" && c.StripeWebhookSecret == "",
			"is required with SHOP_PAYMENT_PROVIDER=stripe (the endpoint's whsec_ signing secret)"},
		{"SHOP_STRIPE_API_URL", c.StripeAPIURL != "" && !httpURL(c.StripeAPIURL), "must be an http:// or https:// URL (or empty: Stripe's own)"},
		{"SHOP_CURRENCY", !currencyCode(c.Currency), "must be a three-letter ISO 4217 code in lower case, like usd"},
		{"SHOP_BODY_LIMIT", c.BodyLimit < 1024, "must be at least 1024 bytes"},
		{"SHOP_DRAW_CANCEL_RATE", !(c.DrawCancelRate >= 0 && c.DrawCancelRate <= 10000), "must be 0 (no limit) to 10000 cancels a second"},
		{"SHOP_SHUTDOWN_TIMEOUT", c.ShutdownTimeout <= 0, "must be positive"},
		{"SHOP_AUDIT_INTERVAL", c.AuditInterval != 0 && (c.AuditInterval < 10*time.Second || c.AuditInterval > 24*time.Hour),
			"must be 0 (audit only when asked) or between 10s and 24h"},
		{"SHOP_REDIS_POOL_SIZE", c.RedisPoolSize < 1, "must be at least 1"},
		{"SHOP_REDIS_PIPELINE_BATCHES", c.RedisPipelineBatches < 1 || c.RedisPipelineBatches > 64, "must be from 1 to 64"},
		{"SHOP_REDIS_PIPELINE_DELAY", c.RedisPipelineDelay < 0 || c.RedisPipelineDelay > 10*time.Millisecond, "must be from 0 to 10ms"},
		{"SHOP_ORDER_PARTITIONS", c.OrderPartitions < 0 || c.OrderPartitions > keyspace.MaxPartitions,
			fmt.Sprintf("must be from 0 (the default for the mode) to %d", keyspace.MaxPartitions)},
		{"SHOP_PASSWORD_HASHING", c.PasswordHashing != "owasp" && c.PasswordHashing != "fast", "must be owasp or fast"},
		{"SHOP_PASSWORD_HASHING", c.PasswordHashing == "fast" && !c.Dev(), "fast is only allowed with SHOP_ENV=dev"},
		{"SHOP_LIVE_MAX_STREAMS", c.LiveMaxStreams < 1, "must be at least 1"},
		{"SHOP_NEAR_CACHE_TTL", c.NearCacheTTL < 0 || c.NearCacheTTL > time.Minute, "must be 0 (off) or at most 1m"},
		{"SHOP_NEAR_CACHE_SIZE", c.NearCacheSize < 1, "must be at least 1"},
		{"SHOP_SAGA_HOLD_TTL", c.SagaHoldTTL < 3*time.Second || c.SagaHoldTTL > time.Hour, "must be from 3s to 1h"},
		{"SHOP_LIVE_MAX_STREAMS_PER_IP", c.LiveMaxStreamsPerIP < 1 || c.LiveMaxStreamsPerIP > c.LiveMaxStreams, "must be from 1 to SHOP_LIVE_MAX_STREAMS"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("invalid %s: %s", ch.name, ch.why)
		}
	}
	if err := c.stripeSecrets(); err != nil {
		return err
	}
	if c.RedisCluster {
		if err := clusterURL(c.RedisURL); err != nil {
			return fmt.Errorf("invalid SHOP_REDIS_URL (SHOP_REDIS_CLUSTER=true): %w", err)
		}
	}
	if c.CacheRedisURL != "" && !redisURL(c.CacheRedisURL) {
		return errors.New("invalid SHOP_CACHE_REDIS_URL: must be a redis://, rediss:// or unix:// URL (or empty: the catalog cache uses SHOP_REDIS_URL)")
	}
	for _, p := range c.TrustedProxies {
		if _, err := parseProxy(p); err != nil {
			return fmt.Errorf("invalid SHOP_TRUSTED_PROXIES: %q is neither an IP nor a CIDR", p)
		}
	}
	return nil
}

// httpURL tells whether s is an absolute http(s) URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// currencyCode tells whether s has the form Stripe takes: three lower
// case letters (Stripe refuses a code it does not know).
func currencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// redisURL tells whether s has the form of a Redis URL; go-redis checks
// the rest when it connects.
func redisURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "redis" || u.Scheme == "rediss" || u.Scheme == "unix")
}

// clusterURL checks SHOP_REDIS_URL in cluster mode: redis:// or rediss://
// (no unix socket: the nodes announce TCP addresses), database 0 or none,
// seeds as addr=host:port, and no option go-redis would refuse.
func clusterURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return errors.New("must be a redis:// or rediss:// URL")
	case u.Host == "":
		return errors.New("must name a seed node (host:port)")
	}
	if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
		return fmt.Errorf("database %s: a cluster has only database 0", db)
	}
	if _, err := redis.ParseClusterURL(s); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "redis: "))
	}
	return nil
}

// trimAll drops blank entries, so SHOP_TRUSTED_PROXIES="" or "a, b," work.
func trimAll(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ErrNoJWTSecret is returned by EnsureJWTSecret when SHOP_JWT_SECRET is unset
// outside development mode.
var ErrNoJWTSecret = errors.New("SHOP_JWT_SECRET is required (or set SHOP_ENV=dev for a random one)")

// MinJWTSecretBytes is the shortest SHOP_JWT_SECRET accepted outside
// development mode: HS256 needs a key of at least 256 bits (RFC 7518 §3.2).
const MinJWTSecretBytes = 32

// MinWebhookSecretBytes is the shortest SHOP_STRIPE_WEBHOOK_SECRET accepted
// outside development mode. The whole whsec_ string is the HMAC-SHA256 key
// of Stripe's signatures, so the same floor as HS256's holds (RFC 2104 §3:
// no shorter than the hash's output); Stripe's own secrets are longer
// (whsec_ and 32 or more characters), so it refuses none of them.
const MinWebhookSecretBytes = MinJWTSecretBytes

// EnsureJWTSecret checks that a signing secret is configured and, outside
// development mode, at least MinJWTSecretBytes long. In development mode it
// makes a random one and returns generated=true, so the caller can warn
// that tokens will not survive a restart. Errors: ErrNoJWTSecret, or one
// naming the variable for a blank or short secret.
func (c *Config) EnsureJWTSecret() (generated bool, err error) {
	if c.JWTSecret != "" {
		return false, c.checkSecret("SHOP_JWT_SECRET", c.JWTSecret, MinJWTSecretBytes, "HS256 needs a 256-bit key: openssl rand -hex 32")
	}
	if !c.Dev() {
		return false, ErrNoJWTSecret
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return false, fmt.Errorf("generate SHOP_JWT_SECRET: %w", err)
	}
	c.JWTSecret = hex.EncodeToString(b)
	return true, nil
}

// stripeSecrets checks Stripe's two secrets with the stripe provider (an
// empty one is refused above, as required). The secret key gets no length
// floor: it is Stripe's credential, and Stripe refuses a wrong one at the
// first call; the webhook secret is the key that this process checks forged
// events against, so a short one is as weak as a short SHOP_JWT_SECRET.
func (c *Config) stripeSecrets() error {
	if c.PaymentProvider != "stripe" {
		return nil
	}
	if err := c.checkSecret("SHOP_STRIPE_SECRET_KEY", c.StripeSecretKey, 1, "an sk_ or rk_ key"); err != nil {
		return err
	}
	return c.checkSecret("SHOP_STRIPE_WEBHOOK_SECRET", c.StripeWebhookSecret, MinWebhookSecretBytes,
		"the endpoint's whsec_ signing secret, as Stripe shows it")
}

// checkSecret refuses a set secret that is blank (white space only: a
// quoting slip, never a secret) in any mode, and one under min bytes
// outside development mode, where short secrets are for tests. Its errors
// name the variable; hint says what the secret should be.
func (c *Config) checkSecret(name, value string, min int, hint string) error {
	n := len(value)
	switch {
	case strings.TrimSpace(value) == "":
		return fmt.Errorf("invalid %s: blank, white space only (%s)", name, hint)
	case n < min && !c.Dev():
		return fmt.Errorf("invalid %s: %d bytes, at least %d needed (%s)", name, n, min, hint)
	}
	return nil
}

// nameVariables rewrites env's errors, which name struct fields, so that they
// name the environment variable the user has to fix.
func nameVariables(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) || len(agg.Errors) == 0 {
		return err
	}
	var pe env.ParseError
	if errors.As(agg.Errors[0], &pe) {
		if f, ok := reflect.TypeOf(Config{}).FieldByName(pe.Name); ok {
			name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
			return fmt.Errorf("invalid %s: %v", name, pe.Err)
		}
	}
	return agg.Errors[0]
}

// DrawCancelEvery is the pause between two cancels of a draw
// (SHOP_DRAW_CANCEL_RATE); 0: none.
func (c *Config) DrawCancelEvery() time.Duration {
	if c.DrawCancelRate <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / c.DrawCancelRate)
}

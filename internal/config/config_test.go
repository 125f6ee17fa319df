package config_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/config"
)

func TestDefaults(t *testing.T) {
	c, err := config.Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":8080" || c.KeyPrefix != "shop:" || c.AccessTTL != 15*time.Minute ||
		c.SessionTTL != 720*time.Hour || c.RateLimit.Limit != 100 || c.RateLimit.Window != 10*time.Second ||
		c.RedisURL != "redis://127.0.0.1:6379/0" ||
		c.DatabaseURL != "postgres://postgres@127.0.0.1:5432/shop?sslmode=disable" || len(c.TrustedProxies) != 0 ||
		c.RateLimitIPv6Prefix != 64 || c.LoginFailures.Limit != 10 || c.LoginFailures.Window != 15*time.Minute ||
		c.CacheRedisURL != "" ||
		c.PaymentTTL != 15*time.Minute || c.PaymentProvider != "test" ||
		!c.RedisPipeline || c.RedisPipelineBatches != 16 || c.RedisPipelineDelay != 100*time.Microsecond || !c.RedisPipelineAdaptive ||
		!c.RedisOneTrip || c.SagaHoldTTL != 30*time.Second || c.AuditInterval != time.Minute ||
		c.DrawCancelRate != 20 || c.DrawCancelEvery() != 50*time.Millisecond {
		t.Errorf("defaults differ from docs/configuration.md: %+v", c)
	}
}

func TestInvalidSettingsNameTheirVariable(t *testing.T) {
	tests := []struct {
		name, variable, value string
	}{
		{"rate_limit_garbage", "SHOP_RATE_LIMIT", "abc"},
		{"rate_limit_negative", "SHOP_RATE_LIMIT", "-1/10s"},
		{"rate_limit_bad_window", "SHOP_RATE_LIMIT", "10/soon"},
		{"access_ttl", "SHOP_ACCESS_TTL", "x"},
		{"access_ttl_zero", "SHOP_ACCESS_TTL", "0s"},
		{"session_shorter_than_access", "SHOP_SESSION_TTL", "1m"},
		{"log_level", "SHOP_LOG_LEVEL", "loud"},
		{"proxy", "SHOP_TRUSTED_PROXIES", "10.0.0.1,not-an-ip"},
		{"body_limit", "SHOP_BODY_LIMIT", "ten"},
		{"hashing", "SHOP_PASSWORD_HASHING", "none"},
		{"login_failures_garbage", "SHOP_LOGIN_FAILURES", "ten"},
		{"login_failures_no_window", "SHOP_LOGIN_FAILURES", "10/"},
		{"ipv6_prefix_zero", "SHOP_RATE_LIMIT_IPV6_PREFIX", "0"},
		{"ipv6_prefix_too_long", "SHOP_RATE_LIMIT_IPV6_PREFIX", "129"},
		{"ipv6_prefix_garbage", "SHOP_RATE_LIMIT_IPV6_PREFIX", "/64"},
		{"fast_hashing_outside_dev", "SHOP_PASSWORD_HASHING", "fast"},
		{"cache_redis_not_a_url", "SHOP_CACHE_REDIS_URL", "127.0.0.1:6380"},
		{"cache_redis_other_scheme", "SHOP_CACHE_REDIS_URL", "http://127.0.0.1:6380"},
		{"payment_ttl_garbage", "SHOP_PAYMENT_TTL", "soon"},
		{"payment_ttl_negative", "SHOP_PAYMENT_TTL", "-1m"},
		{"payment_ttl_below_a_second", "SHOP_PAYMENT_TTL", "10ms"},
		{"payment_provider", "SHOP_PAYMENT_PROVIDER", "paypal"},
		{"audit_interval_short", "SHOP_AUDIT_INTERVAL", "1s"},
		{"audit_interval_long", "SHOP_AUDIT_INTERVAL", "48h"},
		{"audit_interval_garbage", "SHOP_AUDIT_INTERVAL", "often"},
		{"draw_cancel_rate_negative", "SHOP_DRAW_CANCEL_RATE", "-1"},
		{"draw_cancel_rate_garbage", "SHOP_DRAW_CANCEL_RATE", "fast"},
		{"stripe_without_its_key", "SHOP_PAYMENT_PROVIDER", "stripe"},
		{"stripe_api_url_not_a_url", "SHOP_STRIPE_API_URL", "localhost:12111"},
		{"currency_upper_case", "SHOP_CURRENCY", "USD"},
		{"currency_long", "SHOP_CURRENCY", "dollar"},
		{"pipeline_not_a_bool", "SHOP_REDIS_PIPELINE", "maybe"},
		{"one_trip_not_a_bool", "SHOP_REDIS_ONE_TRIP", "maybe"},
		{"pipeline_no_batches", "SHOP_REDIS_PIPELINE_BATCHES", "0"},
		{"pipeline_too_many_batches", "SHOP_REDIS_PIPELINE_BATCHES", "65"},
		{"pipeline_negative_delay", "SHOP_REDIS_PIPELINE_DELAY", "-1us"},
		{"pipeline_long_delay", "SHOP_REDIS_PIPELINE_DELAY", "11ms"},
		{"order_partitions_negative", "SHOP_ORDER_PARTITIONS", "-1"},
		{"order_partitions_too_many", "SHOP_ORDER_PARTITIONS", "257"},
		{"order_partitions_garbage", "SHOP_ORDER_PARTITIONS", "some"},
		{"saga_hold_shorter_than_a_placement", "SHOP_SAGA_HOLD_TTL", "2s"},
		{"saga_hold_over_an_hour", "SHOP_SAGA_HOLD_TTL", "61m"},
		{"saga_hold_garbage", "SHOP_SAGA_HOLD_TTL", "soon"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(map[string]string{tc.variable: tc.value})
			if err == nil || !strings.Contains(err.Error(), tc.variable) {
				t.Fatalf("Load(%s=%q) error = %v, want one naming %s", tc.variable, tc.value, err, tc.variable)
			}
		})
	}
}

// whsec is a webhook secret of the length Stripe's have.
const whsec = "whsec_0123456789abcdefghijklmnopqrstuv"

// Stripe needs both secrets; each missing one is named.
func TestStripeSettings(t *testing.T) {
	full := map[string]string{"SHOP_PAYMENT_PROVIDER": "stripe", "SHOP_STRIPE_SECRET_KEY": "sk_test_1",
		"SHOP_STRIPE_WEBHOOK_SECRET": whsec, "SHOP_STRIPE_API_URL": "http://127.0.0.1:12111"}
	c, err := config.Load(full)
	if err != nil || c.StripeSecretKey != "sk_test_1" || c.Currency != "usd" || c.StripeAPIURL != "http://127.0.0.1:12111" {
		t.Fatalf("Load(stripe) = %+v, %v", c, err)
	}
	for _, missing := range []string{"SHOP_STRIPE_SECRET_KEY", "SHOP_STRIPE_WEBHOOK_SECRET"} {
		env := maps.Clone(full)
		delete(env, missing)
		if _, err := config.Load(env); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: %v", missing, err)
		}
	}
}

// A blank secret is refused in every mode, naming its variable; a short
// webhook secret (an HMAC key anyone could guess) outside dev only. The
// secret key has no length floor: Stripe refuses a wrong one itself.
func TestStripeSecrets(t *testing.T) {
	short := whsec[:config.MinWebhookSecretBytes-1]
	for _, tc := range []struct {
		name, env, variable, value string
		ok                         bool
	}{
		{"webhook_blank", "production", "SHOP_STRIPE_WEBHOOK_SECRET", " ", false},
		{"webhook_tab_and_newline", "", "SHOP_STRIPE_WEBHOOK_SECRET", "\t\n", false},
		{"webhook_blank_in_dev", "dev", "SHOP_STRIPE_WEBHOOK_SECRET", "   ", false},
		{"webhook_one_short", "", "SHOP_STRIPE_WEBHOOK_SECRET", short, false},
		{"webhook_exact", "", "SHOP_STRIPE_WEBHOOK_SECRET", whsec[:config.MinWebhookSecretBytes], true},
		{"webhook_short_in_dev", "dev", "SHOP_STRIPE_WEBHOOK_SECRET", "whsec_1", true},
		{"key_blank", "", "SHOP_STRIPE_SECRET_KEY", " ", false},
		{"key_blank_in_dev", "dev", "SHOP_STRIPE_SECRET_KEY", "\t", false},
		{"key_short", "", "SHOP_STRIPE_SECRET_KEY", "sk_1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SHOP_ENV": tc.env, "SHOP_PAYMENT_PROVIDER": "stripe",
				"SHOP_STRIPE_SECRET_KEY": "sk_test_1", "SHOP_STRIPE_WEBHOOK_SECRET": whsec}
			env[tc.variable] = tc.value
			_, err := config.Load(env)
			if (err == nil) != tc.ok {
				t.Fatalf("Load(%s=%q) = %v, want ok=%v", tc.variable, tc.value, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.variable) {
				t.Fatalf("error %q does not name %s", err, tc.variable)
			}
		})
	}
	// The test provider needs neither.
	if _, err := config.Load(map[string]string{"SHOP_STRIPE_WEBHOOK_SECRET": " "}); err != nil {
		t.Errorf("a blank webhook secret with the test provider: %v", err)
	}
}

func TestRateLimitForms(t *testing.T) {
	c, err := config.Load(map[string]string{"SHOP_RATE_LIMIT": "0"})
	if err != nil || !c.RateLimit.Off() {
		t.Fatalf("0 should turn the limiter off: %+v %v", c, err)
	}
	if c, err := config.Load(map[string]string{"SHOP_LOGIN_FAILURES": "0"}); err != nil || !c.LoginFailures.Off() {
		t.Fatalf("SHOP_LOGIN_FAILURES=0 should turn the throttle off: %+v %v", c, err)
	}
	c, err = config.Load(map[string]string{"SHOP_RATE_LIMIT": "5/500ms", "SHOP_TRUSTED_PROXIES": " 10.0.0.0/8, ::1 ,"})
	if err != nil || c.RateLimit.Limit != 5 || c.RateLimit.Window != 500*time.Millisecond || len(c.TrustedProxies) != 2 {
		t.Fatalf("got %+v %v", c, err)
	}
}

func TestPaymentWindowOff(t *testing.T) {
	c, err := config.Load(map[string]string{"SHOP_PAYMENT_TTL": "0"})
	if err != nil || c.PaymentTTL != 0 {
		t.Fatalf("SHOP_PAYMENT_TTL=0 should turn the window off: %+v %v", c, err)
	}
}

func TestJWTSecret(t *testing.T) {
	c, _ := config.Load(map[string]string{})
	if _, err := c.EnsureJWTSecret(); err == nil {
		t.Fatal("a missing secret outside dev must fail")
	}
	c, _ = config.Load(map[string]string{"SHOP_ENV": "dev"})
	gen, err := c.EnsureJWTSecret()
	if err != nil || !gen || len(c.JWTSecret) < 32 {
		t.Fatalf("dev should generate a secret: %v %v %q", gen, err, c.JWTSecret)
	}
}

func TestJWTSecretLength(t *testing.T) {
	short := strings.Repeat("k", config.MinJWTSecretBytes-1)
	for _, tc := range []struct {
		name, env, secret string
		ok                bool
	}{
		{"one_byte", "", "x", false},
		{"one_short", "production", short, false},
		{"exact", "", short + "k", true},
		{"dev_short", "dev", "x", true},
		{"blank", "", strings.Repeat(" ", config.MinJWTSecretBytes), false},
		{"dev_blank", "dev", " ", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := config.Load(map[string]string{"SHOP_ENV": tc.env, "SHOP_JWT_SECRET": tc.secret})
			_, err := c.EnsureJWTSecret()
			if (err == nil) != tc.ok {
				t.Fatalf("EnsureJWTSecret() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "SHOP_JWT_SECRET") {
				t.Fatalf("error %q does not name the variable", err)
			}
		})
	}
}

func TestCacheRedisURL(t *testing.T) {
	for _, u := range []string{"redis://cache:6379/0", "rediss://user:pw@cache:6380/2", "unix:///run/redis.sock"} {
		c, err := config.Load(map[string]string{"SHOP_CACHE_REDIS_URL": u})
		if err != nil || c.CacheRedisURL != u {
			t.Errorf("SHOP_CACHE_REDIS_URL=%s: %+v %v", u, c, err)
		}
	}
}

// In cluster mode SHOP_REDIS_URL is a seed node with more seeds as
// ?addr=; a URL a cluster cannot serve fails Load naming SHOP_REDIS_URL.
func TestRedisClusterURL(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1:7000",
		"redis://127.0.0.1:7000/0?addr=127.0.0.1:7001&addr=127.0.0.1:7002",
		"rediss://user:pw@node1:6379/?addr=node2:6379",
	} {
		c, err := config.Load(map[string]string{"SHOP_REDIS_CLUSTER": "true", "SHOP_REDIS_URL": u})
		if err != nil || !c.RedisCluster {
			t.Errorf("SHOP_REDIS_URL=%s: %+v %v", u, c, err)
		}
	}
	for _, u := range []string{
		"unix:///tmp/redis.sock",
		"redis://127.0.0.1:7000/1",
		"redis://127.0.0.1:7000?addr=nohostport",
		"redis://127.0.0.1:7000?master_name=x",
		"redis:///0",
	} {
		_, err := config.Load(map[string]string{"SHOP_REDIS_CLUSTER": "true", "SHOP_REDIS_URL": u})
		if err == nil || !strings.Contains(err.Error(), "SHOP_REDIS_URL") {
			t.Errorf("SHOP_REDIS_URL=%s with SHOP_REDIS_CLUSTER=true: error = %v, want one naming SHOP_REDIS_URL", u, err)
		}
	}
	// The same database number is fine on a single Redis.
	if _, err := config.Load(map[string]string{"SHOP_REDIS_URL": "redis://127.0.0.1:7000/1"}); err != nil {
		t.Errorf("single Redis, database 1: %v", err)
	}
	if _, err := config.Load(map[string]string{"SHOP_REDIS_CLUSTER": "maybe"}); err == nil ||
		!strings.Contains(err.Error(), "SHOP_REDIS_CLUSTER") {
		t.Errorf("SHOP_REDIS_CLUSTER=maybe: error = %v", err)
	}
}

// SHOP_ORDER_PARTITIONS 0 (the default) is one partition on a single Redis
// and DefaultClusterPartitions, grouping the SKUs, on a cluster.
func TestOrderPartitions(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		n       int
		grouped bool
	}{
		{map[string]string{}, 1, false},
		{map[string]string{"SHOP_ORDER_PARTITIONS": "4"}, 4, false},
		{map[string]string{"SHOP_REDIS_CLUSTER": "true"}, config.DefaultClusterPartitions, true},
		{map[string]string{"SHOP_REDIS_CLUSTER": "true", "SHOP_ORDER_PARTITIONS": "6"}, 6, true},
	} {
		c, err := config.Load(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if p := c.Partitions(); p.Count() != tc.n || p.Grouped() != tc.grouped {
			t.Errorf("%v: %d partitions, grouped %v; want %d, %v", tc.env, p.Count(), p.Grouped(), tc.n, tc.grouped)
		}
	}
}

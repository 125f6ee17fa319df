package main

import (
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shop-oss/shop/internal/config"
)

// settingHelp is the one sentence each SHOP_* setting's flag shows in -h;
// docs/configuration.md says the rest.
var settingHelp = map[string]string{
	"SHOP_ENV":                     "dev for development conveniences (text logs, a random JWT secret, demo seeding)",
	"SHOP_ADDR":                    "the address the HTTP API listens on",
	"SHOP_REDIS_URL":               "the Redis holding stock, orders and sessions",
	"SHOP_REDIS_CLUSTER":           "the Redis URL names a Redis Cluster (more seed nodes as ?addr=host:port)",
	"SHOP_ORDER_PARTITIONS":        "order streams the orders are spread over by SKU (0: 1 on a single Redis, 12 on a cluster)",
	"SHOP_DATABASE_URL":            "the PostgreSQL database (pool size via pool_max_conns=)",
	"SHOP_JWT_SECRET":              "the key access tokens are signed with, at least 32 bytes (random in dev when empty)",
	"SHOP_KEY_PREFIX":              "the prefix of every Redis key this process writes",
	"SHOP_RATE_LIMIT":              "requests per client IP and sliding window, as N/duration (0: off)",
	"SHOP_TRUSTED_PROXIES":         "comma-separated IPs or CIDRs allowed to set X-Forwarded-For",
	"SHOP_ACCESS_TTL":              "how long an access token lasts",
	"SHOP_SESSION_TTL":             "how long an unused session lasts",
	"SHOP_LOG_LEVEL":               "the least severe log lines written: debug, info, warn or error",
	"SHOP_RATE_LIMIT_IPV6_PREFIX":  "leading bits of an IPv6 client address that share one rate-limit window",
	"SHOP_LOGIN_FAILURES":          "failed logins per account and sliding window, as N/duration (0: off)",
	"SHOP_CACHE_REDIS_URL":         "a separate Redis for the catalog cache (empty: the cache lives in the main Redis)",
	"SHOP_PAYMENT_TTL":             "how long an order may wait for its payment before it expires (0: no window)",
	"SHOP_PAYMENT_PROVIDER":        "test (approves every token but tok_declined) or stripe",
	"SHOP_STRIPE_SECRET_KEY":       "Stripe's secret or restricted key (with the stripe provider)",
	"SHOP_STRIPE_WEBHOOK_SECRET":   "the webhook endpoint's whsec_ signing secret (with the stripe provider)",
	"SHOP_STRIPE_API_URL":          "where Stripe's API is (empty: Stripe's own; a stripe-mock in tests)",
	"SHOP_CURRENCY":                "the currency of every payment, three lower-case letters",
	"SHOP_BODY_LIMIT":              "the largest request body in bytes (413 above)",
	"SHOP_SHUTDOWN_TIMEOUT":        "how long a stop waits for the requests in flight",
	"SHOP_AUDIT_INTERVAL":          "how often the serving instances, between them, audit the stores (0: only when asked)",
	"SHOP_REDIS_POOL_SIZE":         "Redis connections per process",
	"SHOP_REDIS_PIPELINE":          "auto-pipeline the purchase path's scripts, so concurrent purchases share round trips",
	"SHOP_REDIS_PIPELINE_BATCHES":  "pipelined batches in flight at once (1 to 64)",
	"SHOP_REDIS_PIPELINE_DELAY":    "the longest a pipelined batch waits for more commands (0 to 10ms)",
	"SHOP_REDIS_PIPELINE_ADAPTIVE": "shorten the pipeline's wait as its queue fills",
	"SHOP_REDIS_ONE_TRIP":          "run a purchase's rate limit, session check and reservation in one script call",
	"SHOP_PASSWORD_HASHING":        "owasp, or fast (a tiny cost for load tests, dev only)",
	"SHOP_LIVE_MAX_STREAMS":        "live stock streams one instance holds (503 above)",
	"SHOP_LIVE_MAX_STREAMS_PER_IP": "live stock streams of one client IP (429 above)",
	"SHOP_NEAR_CACHE_TTL":          "how old a product read from this instance's own memory may be (0: every read goes to Redis)",
	"SHOP_NEAR_CACHE_SIZE":         "entries of each near cache (least recently used out first)",
	"SHOP_SAGA_HOLD_TTL":           "Redis Cluster only: how long a cross-shard hold waits for its commit before it may be undone",
	"SHOP_DRAW_CANCEL_RATE":        "holds a draw releases a second at most, once its winners are captured (0: no limit)",
}

// The settings each part of the shop reads, so that a command's -h lists
// those of the parts it builds and no other.
var (
	logSettings = []string{"SHOP_ENV", "SHOP_LOG_LEVEL"}
	// storeSettings: openStores, and the live stock on it.
	storeSettings = append(slices.Clone(logSettings), "SHOP_DATABASE_URL", "SHOP_REDIS_URL", "SHOP_REDIS_CLUSTER",
		"SHOP_REDIS_POOL_SIZE", "SHOP_KEY_PREFIX", "SHOP_ORDER_PARTITIONS")
	// migratedSettings: openMigrated, which also opens the catalog
	// cache's own Redis.
	migratedSettings = append(slices.Clone(storeSettings), "SHOP_CACHE_REDIS_URL")
	// orderSettings: shop.NewOrders (its payment provider, and the saga
	// that places orders on a cluster).
	orderSettings = []string{"SHOP_PAYMENT_TTL", "SHOP_PAYMENT_PROVIDER", "SHOP_STRIPE_SECRET_KEY",
		"SHOP_STRIPE_API_URL", "SHOP_CURRENCY", "SHOP_SAGA_HOLD_TTL"}
	// allSettings: the commands that build the whole app.
	allSettings = config.Variables()
)

// setting is a SHOP_* variable as its flag shows it.
type setting struct {
	variable, def, help string
	typ                 reflect.Type
}

// settings describes config.Config's variables by name.
func settings() map[string]setting {
	defaults := config.Defaults()
	t := reflect.TypeOf(config.Config{})
	out := map[string]setting{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("env"), ",")
		if name != "" {
			out[name] = setting{variable: name, def: defaults[name], help: settingHelp[name], typ: t.Field(i).Type}
		}
	}
	return out
}

// readsSettings gives cmd a flag for each of the variables it reads,
// typed as the setting is; a flag given overrides its variable.
func readsSettings(cmd *cobra.Command, variables ...[]string) *cobra.Command {
	all := settings()
	for _, names := range variables {
		for _, name := range names {
			if cmd.Flags().Lookup(flagName(name)) == nil {
				addSetting(cmd.Flags(), all[name])
			}
		}
	}
	return cmd
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	levelType    = reflect.TypeOf(slog.Level(0))
	rateType     = reflect.TypeOf(config.RateLimit{})
)

// addSetting registers s's flag: bool, int and duration settings as
// pflag's own types, so that -h shows them as such and a bad value fails
// at parse time; the others as text config.Load parses.
func addSetting(fs *pflag.FlagSet, s setting) {
	name, usage := flagName(s.variable), s.help+" ($"+s.variable+")"
	switch {
	case s.typ.Kind() == reflect.Bool:
		fs.Bool(name, s.def == "true", usage)
	case s.typ == durationType:
		d, _ := time.ParseDuration(s.def) // config's own default, tested
		fs.Duration(name, d, usage)
	case s.typ.Kind() == reflect.Int && s.typ != levelType: // a level is an int, named
		n, _ := strconv.Atoi(s.def)
		fs.Int(name, n, usage)
	default:
		fs.Var(&textValue{s: s.def, typ: textType(s.typ)}, name, usage)
		fs.Lookup(name).DefValue = s.def
	}
}

// textType names a text setting's values in -h.
func textType(t reflect.Type) string {
	switch {
	case t == levelType:
		return "level"
	case t == rateType:
		return "N/duration"
	case t.Kind() == reflect.Slice:
		return "list"
	case t.Kind() == reflect.Float64:
		return "number"
	}
	return "string"
}

// textValue is a setting that config.Load parses from its text.
type textValue struct{ s, typ string }

func (v *textValue) String() string     { return v.s }
func (v *textValue) Set(s string) error { v.s = s; return nil }
func (v *textValue) Type() string       { return v.typ }

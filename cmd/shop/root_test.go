package main

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shop-oss/shop/internal/config"
)

// Every command's -h lists, as typed flags with a sentence each, exactly
// the settings it reads: `shop migrate -h` shows the database URL, not
// Stripe's keys.
func TestHelpListsTheSettingsEachCommandReads(t *testing.T) {
	t.Parallel()
	log := []string{"SHOP_ENV", "SHOP_LOG_LEVEL"}
	stores := append(slices.Clone(log), "SHOP_DATABASE_URL", "SHOP_REDIS_URL", "SHOP_REDIS_CLUSTER",
		"SHOP_REDIS_POOL_SIZE", "SHOP_KEY_PREFIX", "SHOP_ORDER_PARTITIONS")
	migrated := append(slices.Clone(stores), "SHOP_CACHE_REDIS_URL")
	orders := []string{"SHOP_PAYMENT_TTL", "SHOP_PAYMENT_PROVIDER", "SHOP_STRIPE_SECRET_KEY", "SHOP_STRIPE_API_URL",
		"SHOP_CURRENCY", "SHOP_SAGA_HOLD_TTL"}
	reads := map[string][]string{
		"shop":                     nil,
		"shop serve":               config.Variables(),
		"shop routes":              config.Variables(),
		"shop writer":              migrated,
		"shop migrate":             {"SHOP_DATABASE_URL"},
		"shop seed":                nil,
		"shop seed demo":           append(slices.Clone(migrated), "SHOP_PASSWORD_HASHING", "SHOP_SAGA_HOLD_TTL"),
		"shop bestsellers":         nil,
		"shop bestsellers rebuild": migrated,
		"shop user":                nil,
		"shop user add":            append(slices.Clone(log), "SHOP_DATABASE_URL", "SHOP_PASSWORD_HASHING"),
		"shop user delete":         append(slices.Clone(migrated), orders...),
		"shop audit":               stores,
		"shop recover":             stores,
		"shop payments":            nil,
		"shop payments reconcile":  append(append(slices.Clone(migrated), orders...), "SHOP_STRIPE_WEBHOOK_SECRET"),
		"shop bench":               {"SHOP_REDIS_URL"},
		"shop loadtest":            nil, // its --redis-url and the like are the target's, not settings
		"shop loadtest get":        nil,
		"shop version":             nil,
		"shop help":                nil,
		"shop completion":          nil,
	}
	root, _ := newRootCmd(func(string) string { return "" }, nil, nil)
	for _, c := range allCommands(root) {
		want, ok := reads[c.CommandPath()]
		if !ok {
			if c.Parent() != nil && c.Parent().Name() == "completion" {
				continue // cobra's own
			}
			t.Errorf("%s: not in the table: which settings does it read?", c.CommandPath())
			continue
		}
		help := helpOf(t, c)
		for _, name := range config.Variables() {
			// loadtest's own --redis-url names the target's Redis, not $SHOP_REDIS_URL.
			line, _ := flagLine(help, flagName(name))
			listed := strings.Contains(line, "($"+name+")")
			if listed != slices.Contains(want, name) {
				t.Errorf("%s -h: --%s listed %v, want %v", c.CommandPath(), flagName(name), listed, !listed)
				continue
			}
			if listed {
				checkSettingFlag(t, c, name, line)
			}
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.TrimSpace(f.Usage) == "" || strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: usage %q, want a sentence without backquotes (pflag takes one as the value's name)",
					c.CommandPath(), f.Name, f.Usage)
			}
		})
	}
}

// checkSettingFlag checks a setting's line of -h: typed as its field is,
// naming its variable, with its sentence and its default.
func checkSettingFlag(t *testing.T, c *cobra.Command, name, line string) {
	t.Helper()
	field := settings()[name]
	want := map[reflect.Kind]string{reflect.Bool: "bool", reflect.Int: "int", reflect.Int64: "duration"}[field.typ.Kind()]
	if field.typ == levelType {
		want = "level"
	}
	if got := c.Flags().Lookup(flagName(name)).Value.Type(); want != "" && got != want {
		t.Errorf("%s --%s: type %s, want %s", c.CommandPath(), flagName(name), got, want)
	}
	if strings.Contains(line, " string") && want != "" || !strings.Contains(line, "$"+name) ||
		!strings.Contains(line, settingHelp[name]) || settingHelp[name] == "" {
		t.Errorf("%s -h: %q, want it typed %s with its sentence and $%s", c.CommandPath(), line, want, name)
	}
	if def := field.def; def != "" && def != "0" && def != "false" && !strings.Contains(line, "(default ") {
		t.Errorf("%s -h: %q, want its default %s", c.CommandPath(), line, def)
	}
}

func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

// helpOf runs `shop ... -h` as the binary would.
func helpOf(t *testing.T, c *cobra.Command) string {
	t.Helper()
	args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "shop")), "-h")
	var out bytes.Buffer
	if err := run(context.Background(), args, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatalf("shop %v: %v", args, err)
	}
	return out.String()
}

// flagLine is the line of help that lists --name.
func flagLine(help, name string) (string, bool) {
	for _, line := range strings.Split(help, "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "--"+name || len(f) > 1 && f[1] == "--"+name) {
			return line, true
		}
	}
	return "", false
}

// A setting's flag overrides its variable, which overrides its default;
// typed flags reach config.Load as it parses them.
func TestSettingFlagsOverrideTheEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SHOP_ADDR": ":9999", "SHOP_ACCESS_TTL": "5m"}
	config := func(args ...string) *config.Config {
		t.Helper()
		root, a := newRootCmd(func(k string) string { return env[k] }, nil, nil)
		serve, _, err := root.Find([]string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		if err := serve.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		a.flags = serve.Flags()
		cfg, err := a.config()
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if cfg := config(); cfg.Addr != ":9999" || cfg.AccessTTL != 5*time.Minute || !cfg.RedisPipeline || cfg.RateLimit.Limit != 100 {
		t.Fatalf("from the environment and defaults: %+v", cfg)
	}
	cfg := config("--addr", ":7777", "--access-ttl", "2m", "--redis-pipeline=false", "--rate-limit", "5/1s", "--body-limit", "2048")
	if cfg.Addr != ":7777" || cfg.AccessTTL != 2*time.Minute || cfg.RedisPipeline || cfg.RateLimit.Limit != 5 || cfg.BodyLimit != 2048 {
		t.Fatalf("from flags: %+v", cfg)
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/config"
)

// `shop -h` and every subcommand's -h show the settings' flags with the
// defaults their variables take when unset.
func TestHelpShowsSettingDefaults(t *testing.T) {
	t.Parallel()
	defaults := config.Defaults()
	if defaults["SHOP_ADDR"] != ":8080" || defaults["SHOP_RATE_LIMIT"] != "100/10s" {
		t.Fatalf("config.Defaults() = %v", defaults)
	}
	root, _ := newRootCmd(func(string) string { return "" }, nil, nil)
	cmds := []*cobra.Command{root}
	for _, c := range root.Commands() {
		cmds = append(cmds, c)
		cmds = append(cmds, c.Commands()...)
	}
	for _, c := range cmds {
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "shop")), "-h")
		var out bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, &out); err != nil {
			t.Fatalf("shop %v: %v", args, err)
		}
		for name, def := range defaults {
			if c.LocalNonPersistentFlags().Lookup(flagName(name)) != nil {
				continue // a flag of its own, of another meaning (loadtest's --redis-url)
			}
			line := "--" + flagName(name) + " string"
			i := strings.Index(out.String(), line)
			if i < 0 {
				t.Errorf("%s -h: no %s flag", c.CommandPath(), line)
				continue
			}
			rest, _, _ := strings.Cut(out.String()[i:], "\n")
			if !strings.Contains(rest, "$"+name) || !strings.Contains(rest, `(default "`+def+`")`) {
				t.Errorf("%s -h: %q, want $%s and its default %q", c.CommandPath(), rest, name, def)
			}
		}
	}
}

// A flag's shown default is not a value given: the environment still
// overrides it.
func TestEnvironmentOverridesFlagDefaults(t *testing.T) {
	t.Parallel()
	a := &app{getenv: func(k string) string { return map[string]string{"SHOP_ADDR": ":9999"}[k] }}
	root, _ := newRootCmd(a.getenv, nil, nil)
	a.flags = root.PersistentFlags()
	cfg, err := a.config()
	if err != nil || cfg.Addr != ":9999" {
		t.Fatalf("addr = %v (%v), want :9999 from the environment", cfg, err)
	}
}

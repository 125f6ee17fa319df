package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/config"
)

// --fault crashes a writer on purpose: a production process refuses it
// before touching anything, and a bad spec is one clear line.
func TestWriterFaultFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, env, fault, want string
	}{
		{"production", "", "exit-after-commit:1", "--fault is for fault drills: it needs SHOP_ENV=dev"},
		{"no_count", "dev", "exit-after-commit", "invalid --fault"},
		{"zero", "dev", "exit-after-commit:0", "N >= 1"},
		{"unknown_action", "dev", "panic-after-commit:1", "ACTION is exit or stop"},
		{"unknown_point", "dev", "exit-after-ack:1", "POINT before-commit or after-commit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SHOP_ENV": tc.env,
				// Unreachable: a refused flag must fail before the stores.
				"SHOP_REDIS_URL": "redis://127.0.0.1:1/0", "SHOP_DATABASE_URL": "postgres://postgres@127.0.0.1:1/shop"}
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{"writer", "--fault", tc.fault}, func(k string) string { return env[k] }, &out, &errb)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tc.want)
			}
		})
	}
	for _, spec := range []string{"exit-before-commit:1", "exit-after-commit:3", "stop-before-commit:2", "stop-after-commit:1"} {
		if f, err := parseFault(spec); err != nil || f == nil {
			t.Errorf("parseFault(%q) = %v, %v", spec, f, err)
		}
	}
	var help bytes.Buffer
	_ = run(context.Background(), []string{"writer", "-h"}, func(string) string { return "" }, &help, &help)
	if strings.Contains(help.String(), "--fault") {
		t.Errorf("shop writer -h shows the hidden --fault flag")
	}
}

// --saga-fault kills `shop serve` mid-saga on purpose: the same rules as
// the writer's --fault.
func TestServeSagaFaultFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, env, fault, want string
	}{
		{"production", "", "after-hold:1", "--saga-fault is for fault drills: it needs SHOP_ENV=dev"},
		{"no_count", "dev", "after-hold", "invalid --saga-fault"},
		{"zero", "dev", "after-commit:0", "N >= 1"},
		{"unknown_point", "dev", "after-finish:1", "POINT is after-hold, after-commit or before-finish"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SHOP_ENV": tc.env, "SHOP_JWT_SECRET": "fault-secret-0123456789abcdef0123456789",
				"SHOP_REDIS_URL": "redis://127.0.0.1:1/0", "SHOP_DATABASE_URL": "postgres://postgres@127.0.0.1:1/shop"}
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{"serve", "--saga-fault", tc.fault}, func(k string) string { return env[k] }, &out, &errb)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tc.want)
			}
		})
	}
	dev := &config.Config{Env: "dev"}
	for _, spec := range []string{"after-hold:1", "after-commit:3", "before-finish:2"} {
		if f, err := parseSagaFault(spec, dev); err != nil || f == nil || f.n < 1 {
			t.Errorf("parseSagaFault(%q) = %v, %v", spec, f, err)
		}
	}
	var help bytes.Buffer
	_ = run(context.Background(), []string{"serve", "-h"}, func(string) string { return "" }, &help, &help)
	if strings.Contains(help.String(), "--saga-fault") {
		t.Errorf("shop serve -h shows the hidden --saga-fault flag")
	}
}

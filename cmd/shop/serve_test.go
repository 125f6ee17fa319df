package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

// startupEnv points a command at redisURL; PostgreSQL is a closed port, so a
// command that gets past the Redis checks fails there instead of serving.
func startupEnv(redisURL string) func(string) string {
	env := map[string]string{
		"SHOP_REDIS_URL": redisURL, "SHOP_DATABASE_URL": "postgres://postgres@127.0.0.1:1/shop?sslmode=disable",
		"SHOP_ENV": "dev", "SHOP_ADDR": "127.0.0.1:0", "SHOP_LOG_LEVEL": "warn",
	}
	return func(k string) string { return env[k] }
}

func TestStartRefusesAnEvictingRedis(t *testing.T) {
	t.Parallel()
	getenv := startupEnv(testenv.RedisServer(t, "--maxmemory-policy", "allkeys-lru"))
	for _, cmd := range []string{"serve", "writer"} {
		t.Run(cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{cmd}, getenv, &out, &errb)
			// main prints err as the one stderr line and exits 1.
			if err == nil || !strings.Contains(err.Error(), "maxmemory-policy allkeys-lru") ||
				!strings.Contains(err.Error(), "set maxmemory-policy noeviction") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line naming allkeys-lru and the fix", err)
			}
			if errb.Len() != 0 {
				t.Errorf("stderr = %q besides the error", errb.String())
			}
		})
	}
}

func TestStartWarnsWhenConfigIsRefused(t *testing.T) {
	t.Parallel()
	getenv := startupEnv(testenv.RedisServer(t, "--rename-command", "CONFIG", ""))
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"serve"}, getenv, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "postgres unreachable") {
		t.Fatalf("err = %v, want it past Redis, failing on PostgreSQL", err)
	}
	if n := strings.Count(out.String(), "could not verify"); n != 1 {
		t.Errorf("log = %q, want one warning", out.String())
	}
}

// Outside SHOP_ENV=dev, serve and writer warn once at start when Redis
// keeps no append-only file; in development they do not.
func TestStartWarnsWithoutAOF(t *testing.T) {
	t.Parallel()
	url := testenv.RedisServer(t) // appendonly no
	for _, tc := range []struct {
		cmd, env string
		warns    int
	}{
		{"serve", "", 1}, {"writer", "", 1}, {"serve", "dev", 0}, {"writer", "dev", 0},
	} {
		t.Run(tc.cmd+"_"+tc.env, func(t *testing.T) {
			base := startupEnv(url)
			getenv := func(k string) string {
				switch k {
				case "SHOP_ENV":
					return tc.env
				case "SHOP_JWT_SECRET":
					return "a-secret-for-this-test-0123456789abcdef"
				}
				return base(k)
			}
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{tc.cmd}, getenv, &out, &errb)
			if err == nil || !strings.Contains(err.Error(), "postgres unreachable") {
				t.Fatalf("err = %v, want it past Redis, failing on PostgreSQL", err)
			}
			if n := strings.Count(out.String(), "appendonly no"); n != tc.warns {
				t.Errorf("log = %q, want %d appendonly warning(s)", out.String(), tc.warns)
			}
		})
	}
}

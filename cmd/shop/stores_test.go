package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

// onTestStores returns the test's own Redis, the environment and a runner
// of shop commands as the binary runs them (run), on the test's own
// database and key prefix. The runner reads env at each call, so a test
// may change a setting between commands; it returns what the command
// printed, then its error's text.
func onTestStores(t *testing.T) (*testenv.Redis, map[string]string, func(args ...string) (string, error)) {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	env := map[string]string{
		"SHOP_DATABASE_URL": db.URL, "SHOP_REDIS_URL": r.URL, "SHOP_KEY_PREFIX": r.Prefix,
		"SHOP_LOG_LEVEL": "warn", "SHOP_ENV": "dev", "SHOP_PASSWORD_HASHING": "fast",
	}
	return r, env, func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
		if err != nil {
			return out.String() + errb.String() + err.Error(), err
		}
		return out.String() + errb.String(), nil
	}
}

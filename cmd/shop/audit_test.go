package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

// The commands that work on the stores, run as the binary runs them: after
// the demo seed, `shop audit` exits 0 and `shop bestsellers rebuild`
// succeeds; a unit that appears from nowhere in the live stock makes the
// audit fail, naming the SKU.
func TestAuditAndRebuildCommands(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	env := map[string]string{
		"SHOP_DATABASE_URL": db.URL, "SHOP_REDIS_URL": r.URL, "SHOP_KEY_PREFIX": r.Prefix,
		"SHOP_LOG_LEVEL": "warn", "SHOP_ENV": "dev", "SHOP_PASSWORD_HASHING": "fast",
	}
	shop := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
		return out.String() + errb.String(), err
	}
	if out, err := shop("seed", "demo"); err != nil {
		t.Fatalf("seed: %v %s", err, out)
	}
	if out, err := shop("audit"); err != nil || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("audit of the demo: %v %s", err, out)
	}
	if out, err := shop("bestsellers", "rebuild"); err != nil || !strings.Contains(out, "rebuilt") {
		t.Fatalf("rebuild: %v %s", err, out)
	}
	r.Client.HIncrBy(context.Background(), r.Prefix+"sale:{phone-x1}", "available", 1)
	if out, err := shop("audit"); err == nil || !strings.Contains(out, "phone-x1") {
		t.Fatalf("audit after a unit appeared from nowhere: %v %s", err, out)
	}
}

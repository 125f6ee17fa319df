package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

// Every command that opens the stores settles SHOP_ORDER_PARTITIONS
// against the count the orders in Redis are spread over: a process with
// another count would read and write other streams, and the orders in the
// old ones would never be written nor expire.
func TestCommandsRefuseAnotherPartitionCount(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	shop := func(partitions string, args ...string) (string, error) {
		env := map[string]string{
			"SHOP_DATABASE_URL": db.URL, "SHOP_REDIS_URL": r.URL, "SHOP_KEY_PREFIX": r.Prefix,
			"SHOP_LOG_LEVEL": "warn", "SHOP_ENV": "dev", "SHOP_PASSWORD_HASHING": "fast",
			"SHOP_ORDER_PARTITIONS": partitions,
		}
		var out, errb bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
		if err != nil {
			return out.String() + errb.String() + err.Error(), err
		}
		return out.String() + errb.String(), nil
	}
	if out, err := shop("4", "seed", "demo"); err != nil {
		t.Fatalf("seed with 4 partitions: %v %s", err, out)
	}
	if out, err := shop("8", "seed", "demo"); err == nil || !strings.Contains(out, "SHOP_ORDER_PARTITIONS is 8") {
		t.Fatalf("seed with 8 partitions after 4: %v %s, want refused", err, out)
	}
	if out, err := shop("4", "seed", "demo"); err != nil {
		t.Fatalf("seed with 4 partitions again: %v %s", err, out)
	}
}

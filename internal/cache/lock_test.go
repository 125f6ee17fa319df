package cache

import (
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

func TestLockIsReleasedOnlyByItsOwner(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	c := New(r.Client, Options{Prefix: r.Prefix}, nil)
	ctx := context.Background()
	lk, _, found := c.acquire(ctx, "k")
	if found || lk.token == "" {
		t.Fatalf("acquire = %+v %v, want the lock", lk, found)
	}
	if other, _, _ := c.acquire(ctx, "k"); other.token != "" {
		t.Fatal("a second caller took a held lock")
	}
	// The lock expired and someone else took it: releasing ours must not
	// free theirs.
	r.Client.Set(ctx, lk.key, "someone-else", 0)
	c.release(ctx, lk)
	if v := r.Client.Get(ctx, lk.key).Val(); v != "someone-else" {
		t.Fatalf("lock = %q after a stale release, want someone-else's", v)
	}
	r.Client.Set(ctx, lk.key, lk.token, 0)
	c.release(ctx, lk)
	if n := r.Client.Exists(ctx, lk.key).Val(); n != 0 {
		t.Error("the owner's release left the lock")
	}
}

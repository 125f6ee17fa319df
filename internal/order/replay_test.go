package order

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
)

// Replay finds the first answer of a checkout's Idempotency-Key, for its
// user only; a key a buy-now used is another request's.
func TestReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.sale(t, "r-1", 5, 0, 100)
	ann, bob := f.user(t), f.user(t)
	cart := f.r.Prefix + "cart:{" + ann + "}"
	f.r.Client.HSet(ctx, cart, "r-1", 1)
	first, err := f.svc.Place(ctx, ann, []Line{{SKU: "r-1", Quantity: 1}}, PlaceOptions{IdemKey: "k-1", CartKey: cart})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Place(ctx, ann, []Line{{SKU: "r-1", Quantity: 1}}, PlaceOptions{IdemKey: "k-buy"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Replay(ctx, ann, "k-buy", nil); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("replay of a buy-now's key as a checkout: %v, want idempotency_key_reused", err)
	}
	got, ok, err := f.svc.Replay(ctx, ann, "k-1", nil)
	if err != nil || !ok || got.OrderID != first.OrderID || got.Status != StatusPending || !got.Replayed {
		t.Fatalf("replay of a used key = %+v %v %v, want order %s", got, ok, err, first.OrderID)
	}
	for _, tc := range []struct{ name, user, key string }{
		{"unused_key", ann, "k-2"},
		{"another_users_key", bob, "k-1"},
	} {
		if got, ok, err := f.svc.Replay(ctx, tc.user, tc.key, nil); err != nil || ok {
			t.Errorf("%s: replay = %+v %v %v, want none", tc.name, got, ok, err)
		}
	}
}

func TestReplayRedisDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	f.svc.rdb = dead
	_, _, err := f.svc.Replay(context.Background(), f.user(t), "k", nil)
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.CodeUnavailable {
		t.Fatalf("err = %v, want 503 unavailable", err)
	}
}

// A checkout line without a sale is sale_not_active naming it, even for a
// one-line cart whose product is gone: the 404 is buy-now's answer only.
func TestCheckoutWithoutSaleIsNotActive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	user := f.user(t)
	cart := f.r.Prefix + "cart:{" + user + "}"
	f.r.Client.HSet(ctx, cart, "gone", 1)
	_, err := f.svc.Place(ctx, user, []Line{{SKU: "gone", Quantity: 1}}, PlaceOptions{CartKey: cart})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.CodeSaleNotActive || len(e.Extra["skus"].([]string)) != 1 {
		t.Fatalf("err = %v, want sale_not_active naming gone", err)
	}
	if n := f.r.Client.HLen(ctx, cart).Val(); n != 1 {
		t.Fatalf("cart has %d lines after a refusal, want 1", n)
	}
	_, err = f.svc.Place(ctx, user, []Line{{SKU: "gone", Quantity: 1}}, PlaceOptions{})
	if !errors.Is(err, ErrProductNotFound) {
		t.Fatalf("buy-now err = %v, want ErrProductNotFound", err)
	}
}

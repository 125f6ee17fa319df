package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// `buckets` on the stock PUT: 1 to 64, 1 when absent; anything else is
// reported under its field.
func TestBucketsValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		member string
		want   int // 0: refused
	}{
		{``, 1}, {`,"buckets":1`, 1}, {`,"buckets":4`, 4}, {`,"buckets":64`, 64},
		{`,"buckets":0`, 0}, {`,"buckets":65`, 0}, {`,"buckets":-1`, 0},
	} {
		var b seedBody
		if err := json.Unmarshal([]byte(`{"quantity":1`+c.member+`}`), &b); err != nil {
			t.Fatal(err)
		}
		seed, err := b.validate(time.Now())
		var e *apperr.Error
		switch {
		case c.want == 0 && (!errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Field != "buckets"):
			t.Errorf("%s: %v, want buckets refused alone", c.member, err)
		case c.want != 0 && (err != nil || seed.Buckets != c.want):
			t.Errorf("%s: %+v %v, want %d buckets", c.member, seed, err, c.want)
		}
	}
}

// HomeBucket is what the scripts compute with redis.sha1hex: a caller
// and the script deciding a purchase agree on every shopper's bucket.
func TestHomeBucketIsTheScripts(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	lua := redis.NewScript(`return tonumber(string.sub(redis.sha1hex(ARGV[1]), 1, 8), 16) % tonumber(ARGV[2])`)
	seen := map[int]bool{}
	for i := range 200 {
		user := fmt.Sprintf("user-%d", i)
		got, err := lua.Run(context.Background(), r.Client, nil, user, 16).Int()
		if err != nil {
			t.Fatal(err)
		}
		if want := HomeBucket(user, 16); got != want {
			t.Fatalf("%s: the script says bucket %d, Go %d", user, got, want)
		}
		seen[got] = true
	}
	if len(seen) != 16 {
		t.Fatalf("200 shoppers landed in %d of 16 buckets", len(seen))
	}
}

// A round of B buckets: each bucket holds its share (the first q mod B
// one more), the live round and Available sum them, a round of one
// bucket has the hash of before, and reseeding with fewer buckets
// removes the old round's others.
func TestSeedingSplitsTheRoundOverBuckets(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	checkBucketSeeding(t, r.Client, NewStock(r.Client, r.Prefix))
}

// The same on a 3-master cluster, where each bucket's keys are in the
// slot of the partition its tag names, spread over the masters.
func TestSeedingSplitsTheRoundOverBucketsOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb := testenv.OpenCluster(t, c)
	parts := keyspace.NewPartitions(12, true)
	s := NewPartitionedStock(rdb, c.Prefix, parts)
	masters := map[string]bool{}
	for b := range 3 {
		key := s.BucketKey("hot", b, 3)
		want := c.Slot(t, parts.Tag((parts.Of("hot")+b*4)%12))
		if got := c.Slot(t, key); got != want {
			t.Fatalf("bucket %d (%s): slot %d, want %d", b, key, got, want)
		}
		m, err := c.Client.MasterForKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("3 buckets of 12 partitions on %d masters, want 3", len(masters))
	}
	checkBucketSeeding(t, rdb, s)
}

func checkBucketSeeding(t *testing.T, rdb redis.UniversalClient, s *Stock) {
	t.Helper()
	ctx := context.Background()
	if err := s.OpenRound(ctx, "hot", LiveRound{Round: 1, Quantity: 10, PerUserLimit: 2, PriceCents: 100, Buckets: 4}); err != nil {
		t.Fatal(err)
	}
	for b, want := range []int64{3, 3, 2, 2} {
		m := rdb.HGetAll(ctx, s.BucketKey("hot", b, 4)).Val()
		if m["available"] != strconv.FormatInt(want, 10) || m["seeded"] != m["available"] ||
			m["bucket"] != strconv.Itoa(b) || m["buckets"] != "4" || m["quantity"] != "10" || m["round"] != "1" {
			t.Fatalf("bucket %d: %v, want %d units of 10", b, m, want)
		}
	}
	live, ok, err := s.Live(ctx, "hot")
	if err != nil || !ok || live.Available != 10 || live.Quantity != 10 || live.Buckets != 4 {
		t.Fatalf("live: %+v %v %v", live, ok, err)
	}
	rdb.HIncrBy(ctx, s.BucketKey("hot", 3, 4), "available", -2)
	if got, err := s.Available(ctx, "hot", "none"); err != nil || got[0] != 8 || got[1] != 0 {
		t.Fatalf("available: %v %v, want [8 0]", got, err)
	}
	if err := s.SetPrice(ctx, "hot", 250); err != nil {
		t.Fatal(err)
	}
	for b := range 4 {
		if p := rdb.HGet(ctx, s.BucketKey("hot", b, 4), "price_cents").Val(); p != "250" {
			t.Fatalf("bucket %d's price %s after SetPrice", b, p)
		}
	}
	// Fewer buckets: the old round's others go; one bucket: no new field.
	if err := s.OpenRound(ctx, "hot", LiveRound{Round: 2, Quantity: 5, PerUserLimit: 1, PriceCents: 100}); err != nil {
		t.Fatal(err)
	}
	for b := 1; b < 4; b++ {
		if n := rdb.Exists(ctx, s.BucketKey("hot", b, 4)).Val(); n != 0 {
			t.Fatalf("bucket %d of the old round is still there", b)
		}
	}
	m := rdb.HGetAll(ctx, s.SaleKey("hot")).Val()
	for _, f := range []string{"bucket", "buckets", "seeded"} {
		if _, has := m[f]; has {
			t.Fatalf("a round of one bucket has %s: %v", f, m)
		}
	}
	if live, _, _ := s.Live(ctx, "hot"); live.Available != 5 || live.Buckets != 1 {
		t.Fatalf("live after reseeding: %+v", live)
	}
	if err := s.Close(ctx, "hot"); err != nil {
		t.Fatal(err)
	}
}

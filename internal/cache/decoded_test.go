package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/cache"
)

// decodes counts the JSON decodings of countedDoc.
var decodes atomic.Int64

// countedDoc is a document whose decodings are counted.
type countedDoc struct{ N int }

func (d *countedDoc) UnmarshalJSON(b []byte) error {
	decodes.Add(1)
	var v struct{ N int }
	err := json.Unmarshal(b, &v)
	d.N = v.N
	return err
}

// The decoded memo (decoded.go): Redis hits of the same bytes are decoded
// once, by GetJSONShared and by GetJSONPrefetched; a write's new bytes
// are decoded and answered at once, and GetJSON, whose callers may
// change what they get, decodes every read. The tests that count
// decodings do not run in parallel with each other.
func TestDecodedMemoDecodesEachEntryOnce(t *testing.T) {
	c := newTestCache(t, cache.Options{})
	ctx := context.Background()
	n := 1
	load := func(context.Context) (countedDoc, error) { return countedDoc{N: n}, nil }
	read := func(get func() (countedDoc, error), want int, what string) {
		t.Helper()
		if v, err := get(); err != nil || v.N != want {
			t.Fatalf("%s: %+v %v, want N %d", what, v, err, want)
		}
	}
	shared := func() (countedDoc, error) { return cache.GetJSONShared(ctx, c.Cache, "k", nil, load) }
	prefetched := func() (countedDoc, error) {
		p, reply := prefetch(t, c, "k", nil)
		return cache.GetJSONPrefetched(ctx, p, reply, load)
	}
	start := decodes.Load()
	read(shared, 1, "the miss")
	for i := range 3 {
		read(shared, 1, fmt.Sprint("shared hit ", i))
		read(prefetched, 1, fmt.Sprint("prefetched hit ", i))
	}
	if got := decodes.Load() - start; got != 1 {
		t.Fatalf("a miss and six hits of the same entry decoded %d times, want 1", got)
	}
	if err := cache.SetJSON(ctx, c.Cache, c.Fence(ctx, "k"), countedDoc{N: 2}); err != nil {
		t.Fatal(err)
	}
	read(prefetched, 2, "after a write")
	read(shared, 2, "after a write, again")
	if got := decodes.Load() - start; got != 2 {
		t.Fatalf("after a write: %d decodings in all, want 2", got)
	}
	n = 3
	if err := c.Delete(ctx, c.Fence(ctx, "k")); err != nil {
		t.Fatal(err)
	}
	read(shared, 3, "after a delete")
	start = decodes.Load()
	for range 3 {
		read(func() (countedDoc, error) { return cache.GetJSON(ctx, c.Cache, "k", nil, load) }, 3, "GetJSON")
	}
	if got := decodes.Load() - start; got != 3 {
		t.Fatalf("three GetJSON reads decoded %d times, want 3", got)
	}
}

// Readers racing writers never get a value other than the one Redis
// answered: each reader sees a value at least as new as the last write
// that returned before it started, and writers' values only.
func TestDecodedMemoReadersRacingWrites(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{})
	ctx := context.Background()
	type doc struct{ N int64 }
	var written atomic.Int64 // the last value whose write returned
	load := func(context.Context) (doc, error) { return doc{N: written.Load()}, nil }
	if _, err := cache.GetJSONShared(ctx, c.Cache, "k", nil, load); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := written.Load()
				v, err := cache.GetJSONShared(ctx, c.Cache, "k", nil, load)
				if err == nil && v.N < floor {
					err = fmt.Errorf("read %d after the write of %d had returned", v.N, floor)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := int64(1); i <= 200; i++ {
		if err := cache.SetJSON(ctx, c.Cache, c.Fence(ctx, "k"), doc{N: i}); err != nil {
			t.Fatal(err)
		}
		written.Store(i)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

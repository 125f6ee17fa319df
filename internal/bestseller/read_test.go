package bestseller

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func skusOf(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.SKU)
	}
	return out
}

// Equal units rank by SKU ascending, on the list and around a SKU alike.
func TestTiesRankBySKUAscending(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, sku := range []string{"b", "c", "d"} {
		f.product(t, sku)
	}
	// "a" and "e" have no product (deleted since they sold).
	mustApply(t, f.s.Record,
		ord("1", fixedNow, Line{"e", 5}, Line{"c", 5}, Line{"a", 5}),
		ord("2", fixedNow, Line{"d", 9}, Line{"b", 1}),
	)
	ctx := context.Background()
	b, err := f.s.Top(ctx, Day, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := skusOf(b.Items), []string{"d", "a", "c", "e", "b"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	for i, e := range b.Items {
		if e.Rank != int64(i+1) {
			t.Errorf("%s rank %d, want %d", e.SKU, e.Rank, i+1)
		}
	}
	if b.Items[0].Name != "Name of d" || b.Items[1].Name != "" || b.Items[0].Units != 9 {
		t.Errorf("entries %+v", b.Items)
	}
	if b, _ := f.s.Top(ctx, Day, 2); !slices.Equal(skusOf(b.Items), []string{"d", "a"}) {
		t.Errorf("limit 2: %v", skusOf(b.Items))
	}

	pos, err := f.s.Position(ctx, Day, "c", 1)
	if err != nil {
		t.Fatal(err)
	}
	if pos.Rank != 3 || pos.Units != 5 || !slices.Equal(skusOf(pos.Above), []string{"a"}) ||
		!slices.Equal(skusOf(pos.Below), []string{"e"}) || pos.Above[0].Rank != 2 || pos.Below[0].Rank != 4 {
		t.Fatalf("position of c: %+v", pos)
	}
	top, _ := f.s.Position(ctx, Day, "d", 5)
	if top.Rank != 1 || len(top.Above) != 0 || !slices.Equal(skusOf(top.Below), []string{"a", "c", "e", "b"}) ||
		top.Below[1].Name != "Name of c" {
		t.Fatalf("position of d: %+v", top)
	}
	alone, _ := f.s.Position(ctx, Day, "b", 0)
	if alone.Rank != 5 || len(alone.Above)+len(alone.Below) != 0 {
		t.Fatalf("position of b, around 0: %+v", alone)
	}
	for _, sku := range []string{"zzz", "not a sku"} {
		if _, err := f.s.Position(ctx, Day, sku, 5); !errors.Is(err, ErrNotRanked) {
			t.Errorf("%q: %v, want ErrNotRanked", sku, err)
		}
	}
}

package inventory

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// checkProductJSON fails unless e encodes p as json.Marshal does, the
// first time and from its memo.
func checkProductJSON(t *testing.T, e *productJSON, p Product) {
	t.Helper()
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, pass := range []string{"first", "again"} {
		got, err := e.encode(p)
		if err != nil {
			t.Fatalf("%s: %v", pass, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s encoding of %+v:\n got %s\nwant %s", pass, p, got, want)
		}
	}
}

// The product read's encoder answers json.Marshal's bytes for every
// product, whatever its strings hold, and for every change of a field
// of a product it has encoded before (the same SKU).
func TestProductJSONIsJSONMarshal(t *testing.T) {
	t.Parallel()
	e := newProductJSON()
	at := time.Date(2026, 12, 2, 3, 4, 5, 600, time.UTC)
	base := Product{SKU: "sku-1", Name: "Phone", Description: "d", Category: "c", PriceCents: 9900, Available: 5, UpdatedAt: at}
	checkProductJSON(t, e, base)
	changes := []func(*Product){
		func(p *Product) { p.Available = 0 },
		func(p *Product) { p.Available = -1 },
		func(p *Product) { p.Available = 1 << 62 },
		func(p *Product) { p.Name = "Phone 2" },
		func(p *Product) { p.Description = `<b>"quoted"</b> & \ back` },
		func(p *Product) { p.Category = "ünïcode \u2028 \x01" },
		func(p *Product) { p.PriceCents = 1 },
		func(p *Product) { p.UpdatedAt = at.Add(time.Nanosecond) },
		func(p *Product) { p.UpdatedAt = at.In(time.FixedZone("X", 3600)) },
		func(p *Product) { p.Name = `x,"available":0,"updated_at":"y` },
		func(p *Product) { p.Description = `,"available":0,"updated_at":` },
	}
	for _, change := range changes {
		p := base
		change(&p)
		checkProductJSON(t, e, p)
		checkProductJSON(t, e, base)
	}
}

// The memo is bounded: encoding more products than it keeps still
// answers each one's own JSON.
func TestProductJSONIsBounded(t *testing.T) {
	t.Parallel()
	e := newProductJSON()
	for i := range productJSONSize + 10 {
		checkProductJSON(t, e, Product{SKU: string(rune('a'+i%26)) + time.Duration(i).String(), Available: int64(i)})
	}
	if n := e.lru.Len(); n != productJSONSize {
		t.Fatalf("memo holds %d products, want %d", n, productJSONSize)
	}
}

func FuzzProductJSON(f *testing.F) {
	f.Add("sku", "name", "desc", "cat", int64(100), int64(3), int64(0))
	f.Add("a", `,"available":0,"updated_at":`, "\u2028<>&", "\xff", int64(-1), int64(-5), int64(1<<40))
	e := newProductJSON()
	f.Fuzz(func(t *testing.T, sku, name, desc, cat string, price, available, nanos int64) {
		p := Product{SKU: sku, Name: name, Description: desc, Category: cat, PriceCents: price,
			Available: available, UpdatedAt: time.Unix(0, nanos).UTC()}
		if _, err := json.Marshal(p); err != nil {
			return // a time json.Marshal refuses: the handler answers its error either way
		}
		checkProductJSON(t, e, p)
	})
}

// BenchmarkProductJSON is the product read's encoding: json.Marshal of
// the product, and productJSON's from its memo (results: BENCHMARKS.md).
func BenchmarkProductJSON(b *testing.B) {
	p := Product{SKU: "bench", Name: "A product", Description: "Its description, of some length.",
		Category: "phones", PriceCents: 19900, Available: 1234, UpdatedAt: time.Now().UTC()}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memo", func(b *testing.B) {
		e := newProductJSON()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			p.Available = int64(i)
			if _, err := e.encode(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

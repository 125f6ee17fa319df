package writer

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// entry is a stream entry of an order of items (JSON) for total cents.
func entry(id int, items string, total int64) redis.XMessage {
	return redis.XMessage{ID: "1-" + strconv.Itoa(id), Values: map[string]any{
		"order_id": uuid.NewString(), "user_id": uuid.NewString(), "created_ms": "1764633600000",
		"total_cents": strconv.FormatInt(total, 10), "items": items,
	}}
}

// A batch decodes each distinct items text once, and still gives every
// event exactly what parseEvent gives it, with items of its own: an
// event's items changed by a hook do not change another's.
func TestParseBatchItemsAreEachEventsOwn(t *testing.T) {
	one := `[{"sku":"tee","quantity":1,"price_cents":1500,"round_id":3}]`
	msgs := []redis.XMessage{
		entry(1, one, 1500),
		entry(2, one, 1500),
		entry(3, `[{"sku":"mug","quantity":2,"price_cents":800,"round_id":1,"released":4}]`, 1600),
		entry(4, one, 1400), // the same text, a total that is not its sum
		entry(5, `[{"sku":`, 0),
		entry(6, one, 1500),
	}
	events, _, failures := parseBatch(msgs)
	if len(events) != 4 || len(failures) != 2 {
		t.Fatalf("%d events and %d failures, want 4 and 2 (%v)", len(events), len(failures), failures)
	}
	byID := map[string]event{}
	for _, e := range events {
		byID[e.streamID] = e
	}
	for _, m := range msgs {
		want, err := parseEvent(m)
		got, ok := byID[m.ID]
		if (err == nil) != ok {
			t.Fatalf("entry %s: parseEvent error %v, in the batch's events %v", m.ID, err, ok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("entry %s: batch %+v, parseEvent %+v", m.ID, got, want)
		}
	}
	byID["1-1"].items[0].Quantity = 91
	byID["1-2"].items[0].Quantity = 92
	for id, want := range map[string]int{"1-1": 91, "1-2": 92, "1-6": 1} {
		if q := byID[id].items[0].Quantity; q != want {
			t.Errorf("entry %s: quantity %d, want %d: changing one event's items changed another's", id, q, want)
		}
	}
}

// BenchmarkParseBatch reads a batch of 1,000 orders of one product, as a
// flash sale's writer does.
func BenchmarkParseBatch(b *testing.B) {
	msgs := make([]redis.XMessage, 1000)
	for i := range msgs {
		msgs[i] = entry(i, `[{"sku":"flash-tee","quantity":1,"price_cents":1500,"round_id":7}]`, 1500)
	}
	b.ReportAllocs()
	for b.Loop() {
		if events, _, _ := parseBatch(msgs); len(events) != len(msgs) {
			b.Fatal(len(events))
		}
	}
}

// Whatever an items text holds, an event read through a batch's decoded
// texts, first or again, is what parseEvent reads, and fails alike.
func FuzzParseEventItems(f *testing.F) {
	f.Add(`[{"sku":"tee","quantity":1,"price_cents":1500,"round_id":3}]`, int64(1500))
	f.Add(`[{"sku":"a","quantity":2,"price_cents":5,"round_id":1,"released":9},{"sku":"b","quantity":1,"price_cents":0,"round_id":2}]`, int64(10))
	f.Add(`null`, int64(0))
	f.Add(`[{"sku":`, int64(0))
	f.Fuzz(func(t *testing.T, items string, total int64) {
		m := entry(1, items, total)
		want, werr := parseEvent(m)
		texts := itemsTexts{}
		for range 2 { // the text decoded, then found
			got, err := parseEventWith(m, texts)
			if (err == nil) != (werr == nil) || (err == nil && !reflect.DeepEqual(got, want)) {
				t.Fatalf("through the texts: %+v, %v; parseEvent: %+v, %v", got, err, want, werr)
			}
		}
	})
}

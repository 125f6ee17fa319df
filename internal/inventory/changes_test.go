package inventory_test

import (
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
)

func TestParseChangeRefusesStrangers(t *testing.T) {
	t.Parallel()
	s := inventory.NewStock(nil, "p*:")
	if got := s.ChangesPattern(); got != `p\*:sale:{*}*:changed` {
		t.Errorf("pattern %q", got)
	}
	for _, m := range []struct{ channel, payload string }{
		{"other:sale:{a}:changed", "1 2 0 0"},
		{"p*:sale:{a}:changed", "1 2 0"},
		{"p*:sale:{a}:changed", "1 2 0 0 1 1 1"},
		{"p*:sale:{a}:changed", "1 2 0 0 1 4 4"},
		{"p*:sale:{a}:changed", "1 2 0 0 1 -1 4"},
		{"p*:sale:{a}:changed", "1 2 0 0 1 0 65"},
		{"p*:sale:{a}:changed", "1 2 0 0 1 1 1 4"},
		{"p*:sale:{a}:changed", "1 2 0 0 1 2"},
		{"p*:sale:{a}:changed", "1 2 0 0 x"},
		{"p*:sale:{a}:changed", "1 x 0 0"},
		{"p*:sale:{a b}:changed", "1 2 0 0"},
	} {
		if c, err := s.ParseChange(m.channel, m.payload); err == nil {
			t.Errorf("ParseChange(%q, %q) = %+v, want an error", m.channel, m.payload, c)
		}
	}
	c, err := s.ParseChange("p*:sale:{a}:changed", "3 -1 0 0")
	if err != nil || c != (inventory.Change{SKU: "a", Round: 3, Available: -1}) {
		t.Errorf("ParseChange = %+v, %v", c, err)
	}
	// The per-shopper limit, last; without it (an older instance's
	// message) it reads 0.
	c, err = s.ParseChange("p*:sale:{a}:changed", "3 7 0 0 2")
	if err != nil || c != (inventory.Change{SKU: "a", Round: 3, Available: 7, PerUserLimit: 2}) {
		t.Errorf("ParseChange with the limit = %+v, %v", c, err)
	}
	// A seeding's message says whether the round has a waiting room.
	c, err = s.ParseChange("p*:sale:{a}:changed", "3 7 0 0 2 1")
	if err != nil || c != (inventory.Change{SKU: "a", Round: 3, Available: 7, PerUserLimit: 2, Room: true, RoomKnown: true}) {
		t.Errorf("ParseChange with the room = %+v, %v", c, err)
	}
	// One bucket's message of a round of several names the bucket and
	// the buckets: its available is the bucket's, not the round's.
	c, err = s.ParseChange("p*:sale:{a}:changed", "3 2 0 0 2 1 4")
	if err != nil || c != (inventory.Change{SKU: "a", Round: 3, Available: 2, PerUserLimit: 2, Buckets: 4}) {
		t.Errorf("ParseChange of a bucket = %+v, %v", c, err)
	}
}

package roomrule_test

import (
	"encoding/hex"
	"testing"

	"github.com/shop-oss/shop/internal/room/roomrule"
)

func TestLeadingZeroBits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hex  string
		want int
	}{{"80", 0}, {"7f", 1}, {"00ff", 8}, {"0001", 15}, {"000000", 24}} {
		var d [32]byte
		b, _ := hex.DecodeString(c.hex)
		copy(d[:], b)
		if c.hex == "000000" {
			d[3] = 1
			c.want = 31
		}
		if got := roomrule.LeadingZeroBits(d); got != c.want {
			t.Errorf("%s: %d, want %d", c.hex, got, c.want)
		}
	}
}

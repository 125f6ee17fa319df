package order

import (
	"strings"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/room/roomkey"
)

// A round with a waiting room sells only to the shoppers it admitted: a
// line of its SKU needs the buyer's pass (docs/api.md, "The pass"). The pass is
// checked in the same atomic step that takes the stock (lines.lua's
// check_lines), against the room's pass hash, which only the admitter
// writes (internal/room; the key's name is internal/room/roomkey's).

// HeaderQueuePass carries the buyer's waiting room passes: one, or several
// comma-separated for a checkout.
const HeaderQueuePass = "X-Queue-Pass"

// Bounds on the passes one placement presents. A pass outside them cannot
// be one the admitter issued, so it is dropped: it simply matches nothing.
const (
	MaxPasses   = 100
	MaxPassSize = 128
)

// ErrPassRequired: a line's round has a waiting room and the buyer
// presented no live pass of it (none, another shopper's, another round's
// or an expired one); nothing was reserved.
var ErrPassRequired = apperr.NewError(apperr.CodePassRequired,
	"this sale has a waiting room: buying needs your pass from it (header "+HeaderQueuePass+")")

// ParsePasses reads an X-Queue-Pass header: comma-separated passes,
// spaces around each trimmed, empty ones ignored, at most MaxPasses kept.
func ParsePasses(header string) []string {
	var out []string
	for p := range strings.SplitSeq(header, ",") {
		if p = strings.TrimSpace(p); p != "" && len(out) < MaxPasses {
			out = append(out, strings.Clone(p))
		}
	}
	return out
}

// passArg is the scripts' passes argument: the passes comma-joined, each
// one that could be a pass (1 to MaxPassSize visible ASCII characters,
// no comma), at most MaxPasses of them. The others are left out, so one
// holding a comma is never split into passes it was not.
func passArg(passes []string) string {
	var b strings.Builder
	n := 0
	for _, p := range passes {
		if n == MaxPasses {
			break
		}
		if !validPass(p) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p)
		n++
	}
	return b.String()
}

func validPass(p string) bool {
	if p == "" || len(p) > MaxPassSize {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] > '~' || p[i] == ',' {
			return false
		}
	}
	return true
}

// passesKey is sku's room pass hash, the stock-taking scripts' third key
// of a line (read only when the sale has a room).
func (s *Service) passesKey(sku string) string { return roomkey.New(s.stock).Passes(sku) }

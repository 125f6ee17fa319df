package inventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Stock changes: every script that changes a SKU's live stock (seed.lua,
// release.lua, the order package's reserve script) and Close publish the
// state it left on the SKU's Redis Pub/Sub channel, in the same atomic step
// as the change:
//
//	channel  <prefix>sale:{<sku>}:changed (on a cluster
//	         <prefix>sale:{<partition tag>}<sku>:changed, see stock.go)
//	message  "<round> <available> <starts_ms> <ends_ms>"  (integers; round 0:
//	         no sale, the SKU's live state is gone)
//
// Publishing inside the script costs no extra round trip, and since Redis
// delivers a connection's messages in the order they were published, the
// last message a subscriber got is the SKU's current state. Pub/Sub is
// fire-and-forget: a subscriber that was away rebuilds its picture from
// Live, never from the messages it missed. The {<sku>} hash tag puts the
// channel in the SKU's slot, for sharded channels on a cluster.

// ChangesChannel is the Pub/Sub channel of sku's stock changes. The order
// package's reserve script publishes on it (in the format above).
func (s *Stock) ChangesChannel(sku string) string { return s.SaleKey(sku) + ":changed" }

// ChangesPattern matches every SKU's changes channel (PSUBSCRIBE); the
// prefix's glob characters are escaped.
func (s *Stock) ChangesPattern() string {
	return globEscaper.Replace(s.prefix) + "sale:{*}*:changed"
}

var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// Change is one published state of a SKU's live stock.
type Change struct {
	SKU       string
	Round     int64 // 0: no sale
	Available int64
	StartsAt  time.Time // zero: open from seeding
	EndsAt    time.Time // zero: no end
}

// ParseChange reads a message received on channel.
func (s *Stock) ParseChange(channel, payload string) (Change, error) {
	sku, ok := strings.CutPrefix(channel, s.prefix+"sale:")
	if ok {
		sku, ok = strings.CutSuffix(sku, ":changed")
	}
	if ok {
		sku, ok = channelSKU(s, sku)
	}
	if !ok || !ValidSKU(sku) {
		return Change{}, fmt.Errorf("stock change on %q: not a changes channel", channel)
	}
	f := strings.Fields(payload)
	if len(f) != 4 {
		return Change{}, fmt.Errorf("stock change of %s: bad message %q", sku, payload)
	}
	var n [4]int64
	for i, v := range f {
		var err error
		if n[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return Change{}, fmt.Errorf("stock change of %s: bad message %q", sku, payload)
		}
	}
	return Change{SKU: sku, Round: n[0], Available: n[1], StartsAt: fromMilli(n[2]), EndsAt: fromMilli(n[3])}, nil
}

// channelSKU reads the SKU from a channel's "{<sku>}" (or, grouped,
// "{<tag>}<sku>") and checks that the channel is the SKU's own.
func channelSKU(s *Stock, name string) (string, bool) {
	tag, rest, ok := strings.Cut(name, "}")
	if !ok || !strings.HasPrefix(tag, "{") {
		return "", false
	}
	sku := rest
	if !s.parts.Grouped() {
		sku = tag[1:]
	}
	return sku, s.ChangesChannel(sku) == s.prefix+"sale:"+name+":changed"
}

// Current returns sku's live state as a Change (Round 0 when it has no
// sale), read from the live keys.
func (s *Stock) Current(ctx context.Context, sku string) (Change, error) {
	r, ok, err := s.Live(ctx, sku)
	if err != nil || !ok {
		return Change{SKU: sku}, err
	}
	return Change{SKU: sku, Round: r.Round, Available: r.Available, StartsAt: r.StartsAt, EndsAt: r.EndsAt}, nil
}

// closedMessage is the change Close publishes: no sale.
const closedMessage = "0 0 0 0"

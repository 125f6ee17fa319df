package inventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Stock changes: every script that changes a SKU's live stock publishes
// the state it left on the SKU's changes channel, in the same atomic step.
// More in docs/design/inventory.md ("changes.go").

// ChangesChannel is the Pub/Sub channel of sku's stock changes. The order
// package's reserve script publishes on it, with PublishCommand, in the
// format of docs/design/inventory.md ("changes.go").
func (s *Stock) ChangesChannel(sku string) string { return s.SaleKey(sku) + ":changed" }

// ShardedChanges reports whether the changes channels are sharded
// (SPUBLISH, SSUBSCRIBE): on a cluster, where the SKU keys are grouped by
// partition. Otherwise they are ordinary channels (PUBLISH, SUBSCRIBE or
// ChangesPattern's PSUBSCRIBE).
func (s *Stock) ShardedChanges() bool { return s.parts.Grouped() }

// PublishCommand is the command that publishes on a changes channel:
// "SPUBLISH" when ShardedChanges, else "PUBLISH". Scripts that publish a
// change are handed it with the channel (every script of this package,
// and the order package's reserve script).
func (s *Stock) PublishCommand() string {
	if s.ShardedChanges() {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// ChangesPattern matches every SKU's changes channel (PSUBSCRIBE); the
// prefix's glob characters are escaped. It hears nothing when
// ShardedChanges: patterns never match sharded channels.
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
	// PerUserLimit is the round's units per shopper (0: no limit), so a
	// page can state it before a purchase is refused.
	PerUserLimit int64
	// Room tells whether the round has a waiting room, so that a page
	// asks for the queue only where there is one. RoomKnown says whether
	// the state said it: a seeding's message and Current do; a
	// purchase's or a release's message does not (the round's flag is
	// the one its seeding published).
	Room, RoomKnown bool
	// Draw tells whether the round is a draw, so that a page asks for the
	// draw only where there is one. Only Current says it (DrawKnown); no
	// message does, so that the message format stays the one instances
	// of an older release read during an upgrade.
	Draw, DrawKnown bool
	// Buckets > 1: the change is one stock bucket's of a round of that
	// many (docs/design/buckets.md), and Available is that bucket's own,
	// not the round's: a reader reads the round again (Stock.Current).
	Buckets int
}

// ParseChange reads a message received on channel.
func (s *Stock) ParseChange(channel, payload string) (Change, error) {
	sku, ok := s.ChangesSKU(channel)
	if !ok {
		return Change{}, fmt.Errorf("stock change on %q: not a changes channel", channel)
	}
	f := strings.Fields(payload)
	// Four fields from an instance older than the limit's (a rolling
	// upgrade): the limit reads 0 until the next change. Six from a
	// seeding: the room's flag (not the draw's: the live hub reads a
	// seeded round again, since an instance that read a third value
	// would refuse the message). Seven from one bucket of a round of
	// several: the bucket and the buckets.
	if len(f) < 4 || len(f) > 7 {
		return Change{}, fmt.Errorf("stock change of %s: bad message %q", sku, payload)
	}
	var n [7]int64
	for i, v := range f {
		var err error
		if n[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return Change{}, fmt.Errorf("stock change of %s: bad message %q", sku, payload)
		}
	}
	c := Change{SKU: sku, Round: n[0], Available: n[1], StartsAt: fromMilli(n[2]), EndsAt: fromMilli(n[3]), PerUserLimit: n[4]}
	switch {
	case len(f) == 6 && (n[5] == 0 || n[5] == 1):
		c.Room, c.RoomKnown = n[5] == 1, true
	case len(f) == 7 && n[5] >= 0 && n[5] < n[6] && n[6] > 1 && n[6] <= MaxBuckets:
		c.Buckets = int(n[6])
	case len(f) >= 6:
		return Change{}, fmt.Errorf("stock change of %s: bad message %q", sku, payload)
	}
	return c, nil
}

// ChangesSKU is the SKU whose changes channel is channel (on a cluster,
// that of one of its round's buckets too: BucketChannel); ok is false
// for any other channel.
func (s *Stock) ChangesSKU(channel string) (sku string, ok bool) {
	sku, ok = strings.CutPrefix(channel, s.prefix+"sale:")
	if ok {
		sku, ok = strings.CutSuffix(sku, ":changed")
	}
	if name, b, bucketed := strings.Cut(sku, "#"); ok && bucketed && s.parts.Grouped() {
		return s.bucketChannelSKU(channel, name, b)
	}
	if ok {
		sku, ok = channelSKU(s, sku)
	}
	return sku, ok && ValidSKU(sku)
}

// bucketChannelSKU reads the SKU of a cluster bucket's channel, whose
// name is "{<tag>}<sku>" and bucket b: it must be bucket b's channel of
// the SKU in a round of some number of buckets.
func (s *Stock) bucketChannelSKU(channel, name, b string) (string, bool) {
	tag, sku, ok := strings.Cut(name, "}")
	bucket, err := strconv.Atoi(b)
	if !ok || !strings.HasPrefix(tag, "{") || err != nil || bucket < 1 || !ValidSKU(sku) {
		return "", false
	}
	for buckets := bucket + 1; buckets <= MaxBuckets; buckets++ {
		if s.BucketChannel(sku, bucket, buckets) == channel {
			return sku, true
		}
	}
	return "", false
}

// WatchedChannel is a changes channel a watcher of a SKU listens on, and
// the partition whose slot it lies in.
type WatchedChannel struct {
	Partition int
	Channel   string
}

// WatchChannels are the changes channels a watcher of sku listens on:
// its own, and on a cluster those of its round's other buckets, as this
// process last knew them (NoteBuckets); a single Redis publishes every
// bucket's changes on the SKU's channel.
func (s *Stock) WatchChannels(sku string) []WatchedChannel {
	out := []WatchedChannel{{Partition: s.parts.Of(sku), Channel: s.ChangesChannel(sku)}}
	if !s.parts.Grouped() {
		return out
	}
	buckets := s.hints.of(sku)
	for b := 1; b < buckets; b++ {
		out = append(out, WatchedChannel{Partition: s.BucketPartition(sku, b, buckets), Channel: s.BucketChannel(sku, b, buckets)})
	}
	return out
}

// NoteBuckets records that sku's live round has buckets, as a change or
// a read told, and says whether this process knew otherwise.
func (s *Stock) NoteBuckets(sku string, buckets int) bool {
	if s.hints.of(sku) == max(buckets, 1) {
		return false
	}
	if buckets <= 1 {
		s.hints.m.Delete(sku)
	} else {
		s.hints.m.Store(sku, buckets)
	}
	return true
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
	s.NoteBuckets(sku, r.Buckets) // the watchers' channels follow it
	return Change{SKU: sku, Round: r.Round, Available: r.Available, StartsAt: r.StartsAt, EndsAt: r.EndsAt,
		PerUserLimit: int64(r.PerUserLimit), Room: r.Room != nil, RoomKnown: true, Draw: r.Draw, DrawKnown: true}, nil
}

// closedMessage is the change Close publishes: no sale.
const closedMessage = "0 0 0 0"

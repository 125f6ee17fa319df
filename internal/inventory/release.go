package inventory

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)

// maxReleaseLines bounds one release, as the order package bounds one
// placement.
const maxReleaseLines = 100

// ReleaseLine is one line of an order to give back: its SKU, units, and
// the sale round it was reserved in.
type ReleaseLine struct {
	SKU      string
	Quantity int
	RoundID  int64
	// Buckets is how many buckets the line's round had when it was bought
	// (its item's; 0: as this process last knew). It names the home bucket
	// the units go back to on a cluster.
	Buckets int
}

// Guard makes a release conditional on, and atomic with, a state change of
// the caller's: Field of the caller's hash Key must hold one of From, and
// is set to To in the same step. The caller owns the key and its format;
// inventory only compares and sets that one field.
type Guard struct {
	Key   string
	Field string
	From  []string
	To    string
}

// Outbox is a stream entry of the caller's, added in the same atomic step
// as the release (only when the guard, if any, passes): how the caller
// records the change durably elsewhere without a window in which the
// release happened and its record was lost. The caller owns the stream and
// the entry's format.
type Outbox struct {
	Stream string
	Values []string // field, value, field, value...
	// WhenGiven: the entry only when units go back, so the stream records
	// the releases that happened (each order's once per round), not the
	// calls.
	WhenGiven bool
}

// Release asks for one order's units back.
type Release struct {
	OrderID string
	UserID  string
	Lines   []ReleaseLine
	Guard   *Guard  // nil: unconditional
	Outbox  *Outbox // nil: none
}

// Released is what a release did.
type Released struct {
	// Refused: the guard's field did not hold an allowed value (it held
	// State); nothing changed.
	Refused bool
	State   string
	// Units went back to available (lines of the live round only).
	Units int64
	// Stale lines belong to a round that is no longer live: they give
	// nothing back, since that round's stock and counts are gone.
	Stale int
	// Before lines had been released already by an earlier call with the
	// same order id: they give nothing back again.
	Before int
}

// Release is the atomic inverse of a reservation for one order's lines, in
// one script: units back to available while the line's round is the live
// one, the buyer's count down, exactly once per order id (a second call
// gives nothing back), and, with a guard, only if the caller's state
// allows it. Everything is validated before anything is written. A line
// that gives units back publishes the SKU's new state (changes.go), so
// live stock streams see cancellations and expiries too.
//
// All of a release's keys must share a slot on Redis Cluster: one SKU per
// call there, with no guard or a guard tagged like the SKU.
//
// Errors: a validation error for bad lines or guard, or a Redis error
// (nothing is known to have happened; the same call again is safe).
func (s *Stock) Release(ctx context.Context, r Release) (Released, error) {
	if err := checkRelease(r); err != nil {
		return Released{}, err
	}
	for try := 1; ; try++ {
		homes := s.homeBuckets(r)
		reply, err := releaseScript.Run(ctx, s.rdb, s.releaseKeys(r, homes), s.releaseArgs(r, homes)...).StringSlice()
		if err != nil {
			return Released{}, fmt.Errorf("release order %s: %w", r.OrderID, err)
		}
		// A line named a bucket other than its buyer's home: this process
		// did not know the round's buckets. Learn them and ask again.
		if len(reply) == 3 && reply[0] == "bucket" && try < maxReleaseTries {
			if _, err := s.LearnBuckets(ctx, reply[1]); err != nil {
				return Released{}, fmt.Errorf("release order %s: %w", r.OrderID, err)
			}
			continue
		}
		return parseReleased(r.OrderID, reply)
	}
}

// maxReleaseTries bounds the retries of a release after a stale guess of
// a round's buckets (once per SKU and round in a process; more only while
// the round is reseeded over and over).
const maxReleaseTries = 4

// homeBuckets are the buyer's home bucket of each line, and its round's
// buckets, as this process last knew them (bucketHints).
func (s *Stock) homeBuckets(r Release) [][2]int {
	out := make([][2]int, len(r.Lines))
	for i, l := range r.Lines {
		buckets := l.Buckets
		if buckets == 0 && !s.parts.Grouped() {
			// A line that does not say: bought before items named their
			// buckets (on a cluster, only bucket 0 sold before they did).
			buckets = s.hints.of(l.SKU)
		}
		out[i] = [2]int{HomeBucket(r.UserID, buckets), buckets}
	}
	return out
}

// releaseKeys are release.lua's keys: the guard's, each line's sale hash,
// its buyer's counts in the home bucket, its released set, and the outbox
// stream.
func (s *Stock) releaseKeys(r Release, homes [][2]int) []string {
	keys := make([]string, 0, 2+3*len(r.Lines))
	// An unused guard key is never touched, but it must share the slot of
	// the other keys on Redis Cluster.
	gkey := s.SaleKey(r.Lines[0].SKU) + ":noguard"
	if r.Guard != nil {
		gkey = r.Guard.Key
	}
	keys = append(keys, gkey)
	for i, l := range r.Lines {
		sale := s.releaseInto(l.SKU, homes[i][0], homes[i][1])
		keys = append(keys, sale, s.BucketBuyersKey(l.SKU, homes[i][0], homes[i][1]), sale+":released")
	}
	okey := s.SaleKey(r.Lines[0].SKU) + ":nooutbox"
	if r.Outbox != nil {
		okey = r.Outbox.Stream
	}
	return append(keys, okey)
}

// releaseInto is the sale hash a line bought from bucket b of a round of
// buckets gives its units back to: bucket 0's on a single Redis, where one
// script reaches both it and the buyer's count (so PostgreSQL's CHECK sees
// every release in one place); the home bucket's own on a cluster, the
// slot of the buyer's count, whose releases the moves carry on
// (released_in) and PostgreSQL sums per bucket (docs/design/buckets.md).
func (s *Stock) releaseInto(sku string, b, buckets int) string {
	if !s.parts.Grouped() {
		return s.SaleKey(sku)
	}
	return s.BucketKey(sku, b, buckets)
}

// releaseArgs are release.lua's arguments, in releaseKeys' order.
func (s *Stock) releaseArgs(r Release, homes [][2]int) []any {
	gfield, gto, gfrom := "", "", ""
	if g := r.Guard; g != nil {
		gfield, gto, gfrom = g.Field, g.To, strings.Join(g.From, ",")
	}
	args := make([]any, 0, 9+5*len(r.Lines))
	args = append(args, r.OrderID, r.UserID, gfield, gto, gfrom, len(r.Lines))
	for i, l := range r.Lines {
		into := 0
		if s.parts.Grouped() {
			into = homes[i][0]
		}
		args = append(args, l.SKU, l.Quantity, l.RoundID, s.BucketChannel(l.SKU, into, homes[i][1]), homes[i][0])
	}
	var ovalues []string
	whenGiven := "0"
	if r.Outbox != nil {
		ovalues = r.Outbox.Values
		if r.Outbox.WhenGiven {
			whenGiven = "1"
		}
	}
	args = append(args, len(ovalues)/2)
	for _, v := range ovalues {
		args = append(args, v)
	}
	return append(args, whenGiven, s.PublishCommand())
}

func checkRelease(r Release) error {
	if r.OrderID == "" || r.UserID == "" || len(r.Lines) == 0 || len(r.Lines) > maxReleaseLines {
		return fmt.Errorf("release order %q: want an order id, a user id and 1 to %d lines", r.OrderID, maxReleaseLines)
	}
	seen := make(map[string]bool, len(r.Lines))
	for _, l := range r.Lines {
		if !ValidSKU(l.SKU) || seen[l.SKU] || l.Quantity < 1 || l.RoundID < 1 {
			return fmt.Errorf("release order %s: bad line %+v", r.OrderID, l)
		}
		seen[l.SKU] = true
	}
	if o := r.Outbox; o != nil && (o.Stream == "" || len(o.Values) == 0 || len(o.Values)%2 != 0) {
		return fmt.Errorf("release order %s: an outbox needs a stream and field-value pairs", r.OrderID)
	}
	if g := r.Guard; g != nil {
		if g.Key == "" || g.Field == "" || g.To == "" || len(g.From) == 0 {
			return fmt.Errorf("release order %s: incomplete guard %+v", r.OrderID, *g)
		}
		for _, v := range g.From {
			if v == "" || strings.Contains(v, ",") {
				return fmt.Errorf("release order %s: bad guard value %q", r.OrderID, v)
			}
		}
	}
	return nil
}

func parseReleased(orderID string, reply []string) (Released, error) {
	switch {
	case len(reply) == 2 && reply[0] == "refused":
		return Released{Refused: true, State: reply[1]}, nil
	case len(reply) == 4 && reply[0] == "ok":
		units, err1 := strconv.ParseInt(reply[1], 10, 64)
		stale, err2 := strconv.Atoi(reply[2])
		before, err3 := strconv.Atoi(reply[3])
		if err1 == nil && err2 == nil && err3 == nil {
			return Released{Units: units, Stale: stale, Before: before}, nil
		}
	}
	return Released{}, fmt.Errorf("release order %s: unexpected reply %q", orderID, reply)
}

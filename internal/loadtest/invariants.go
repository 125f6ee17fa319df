package loadtest

import (
	"fmt"
	"strings"
	"time"
)

// Invariant is one property of the sale that must hold, and whether it did.
type Invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Skipped is set when the evidence needed was not at hand (then OK).
	Skipped bool `json:"skipped,omitempty"`
}

// evidence is everything the invariants are judged on: what the client
// saw (the tally) and what the server reports after the writer drained.
type evidence struct {
	seeded, limit int
	tally         *tally
	stock         stock
	drained       bool
	drainTimeout  time.Duration
	sampleChecked int
	sampleBad     []string // why each sampled order failed
}

// checkInvariants judges the evidence; every invariant is reported, passed
// or not.
func checkInvariants(e evidence) []Invariant {
	return []Invariant{
		noOversell(e),
		acceptedIsSold(e),
		perUserLimit(e),
		distinctOrders(e),
		confirmedOnce(e),
		sampleConfirmed(e),
	}
}

// sold is what the server says is off the shelf: seeded minus available.
func (e evidence) sold() int64 { return int64(e.seeded) - e.stock.Available }

// taken is every unit the sale handed out: those off the shelf and those
// given back by expired orders (and sold again).
func (e evidence) taken() int64 { return e.sold() + e.stock.Released }

func noOversell(e evidence) Invariant {
	ok := e.stock.Quantity == int64(e.seeded) && e.stock.Available >= 0 && e.stock.Sold == e.sold()
	return Invariant{Name: "no oversell", OK: ok, Detail: fmt.Sprintf(
		"seeded %d, server reports quantity %d, available %d, sold %d", e.seeded, e.stock.Quantity, e.stock.Available, e.stock.Sold)}
}

// acceptedIsSold: every 202 took a unit and every unit taken was a 202
// (a unit given back by an expired order counts as taken, and again when
// it is sold again). An attempt without an answer (or with a 5xx) may have
// bought one unit unseen, so with u of them sold may exceed accepted by up
// to u.
func acceptedIsSold(e evidence) Invariant {
	acc, sold, unknown := int64(e.tally.accepted), e.taken(), int64(e.tally.unknown)
	inv := Invariant{Name: "accepted == sold == seeded - available"}
	inv.Detail = fmt.Sprintf("accepted %d, sold %d", acc, sold)
	if e.stock.Released > 0 {
		inv.Detail += fmt.Sprintf(" (%d of them given back)", e.stock.Released)
	}
	if unknown == 0 {
		inv.OK = acc == sold
		return inv
	}
	inv.OK = acc <= sold && sold <= acc+unknown
	inv.Detail += fmt.Sprintf(" (%d attempts got no answer or a 5xx, each may have bought a unit unseen)", unknown)
	return inv
}

func perUserLimit(e evidence) Invariant {
	inv := Invariant{Name: "never more per shopper than the limit"}
	who, most := e.tally.maxPerShopper()
	switch {
	case e.tally.unattributed > 0:
		inv.Detail = fmt.Sprintf("%d accepted purchases could not be attributed to a shopper", e.tally.unattributed)
	case e.limit == 0:
		inv.OK = true
		inv.Detail = fmt.Sprintf("no limit; most by one shopper %d", most)
	default:
		inv.OK = most <= e.limit
		inv.Detail = fmt.Sprintf("limit %d; most by one shopper %d", e.limit, most)
		if !inv.OK {
			inv.Detail += fmt.Sprintf(" (shopper #%d)", who)
		}
	}
	return inv
}

func distinctOrders(e evidence) Invariant {
	t := e.tally
	return Invariant{
		Name:   "every accepted purchase has its own order id",
		OK:     t.duplicates == 0 && t.malformed == 0 && len(t.orders) == t.accepted,
		Detail: fmt.Sprintf("%d distinct of %d accepted; %d repeated, %d missing or malformed", len(t.orders), t.accepted, t.duplicates, t.malformed),
	}
}

// confirmedOnce: the writer persisted every unit taken, once (the
// server's confirmed count is the sale round's sold column in PostgreSQL,
// which keeps the units of expired orders).
func confirmedOnce(e evidence) Invariant {
	inv := Invariant{Name: "after the writer drains, every sold unit confirmed once"}
	inv.Detail = fmt.Sprintf("confirmed %d, sold %d", e.stock.Confirmed, e.taken())
	if !e.drained {
		inv.Detail += fmt.Sprintf(": the writer did not drain within %s (is an order writer running?)", e.drainTimeout)
		return inv
	}
	inv.OK = e.stock.Confirmed == e.taken()
	return inv
}

func sampleConfirmed(e evidence) Invariant {
	inv := Invariant{Name: "sampled orders read back confirmed"}
	inv.OK = len(e.sampleBad) == 0
	inv.Detail = fmt.Sprintf("%d of %d confirmed", e.sampleChecked-len(e.sampleBad), e.sampleChecked)
	if !inv.OK {
		inv.Detail += ": " + strings.Join(firstN(e.sampleBad, 3), "; ")
	}
	return inv
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// failed returns the invariants that did not hold.
func failed(invs []Invariant) []Invariant {
	var out []Invariant
	for _, i := range invs {
		if !i.OK {
			out = append(out, i)
		}
	}
	return out
}

package loadtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The invariants every sale and every fault drill ends with: I1–I6 of the
// reliability bar (no oversell, no loss, no duplicates, conservation,
// drained, alive) and I7, added here for the order lifecycle (payment,
// cancellation and expiry), which the bar predates. Check judges them on evidence gathered three ways,
// each independent of the server's own stock report: what the clients
// were answered, the stores read directly (Redis keys and PostgreSQL
// rows, ReadStore), and the live stock sampled during the sale
// (SampleStock). `shop loadtest` and the e2e drills share it.

// Evidence is everything the invariants are judged on.
type Evidence struct {
	// Quantity is the units seeded in the round; PerUserLimit the most
	// one shopper may buy (0: none).
	Quantity     int64
	PerUserLimit int
	Answers      Answers
	// Samples is the live stock sampled during the sale; nil when it was
	// not sampled.
	Samples *Samples
	// Store is the stores read after the sale; nil when they could not be
	// reached (then I1, I2, I4 and I5 are judged on less, or skipped).
	Store *Store
	// Processes are those of the system under test, alive or not.
	Processes []Process
	// FaultWindows are when faults were injected: a 5xx to a request in
	// flight during one is expected, any other 5xx is a failure.
	FaultWindows []Window
}

// Answers is what the clients were told.
type Answers struct {
	// Accepted maps each order id a client got a 202 for to its units.
	Accepted map[string]int64
	// Paid lists the order ids a pay was answered 200 paid for.
	Paid []string
	// Repeated lists order ids answered 202 to two different purchases
	// (a retry of the same purchase, same Idempotency-Key, is not one).
	Repeated []string
	// Unknown counts attempts whose effect the client cannot know (no
	// answer, or a 5xx): each may have bought its units unseen.
	Unknown int
	// ServerErrors are the 5xx answers, with when they came.
	ServerErrors []ServerError
}

// ServerError is one 5xx answer.
type ServerError struct {
	// Sent is when its request was sent; the zero time stands for At.
	// The answer is a fault's when the request was in flight during
	// one (sent before a fault began and answered in it, or sent in it
	// and answered after it), and came within LateAnswer of the fault's
	// end: a loaded machine answers late, a hung request never.
	Sent   time.Time
	At     time.Time // when the answer came
	Status int
	What   string // e.g. "purchase by shopper 12"
}

// LateAnswer bounds how long after a fault window (its grace included) a
// request that was in flight during it may still be answered 5xx: each
// store call on the request's path gives up after its timeout (Redis's
// 2 s reads, the session check, the replay lookup and the script in
// turn), and 10 s leaves a loaded machine room without excusing a
// request left hanging.
const LateAnswer = 10 * time.Second

// inFault says whether se's request was in flight during one of ws and
// answered within LateAnswer of its end.
func (se ServerError) inFault(ws []Window) bool {
	sent := se.Sent
	if sent.IsZero() {
		sent = se.At
	}
	for _, w := range ws {
		if !se.At.Before(w.From) && !sent.After(w.To) && !se.At.After(w.To.Add(LateAnswer)) {
			return true
		}
	}
	return false
}

// String names the answer for a report: what, its status, when it was
// sent and how long it took.
func (se ServerError) String() string {
	s := fmt.Sprintf("%d to %s at %s", se.Status, se.What, se.At.Format("15:04:05.000"))
	if !se.Sent.IsZero() {
		s += fmt.Sprintf(" (sent %s, after %s)", se.Sent.Format("15:04:05.000"), se.At.Sub(se.Sent).Round(time.Millisecond))
	}
	return s
}

// Window is a span of time, as a fault's.
type Window struct{ From, To time.Time }

// Process is one process of the system under test.
type Process struct {
	Name   string
	Alive  bool
	Killed bool // the drill killed or stopped it on purpose
}

// Samples summarises the live stock read during the sale.
type Samples struct {
	N      int       // successful reads
	Errors int       // failed reads (Redis unreachable)
	Min    int64     // lowest available seen
	MinAt  time.Time // when
}

// Store is the sale's state read directly from Redis and PostgreSQL.
type Store struct {
	Round         int64 // the sale round's id in PostgreSQL
	RoundQuantity int64 // its quantity column
	RoundSold     int64 // its sold column (the writer's count)
	LiveRound     int64 // the round Redis's sale hash is on
	Available     int64 // Redis: units left
	// Released is the sale hash's count of units given back this round,
	// ReleasedIDs the orders its released set names.
	Released    int64
	ReleasedIDs []string
	// Buyers is Redis's count of units per user id this round.
	Buyers map[string]int64
	// Rows are the round's orders in PostgreSQL.
	Rows []Row
	// Stream and Dead are the round's order events in the order stream
	// (written or not) and in the dead-letter stream; DeadTransitions the
	// orders whose transition event was dead-lettered.
	Stream, Dead    []Entry
	DeadTransitions []string
	// Statuses are the orders' statuses in Redis (an order without a
	// status hash is left out); Transitions the final statuses PostgreSQL
	// recorded (order_transitions), by order id.
	Statuses, Transitions map[string]string
	// Pending are the ids XPENDING lists for the writers' group; Missing
	// those of them XRANGE no longer finds in the stream.
	Pending, Missing []string
}

// Row is one order of the round in PostgreSQL. Stream is the order
// stream its StreamID belongs to, when known: entry ids are unique only
// within one stream, and with partitioned orders two partitions' streams
// hand out the same id in the same millisecond.
type Row struct {
	OrderID, UserID, StreamID string
	Stream                    string
	Units                     int64
}

// Entry is one order event of the round in a stream (Stream, whose
// entry StreamID is).
type Entry struct {
	Stream, StreamID, OrderID, UserID string
	Units                             int64
}

// Invariant names, in order.
const (
	nameI1 = "I1 no oversell"
	nameI2 = "I2 every accepted order persisted"
	nameI3 = "I3 no duplicates"
	nameI4 = "I4 conservation"
	nameI5 = "I5 stream drained"
	nameI6 = "I6 alive, no 5xx outside a fault"
	nameI7 = "I7 lifecycle: paid kept, released once, statuses agree"
)

// Check judges I1–I7 and reports each, held or not. A failure names the
// order ids, users or processes at fault (the first few of them).
func Check(e Evidence) []Invariant {
	return []Invariant{checkI1(e), checkI2(e), checkI3(e), checkI4(e), checkI5(e), checkI6(e), checkI7(e)}
}

// Failed returns the invariants that did not hold.
func Failed(invs []Invariant) []Invariant { return failed(invs) }

// judge collects the failures of one invariant.
type judge struct {
	inv  Invariant
	bad  []string
	good []string
}

func newJudge(name string) *judge { return &judge{inv: Invariant{Name: name}} }

func (j *judge) fail(format string, a ...any) { j.bad = append(j.bad, fmt.Sprintf(format, a...)) }
func (j *judge) note(format string, a ...any) { j.good = append(j.good, fmt.Sprintf(format, a...)) }

func (j *judge) result() Invariant {
	j.inv.OK = len(j.bad) == 0
	if j.inv.OK {
		j.inv.Detail = strings.Join(j.good, "; ")
	} else {
		j.inv.Detail = strings.Join(j.bad, "; ")
	}
	return j.inv
}

func (j *judge) skip(why string) Invariant {
	return Invariant{Name: j.inv.Name, OK: true, Skipped: true, Detail: "not checked: " + why}
}

// few lists the first ids of a set, sorted, and how many there are.
func few(ids []string) string {
	s := slices.Sorted(slices.Values(ids))
	if len(s) > 5 {
		return fmt.Sprintf("%s … (%d in all)", strings.Join(s[:5], ", "), len(s))
	}
	return strings.Join(s, ", ")
}

func checkI1(e Evidence) Invariant {
	j := newJudge(nameI1)
	switch s := e.Samples; {
	case s == nil:
		j.note("live stock not sampled")
	case s.N == 0:
		j.fail("the live stock was never read during the sale (%d failed reads)", s.Errors)
	case s.Min < 0:
		j.fail("live stock %d at %s", s.Min, s.MinAt.Format(time.RFC3339Nano))
	default:
		j.note("lowest live stock %d in %d samples", s.Min, s.N)
	}
	if st := e.Store; st != nil {
		// Units given back are sold again: a round sells at most what was
		// seeded plus what came back.
		units := sumRows(st.Rows)
		if most := e.Quantity + st.Released; st.RoundSold > most || units > most {
			j.fail("PostgreSQL sold %d, rows hold %d units, of %d seeded and %d given back", st.RoundSold, units, e.Quantity, st.Released)
		}
		if st.Available < 0 {
			j.fail("Redis available %d", st.Available)
		}
		j.note("PostgreSQL sold %d of %d", st.RoundSold, e.Quantity)
	}
	if e.Samples == nil && e.Store == nil {
		return j.skip("neither sampled nor read from the stores")
	}
	return j.result()
}

func checkI2(e Evidence) Invariant {
	j := newJudge(nameI2)
	if e.Store == nil {
		return j.skip("PostgreSQL not read")
	}
	rows := map[string]bool{}
	for _, r := range e.Store.Rows {
		rows[r.OrderID] = true
	}
	var missing, unseen []string
	for id := range e.Answers.Accepted {
		if !rows[id] {
			missing = append(missing, id)
		}
	}
	for id := range rows {
		if _, ok := e.Answers.Accepted[id]; !ok {
			unseen = append(unseen, id)
		}
	}
	if len(missing) > 0 {
		j.fail("accepted but not in PostgreSQL: %s", few(missing))
	}
	// An order no client was told of is explained only by an attempt
	// whose answer was lost.
	if len(unseen) > e.Answers.Unknown {
		j.fail("in PostgreSQL but never accepted (%d attempts unanswered): %s", e.Answers.Unknown, few(unseen))
	}
	j.note("%d accepted, %d rows, %d rows from unanswered attempts", len(e.Answers.Accepted), len(rows), len(unseen))
	return j.result()
}

func checkI3(e Evidence) Invariant {
	j := newJudge(nameI3)
	if len(e.Answers.Repeated) > 0 {
		j.fail("order ids answered to two purchases: %s", few(e.Answers.Repeated))
	}
	if e.Store != nil {
		dupIDs, dupStream := repeats(e.Store.Rows, func(r Row) string { return r.OrderID }),
			repeats(e.Store.Rows, entryKey)
		if len(dupIDs) > 0 {
			j.fail("order ids twice in PostgreSQL: %s", few(dupIDs))
		}
		if len(dupStream) > 0 {
			j.fail("one stream entry written as two orders: %s", few(dupStream))
		}
		if over := overLimit(e); len(over) > 0 {
			j.fail("users over the limit of %d: %s", e.PerUserLimit, few(over))
		}
		// A dead letter is an order that could never be written: one that
		// was written as well is an order recorded twice, in two states.
		if both := persistedAndDead(e.Store); len(both) > 0 {
			j.fail("orders both persisted and dead-lettered: %s", few(both))
		}
	}
	j.note("%d accepted ids distinct", len(e.Answers.Accepted))
	return j.result()
}

// entryKey names the stream entry a row was written from: its stream and
// id, or the id alone when the stream is not known (ReadStoreIn).
func entryKey(r Row) string {
	if r.Stream == "" {
		return r.StreamID
	}
	return r.Stream + " " + r.StreamID
}

func repeats(rows []Row, key func(Row) string) []string {
	seen := map[string]int{}
	for _, r := range rows {
		seen[key(r)]++
	}
	var out []string
	for k, n := range seen {
		if n > 1 {
			out = append(out, k)
		}
	}
	return out
}

func persistedAndDead(st *Store) []string {
	inRows := map[string]bool{}
	for _, r := range st.Rows {
		inRows[r.OrderID] = true
	}
	var out []string
	for _, d := range st.Dead {
		if inRows[d.OrderID] {
			out = append(out, d.OrderID)
		}
	}
	return out
}

// overLimit lists the users whose held orders (persisted, pending or dead,
// not given back) or whose Redis buyer count exceed the limit; with a
// limit of 1, a second held row of the same (round, user) is one.
func overLimit(e Evidence) []string {
	if e.PerUserLimit == 0 {
		return nil
	}
	var out []string
	for u, n := range unitsByUser(e.Store) {
		if n > int64(e.PerUserLimit) {
			out = append(out, fmt.Sprintf("%s has %d units in orders", u, n))
		}
	}
	for u, n := range e.Store.Buyers {
		if n > int64(e.PerUserLimit) {
			out = append(out, fmt.Sprintf("%s counted %d in Redis", u, n))
		}
	}
	return out
}

// unitsByUser sums each user's units over the round's orders, whether
// persisted, pending in the stream or dead-lettered, each order once,
// leaving out those given back (cancelled or expired): the release takes
// them off the buyer's count, and the buyer may buy again.
func unitsByUser(st *Store) map[string]int64 {
	out := map[string]int64{}
	for id, o := range orders(st) {
		if !released(st.status(id)) {
			out[o.UserID] += o.Units
		}
	}
	return out
}

// status is an order's lifecycle state: Redis's when it has one, else the
// final state PostgreSQL recorded, else "" (not known).
func (st *Store) status(id string) string {
	if s, ok := st.Statuses[id]; ok {
		return s
	}
	return st.Transitions[id]
}

// released reports whether an order in status s gave its units back.
func released(s string) bool { return s == "cancelled" || s == "expired" }

// orders is every order of the round once: PostgreSQL's rows, then the
// dead letters and the stream's events not among them.
func orders(st *Store) map[string]Entry {
	out := map[string]Entry{}
	for _, r := range st.Rows {
		out[r.OrderID] = Entry{StreamID: r.StreamID, OrderID: r.OrderID, UserID: r.UserID, Units: r.Units}
	}
	for _, list := range [][]Entry{st.Dead, st.Stream} {
		for _, en := range list {
			if _, ok := out[en.OrderID]; !ok {
				out[en.OrderID] = en
			}
		}
	}
	return out
}

func checkI4(e Evidence) Invariant {
	j := newJudge(nameI4)
	st := e.Store
	if st == nil {
		return j.skip("the stores not read")
	}
	h := hold(st)
	total := st.Available + h.persisted + h.pending + h.dead
	if st.RoundQuantity != e.Quantity || st.LiveRound != st.Round {
		j.fail("PostgreSQL round %d holds %d units, Redis is on round %d, %d were seeded",
			st.Round, st.RoundQuantity, st.LiveRound, e.Quantity)
	}
	if total != e.Quantity {
		j.fail("seeded %d != available %d + held by persisted %d + pending %d + dead-lettered %d (%d given back)",
			e.Quantity, st.Available, h.persisted, h.pending, h.dead, h.released)
	}
	// Each cancelled or expired order gives its units back once: the sale
	// hash counts every unit it took back.
	if st.Released != h.released {
		j.fail("the sale hash counts %d units given back, its cancelled and expired orders hold %d", st.Released, h.released)
	}
	if rows := sumRows(st.Rows); rows != st.RoundSold {
		j.fail("rows hold %d units, the round's sold column says %d", rows, st.RoundSold)
	}
	if bad := buyerMismatch(st); len(bad) > 0 {
		j.fail("Redis buyer counts disagree with the orders: %s", few(bad))
	}
	j.note("seeded %d = available %d + held by persisted %d + pending %d + dead-lettered %d (%d given back)",
		e.Quantity, st.Available, h.persisted, h.pending, h.dead, h.released)
	return j.result()
}

// holdings are the round's units by where their orders are.
type holdings struct {
	// persisted, pending and dead are the units held by orders in
	// PostgreSQL, only in the stream, and dead-lettered, those given back
	// left out.
	persisted, pending, dead int64
	// released is the units of the round's cancelled and expired orders.
	released int64
}

func hold(st *Store) holdings {
	inRows, deadIDs := map[string]bool{}, map[string]bool{}
	for _, r := range st.Rows {
		inRows[r.OrderID] = true
	}
	for _, d := range st.Dead {
		deadIDs[d.OrderID] = true
	}
	var h holdings
	for id, o := range orders(st) {
		switch {
		case released(st.status(id)):
			h.released += o.Units
		case inRows[id]:
			h.persisted += o.Units
		case deadIDs[id]:
			h.dead += o.Units
		default:
			h.pending += o.Units
		}
	}
	return h
}

// buyerMismatch names the users whose Redis buyer count is not the units
// of their orders: a decrement without its event, or an event without its
// decrement.
func buyerMismatch(st *Store) []string {
	byUser := unitsByUser(st)
	var out []string
	for _, u := range slices.Sorted(maps.Keys(unionKeys(byUser, st.Buyers))) {
		if byUser[u] != st.Buyers[u] {
			out = append(out, fmt.Sprintf("%s: Redis %d, orders %d", u, st.Buyers[u], byUser[u]))
		}
	}
	return out
}

func unionKeys(a, b map[string]int64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func sumRows(rows []Row) int64 {
	var n int64
	for _, r := range rows {
		n += r.Units
	}
	return n
}

func checkI5(e Evidence) Invariant {
	j := newJudge(nameI5)
	if e.Store == nil {
		return j.skip("Redis not read")
	}
	if p := e.Store.Pending; len(p) > 0 {
		j.fail("pending, not acknowledged: %s", few(p))
	}
	if m := e.Store.Missing; len(m) > 0 {
		j.fail("pending but gone from the stream (trimmed unwritten): %s", few(m))
	}
	if u := unwritten(e.Store); len(u) > 0 {
		j.fail("in the stream, neither written nor dead-lettered: %s", few(u))
	}
	j.note("nothing pending or unwritten")
	return j.result()
}

// unwritten lists the stream's events of the round that are neither rows
// nor dead letters: delivered or not, no writer has finished them.
func unwritten(st *Store) []string {
	done := map[string]bool{}
	for _, r := range st.Rows {
		done[r.OrderID] = true
	}
	for _, d := range st.Dead {
		done[d.OrderID] = true
	}
	var out []string
	for _, en := range st.Stream {
		if !done[en.OrderID] {
			out = append(out, en.OrderID)
		}
	}
	return out
}

func checkI6(e Evidence) Invariant {
	j := newJudge(nameI6)
	for _, p := range e.Processes {
		if !p.Alive && !p.Killed {
			j.fail("%s died", p.Name)
		}
	}
	var outside []string
	for _, se := range e.Answers.ServerErrors {
		if !se.inFault(e.FaultWindows) {
			outside = append(outside, se.String())
		}
	}
	if len(outside) > 0 {
		j.fail("5xx outside a fault: %s", few(outside))
	}
	j.note("%d processes checked, %d 5xx, all within a fault", len(e.Processes), len(e.Answers.ServerErrors))
	return j.result()
}

func checkI7(e Evidence) Invariant {
	j := newJudge(nameI7)
	st := e.Store
	if st == nil {
		return j.skip("the stores not read")
	}
	var notPaid []string
	for _, id := range e.Answers.Paid {
		if st.Transitions[id] != "paid" {
			notPaid = append(notPaid, fmt.Sprintf("%s (%s)", id, orNone(st.Transitions[id])))
		}
	}
	if len(notPaid) > 0 {
		j.fail("answered paid, not paid in PostgreSQL: %s", few(notPaid))
	}
	all := orders(st)
	inSet := map[string]bool{}
	var wrongRelease []string
	for _, id := range st.ReleasedIDs {
		inSet[id] = true
		if _, ok := all[id]; !ok || !released(st.status(id)) {
			wrongRelease = append(wrongRelease, fmt.Sprintf("%s (%s)", id, orNone(st.status(id))))
		}
	}
	if len(wrongRelease) > 0 {
		j.fail("units given back for orders not cancelled or expired: %s", few(wrongRelease))
	}
	var notBack []string
	for id := range all {
		if released(st.status(id)) && !inSet[id] {
			notBack = append(notBack, fmt.Sprintf("%s (%s)", id, st.status(id)))
		}
	}
	if len(notBack) > 0 {
		j.fail("cancelled or expired, units never given back: %s", few(notBack))
	}
	if bad := disagreements(st); len(bad) > 0 {
		j.fail("Redis and PostgreSQL disagree on the status: %s", few(bad))
	}
	if len(st.DeadTransitions) > 0 {
		j.fail("transitions dead-lettered, never recorded: %s", few(st.DeadTransitions))
	}
	counts := map[string]int{}
	for id := range all {
		counts[orNone(st.status(id))]++
	}
	j.note("%d answered paid; statuses %v; %d orders given back; %d of %d orders with a status in Redis",
		len(e.Answers.Paid), counts, len(st.ReleasedIDs), len(st.Statuses), len(all))
	return j.result()
}

func orNone(s string) string {
	if s == "" {
		return "no status"
	}
	return s
}

// disagreements compares each order's status in Redis with what
// PostgreSQL holds of it once the writers have drained: confirmed is a row
// with no transition, paid, cancelled and expired their transition,
// rejected no row; pending is not persisted yet; and a transition is
// recorded only for an order Redis moved there. Orders Redis has no status
// for are not compared.
func disagreements(st *Store) []string {
	inRows := map[string]bool{}
	for _, r := range st.Rows {
		inRows[r.OrderID] = true
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(orders(st))) {
		redis, ok := st.Statuses[id]
		if !ok {
			continue
		}
		pg := st.Transitions[id]
		var bad bool
		switch redis {
		case "confirmed":
			bad = !inRows[id] || pg != ""
		case "paid", "cancelled", "expired":
			bad = pg != redis
		case "pending", "rejected":
			bad = inRows[id] || pg != ""
		default:
			bad = true
		}
		if bad {
			out = append(out, fmt.Sprintf("%s: Redis %s, PostgreSQL %s", id, redis, pgState(inRows[id], pg)))
		}
	}
	return out
}

func pgState(row bool, transition string) string {
	switch {
	case transition != "":
		return transition
	case row:
		return "confirmed"
	}
	return "no row"
}

// unrecorded lists the orders whose final status in Redis PostgreSQL has
// not recorded yet (the writer drains transitions as it does orders).
func unrecorded(st *Store) []string {
	var out []string
	for id, s := range st.Statuses {
		if (s == "paid" || released(s)) && st.Transitions[id] != s {
			out = append(out, id)
		}
	}
	return out
}

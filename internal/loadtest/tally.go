package loadtest

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// tally counts what the purchases came to, from the client's side: the
// evidence the invariants are checked against. It is used by one goroutine.
type tally struct {
	limit int // per-user limit; 0: none

	requests int
	accepted int
	// outcomes counts answers by status and problem code: "202 accepted",
	// "409 out_of_stock", "0 no answer".
	outcomes map[string]int
	// unknown counts attempts whose effect the client cannot know: no
	// answer, or a 5xx (a 503 after a timeout may hide a reservation). Each
	// may have bought one unit.
	unknown    int
	limited    int // 429 answers
	perShopper []int
	atLimit    int // shoppers that reached the limit
	// unattributed counts 202s whose shopper could not be told.
	unattributed int
	orders       map[uuid.UUID]int32 // order id -> shopper
	duplicates   int                 // 202s repeating an order id
	repeated     []string            // the first such ids
	// serverErrors are the first 5xx (or unanswered) attempts, with when.
	serverErrors []ServerError
	malformed    int // 202s without a valid order id
	soldOut      bool

	sample []sampled // a uniform sample of accepted orders (reservoir)
	size   int
	rng    *rand.Rand
}

// sampled is an accepted order and whose it is.
type sampled struct {
	orderID string
	shopper int
}

func newTally(shoppers, limit, sample int) *tally {
	return &tally{
		limit:      limit,
		outcomes:   map[string]int{},
		perShopper: make([]int, shoppers),
		orders:     map[uuid.UUID]int32{},
		size:       sample,
		rng:        rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
}

// add counts one purchase attempt by shopper (-1: unknown) that got status
// (0: no answer) and body.
func (t *tally) add(shopper, status int, body []byte) {
	t.requests++
	if status == http.StatusAccepted {
		t.outcomes[outcomeKey(status, "accepted")]++
		t.accept(shopper, body)
		return
	}
	var p problem
	_ = json.Unmarshal(body, &p) // not a problem document: counted by status
	t.outcomes[outcomeKey(status, p.Code)]++
	switch {
	case status == 0 || status >= 500:
		t.unknown++
	case status == http.StatusTooManyRequests:
		t.limited++
	case p.Code == "out_of_stock":
		// Every attempt is for one unit, and stock only falls during a
		// round: an out_of_stock answer means none is left.
		t.soldOut = true
	}
}

func outcomeKey(status int, code string) string {
	switch {
	case status == 0:
		return "0 no answer"
	case code == "":
		return strconv.Itoa(status) + " " + http.StatusText(status)
	}
	return strconv.Itoa(status) + " " + code
}

func (t *tally) accept(shopper int, body []byte) {
	t.accepted++
	var a struct {
		OrderID string `json:"order_id"`
	}
	id, err := uuid.Parse(jsonField(body, &a, &a.OrderID))
	if err != nil {
		t.malformed++
	} else if _, dup := t.orders[id]; dup {
		t.duplicates++
		if len(t.repeated) < maxListed {
			t.repeated = append(t.repeated, id.String())
		}
	} else {
		t.orders[id] = int32(shopper)
	}
	if shopper < 0 || shopper >= len(t.perShopper) {
		t.unattributed++
		return
	}
	t.perShopper[shopper]++
	if t.limit > 0 && t.perShopper[shopper] == t.limit {
		t.atLimit++
	}
	if err == nil {
		t.keep(sampled{orderID: id.String(), shopper: shopper})
	}
}

// maxListed bounds the ids and errors a tally keeps for the report.
const maxListed = 1000

// serverError notes a 5xx or an attempt without an answer: its request
// sent at sent, answered (or given up) at at.
func (t *tally) serverError(shopper, status int, sent, at time.Time) {
	if len(t.serverErrors) < maxListed {
		t.serverErrors = append(t.serverErrors, ServerError{Sent: sent, At: at, Status: status, What: "purchase by shopper #" + strconv.Itoa(shopper)})
	}
}

// answers is the tally as Check takes it: every order id accepted, one
// unit each.
func (t *tally) answers() Answers {
	a := Answers{Accepted: make(map[string]int64, len(t.orders)), Repeated: t.repeated, Unknown: t.unknown, ServerErrors: t.serverErrors}
	for id := range t.orders {
		a.Accepted[id.String()] = 1
	}
	return a
}

// jsonField decodes body into v and returns *field ("" when undecodable).
func jsonField(body []byte, v any, field *string) string {
	if json.Unmarshal(body, v) != nil {
		return ""
	}
	return *field
}

// keep is reservoir sampling (Algorithm R): every accepted order has the
// same chance to be in the sample, whatever the count.
func (t *tally) keep(s sampled) {
	n := t.accepted // s is the n-th accepted order
	switch {
	case t.size == 0:
	case len(t.sample) < t.size:
		t.sample = append(t.sample, s)
	default:
		if j := t.rng.IntN(n); j < t.size {
			t.sample[j] = s
		}
	}
}

// exhausted reports whether nothing more can be sold: the stock is gone, or
// every shopper has bought their limit.
func (t *tally) exhausted() bool {
	return t.soldOut || (t.limit > 0 && t.atLimit == len(t.perShopper))
}

// shopperOf returns the shopper whose accepted order id is (-1: none).
func (t *tally) shopperOf(id string) int {
	u, err := uuid.Parse(id)
	if err != nil {
		return -1
	}
	if s, ok := t.orders[u]; ok {
		return int(s)
	}
	return -1
}

// maxPerShopper returns the shopper who bought the most and how much.
func (t *tally) maxPerShopper() (shopper, units int) {
	shopper = -1
	for i, n := range t.perShopper {
		if n > units {
			shopper, units = i, n
		}
	}
	return shopper, units
}

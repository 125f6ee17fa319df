package saga

// Point names a step boundary of the saga (saga.go) where a fault
// drill may crash a placement: the states a `shop serve` killed there
// leaves on the cluster are the ones the repair and a repeat of the
// Idempotency-Key must settle.
type Point string

// The saga's crash points, in the order a placement reaches them.
const (
	// AfterHold: every partition other than the home holds its lines
	// (when the order has any there); nothing is committed. The repair
	// gives the holds back and tombstones the order id.
	AfterHold Point = "after-hold"
	// AfterCommit: the order exists (event, status, due entry) and its
	// holds are not dropped yet. The repair drops them, units kept.
	AfterCommit Point = "after-commit"
	// BeforeFinish: committed, holds dropped; the buyer's pending
	// index and cart are not updated yet.
	BeforeFinish Point = "before-finish"
)

// InjectFault sets what every placement calls at each Point it reaches,
// for the fault drills (`shop serve --saga-fault`): f may end the
// process there. Call it before serving.
func (s *Placer) InjectFault(f func(Point)) { s.fault = f }

// at calls the injected fault hook at point, if there is one.
func (s *Placer) at(point Point) {
	if s.fault != nil {
		s.fault(point)
	}
}

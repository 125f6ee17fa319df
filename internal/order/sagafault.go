package order

// SagaPoint names a step boundary of the saga (saga.go) where a fault
// drill may crash a placement: the states a `shop serve` killed there
// leaves on the cluster are the ones the repair and a repeat of the
// Idempotency-Key must settle.
type SagaPoint string

// The saga's crash points, in the order a placement reaches them.
const (
	// SagaAfterHold: every partition other than the home holds its lines
	// (when the order has any there); nothing is committed. The repair
	// gives the holds back and tombstones the order id.
	SagaAfterHold SagaPoint = "after-hold"
	// SagaAfterCommit: the order exists (event, status, due entry) and its
	// holds are not dropped yet. The repair drops them, units kept.
	SagaAfterCommit SagaPoint = "after-commit"
	// SagaBeforeFinish: committed, holds dropped; the buyer's pending
	// index and cart are not updated yet.
	SagaBeforeFinish SagaPoint = "before-finish"
)

// InjectSagaFault sets what every placement on a cluster calls at each
// SagaPoint it reaches, for the fault drills (`shop serve --saga-fault`):
// f may end the process there. Call it before serving.
func (s *Service) InjectSagaFault(f func(SagaPoint)) { s.sagaFault = f }

// fault calls the injected fault hook at point, if there is one.
func (s *Service) fault(point SagaPoint) {
	if s.sagaFault != nil {
		s.sagaFault(point)
	}
}

package order

// The tests here that place on a Redis Cluster through the saga
// (internal/order/saga), which imports this package, reach it through
// NewSagaPlacer, which sagahook_ext_test.go (package order_test) sets, as
// writerhook_test.go does for the writer.

// NewSagaPlacer is a new saga placer's On, for Options.Placer.
var NewSagaPlacer func() func(Kit) Placer

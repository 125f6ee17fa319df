package telemetry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// Off, a background job's span costs no allocation: a loop that works
// often (the visitor counts' writes) pays nothing for tracing unset.
func TestJobCostsNothingOff(t *testing.T) {
	if Active() {
		t.Skip("tracing is on in this test binary")
	}
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() {
		_, span := Job(ctx, "job", attribute.Int("n", 1))
		End(span, nil)
		Did(ctx, "did", time.Time{}, attribute.Int("n", 1))
	})
	if n != 0 {
		t.Errorf("a job off allocates %v times", n)
	}
}

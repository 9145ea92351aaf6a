package costmodel_test

import (
	"testing"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// TestBusFactorIsTheRuntimes: a predicted busbw is computed by the rule of
// the runtime's report, at every rank count, one rank included (where an
// allreduce's busbw is 0).
func TestBusFactorIsTheRuntimes(t *testing.T) {
	for c := plan.CollAllReduce; c <= plan.CollReduceScatter; c++ {
		for n := 1; n <= 17; n++ {
			if got, want := costmodel.BusFactor(c.String(), n), c.Info().BusFactor(n); got != want {
				t.Errorf("%s at %d ranks: %v, the runtime's %v", c, n, got, want)
			}
		}
	}
	if got := costmodel.BusFactor("allreduce", 1); got != 0 {
		t.Errorf("a one-rank allreduce: %v, want 0", got)
	}
}

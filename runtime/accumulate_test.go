package runtime_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Gradient accumulation (Plan.Accumulate): every step of 4 micro-batches
// checked at 1, 2 and 4 ranks, f32 and f16 averaged: the accumulated
// gradients and the parameters that one SGD step a step makes of them
// (several updates a step would leave them wrong). The report counts what
// syncing once saves: 2 buckets of 934 elements, so 3*2 collectives and
// 3*934 elements a step.
func TestGradientAccumulation(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		for _, c := range []struct{ plan, saved string }{
			{"accumulate:4:f32:avg", "10.9 KiB"}, // 11,208 B
			{"accumulate:4:f16:avg", "5.5 KiB"},  // 5,604 B
		} {
			t.Run(fmt.Sprintf("%s/np%d", c.plan, np), func(t *testing.T) {
				r := ok(t, np, c.plan, "--steps", "2", "--warmup", "1", "--check", "1", "--quiet")
				mustContain(t, r, "# accumulate 4: 1 synchronisation every 4 micro-batches; 6 collectives and "+c.saved+" a rank saved a step (75% of", "3 checks")
			})
		}
	}
	// A loss scaler: the scale multiplies the accumulated bf16 sums.
	t.Run("scaled", func(t *testing.T) {
		ok(t, 2, "accumulate:3:bf16:sum:scaled", "--steps", "3", "--warmup", "0", "--check", "1", "--quiet")
	})
}

// In the trace, each step has a backward span per micro-batch, and the
// allreduce of a bucket starts only after the last one.
func TestGradientAccumulationTrace(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.json")
	ok(t, 2, "accumulate:3:f32:sum", "--steps", "1", "--warmup", "0", "--check", "1", "--trace", trace, "--quiet")
	tr := readTrace(t, trace)
	for rank := range 2 {
		var backs []string
		lastEnd, firstColl := -1.0, -1.0
		for _, e := range tr.TraceEvents {
			if e.Ph != "X" || e.Pid != rank {
				continue
			}
			switch {
			case strings.HasPrefix(e.Name, "backward"):
				backs = append(backs, e.Name)
				lastEnd = max(lastEnd, e.Ts+e.Dur)
			case strings.HasPrefix(e.Name, "allreduce ") && (firstColl < 0 || e.Ts < firstColl):
				firstColl = e.Ts
			}
		}
		want := "backward (micro-batch 1/3), backward (micro-batch 2/3), backward (micro-batch 3/3)"
		if got := strings.Join(backs, ", "); got != want {
			t.Errorf("rank %d: backward spans %s, want %s", rank, got, want)
		}
		if firstColl < lastEnd {
			t.Errorf("rank %d: the first allreduce starts at %.1f us, before the last micro-batch's backward ends at %.1f us", rank, firstColl, lastEnd)
		}
	}
}

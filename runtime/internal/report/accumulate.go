package report

// Gradient accumulation in the report: a step of N micro-batches
// (plan.Plan.Accumulate) synchronises once where syncing every
// micro-batch would have synchronised N times. What it saves a step is
// (N-1) times the step's collectives and their bytes, (N-1)/N of the
// communication of syncing every micro-batch; the step's compute spans
// the N micro-batches.

import (
	"fmt"
	"io"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/text"
)

// accumulation is what a step of several micro-batches saves.
type accumulation struct {
	// Micro is the step's micro-batches; Colls and Bytes the collectives
	// one step issues (one per bucket of each collective statement, the
	// rows of the table) and the bytes a rank moves through them.
	Micro int
	Colls int
	Bytes int64
	// SavedColls and SavedBytes are what a step saves against syncing
	// every micro-batch, SavedPct that as a percentage of it.
	SavedColls int
	SavedBytes int64
	SavedPct   float64
}

// accumulationOf returns what the report's steps of micro micro-batches
// save.
func accumulationOf(rep *Report, micro int) accumulation {
	a := accumulation{Micro: micro, Colls: len(rep.rows)}
	for _, r := range rep.rows {
		a.Bytes += r.Bytes
	}
	a.SavedColls = (micro - 1) * a.Colls
	a.SavedBytes = int64(micro-1) * a.Bytes
	a.SavedPct = 100 * float64(micro-1) / float64(micro)
	return a
}

// printAccumulation prints the summary line of a step of several
// micro-batches: what it saves, and its compute a micro-batch.
func printAccumulation(w io.Writer, run *Run, rep *Report) {
	n := run.Plan.Micro()
	if n < 2 {
		return
	}
	a := accumulationOf(rep, n)
	line := fmt.Sprintf("# accumulate %d: 1 synchronisation every %d micro-batches; %d collective%s and %s a rank saved a step (%.0f%% of the communication of syncing every micro-batch)",
		n, n, a.SavedColls, text.Plural(a.SavedColls), text.Bytes(a.SavedBytes), a.SavedPct)
	if len(rep.stepTimes) > 0 {
		line += fmt.Sprintf("; compute %s a micro-batch", text.Dur(rep.compute/time.Duration(n)))
	}
	fmt.Fprintln(w, line)
}

// jsonAccumulate is the JSON report's "accumulate": the line's figures.
type jsonAccumulate struct {
	MicroBatches       int     `json:"micro_batches"`
	CollectivesPerStep int     `json:"collectives_per_step"`
	BytesPerStep       int64   `json:"bytes_per_rank_per_step"`
	SavedCollectives   int     `json:"saved_collectives_per_step"`
	SavedBytes         int64   `json:"saved_bytes_per_rank_per_step"`
	SavedPct           float64 `json:"saved_pct"`
	ComputePerMicroMs  float64 `json:"compute_per_micro_batch_ms"`
	Note               string  `json:"note"`
}

// makeJSONAccumulate returns the JSON of a step of several micro-batches,
// nil for a step of one.
func makeJSONAccumulate(run *Run, rep *Report) *jsonAccumulate {
	n := run.Plan.Micro()
	if n < 2 {
		return nil
	}
	a := accumulationOf(rep, n)
	return &jsonAccumulate{MicroBatches: n, CollectivesPerStep: a.Colls, BytesPerStep: a.Bytes,
		SavedCollectives: a.SavedColls, SavedBytes: a.SavedBytes, SavedPct: a.SavedPct,
		ComputePerMicroMs: float64(rep.compute.Nanoseconds()) / 1e6 / float64(n),
		Note:              "a step is one optimizer step of micro_batches micro-batches; step times and compute span all of them"}
}

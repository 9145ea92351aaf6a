package report

// A run given --profile: the cost model's prediction beside what the run
// measured, per bucket and for the step, in the table, the JSON and the
// trace. Errors compare with medians (a bucket's median over steps, max
// over ranks; the step's p50): the prediction is of a typical step, and a
// few slow steps of a shared machine should not decide how far off it is.

import (
	"fmt"
	"io"
	"time"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// Predicted is a run's prediction and the profile it came from.
type Predicted struct {
	// Profile names the profile (its name, or the file given).
	Profile string
	*costmodel.Prediction
	// rowOf maps (collective id, bucket) to the prediction's row.
	rowOf map[[2]int]int
}

// NewPredicted wraps a prediction made with the profile named profile.
func NewPredicted(profile string, pr *costmodel.Prediction) *Predicted {
	p := &Predicted{Profile: profile, Prediction: pr, rowOf: map[[2]int]int{}}
	for i, r := range pr.Rows {
		p.rowOf[[2]int{r.ID, r.Bucket}] = i
	}
	return p
}

// row returns the predicted time of collective id on bucket b.
func (p *Predicted) row(id, b int) (time.Duration, bool) {
	i, ok := p.rowOf[[2]int{id, b}]
	if !ok {
		return 0, false
	}
	return p.Rows[i].Time(), true
}

// errPct is how far predicted is from measured, in percent of measured.
func errPct(predicted, measured time.Duration) float64 {
	if measured <= 0 {
		return 0
	}
	return 100 * float64(predicted-measured) / float64(measured)
}

// printPredicted prints the predicted-against-measured table and step.
func printPredicted(w io.Writer, run *Run, rep *Report) {
	pr := run.Predicted
	if pr == nil || len(rep.stepTimes) == 0 {
		return
	}
	if !run.Quiet {
		fmt.Fprintf(w, "#\n# predicted with profile %s against measured (median over steps, max over ranks)\n", text.Printable(pr.Profile))
		fmt.Fprintf(w, "# %-24s %14s %14s %9s\n", "bucket", "predicted(us)", "measured(us)", "error(%)")
		for _, r := range rep.rows {
			t, ok := pr.row(r.ID, r.Bucket)
			if !ok {
				continue
			}
			fmt.Fprintf(w, "  %s %14.1f %14.1f %+9.1f\n", text.Cell(run.Plan.Buckets[r.Bucket].Name, 24), float64(t)/1e3, float64(r.median)/1e3, errPct(t, r.median))
		}
		for _, n := range pr.Notes {
			fmt.Fprintf(w, "# prediction note: %s\n", n)
		}
	}
	fmt.Fprintf(w, "# step time predicted %s, measured p50 %s (%+.1f%%), mean %s (%+.1f%%); exposed communication predicted %s, measured %s\n",
		text.Dur(pr.Step), text.Dur(rep.p50), errPct(pr.Step, rep.p50), text.Dur(rep.mean), errPct(pr.Step, rep.mean),
		text.Dur(pr.Exposed), text.Dur(rep.exposed))
}

// predictedEvents are the prediction as a process of its own in the
// trace (pid = the number of ranks, after the ranks'), one thread per
// stream, laid over every traced measured step from that step's start.
func predictedEvents(run *Run, bases []stepBase) []traceEvent {
	pr := run.Predicted
	if pr == nil || run.Rank != 0 {
		return nil
	}
	pid := run.Ranks
	out := []traceEvent{{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": "predicted (profile " + pr.Profile + ")"}},
		{Name: "process_sort_index", Ph: "M", Pid: pid, Args: map[string]any{"sort_index": pid}}}
	for i, s := range run.Plan.Streams {
		out = append(out, traceEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: i + 1, Args: map[string]any{"name": "stream " + s.Name}})
	}
	for _, b := range bases {
		for _, sp := range pr.Spans {
			dur := float64(sp.End-sp.Start) / 1e3
			out = append(out, traceEvent{Name: "predicted " + sp.Name, Cat: "predicted", Ph: "X", Ts: float64(b.base+sp.Start) / 1e3, Dur: &dur,
				Pid: pid, Tid: sp.Stream + 1, Args: map[string]any{"step": b.step}})
		}
	}
	return out
}

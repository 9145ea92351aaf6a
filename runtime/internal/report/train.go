package report

// The training step in the report: the update and unscale table, the
// update's share hidden behind communication, the loss scaler's course,
// and the parameters checked against the reference.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// trainReport is the training step's part of the Report.
type trainReport struct {
	rows []trainRowReport
	// Means over ranks and measured steps; the update's over the measured
	// steps that applied it (applied of measured), since a step skipped on
	// overflow runs the update's kernels without their work.
	update, updateHidden, unscale, flag time.Duration
	applied, measured                   int
	// Parameter elements wrong and not checkable, over ranks and checks.
	wrongParams, uncheckedParams int64
	// The scaler's course (the same on every rank: the ranks agree on
	// every overflow); nil without a scaler.
	scaling *result.Scaling
}

// trainRowReport is one line of the training table.
type trainRowReport struct {
	result.TrainRow
	time  time.Duration // max over ranks of the mean
	gbps  float64       // Bytes over time
	wrong int64         // parameter elements, on the bucket's update row
}

// trainFigures appends one rank's training figures to vals: row means
// (an update's over the measured steps that applied it), per-bucket wrong
// and unchecked parameters, then per measured step (update, hidden update,
// unscale, flag; the update's two 0 in a skipped step).
func trainFigures(vals []float64, res *result.Results, nb int) []float64 {
	applied := appliedSteps(res)
	for _, r := range res.TrainRows {
		times := r.Times
		if r.Kind == result.Update {
			times = nil
			for i, d := range r.Times {
				if i >= len(applied) || applied[i] {
					times = append(times, d)
				}
			}
		}
		vals = append(vals, float64(meanDur(times)))
	}
	for b := 0; b < nb; b++ {
		vals = append(vals, float64(res.WrongParams[b]), float64(res.UncheckedParam[b]))
	}
	for i := range res.Steps {
		var s result.TrainStepStats
		if i < len(res.TrainSteps) {
			s = res.TrainSteps[i]
		}
		if !applied[i] {
			s.Update, s.UpdateHidden = 0, 0
		}
		vals = append(vals, float64(s.Update), float64(s.UpdateHidden), float64(s.Unscale), float64(s.Flag))
	}
	return vals
}

// appliedSteps says, for each measured step, whether its updates were
// applied: false where the step overflowed and skipped them. The scaler's
// course covers every step the run ran, so its tail is the measured steps
// (they come after the warm-up). Every rank skips the same steps.
func appliedSteps(res *result.Results) []bool {
	applied := make([]bool, len(res.Steps))
	var skipped []bool
	if sc := res.Scaling; sc != nil {
		skipped = sc.Skipped
	}
	off := len(skipped) - len(applied)
	for i := range applied {
		applied[i] = off < 0 || !skipped[off+i]
	}
	return applied
}

// buildTrain reads what trainFigures wrote from index base of each rank's
// figures.
func buildTrain(res *result.Results, nb, ns, n, base int, at func(rank, i int) float64) trainReport {
	tr := trainReport{scaling: res.Scaling}
	nt := len(res.TrainRows)
	wrong := make([]int64, nb)
	for b := 0; b < nb; b++ {
		for r := 0; r < n; r++ {
			wrong[b] += int64(at(r, base+nt+2*b))
			tr.uncheckedParams += int64(at(r, base+nt+2*b+1))
		}
		tr.wrongParams += wrong[b]
	}
	for i, row := range res.TrainRows {
		var t float64
		for r := 0; r < n; r++ {
			t = max(t, at(r, base+i))
		}
		rr := trainRowReport{TrainRow: row, time: time.Duration(t)}
		if t > 0 {
			rr.gbps = float64(row.Bytes) / t
		}
		if row.Kind == result.Update {
			rr.wrong = wrong[row.Bucket]
		}
		tr.rows = append(tr.rows, rr)
	}
	sbase := base + nt + 2*nb
	for _, a := range appliedSteps(res) {
		if a {
			tr.applied++
		}
	}
	tr.measured = ns
	var upd, hid, uns, flag float64
	for s := 0; s < ns; s++ {
		for r := 0; r < n; r++ {
			upd += at(r, sbase+4*s)
			hid += at(r, sbase+4*s+1)
			uns += at(r, sbase+4*s+2)
			flag += at(r, sbase+4*s+3)
		}
	}
	if ns > 0 {
		k := float64(ns * n)
		tr.unscale, tr.flag = time.Duration(uns/k), time.Duration(flag/k)
	}
	if tr.applied > 0 {
		k := float64(tr.applied * n)
		tr.update, tr.updateHidden = time.Duration(upd/k), time.Duration(hid/k)
	}
	return tr
}

// hiddenPct is the share of the update that ran while communication did.
func (tr *trainReport) hiddenPct() float64 {
	if tr.update <= 0 {
		return 0
	}
	return 100 * float64(tr.updateHidden) / float64(tr.update)
}

// skipped lists the steps that overflowed, by their numbers (counted from
// 0, warm-up included, as --overflow counts them; after a resume, from the
// step after the checkpoint).
func (tr *trainReport) skipped() []int {
	var out []int
	if tr.scaling != nil {
		for i, s := range tr.scaling.Skipped {
			if s {
				out = append(out, tr.scaling.First+i)
			}
		}
	}
	return out
}

// printTrain prints the training table and its summary lines.
func printTrain(w io.Writer, run *Run, rep *Report) {
	tr := &rep.train
	p := run.Plan
	measured := len(rep.stepTimes) > 0
	if len(tr.rows) > 0 && !run.Quiet {
		fmt.Fprintf(w, "#\n# %-24s %-9s %-10s %12s %12s %10s %7s\n", "bucket", "work", "stream", "bytes", "time(us)", "GB/s", "wrong")
		for _, r := range tr.rows {
			work, wrong := "unscale", ""
			if r.Kind == result.Update {
				work = optimizerOf(run.Prog, r.At)
				wrong = fmt.Sprint(r.wrong)
				if rep.checks == 0 {
					wrong = "-"
				}
			}
			tm, bw := "-", "-"
			if measured && (r.Kind != result.Update || tr.applied > 0) {
				tm, bw = fmt.Sprintf("%.1f", float64(r.time)/1e3), fmt.Sprintf("%.3f", r.gbps)
			}
			fmt.Fprintf(w, "  %s %-9s %-10s %12d %12s %10s %7s\n", text.Cell(p.Buckets[r.Bucket].Name, 24), work,
				text.Cell(p.Streams[r.Stream].Name, 10), r.Bytes, tm, bw, wrong)
		}
		fmt.Fprintf(w, "# bytes: what the work reads and writes; wrong: parameter and optimizer-state elements that differ from the Go reference\n")
	}
	if len(tr.rows) > 0 && measured {
		unscale := ""
		if tr.scaling != nil {
			unscale = "; unscale and overflow check " + text.Dur(tr.unscale)
			if tr.flag > 0 {
				unscale += " (the ranks' agreement on the flag " + text.Dur(tr.flag) + ")"
			}
		}
		hasUpdate := slices.ContainsFunc(tr.rows, func(r trainRowReport) bool { return r.Kind == result.Update })
		switch {
		case hasUpdate && tr.applied == 0:
			fmt.Fprintf(w, "# update not timed: every measured step skipped it on overflow%s\n", unscale)
		case hasUpdate && tr.applied < tr.measured:
			fmt.Fprintf(w, "# update %s a step, %.1f%% of it while communication ran (over the %d of %d measured steps that applied it)%s\n",
				text.Dur(tr.update), tr.hiddenPct(), tr.applied, tr.measured, unscale)
		default:
			fmt.Fprintf(w, "# update %s a step, %.1f%% of it while communication ran%s\n", text.Dur(tr.update), tr.hiddenPct(), unscale)
		}
	}
	if sc := tr.scaling; sc != nil && len(sc.Scale) > 0 {
		fmt.Fprintf(w, "# %s\n", scalerLine(p.Scaler.Rule.String(), sc, tr.skipped()))
	}
}

// scalerLine sums up the scaler's course over the steps this run ran:
// how many were skipped, which (by their numbers, as --overflow counts
// them), and the first and last scale. After a resume it says that the
// steps are those after the checkpoint.
func scalerLine(rule string, sc *result.Scaling, skipped []int) string {
	n := len(sc.Scale)
	ran := fmt.Sprintf("%d step%s", n, text.Plural(n))
	switch {
	case sc.First > 0 && n == 1:
		ran = fmt.Sprintf("the one step after the resume (step %d)", sc.First)
	case sc.First > 0:
		ran = fmt.Sprintf("the %d steps after the resume (steps %d to %d)", n, sc.First, sc.First+n-1)
	}
	list := ""
	if len(skipped) > 0 {
		var s []string
		for _, k := range skipped[:min(len(skipped), 10)] {
			s = append(s, fmt.Sprint(k))
		}
		if len(skipped) > 10 {
			s = append(s, fmt.Sprintf("and %d more", len(skipped)-10))
		}
		list = fmt.Sprintf(" (step%s %s)", text.Plural(len(skipped)), strings.Join(s, ", "))
	}
	return fmt.Sprintf("loss scale (%s): %d of %s skipped on overflow%s; scale %g at the first step, %g at the last",
		rule, len(skipped), ran, list, sc.Scale[0], sc.Scale[n-1])
}

// optimizerOf names the optimizer of the update at at.
func optimizerOf(prog *plan.Program, at plan.Src) string {
	for _, s := range plan.Flat(prog.Step) {
		if s.Kind == plan.StmtUpdate && s.At == at {
			return s.Optim.Kind.String()
		}
	}
	return "update"
}

// jsonTrain is the training step in the JSON file; each field's name
// carries its unit, as the rest of the file's do.
type jsonTrain struct {
	Rows            []jsonTrainRow `json:"rows"`
	UpdateUs        float64        `json:"update_us"`
	UpdateHiddenPct float64        `json:"update_hidden_pct"`
	UpdateSteps     int            `json:"update_steps"`
	UnscaleUs       float64        `json:"unscale_us"`
	FlagUs          float64        `json:"flag_allreduce_us"`
	WrongParams     int64          `json:"wrong_parameters"`
	UncheckedParams int64          `json:"unchecked_parameters"`
	Scaler          *jsonScaler    `json:"scaler,omitempty"`
}

// jsonTrainRow is one line of the training table.
type jsonTrainRow struct {
	Bucket string  `json:"bucket"`
	Src    string  `json:"src"`
	Stream string  `json:"stream"`
	Work   string  `json:"work"`
	Bytes  int64   `json:"bytes"`
	TimeUs float64 `json:"time_us"`
	GBs    float64 `json:"gbs"`
	// Wrong is an update's parameter and optimizer-state elements found
	// wrong, as the table's column has them: absent on an unscale's row
	// and when no check ran.
	Wrong *int64 `json:"wrong,omitempty"`
}

// jsonScaler is the loss scaler's course: the scale of every step the run
// ran (warm-up included), the first of them being step FirstStep (0, or
// the step after a resumed checkpoint), and the steps it skipped, by
// their numbers.
type jsonScaler struct {
	Rule      string    `json:"rule"`
	FirstStep int       `json:"first_step"`
	Scale     []float64 `json:"scale"`
	Skipped   []int     `json:"skipped_steps"`
}

// makeJSONTrain fills the training part of the JSON file; nil for a plan
// without updates, unscales or scaler.
func makeJSONTrain(run *Run, rep *Report) *jsonTrain {
	tr := &rep.train
	if len(tr.rows) == 0 && tr.scaling == nil {
		return nil
	}
	j := &jsonTrain{Rows: []jsonTrainRow{}, UpdateUs: float64(tr.update) / 1e3, UpdateHiddenPct: tr.hiddenPct(), UpdateSteps: tr.applied,
		UnscaleUs: float64(tr.unscale) / 1e3, FlagUs: float64(tr.flag) / 1e3, WrongParams: tr.wrongParams, UncheckedParams: tr.uncheckedParams}
	for _, r := range tr.rows {
		work := "unscale"
		var wrong *int64
		if r.Kind == result.Update {
			work = optimizerOf(run.Prog, r.At)
			if rep.checks > 0 {
				wrong = &r.wrong
			}
		}
		j.Rows = append(j.Rows, jsonTrainRow{Bucket: run.Plan.Buckets[r.Bucket].Name, Src: string(r.At), Stream: run.Plan.Streams[r.Stream].Name,
			Work: work, Bytes: r.Bytes, TimeUs: float64(r.time) / 1e3, GBs: r.gbps, Wrong: wrong})
	}
	if sc := tr.scaling; sc != nil {
		j.Scaler = &jsonScaler{Rule: run.Plan.Scaler.Rule.String(), FirstStep: sc.First, Scale: append([]float64{}, sc.Scale...), Skipped: tr.skipped()}
		if j.Scaler.Skipped == nil {
			j.Scaler.Skipped = []int{}
		}
	}
	return j
}

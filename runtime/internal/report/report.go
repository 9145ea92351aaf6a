package report

// Reports on rank 0: the header, the per-bucket table in the spirit of
// nccl-tests and the summary. Figures are gathered from every rank first:
// a bucket's time is the maximum over ranks of each rank's mean over the
// measured steps (the slowest rank is what training waits for), a step's
// time the maximum over ranks, and compute, communication and overlap are
// means over ranks and steps.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// Report holds the figures gathered from every rank.
type Report struct {
	rows      []rowReport
	stepTimes []time.Duration // per measured step, max over ranks
	p50, p90  time.Duration
	mean      time.Duration
	compute   time.Duration // mean over ranks and steps
	comm      time.Duration
	exposed   time.Duration
	overlap   float64 // percent of communication time hidden behind compute
	wrong     int64
	unchecked int64
	checks    int
	bucketBad []int64 // per bucket, summed over ranks
	bucketUnc []int64
	train     trainReport
	saves     savesReport
	ranks     ranksReport
	net       *netReport
	// incomplete says why the run ended early ("": it did not).
	incomplete string
}

// Local builds the report from this rank's figures alone: for a run that
// ended early, when the other ranks cannot be asked.
func Local(run *Run, res *result.Results) *Report {
	bufElems := make([]int64, len(run.Mem.Buckets))
	for i, b := range run.Mem.Buckets {
		bufElems[i] = b.Elems
	}
	rep := buildReport(run.Plan, run.Prog, bufElems, res, [][]byte{encodeFigures(res, len(run.Plan.Buckets))})
	if hasHier(res) {
		rep.addPhases([][]byte{encodePhases(res)}, run.Hosts)
	}
	return rep
}

// MarkIncomplete marks the report as that of a run that ended early.
func (r *Report) MarkIncomplete(reason string) { r.incomplete = reason }

// rowReport is one line of the table.
type rowReport struct {
	result.Row
	time      time.Duration // max over ranks of the mean
	median    time.Duration // max over ranks of the median
	algbw     float64       // GB/s
	busbw     float64
	wrong     int64
	showWrong bool
	// unchecked counts the bucket's elements that its checks could not
	// predict exactly, over all checks and ranks; on the bucket's last
	// row, like wrong.
	unchecked int64
	// phases, when phased, are a hierarchical allreduce's phase figures
	// (phases.go).
	phases [3]phaseReport
	phased bool
}

// Gather gathers every rank's figures (collective).
func Gather(run *Run, res *result.Results) (*Report, error) {
	all, err := run.Comm.Allgather(encodeFigures(res, len(run.Plan.Buckets)))
	if err != nil {
		return nil, err
	}
	bufElems := make([]int64, len(run.Mem.Buckets))
	for i, b := range run.Mem.Buckets {
		bufElems[i] = b.Elems
	}
	rep := buildReport(run.Plan, run.Prog, bufElems, res, all)
	if hasHier(res) {
		phases, err := run.Comm.Allgather(encodePhases(res))
		if err != nil {
			return nil, err
		}
		rep.addPhases(phases, run.Hosts)
	}
	// Every rank takes part, with or without counts: the ranks need not
	// agree on SYNCGEN_NET_IFACE.
	nets, err := run.Comm.Allgather(encodeNet(run.Net))
	if err != nil {
		return nil, err
	}
	rep.net = buildNet(run, nets, rep)
	return rep, nil
}

// encodeFigures lays out one rank's figures as float64s for the
// allgather: row means, row medians, per-bucket wrong and unchecked
// counts, then per measured step (step, compute, comm, hidden).
func encodeFigures(res *result.Results, nb int) []byte {
	ns := len(res.Steps)
	vals := make([]float64, 0, 2*len(res.Rows)+2*nb+4*ns)
	for _, r := range res.Rows {
		vals = append(vals, float64(meanDur(r.Times)))
	}
	for _, r := range res.Rows {
		vals = append(vals, float64(percentile(r.Times, 50)))
	}
	for b := 0; b < nb; b++ {
		vals = append(vals, float64(res.Wrong[b]))
	}
	for b := 0; b < nb; b++ {
		vals = append(vals, float64(res.Unchecked[b]))
	}
	for _, s := range res.Steps {
		vals = append(vals, float64(s.Step), float64(s.Compute), float64(s.Comm), float64(s.Hidden))
	}
	vals = trainFigures(vals, res, nb)
	vals = saveFigures(vals, res)
	vals = rankFiguresTail(vals, res)
	rec := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(rec[8*i:], math.Float64bits(v))
	}
	return rec
}

// groupMembers returns the ids of the step's collective statements that
// are issued inside a group.
func groupMembers(prog *plan.Program) map[int]bool {
	in := map[int]bool{}
	for _, s := range prog.Step {
		if s.Kind != plan.StmtGroup {
			continue
		}
		for _, m := range s.Body {
			in[m.ID] = true
		}
	}
	return in
}

// buildReport combines every rank's figures (all[rank], as encodeFigures
// wrote them) into the report. bufElems are the buckets' buffer lengths
// (padded for allgather and reducescatter), which give a row its bytes
// when no measured step recorded them.
func buildReport(p *plan.Plan, prog *plan.Program, bufElems []int64, res *result.Results, all [][]byte) *Report {
	nb := len(p.Buckets)
	ns := len(res.Steps)
	at := func(rank, i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(all[rank][8*i:])) }
	n := len(all)
	rep := &Report{checks: res.Checked, bucketBad: make([]int64, nb), bucketUnc: make([]int64, nb)}
	nr := len(res.Rows)
	base := 2 * nr
	for b := 0; b < nb; b++ {
		for r := 0; r < n; r++ {
			rep.bucketBad[b] += int64(at(r, base+b))
			rep.bucketUnc[b] += int64(at(r, base+nb+b))
		}
		rep.wrong += rep.bucketBad[b]
		rep.unchecked += rep.bucketUnc[b]
	}
	// The wrong and unchecked counts of a bucket go on its last row.
	lastRow := map[int]int{}
	for i, r := range res.Rows {
		lastRow[r.Bucket] = i
		if r.Into > 0 {
			lastRow[r.Into] = i // an output's counts go with the collectives that write it
		}
	}
	inGroup := groupMembers(prog)
	for i, r := range res.Rows {
		var t, med float64
		for k := 0; k < n; k++ {
			t = max(t, at(k, i))
			med = max(med, at(k, nr+i))
		}
		rr := rowReport{Row: r, time: time.Duration(t), median: time.Duration(med)}
		// Without a measured step the records did not say these: take
		// them from the plan, as a measured step would have (issueGroup:
		// only allgather and reducescatter move the padded buffer).
		rr.Group = inGroup[r.ID]
		if r.Bytes == 0 && r.Bucket < len(bufElems) {
			n := r.Coll.Elems(p.Buckets[r.Bucket].Elems, bufElems[r.Bucket])
			if r.Into > 0 && r.Into < len(p.Buckets) {
				// Out of place, nccl-tests' size is the larger buffer.
				n = max(n, p.Buckets[r.Into].Elems)
			}
			rr.Bytes = n * p.Buckets[r.Bucket].Wire.Size()
		}
		if t > 0 {
			rr.algbw = float64(rr.Bytes) / t // bytes per ns = GB/s
			rr.busbw = rr.algbw * r.Coll.Info().BusFactor(n)
		}
		touched := []int{r.Bucket}
		if r.Into > 0 {
			touched = append(touched, r.Into)
		}
		for _, b := range touched {
			if lastRow[b] == i {
				rr.wrong, rr.showWrong = rr.wrong+rep.bucketBad[b], true
				rr.unchecked += rep.bucketUnc[b]
			}
		}
		rep.rows = append(rep.rows, rr)
	}
	sbase := base + 2*nb
	var comp, comm, hidden float64
	for s := 0; s < ns; s++ {
		var st float64
		for r := 0; r < n; r++ {
			st = max(st, at(r, sbase+4*s))
			comp += at(r, sbase+4*s+1)
			comm += at(r, sbase+4*s+2)
			hidden += at(r, sbase+4*s+3)
		}
		rep.stepTimes = append(rep.stepTimes, time.Duration(st))
	}
	tbase := sbase + 4*ns
	rep.train = buildTrain(res, nb, ns, n, tbase, at)
	rep.saves = buildSaves(res, n, tbase+len(res.TrainRows)+2*nb+4*ns, at)
	rep.wrong += rep.train.wrongParams
	rep.ranks = buildRanks(res, n, ns, sbase, func(r int) int { return len(all[r]) / 8 }, at)
	if ns > 0 {
		k := float64(ns * n)
		rep.compute = time.Duration(comp / k)
		rep.comm = time.Duration(comm / k)
		rep.mean = meanDur(rep.stepTimes)
		rep.p50 = percentile(rep.stepTimes, 50)
		rep.p90 = percentile(rep.stepTimes, 90)
		rep.exposed = max(rep.mean-rep.compute, 0)
		if comm > 0 {
			rep.overlap = 100 * hidden / comm
		}
	}
	return rep
}

func meanDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

// planTotals counts the plan's tensors, parameters and gradient bytes.
func planTotals(p *plan.Plan) (tensors, grads int, params, bytes int64) {
	for i := range p.Tensors {
		t := &p.Tensors[i]
		tensors++
		n := t.Elems()
		params += n
		if !t.Frozen {
			grads++
			bytes += n * t.DType.Size()
		}
	}
	return
}

// PrintHeader prints what runs where.
func PrintHeader(w io.Writer, run *Run, info *Info) {
	p := run.Plan
	nt, ng, params, bytes := planTotals(p)
	hash := p.Hash
	if len(hash) > 12 {
		hash = hash[:12]
	}
	fmt.Fprintf(w, "# syncgen: %s (%s), plan %s\n", text.Printable(p.Name), text.Printable(p.Source), hash)
	fmt.Fprintf(w, "# ranks %d on %d host%s; backend %s (%s)\n", run.Ranks, info.distinctHosts(), text.Plural(info.distinctHosts()), info.backend, info.why)
	if info.distinctHosts() > 1 {
		fmt.Fprintf(w, "#   hosts: %s\n", topologyLine(info.topology()))
	}
	for _, kv := range info.Versions {
		fmt.Fprintf(w, "#   %s: %s\n", kv.Key, kv.Value)
	}
	if len(info.mpiSettings) > 0 {
		var parts []string
		for _, kv := range info.mpiSettings {
			parts = append(parts, kv.Key+"="+kv.Value)
		}
		fmt.Fprintf(w, "#   MPI settings: %s (syncgen's defaults for small buckets; %s=off keeps Open MPI's)\n",
			strings.Join(parts, ", "), mpihost.TuningEnv)
	}
	if info.procNote != "" {
		fmt.Fprintf(w, "#   note: %s\n", info.procNote)
	}
	for _, warn := range info.warnings {
		fmt.Fprintf(w, "#   warning: %s\n", warn)
	}
	var wire, outBytes int64
	outs := 0 // the output buffers of `into`, counted apart
	for _, b := range p.Buckets {
		if b.Out != nil {
			outs++
			outBytes += b.Elems * b.Wire.Size()
			continue
		}
		wire += b.Elems * b.Wire.Size()
	}
	buckets := fmt.Sprintf("buckets %d (%s on the wire)", len(p.Buckets)-outs, text.Bytes(wire))
	if outs > 0 {
		buckets += fmt.Sprintf(", output buffers %d (%s)", outs, text.Bytes(outBytes))
	}
	fmt.Fprintf(w, "# tensors %d (%d with gradients), parameters %s, gradient bytes %s, %s, streams %d\n",
		nt, ng, text.Count(params), text.Bytes(bytes), buckets, len(p.Streams))
	check := "off"
	if run.CheckEvery > 0 {
		check = fmt.Sprintf("every %d", run.CheckEvery)
	}
	micro := ""
	if n := p.Micro(); n > 1 {
		micro = fmt.Sprintf("; %d micro-batches a step (accumulate %d), synchronised once", n, n)
	}
	fmt.Fprintf(w, "# steps %d + %d warm-up, check %s%s\n", run.Steps, run.Warmup, check, micro)
}

// Print prints the table and the summary.
func Print(w io.Writer, run *Run, rep *Report) {
	if !run.Quiet {
		fmt.Fprintf(w, "#\n# %-24s %7s %12s %5s %-14s %-5s %12s %10s %10s %7s\n",
			"bucket", "tensors", "bytes", "wire", "collective", "op", "time(us)", "algbw", "busbw", "wrong")
		fmt.Fprintf(w, "# %-24s %7s %12s %5s %-14s %-5s %12s %10s %10s %7s\n",
			"", "", "", "", "", "", "", "(GB/s)", "(GB/s)", "")
		groups, hier := false, false
		for _, r := range rep.rows {
			b := run.Plan.Buckets[r.Bucket]
			// Padded by terminal columns, with what does not print
			// escaped: fmt's %-24s counts runes.
			name := text.Cell(rowName(run.Plan, r.Row), 24)
			coll := r.Coll.String()
			if r.Coll.Info().RootWord != "" {
				coll = fmt.Sprintf("%s(%d)", coll, r.Root)
			}
			if r.Hier {
				coll += "(h)"
				hier = true
			}
			if r.Group {
				coll += "*"
				groups = true
			}
			op := "-"
			if r.Coll.Reduces() {
				op = r.Op.String()
			}
			wrong := ""
			if r.showWrong {
				wrong = fmt.Sprint(r.wrong)
				if rep.checks == 0 {
					wrong = "-"
				}
			}
			// Without a measured step there is no time to show: a
			// dash, not a time of 0 and a bandwidth of 0.
			tm, alg, bus := "-", "-", "-"
			if len(rep.stepTimes) > 0 {
				tm = fmt.Sprintf("%.1f", float64(r.time)/1e3)
				alg, bus = fmt.Sprintf("%.3f", r.algbw), fmt.Sprintf("%.3f", r.busbw)
			}
			fmt.Fprintf(w, "  %s %7d %12d %5s %-14s %-5s %12s %10s %10s %7s\n",
				name, len(b.Tensors), r.Bytes, b.Wire, coll, op, tm, alg, bus, wrong)
		}
		fmt.Fprintf(w, "# time: the maximum over ranks of each rank's mean over %d measured steps; busbw as nccl-tests (allreduce 2(n-1)/n, allgather and reducescatter (n-1)/n, broadcast and reduce 1)\n",
			len(rep.stepTimes))
		if groups {
			fmt.Fprintf(w, "# *: issued in a group; time is the whole group's on its stream; algbw and busbw are this bucket's bytes over that time\n")
		}
		if hier {
			fmt.Fprintf(w, "# (h): algo hierarchical (the header says how it ran)\n")
		}
	}
	if !run.Quiet {
		printPhases(w, run, rep)
		printCross(w, run, rep)
		printNet(w, rep)
	}
	printTrain(w, run, rep)
	printSaves(w, rep)
	printRanks(w, rep)
	printAccumulation(w, run, rep)
	if len(rep.stepTimes) > 0 {
		fmt.Fprintf(w, "# step time p50 %s, p90 %s, mean %s; compute %s; exposed communication (mean step - compute) %s; communication %s, %.1f%% overlapped with compute\n",
			text.Dur(rep.p50), text.Dur(rep.p90), text.Dur(rep.mean), text.Dur(rep.compute), text.Dur(rep.exposed), text.Dur(rep.comm), rep.overlap)
	}
	printPredicted(w, run, rep)
	var parts []string
	switch {
	case rep.checks == 0 && run.CheckEvery == 0:
		parts = append(parts, "checks off")
	case rep.checks == 0 && run.Warmup+run.Steps == 0:
		// Checks were on, but no step ran to be checked.
		parts = append(parts, "0 checks (no step ran)")
	case rep.checks == 0:
		// Steps ran, but they synchronise no bucket (a plan without
		// collectives, or without a step block).
		parts = append(parts, "0 checks (the step has no collective to check)")
	default:
		parts = append(parts, fmt.Sprintf("%d wrong", rep.wrong))
		if n := rep.train.wrongParams; n > 0 {
			parts = append(parts, fmt.Sprintf("of which %d in parameters", n))
		}
		if n := rep.train.uncheckedParams; n > 0 {
			parts = append(parts, fmt.Sprintf("%d parameter elements unchecked (their gradients were not predictable)", n))
		}
		if rep.unchecked > 0 {
			why := "values beyond the exact range of their dtype, or past 64 collectives since their last gradient"
			if len(rep.train.skipped()) > 0 {
				// The inf or NaN of an overflow, and what it reached.
				why = "the inf or NaN of the steps skipped on overflow, values beyond the exact range of their dtype, or past 64 collectives since their last gradient"
			}
			parts = append(parts, fmt.Sprintf("%d unchecked (%s)", rep.unchecked, why))
		}
		parts = append(parts, fmt.Sprintf("%d check%s", rep.checks, text.Plural(rep.checks)))
	}
	fmt.Fprintf(w, "# %s\n", strings.Join(parts, ", "))
}

// Wrong returns the number of wrong elements over all checks and ranks.
func (r *Report) Wrong() int64 { return r.wrong }

// rowName names a row's buffers: the bucket, or "source→output" for an
// out-of-place collective.
func rowName(p *plan.Plan, r result.Row) string {
	if r.Into > 0 && r.Into < len(p.Buckets) {
		return p.Buckets[r.Bucket].Name + "→" + p.Buckets[r.Into].Name
	}
	return p.Buckets[r.Bucket].Name
}

package report

// Chrome trace JSON (the format chrome://tracing and Perfetto open): one
// process per rank (pid = rank), one thread per stream (tid = stream index
// + 1) and one for the host (tid 0, where waits happen). The processes
// sort by host, then rank, each labelled with its host (traceProcess).
// Every rank collects its events; rank 0 gathers them and writes one file.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// traceEvent is one Chrome trace event.
type traceEvent struct {
	Name string  `json:"name"`
	Cat  string  `json:"cat,omitempty"`
	Ph   string  `json:"ph"`
	Ts   float64 `json:"ts"` // microseconds
	// Dur is a complete ("X") event's duration in microseconds, nil for
	// metadata: the format requires it of every complete event, and with
	// omitempty an event of duration 0 had none.
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// traceEvents converts the kept records into trace events.
func traceEvents(run *Run, recs []result.Traced) []traceEvent {
	out := make([]traceEvent, 0, len(recs))
	// The root of each broadcast and reduce, by statement id.
	roots := map[int]int{}
	for _, s := range plan.Flat(run.Prog.Step) {
		if s.Kind == plan.StmtColl && s.Coll.Info().RootWord != "" {
			roots[s.ID] = s.Root
		}
	}
	for _, k := range recs {
		r, step := k.R, k.Step
		us := func(d time.Duration) float64 { return float64(k.Base+d) / 1e3 }
		dur := float64(r.T1-r.T0) / 1e3
		ev := traceEvent{Ph: "X", Ts: us(r.T0), Dur: &dur, Pid: run.Rank, Tid: r.Stream + 1,
			Args: map[string]any{"step": step}}
		if r.At != "" {
			ev.Args["src"] = string(r.At)
		}
		switch r.Kind {
		case result.Grad:
			ev.Name, ev.Cat = "grad "+r.Name, "gradient"
			if n := run.Plan.Micro(); n > 1 {
				ev.Args["micro_batch"] = r.Micro + 1
			}
			ev.Args["tensor"], ev.Args["bytes"] = r.Name, r.Bytes
			if r.Bucket >= 0 {
				ev.Args["bucket"] = run.Plan.Buckets[r.Bucket].Name
			}
		case result.Backward:
			ev.Name, ev.Cat = "backward", "compute"
			microArgs(&ev, run, r)
		case result.Compute:
			ev.Name, ev.Cat = "compute", "compute"
			microArgs(&ev, run, r)
		case result.Collective:
			ev.Name, ev.Cat = r.Coll.String()+" "+r.Name, "collective"
			ev.Args["bucket"], ev.Args["bytes"] = r.Name, r.Bytes
			if r.Coll.Reduces() {
				ev.Args["op"] = r.Op.String()
			}
			if root, ok := roots[r.ID]; ok && r.ID >= 0 {
				ev.Args["root"] = root
			}
			if r.Group {
				ev.Args["group"] = true
			}
			if r.Phased {
				out = append(out, ev)
				out = append(out, phaseEvents(run, k)...)
				continue
			}
		case result.Wait:
			ev.Name, ev.Cat, ev.Tid = r.Name, "wait", 0
		case result.Barrier:
			ev.Name, ev.Cat = r.Name, "sync"
		case result.Update, result.Unscale:
			ev.Name, ev.Cat = r.Name, "update"
			ev.Args["bucket"], ev.Args["bytes"] = run.Plan.Buckets[r.Bucket].Name, r.Bytes
		case result.Flag:
			ev.Name, ev.Cat = "allreduce overflow flag", "collective"
		}
		out = append(out, ev)
	}
	return out
}

// phaseEvents are the phases of a hierarchical allreduce as sub-spans of
// its event, on its stream: each phase's time summed over the bucket's
// pieces, laid end to end from the collective's start (with one piece,
// where they ran; with several, the phases alternate piece by piece and
// the sub-spans show how the time divides).
func phaseEvents(run *Run, k result.Traced) []traceEvent {
	r := k.R
	out := make([]traceEvent, 0, 3)
	at := r.T0
	for p, d := range r.Phases {
		dur := float64(d) / 1e3
		out = append(out, traceEvent{Name: phaseNames[p] + " " + r.Name, Cat: "phase", Ph: "X", Ts: float64(k.Base+at) / 1e3, Dur: &dur,
			Pid: run.Rank, Tid: r.Stream + 1, Args: map[string]any{"step": k.Step, "bucket": r.Name, "phase": phaseKeys[p],
				"note": "summed over the bucket's pieces, laid end to end"}})
		at += d
	}
	return out
}

// traceProcess names this rank's process in the trace and sorts it among
// the others: the ranks of a host together, hosts in the order of their
// lowest rank (the header's), each process labelled with its host.
func traceProcess(run *Run) []traceEvent {
	order := 0
	seen := map[string]int{}
	for _, h := range run.Hosts {
		if _, ok := seen[h]; !ok {
			seen[h] = len(seen)
		}
	}
	if i, ok := seen[run.Host]; ok {
		order = i
	}
	return []traceEvent{
		{Name: "process_name", Ph: "M", Pid: run.Rank, Args: map[string]any{"name": fmt.Sprintf("rank %d (%s)", run.Rank, run.Host)}},
		{Name: "process_labels", Ph: "M", Pid: run.Rank, Args: map[string]any{"labels": "host " + run.Host}},
		{Name: "process_sort_index", Ph: "M", Pid: run.Rank, Args: map[string]any{"sort_index": order*max(run.Ranks, 1) + run.Rank}},
	}
}

// WriteTrace gathers every rank's events to rank 0, which writes the file
// (collective when rank 0 has --trace; "-": standard output). A file rank
// 0 cannot write is an *OutputError.
func WriteTrace(run *Run, res *result.Results) error {
	if !run.Tracing {
		return nil
	}
	meta := append(traceProcess(run), traceEvent{Name: "thread_name", Ph: "M", Pid: run.Rank, Tid: 0, Args: map[string]any{"name": "host"}})
	for i, s := range run.Plan.Streams {
		meta = append(meta, traceEvent{Name: "thread_name", Ph: "M", Pid: run.Rank, Tid: i + 1, Args: map[string]any{"name": "stream " + s.Name}})
	}
	events := append(meta, traceEvents(run, res.Traced)...)
	events = append(events, scaleEvents(run, res)...)
	events = append(events, predictedEvents(run, measuredBases(run, res))...)
	data, err := json.Marshal(append(events, saveEvents(run, res)...))
	if err != nil {
		return err
	}
	all, err := run.Comm.Gather(data)
	if err != nil {
		return err
	}
	if run.Rank != 0 {
		return nil
	}
	path := run.Trace
	if err := writeTraceFile(path, run.TracePipe, run.Plan, run.Ranks, all); err != nil {
		return &OutputError{flag: "--trace", path: path, err: err}
	}
	return nil
}

// writeTraceFile writes the trace of every rank's events (each part a JSON
// array of them) to path (to pipe, when checkOutputs kept that named pipe
// open for it), or to standard output for "-".
func writeTraceFile(path string, pipe *os.File, p *plan.Plan, ranks int, all [][]byte) error {
	f := os.Stdout
	if path != "-" {
		var err error
		if f, err = createOutput(path, pipe); err != nil {
			return err
		}
	}
	w := bufio.NewWriter(f)
	// The names as JSON strings: Go's %q wrote a control character or a
	// byte that is not UTF-8 as \x01, which is not JSON.
	name, _ := json.Marshal(p.Name)
	source, _ := json.Marshal(p.Source)
	fmt.Fprintf(w, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"program\":%s,\"source\":%s,\"ranks\":%d},\"traceEvents\":[", name, source, ranks)
	first := true
	for _, part := range all {
		// Each part is a JSON array: splice its elements in.
		if len(part) <= 2 {
			continue
		}
		if !first {
			w.WriteByte(',')
		}
		first = false
		w.Write(part[1 : len(part)-1])
	}
	w.WriteString("]}\n")
	err := w.Flush()
	if path == "-" {
		return err
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxTraceBytes bounds the trace a run may write: rank 0 gathers every
// rank's events through MPI, whose counts are 32-bit (the gather fails at 2
// GiB), and holds them all while it writes. A larger trace failed only
// after the whole run, so it is refused at start-up.
const maxTraceBytes = 1536 << 20

// traceStepBytes estimates how many bytes of trace JSON one step adds on
// one rank: an event per gradient fill, backward, compute, bucket
// collective, host wait and step barrier (engine.go, run.go), each about
// 110 to 200 bytes with its names (measured on a small plan), here a little
// more.
func traceStepBytes(p *plan.Plan, prog *plan.Program) int64 {
	var grads, nGrads int64
	for _, t := range p.Tensors {
		if !t.Frozen {
			nGrads++
			grads += 200 + 2*int64(len(t.Name))
			if t.Bucket >= 0 && t.Bucket < len(p.Buckets) {
				grads += int64(len(p.Buckets[t.Bucket].Name))
			}
		}
	}
	n := int64(150) // the step barrier
	for _, s := range plan.Flat(prog.Step) {
		src := int64(len(s.At))
		switch s.Kind {
		case plan.StmtBackward:
			n += grads + nGrads*src + 150 + src
		case plan.StmtColl:
			for _, b := range s.Buckets {
				n += 220 + 2*int64(len(p.Buckets[b].Name)) + src
				if s.Hier {
					// Its three phases' sub-spans.
					n += 3 * (300 + 2*int64(len(p.Buckets[b].Name)))
				}
			}
		default:
			n += 150 + src
		}
	}
	return n
}

// CheckTraceFits refuses a --trace that would pass maxTraceBytes, naming
// how many steps fit.
func CheckTraceFits(p *plan.Plan, prog *plan.Program, measured, warmup, ranks int) error {
	per := traceStepBytes(p, prog) * int64(ranks)
	steps := int64(warmup) + int64(measured)
	if steps <= maxTraceBytes/per {
		return nil
	}
	total := text.Bytes(math.MaxInt64) // more than that, at least
	if steps <= math.MaxInt64/per {
		total = text.Bytes(steps * per)
	}
	return fmt.Errorf("--trace of %d steps (%d warm-up, %d measured) would be about %s (%s a step over %d rank%s), more than a trace can hold (%s: rank 0 gathers it through MPI); trace at most %d steps, warm-up included, and leave --trace out of the long run",
		steps, warmup, measured, total, text.Bytes(per), ranks, text.Plural(ranks), text.Bytes(maxTraceBytes), maxTraceBytes/per)
}

// scaleEvents is the loss scale as a counter track of the rank ("C"
// events, one at the start of every traced step), with 1 in "skipped"
// for the steps that overflowed; none without a scaler. The scaler's
// course starts at the run's first step (sc.First, after a resume), the
// trace's steps are numbered from 0.
func scaleEvents(run *Run, res *result.Results) []traceEvent {
	sc := res.Scaling
	if sc == nil {
		return nil
	}
	var out []traceEvent
	last := -1
	for _, k := range res.Traced {
		i := k.Step - sc.First
		if k.Step == last || i < 0 || i >= len(sc.Scale) {
			continue
		}
		last = k.Step
		skipped := 0
		if sc.Skipped[i] {
			skipped = 1
		}
		out = append(out, traceEvent{Name: "loss scale", Ph: "C", Ts: float64(k.Base) / 1e3, Pid: run.Rank,
			Args: map[string]any{"step": k.Step, "scale": sc.Scale[i], "skipped": skipped}})
	}
	return out
}

// saveEvents are the checkpoints on the host's track: when each began and
// how long the steps stood still for it (with async saves, the staging;
// the wait at the commit is on the next one's end). "checkpoint after N
// steps" follows step N-1: its step is N-1, the step whose end it
// follows, and steps_done N.
func saveEvents(run *Run, res *result.Results) []traceEvent {
	var out []traceEvent
	for _, s := range res.Saves {
		dur := float64(s.Time) / 1e3
		out = append(out, traceEvent{Name: fmt.Sprintf("checkpoint after %d steps", s.Steps), Cat: "checkpoint", Ph: "X",
			Ts: float64(s.At) / 1e3, Dur: &dur, Pid: run.Rank, Tid: 0, Args: map[string]any{"step": s.Steps - 1, "steps_done": s.Steps, "bytes": s.Bytes}})
	}
	return out
}

// stepBase is a traced step's number and start.
type stepBase struct {
	step int
	base time.Duration
}

// measuredBases are the traced measured steps and their starts.
func measuredBases(run *Run, res *result.Results) []stepBase {
	var out []stepBase
	last := -1
	for _, k := range res.Traced {
		if k.Step != last && k.Step >= run.Warmup {
			out = append(out, stepBase{k.Step, k.Base})
		}
		last = k.Step
	}
	return out
}

// microArgs names the micro-batch of a backward or compute in a step of
// several ("backward (micro-batch 2/4)"), and gives it as an argument.
func microArgs(ev *traceEvent, run *Run, r result.Record) {
	if n := run.Plan.Micro(); n > 1 {
		ev.Name = fmt.Sprintf("%s (micro-batch %d/%d)", ev.Name, r.Micro+1, n)
		ev.Args["micro_batch"] = r.Micro + 1
	}
}

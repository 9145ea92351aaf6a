package runtime

// Chrome trace JSON (the format chrome://tracing and Perfetto open): one
// process per rank (pid = rank), one thread per stream (tid = stream index
// + 1) and one for the host (tid 0, where waits happen). Every rank
// collects its events; rank 0 gathers them and writes one file.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/plan"
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

// tracedRec is one record of a step, kept for the trace.
type tracedRec struct {
	step int
	base time.Duration // the step's start, from the time origin
	r    timed
}

// traceCapBytes bounds the memory reserved for the trace's records before
// the steps; a longer trace grows as needed.
const traceCapBytes = 64 << 20

// keepForTrace keeps one step's records for the trace. The events are made
// only when the trace is written: converting them during the steps
// allocated a few hundred bytes per record, and the growing slice's copies
// and page faults landed between the ranks' collectives. The first step
// reserves room (its memory written) for every step like it.
func (res *results) keepForTrace(recs []timed, step int, base time.Duration, steps int) {
	if res.traced == nil {
		n := min(len(recs)*steps, traceCapBytes/int(unsafe.Sizeof(tracedRec{})))
		res.traced = preallocated[tracedRec](max(n, len(recs)))
	}
	for _, r := range recs {
		r.start, r.end = nil, nil // pooled events, reused by later steps
		res.traced = append(res.traced, tracedRec{step: step, base: base, r: r})
	}
}

// traceEvents converts the kept records into trace events.
func traceEvents(e *engine, recs []tracedRec) []traceEvent {
	out := make([]traceEvent, 0, len(recs))
	// The root of each broadcast and reduce, by statement id.
	roots := map[int]int{}
	for _, s := range plan.Flat(e.prog.Step) {
		if s.Kind == plan.StmtColl && (s.Coll == plan.CollBroadcast || s.Coll == plan.CollReduce) {
			roots[s.ID] = s.Root
		}
	}
	for _, k := range recs {
		r, step := k.r, k.step
		us := func(d time.Duration) float64 { return float64(k.base+d) / 1e3 }
		dur := float64(r.t1-r.t0) / 1e3
		ev := traceEvent{Ph: "X", Ts: us(r.t0), Dur: &dur, Pid: e.rank, Tid: r.stream + 1,
			Args: map[string]any{"step": step}}
		if r.at != "" {
			ev.Args["src"] = string(r.at)
		}
		switch r.kind {
		case tGrad:
			ev.Name, ev.Cat = "grad "+r.name, "gradient"
			ev.Args["tensor"], ev.Args["bytes"] = r.name, r.bytes
			if r.bucket >= 0 {
				ev.Args["bucket"] = e.plan.Buckets[r.bucket].Name
			}
		case tBackward:
			ev.Name, ev.Cat = "backward", "compute"
		case tCompute:
			ev.Name, ev.Cat = "compute", "compute"
		case tColl:
			ev.Name, ev.Cat = r.coll.String()+" "+r.name, "collective"
			ev.Args["bucket"], ev.Args["bytes"] = r.name, r.bytes
			if r.coll.Reduces() {
				ev.Args["op"] = r.op.String()
			}
			if root, ok := roots[r.id]; ok && r.id >= 0 {
				ev.Args["root"] = root
			}
			if r.group {
				ev.Args["group"] = true
			}
		case tWait:
			ev.Name, ev.Cat, ev.Tid = r.name, "wait", 0
		case tBarrier:
			ev.Name, ev.Cat = "step barrier", "sync"
		}
		out = append(out, ev)
	}
	return out
}

// writeTrace gathers every rank's events to rank 0, which writes the file
// (collective when rank 0 has --trace; "-": standard output). A file rank
// 0 cannot write is an *outputError.
func writeTrace(e *engine, res *results) error {
	if !e.opts.tracing {
		return nil
	}
	meta := []traceEvent{{Name: "process_name", Ph: "M", Pid: e.rank, Args: map[string]any{"name": fmt.Sprintf("rank %d (%s)", e.rank, e.h.Name)}},
		{Name: "process_sort_index", Ph: "M", Pid: e.rank, Args: map[string]any{"sort_index": e.rank}},
		{Name: "thread_name", Ph: "M", Pid: e.rank, Tid: 0, Args: map[string]any{"name": "host"}}}
	for i, s := range e.plan.Streams {
		meta = append(meta, traceEvent{Name: "thread_name", Ph: "M", Pid: e.rank, Tid: i + 1, Args: map[string]any{"name": "stream " + s.Name}})
	}
	data, err := json.Marshal(append(meta, traceEvents(e, res.traced)...))
	if err != nil {
		return err
	}
	all, err := e.h.Gather(data)
	if err != nil {
		return err
	}
	if e.rank != 0 {
		return nil
	}
	path := e.opts.trace
	if err := writeTraceFile(path, e.opts.tracePipe, e.plan, e.size, all); err != nil {
		return &outputError{flag: "--trace", path: path, err: err}
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
	fmt.Fprintf(w, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"plan.Program\":%s,\"source\":%s,\"ranks\":%d},\"traceEvents\":[", name, source, ranks)
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
			}
		default:
			n += 150 + src
		}
	}
	return n
}

// checkTraceFits refuses a --trace that would pass maxTraceBytes, naming
// how many steps fit.
func checkTraceFits(p *plan.Plan, prog *plan.Program, o *options, ranks int) error {
	per := traceStepBytes(p, prog) * int64(ranks)
	steps := int64(o.warmup) + int64(o.steps)
	if steps <= maxTraceBytes/per {
		return nil
	}
	total := text.Bytes(math.MaxInt64) // more than that, at least
	if steps <= math.MaxInt64/per {
		total = text.Bytes(steps * per)
	}
	return fmt.Errorf("--trace of %d steps (%d warm-up, %d measured) would be about %s (%s a step over %d rank%s), more than a trace can hold (%s: rank 0 gathers it through MPI); trace at most %d steps, warm-up included, and leave --trace out of the long run",
		steps, o.warmup, o.steps, total, text.Bytes(per), ranks, text.Plural(ranks), text.Bytes(maxTraceBytes), maxTraceBytes/per)
}

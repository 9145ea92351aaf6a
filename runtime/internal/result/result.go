package result

import (
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// Kind says what a Record measures.
type Kind uint8

// The kinds of records.
const (
	Backward Kind = iota + 1
	Compute
	Collective
	Grad
	Wait
	Barrier
	// Update is one bucket's optimizer update; Unscale one bucket's
	// unscale and inf/NaN check; Flag the allreduce that agrees on the
	// overflow flag.
	Update
	Unscale
	Flag
)

// Record is one measured piece of work of the current step: on a stream
// (between two events) or on the host (Wait).
type Record struct {
	Kind   Kind
	Stream int
	At     plan.Src
	Name   string
	Bucket int
	ID     int // collective statement id, for table rows
	Coll   plan.Coll
	Op     plan.RedOp
	Bytes  int64
	Group  bool
	// Index is an update's or unscale's place among the step's flat
	// statements (plan.Flat), for the training table's rows.
	Index int
	// Micro is the micro-batch (from 0) of a backward, a compute or a
	// gradient in a step of several (plan.Plan.Accumulate).
	Micro int
	Start backend.Event
	End   backend.Event
	// Host times (Wait), and the resolved times of all records after the
	// step, relative to the step's epoch.
	HostStart, HostEnd time.Time
	T0, T1             time.Duration
	// Phases, when Phased, are a hierarchical allreduce's phase times
	// (backend.PhaseTimer): the reduce-scatter inside the host, the
	// allreduce across hosts and the allgather inside the host.
	Phases [3]time.Duration
	Phased bool
}

// Row is one line of the per-bucket table: one bucket of one collective
// statement of the step.
type Row struct {
	ID     int
	Bucket int
	At     plan.Src
	Coll   plan.Coll
	Op     plan.RedOp
	Root   int
	Stream int
	Group  bool
	// Hier: an allreduce with `algo hierarchical`.
	Hier bool
	// Into is the output bucket of an out-of-place collective (`into
	// NAME`), whose source is Bucket; 0 in place (an output follows its
	// source in the plan, so it is never bucket 0).
	Into  int
	Bytes int64
	// Times are this rank's durations in the measured steps.
	Times []time.Duration
	// Phases are, for a hierarchical allreduce outside a group that ran
	// in that form, this rank's phase times in the measured steps (see
	// Record.Phases); empty otherwise.
	Phases [3][]time.Duration
}

// StepStats are one measured step's figures on this rank.
type StepStats struct {
	Step    time.Duration
	Compute time.Duration // union of backward and compute intervals
	Comm    time.Duration // union of collective intervals
	Hidden  time.Duration // communication that overlapped compute
}

// RankStep is one measured step's figures of a heterogeneous run on this
// rank (kept only for such runs, so that the others keep no more a step).
type RankStep struct {
	// FirstColl is when the step's first collective started on this rank
	// (-1: the step has none): the ranks start a step together, so the
	// latest rank's FirstColl less this rank's is what this rank waited
	// there for the others.
	FirstColl time.Duration
	// Share is this rank's share of the global batch at the step.
	Share int
}

// TrainStepStats are one measured step's figures of the training step
// on this rank (kept only for plans with updates or unscales): the union
// of the updates' intervals and the part of it that overlapped
// communication; the unscales' (with the flag's allreduces), and the
// flag's allreduces alone.
type TrainStepStats struct {
	Update       time.Duration
	UpdateHidden time.Duration
	Unscale      time.Duration
	Flag         time.Duration
}

// TrainRow is one line of the training step's table: one bucket of one
// update or unscale statement.
type TrainRow struct {
	Kind   Kind // Update or Unscale
	Bucket int
	At     plan.Src
	Stream int
	// Bytes is the memory the work reads and writes.
	Bytes int64
	// Times are this rank's durations in the measured steps.
	Times []time.Duration
}

// Scaling is the loss scaler's course over the steps this run ran,
// warm-up included: from step 0, or from the step after the checkpoint a
// resumed run started from.
type Scaling struct {
	// First is the number of the run's first step (counted from 0,
	// warm-up included, as --overflow counts them): 0, or the resumed
	// checkpoint's step count.
	First int
	// Scale[i] is step First+i's scale; Skipped[i] whether step First+i
	// found an overflow and skipped its updates.
	Scale   []float64
	Skipped []bool
}

// Results is what a run produced on this rank.
type Results struct {
	Rows      []Row
	RowOf     map[[2]int]int
	Steps     []StepStats
	Wrong     []int64 // per bucket, summed over checks
	Unchecked []int64
	Checked   int // number of checks run
	FirstBad  []string
	Traced    []Traced // --trace: every step's records (KeepForTrace)
	Origin    time.Time
	// The training step: its table and figures per measured step (nil
	// without updates or unscales), the scaler's course (nil without a
	// scaler), and per bucket the parameter elements checked wrong or
	// not checkable.
	TrainRows      []TrainRow
	TrainSteps     []TrainStepStats
	TrainRowOf     map[[2]int]int // (statement At index, bucket) -> TrainRows
	Scaling        *Scaling
	WrongParams    []int64
	UncheckedParam []int64
	// Saves are the checkpoints this rank wrote; Resumed the step a
	// resumed run started at and how long reading the checkpoint took
	// (ResumeTime 0: not resumed).
	Saves      []Save
	Resumed    int
	ResumeTime time.Duration
	// Hetero is the course of a heterogeneous run (nil: homogeneous), the
	// same on every rank; RankSteps its figures per measured step.
	Hetero    *Hetero
	RankSteps []RankStep
}

// Hetero is what a heterogeneous run used: the global batch, the balancing
// rule and period, the ranks' declared speeds, and the shares over time.
type Hetero struct {
	Batch   int
	Balance string
	Every   int
	Speeds  []float64
	Course  []ShareSpan
	// From says where the speeds, batch and balance came from ("": the
	// flags).
	From string
}

// ShareSpan is the shares in force from step From (0 based, warm-up
// counted) until the next span's.
type ShareSpan struct {
	From   int
	Shares []int
}

// Save is one checkpoint as this rank wrote it: after Steps steps, its
// shard's Bytes, and the Time the step loop stood still for it (the
// shard's copy to the host and write, the ranks' agreement and, on rank
// 0, the commit).
type Save struct {
	Steps int
	Bytes int64
	Time  time.Duration
	// At is when the save began, from the run's time origin (the trace's).
	At time.Duration
}

// New returns the empty results of a run of prog: a row for every bucket
// of every collective statement of the step.
func New(p *plan.Plan, prog *plan.Program) *Results {
	r := &Results{RowOf: map[[2]int]int{}, Wrong: make([]int64, len(p.Buckets)), Unchecked: make([]int64, len(p.Buckets)),
		TrainRowOf: map[[2]int]int{}, WrongParams: make([]int64, len(p.Buckets)), UncheckedParam: make([]int64, len(p.Buckets))}
	if p.Scaler != nil {
		r.Scaling = &Scaling{}
	}
	for i, s := range plan.Flat(prog.Step) {
		if s.Kind == plan.StmtUpdate || s.Kind == plan.StmtUnscale {
			kind := Update
			if s.Kind == plan.StmtUnscale {
				kind = Unscale
			}
			for _, b := range s.Buckets {
				r.TrainRowOf[[2]int{i, b}] = len(r.TrainRows)
				r.TrainRows = append(r.TrainRows, TrainRow{Kind: kind, Bucket: b, At: s.At, Stream: s.Stream})
			}
		}
	}
	for _, s := range plan.Flat(prog.Step) {
		if s.Kind != plan.StmtColl {
			continue
		}
		for _, b := range s.Buckets {
			key := [2]int{s.ID, b}
			if _, ok := r.RowOf[key]; ok {
				continue
			}
			r.RowOf[key] = len(r.Rows)
			row := Row{ID: s.ID, Bucket: b, At: s.At, Coll: s.Coll, Op: s.Op, Root: s.Root, Stream: s.Stream, Hier: s.Hier}
			if len(s.Into) == 1 {
				row.Into = s.Into[0]
			}
			r.Rows = append(r.Rows, row)
		}
	}
	return r
}

// Preallocated returns an empty slice with room for n elements, its memory
// already written: the measured steps then neither grow it nor take the
// page faults of fresh memory (each of which, on a virtual machine, can
// wake other threads and stall a rank that is inside a collective).
func Preallocated[T any](n int) []T {
	s := make([]T, n)
	clear(s)
	return s[:0]
}

// Traced is one record of a step, kept for the trace.
type Traced struct {
	Step int
	Base time.Duration // the step's start, from the time origin
	R    Record
}

// traceCapBytes bounds the memory reserved for the trace's records before
// the steps; a longer trace grows as needed.
const traceCapBytes = 64 << 20

// KeepForTrace keeps one step's records for the trace. The events are made
// only when the trace is written: converting them during the steps
// allocated a few hundred bytes per record, and the growing slice's copies
// and page faults landed between the ranks' collectives. The first step
// reserves room (its memory written) for every step like it.
func (res *Results) KeepForTrace(recs []Record, step int, base time.Duration, steps int) {
	if res.Traced == nil {
		n := min(len(recs)*steps, traceCapBytes/int(unsafe.Sizeof(Traced{})))
		res.Traced = Preallocated[Traced](max(n, len(recs)))
	}
	for _, r := range recs {
		r.Start, r.End = nil, nil // pooled events, reused by later steps
		res.Traced = append(res.Traced, Traced{Step: step, Base: base, R: r})
	}
}

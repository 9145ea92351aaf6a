package engine

// The engine holds a running plan: the backend's streams, the buckets' and
// tensors' memory, the events, and the per-step bookkeeping that the
// statements (issue.go) fill in.

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/check"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// Engine runs one plan on one rank.
type Engine struct {
	plan *plan.Plan
	prog *plan.Program
	cfg  Config
	h    *mpihost.Host
	rank int
	size int

	be      backend.Backend
	streams []backend.Stream

	mem    *backend.Layout
	shapes []elem.PatternShape
	// backOrder lists the non-frozen tensors in the order backward makes
	// their gradients ready (reverse declaration order); lastOf[t] is the
	// bucket whose last gradient t is, or -1.
	backOrder []int
	lastOf    []int
	// pieces caches each backward piece's order and lastOf, by its
	// statement's position, so that steps after the first allocate none.
	pieces map[plan.Src]pieceOrder

	// Events: free ones, and those used by the current step.
	freeEvents []backend.Event
	usedEvents []backend.Event
	// lastRec[s] is the event recorded last on stream s if nothing was
	// queued on s after it and the host has not blocked since; nil
	// otherwise (see startEvent).
	lastRec []backend.Event

	// The current step.
	seedStep uint32 // the step number that seeds the fill pattern
	stepNo   int    // 0-based over warm-up and measured steps; -1 in init
	// micro is the micro-batch of the step being issued, 0 to micros-1
	// (plan.Micro): the statements that only the last one runs skip
	// themselves on the others (skips).
	micro, micros int
	epoch         backend.Event
	// stepStart is the host time at which the epoch was recorded (or, with
	// a StepAligner, completed).
	stepStart  time.Time
	epochTimer backend.StepAligner
	// alignStream runs the step barrier of a StepAligner backend: the
	// first stream that runs a collective in the step.
	alignStream int
	ready       []readyEvents
	inGroup     bool // the collectives go to groupBuf until the group ends
	cursor      int  // index into the recorded flat statements, for the sanity check
	hangAt      int  // test hook: stop before this statement (-1: never)
	hooks       *testHooks
	flatStep    []plan.Stmt
	collected   []result.Record  // collect's result, reused from step to step
	itemBuf     []collItem       // a statement's buckets, reused (issue.go)
	opBuf       []backend.CollOp // a statement's collectives, reused (issue.go)
	groupBuf    []collItem       // a group's buckets, reused (issue.go)
	// What the steps reuse so that they allocate nothing once warm (see
	// cpuEvent.record for why that matters): each stream's
	// "wait NAME" record name, the intervals of stepStatsOf.
	waitNames []string
	stats     intervalScratch
	// intoNames names the out-of-place collectives' rows, "src→out", by
	// source and output bucket; intoBuf and srcBuf are Into's slices.
	intoNames       map[[2]int]string
	intoBuf, srcBuf []int

	// mu guards recs, which the watchdog reads, and origin, which the
	// flight record reads (it names the job).
	mu   sync.Mutex
	recs []result.Record

	tr  train       // the training step (train.go)
	het heteroState // heterogeneous ranks (hetero.go)
	// first is the step Run starts at: 0, or the one after a checkpoint
	// resumed (Resume), which took resumeTime.
	first      int
	resumeTime time.Duration
	// resumedFrom is the checkpoint the run resumed from (Resume), which
	// pruning leaves until the run has committed a later one of its own.
	resumedFrom ResumePoint
	// origin is the run's time origin (the trace's), for the saves.
	origin time.Time
	// pending is an async checkpoint being written, committing one being
	// committed by rank 0 (checkpoint.go).
	pending, committing *pendingSave

	model   *check.Model
	tracing bool
	hostAt  watchPoint
	wd      *Watchdog
	// hosts is every rank's host (SetHosts), set before the steps, for
	// the flight records.
	hosts []HostRanks
}

// readyMark is a bucket's "all gradients ready" event of one step.
type readyMark struct {
	ev   backend.Event
	step int
	ok   bool
}

// readyEvents are a bucket's "all gradients ready" events of one step: one
// of a whole backward, or one per backward piece that touched the bucket.
type readyEvents struct {
	evs   []backend.Event
	step  int
	micro int
	ok    bool
}

// Config is what the engine is told of the run.
type Config struct {
	// Steps and Warmup count the measured and the warm-up steps;
	// CheckEvery checks every element every CheckEvery steps and after the
	// last (0: never).
	Steps, Warmup, CheckEvery int
	// Tracing keeps every step's records for the trace.
	Tracing bool
	// Settle is how long the ranks settle before the measured steps (0:
	// not at all; settle.go).
	Settle time.Duration
	// Init runs the plan's init block (nil without one), Step one step:
	// the generated functions, issuing their statements on the engine.
	Init, Step func()
	// Injections are the overflows to inject (--overflow).
	Injections []Injection
	// Checkpoint says when and where to write checkpoints.
	Checkpoint Checkpointing
	// Faults are the faults on demand (--fault).
	Faults []Fault
	// FlightDir is where a timeout writes the flight record ("": not).
	FlightDir string
	// Hetero is the ranks' heterogeneity: speeds, a straggler, jitter,
	// the global batch and its balancing (the zero value: none).
	Hetero hetero.Spec
	// OnAbort, if not nil, runs when the job ends early (a timeout, an
	// error of this rank's own, or mpirun terminating this rank), with the
	// reason: the runtime writes what it has.
	OnAbort func(reason string)
	// Measure, if not nil, runs just before the first measured step
	// (begin) and, behind a barrier that every rank's last sends are in
	// by, just after the last: the runtime reads the network's counters.
	Measure func(begin bool)
}

// New sets up plan p, recorded as prog, on backend be: it creates the
// streams, allocates and fills the buffers, and chooses the fill patterns
// and the checker's model.
func New(cfg Config, p *plan.Plan, prog *plan.Program, h *mpihost.Host, be backend.Backend) (*Engine, error) {
	hooks := testHooksFromEnv()
	hooks.duringSetup(h.Rank)
	e := &Engine{cfg: cfg, plan: p, prog: prog, h: h, rank: h.Rank, size: h.Size, be: be, hooks: hooks, hangAt: -1}
	for _, s := range p.Streams {
		e.waitNames = append(e.waitNames, "wait "+s.Name)
	}
	e.tracing = cfg.Tracing
	e.flatStep = plan.Flat(prog.Step)
	e.micros = p.Micro()
	e.intoNames = map[[2]int]string{}
	for _, s := range append(plan.Flat(prog.Init), e.flatStep...) {
		if len(s.Into) == 1 && len(s.Buckets) == 1 {
			e.intoNames[[2]int{s.Buckets[0], s.Into[0]}] = IntoName(p, s.Buckets[0], s.Into[0])
		}
	}
	for i, s := range p.Streams {
		st, err := be.NewStream(i, s.Name, s.Priority)
		if err != nil {
			return nil, err
		}
		e.streams = append(e.streams, st)
	}
	e.shapes = check.Patterns(p, prog, e.size, cfg.Hetero.GlobalBatch(e.size))
	if err := e.checkHostMemory(); err != nil {
		return nil, err
	}
	if err := e.allocate(); err != nil {
		return nil, err
	}
	if err := e.setUpTrain(cfg.Injections); err != nil {
		return nil, err
	}
	e.ready = make([]readyEvents, len(p.Buckets))
	e.lastRec = make([]backend.Event, len(e.streams))
	for _, s := range e.flatStep {
		if s.Kind == plan.StmtColl {
			e.alignStream = s.Stream
			break
		}
	}
	e.planBackward()
	e.model = check.New(p, e.rank, e.size, e.shapes, e.mem, e.backOrder, be)
	e.model.SetTraining(e.trainModel())
	return e, nil
}

// allocate lays the plan out in the backend's memory and fills every
// gradient with the pattern of InitStep, so that collectives that run
// before any backward move defined values.
func (e *Engine) allocate() error {
	p := e.plan
	mem, err := backend.Allocate(e.be, p, backend.SlicedBuckets(e.prog, len(p.Buckets)), e.size)
	if err != nil {
		return err
	}
	e.mem = mem
	// Initial values, on the first stream.
	st := e.streams[0]
	for i := range p.Tensors {
		tm := &mem.Tensors[i]
		if err := st.Fill(tm.Store, e.shapes[i].Params(e.rank, e.size, elem.InitStep, i)); err != nil {
			return fmt.Errorf("initial fill of %q: %w", p.Tensors[i].Name, err)
		}
		if !tm.InPlace && p.Tensors[i].Bucket >= 0 {
			if err := st.Cast(tm.Wire, tm.Store); err != nil {
				return fmt.Errorf("initial cast of %q: %w", p.Tensors[i].Name, err)
			}
		}
	}
	return st.Synchronize()
}

// planBackward computes the order in which backward makes gradients ready
// and which tensor completes each bucket.
func (e *Engine) planBackward() {
	p := e.plan
	e.lastOf = make([]int, len(p.Tensors))
	for i := range e.lastOf {
		e.lastOf[i] = -1
	}
	seen := make([]bool, len(p.Buckets))
	for i := len(p.Tensors) - 1; i >= 0; i-- {
		if p.Tensors[i].Frozen {
			continue
		}
		e.backOrder = append(e.backOrder, i)
	}
	// The last tensor of a bucket in backward order is the first one met
	// walking forward through the declaration order.
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if t.Frozen || t.Bucket < 0 || seen[t.Bucket] {
			continue
		}
		seen[t.Bucket] = true
		e.lastOf[i] = t.Bucket
	}
}

// pieceOrder is a backward piece's order and lastOf (see pieceOrderOf).
type pieceOrder struct{ tensors, order, lastOf []int }

// pieceOrderOf returns the order of the backward piece at, of tensors, and
// its lastOf (see pieceOrder), cached per statement.
func (e *Engine) pieceOrderOf(at plan.Src, tensors []int) (order, lastOf []int) {
	if po, ok := e.pieces[at]; ok && slices.Equal(po.tensors, tensors) {
		return po.order, po.lastOf
	}
	order, lastOf = e.pieceOrder(tensors)
	if e.pieces == nil {
		e.pieces = map[plan.Src]pieceOrder{}
	}
	e.pieces[at] = pieceOrder{slices.Clone(tensors), order, lastOf}
	return order, lastOf
}

// pieceOrder returns a backward piece's order, tensors in reverse
// declaration order, and per tensor the bucket whose last gradient in
// that order it is (-1 if none), as planBackward does for all.
func (e *Engine) pieceOrder(tensors []int) (order, lastOf []int) {
	p := e.plan
	lastOf = make([]int, len(p.Tensors))
	for i := range lastOf {
		lastOf[i] = -1
	}
	order = slices.Clone(tensors)
	slices.Sort(order)
	seen := make(map[int]bool)
	for _, t := range order {
		if b := p.Tensors[t].Bucket; b >= 0 && !seen[b] {
			seen[b] = true
			lastOf[t] = b
		}
	}
	slices.Reverse(order)
	return order, lastOf
}

// event returns an event for the current step.
func (e *Engine) event() backend.Event {
	var ev backend.Event
	if n := len(e.freeEvents); n > 0 {
		ev = e.freeEvents[n-1]
		e.freeEvents = e.freeEvents[:n-1]
	} else {
		var err error
		ev, err = e.be.NewEvent()
		if err != nil {
			e.fatal("", fmt.Errorf("creating an event: %w", err))
		}
	}
	e.usedEvents = append(e.usedEvents, ev)
	return ev
}

// recordOn records a fresh event on stream and returns it.
func (e *Engine) recordOn(stream int, at plan.Src) backend.Event {
	ev := e.event()
	if err := e.streams[stream].Record(ev); err != nil {
		e.fatal(at, err)
	}
	e.lastRec[stream] = ev
	return ev
}

// startEvent returns an event that marks the current end of stream's
// queue: the last one recorded there when nothing was queued after it
// (a collective that follows another on its stream starts when that one
// ends), else a new one. Recording a timing event is most of what the
// runtime adds to a GPU collective's host time (docs/performance.md,
// "Per-collective cost"), so sharing one between consecutive collectives
// halves the events recorded per collective. Sharing is only right while
// the host issues without blocking: a collective queued after a Wait would
// else be timed from before the wait.
func (e *Engine) startEvent(stream int, at plan.Src) backend.Event {
	if ev := e.lastRec[stream]; ev != nil {
		return ev
	}
	return e.recordOn(stream, at)
}

// queued notes that work other than an event record was queued on stream.
func (e *Engine) queued(stream int) { e.lastRec[stream] = nil }

// hostBlocked notes that the host waited: no recorded event may start what
// is queued from now on.
func (e *Engine) hostBlocked() { clear(e.lastRec) }

// addTimed appends a record for the watchdog and the reports.
func (e *Engine) addTimed(r result.Record) {
	e.mu.Lock()
	e.recs = append(e.recs, r)
	e.mu.Unlock()
}

// fatal reports an error of the running plan, naming this rank, the step
// and the statement, and aborts the whole job so that no rank hangs.
func (e *Engine) fatal(at plan.Src, err error) {
	pos := ""
	if at != "" {
		pos = string(at) + ": "
	}
	fmt.Fprintf(os.Stderr, "%s: rank %d (%s): error: step %s: %s%v\n", proc.Name(), e.rank, e.h.Name, e.stepName(), pos, err)
	e.h.Abort(1)
	os.Exit(1)
}

// Memory returns the plan's memory on the backend.
func (e *Engine) Memory() *backend.Layout { return e.mem }

package runtime

// The engine holds a running plan: the backend's streams, the buckets' and
// tensors' memory, the events, and the per-step bookkeeping that the Step
// methods (step.go) fill in.

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// engine runs one plan on one rank.
type engine struct {
	plan *plan.Plan
	prog *plan.Program
	// runInit runs the plan's init block (nil without one), runStep one
	// step: the generated functions, issuing their statements here.
	runInit, runStep func()
	opts             *options
	h                *mpihost.Host
	rank             int
	size             int

	be      backend.Backend
	streams []backend.Stream

	buckets []bucketMem
	tensors []tensorMem
	shapes  []elem.PatternShape
	// backOrder lists the non-frozen tensors in the order backward makes
	// their gradients ready (reverse declaration order); lastOf[t] is the
	// bucket whose last gradient t is, or -1.
	backOrder []int
	lastOf    []int

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
	epoch    backend.Event
	// stepStart is the host time at which the epoch was recorded (or, with
	// a StepAligner, completed).
	stepStart  time.Time
	epochTimer backend.StepAligner
	// alignStream runs the step barrier of a StepAligner backend: the
	// first stream that runs a collective in the step.
	alignStream int
	ready       []readyMark
	cursor      int // index into the recorded flat statements, for the sanity check
	hangAt      int // test hook: stop before this statement (-1: never)
	flatStep    []plan.Stmt
	collected   []timed          // collect's result, reused from step to step
	itemBuf     []collItem       // a statement's buckets, reused (step.go)
	opBuf       []backend.CollOp // a statement's collectives, reused (step.go)
	groupBuf    []collItem       // a group's buckets, reused (step.go)
	// What the steps reuse so that they allocate nothing once warm (see
	// cpuEvent.record for why that matters): each stream's
	// "wait NAME" record name, the intervals of stepStatsOf.
	waitNames []string
	stats     intervalScratch

	// mu guards recs, which the watchdog reads.
	mu   sync.Mutex
	recs []timed

	model   *model
	tracing bool
	hostAt  watchPoint
	wd      *watchdog
}

// bucketMem is a bucket's wire buffer.
type bucketMem struct {
	buf backend.Buffer
	// elems is the buffer's length: the plan's Elems, padded to a multiple
	// of the world size for buckets that an allgather or reducescatter
	// touches.
	elems int64
	span  backend.Span
}

// tensorMem is where a tensor's gradient lives.
type tensorMem struct {
	elems int64
	// store is the gradient: a view into the bucket's wire buffer when the
	// dtypes agree (inPlace), separate storage otherwise.
	store   backend.Span
	inPlace bool
	// wire is the tensor's place in its bucket's wire buffer (zero Span if
	// in no bucket).
	wire backend.Span
}

// readyMark is a bucket's "all gradients ready" event of one step.
type readyMark struct {
	ev   backend.Event
	step int
	ok   bool
}

// timedKind says what a timed record measures.
type timedKind uint8

const (
	tBackward timedKind = iota + 1
	tCompute
	tColl
	tGrad
	tWait
	tBarrier
)

// timed is one measured piece of work of the current step: on a stream
// (between two events) or on the host (tWait).
type timed struct {
	kind   timedKind
	stream int
	at     Src
	name   string
	bucket int
	id     int // collective statement id, for table rows
	coll   plan.Coll
	op     RedOp
	bytes  int64
	group  bool
	start  backend.Event
	end    backend.Event
	// Host times (tWait), and the resolved times of all records after the
	// step, relative to the step's epoch.
	hostStart, hostEnd time.Time
	t0, t1             time.Duration
}

// newEngine allocates everything the plan needs on backend be.
func newEngine(p *plan.Plan, prog *plan.Program, opts *options, h *mpihost.Host, be backend.Backend) (*engine, error) {
	e := &engine{plan: p, prog: prog, opts: opts, h: h, rank: h.Rank, size: h.Size, be: be}
	for _, s := range p.Streams {
		e.waitNames = append(e.waitNames, "wait "+s.Name)
	}
	e.tracing = opts.tracing
	e.flatStep = plan.Flat(prog.Step)
	for i, s := range p.Streams {
		st, err := be.NewStream(i, s.Name, s.Priority)
		if err != nil {
			return nil, err
		}
		e.streams = append(e.streams, st)
	}
	e.shapes = choosePatterns(p, prog, e.size)
	if err := e.allocate(); err != nil {
		return nil, err
	}
	e.ready = make([]readyMark, len(p.Buckets))
	e.lastRec = make([]backend.Event, len(e.streams))
	for _, s := range e.flatStep {
		if s.Kind == plan.StmtColl {
			e.alignStream = s.Stream
			break
		}
	}
	e.planBackward()
	e.model = newModel(e)
	return e, nil
}

// allocate creates the buckets' wire buffers and the separate storage of
// tensors that do not live in place, and fills every gradient with the
// pattern of InitStep so that collectives that run before any backward
// move defined values.
func (e *engine) allocate() error {
	p := e.plan
	padded := paddedBuckets(e.prog, len(p.Buckets))
	e.buckets = make([]bucketMem, len(p.Buckets))
	for i, b := range p.Buckets {
		n := b.Elems
		if padded[i] && n%int64(e.size) != 0 {
			n += int64(e.size) - n%int64(e.size)
		}
		buf, err := e.be.Alloc(b.Wire, max(n, 1))
		if err != nil {
			return fmt.Errorf("bucket %q (%s of %s): %w", b.Name, text.Count(n), b.Wire, err)
		}
		e.buckets[i] = bucketMem{buf: buf, elems: n, span: backend.Span{Buf: buf, Off: 0, N: n, DType: b.Wire}}
	}
	// Separate storage: one arena per dtype, each tensor 64-byte aligned.
	e.tensors = make([]tensorMem, len(p.Tensors))
	arenaSize := map[DType]int64{}
	offsets := make([]int64, len(p.Tensors))
	for i := range p.Tensors {
		t := &p.Tensors[i]
		tm := &e.tensors[i]
		tm.elems = t.Elems()
		if t.Bucket >= 0 {
			b := &e.buckets[t.Bucket]
			tm.wire = backend.Span{Buf: b.buf, Off: t.Offset, N: tm.elems, DType: p.Buckets[t.Bucket].Wire}
			if t.DType == p.Buckets[t.Bucket].Wire {
				tm.store = tm.wire
				tm.inPlace = true
				continue
			}
		}
		align := 64 / t.DType.Size()
		off := (arenaSize[t.DType] + align - 1) / align * align
		offsets[i] = off
		arenaSize[t.DType] = off + tm.elems
	}
	dtypes := make([]DType, 0, len(arenaSize))
	for dt := range arenaSize {
		dtypes = append(dtypes, dt)
	}
	sort.Slice(dtypes, func(i, j int) bool { return dtypes[i] < dtypes[j] })
	arenas := map[DType]backend.Buffer{}
	for _, dt := range dtypes {
		buf, err := e.be.Alloc(dt, arenaSize[dt])
		if err != nil {
			return fmt.Errorf("storage of the %s tensors (%s): %w", dt, text.Count(arenaSize[dt]), err)
		}
		arenas[dt] = buf
	}
	for i := range p.Tensors {
		tm := &e.tensors[i]
		if tm.inPlace {
			continue
		}
		dt := p.Tensors[i].DType
		tm.store = backend.Span{Buf: arenas[dt], Off: offsets[i], N: tm.elems, DType: dt}
	}
	// Initial values, on the first stream.
	st := e.streams[0]
	for i := range p.Tensors {
		if err := st.Fill(e.tensors[i].store, e.shapes[i].Params(e.rank, e.size, elem.InitStep, i)); err != nil {
			return fmt.Errorf("initial fill of %q: %w", p.Tensors[i].Name, err)
		}
		if !e.tensors[i].inPlace && p.Tensors[i].Bucket >= 0 {
			if err := st.Cast(e.tensors[i].wire, e.tensors[i].store); err != nil {
				return fmt.Errorf("initial cast of %q: %w", p.Tensors[i].Name, err)
			}
		}
	}
	return st.Synchronize()
}

// paddedBuckets reports which of the n buckets an allgather or
// reducescatter touches anywhere in the program.
func paddedBuckets(prog *plan.Program, n int) []bool {
	out := make([]bool, n)
	for _, ss := range [][]plan.Stmt{plan.Flat(prog.Init), plan.Flat(prog.Step)} {
		for _, s := range ss {
			if s.Kind == plan.StmtColl && (s.Coll == plan.CollAllGather || s.Coll == plan.CollReduceScatter) {
				for _, b := range s.Buckets {
					out[b] = true
				}
			}
		}
	}
	return out
}

// planBackward computes the order in which backward makes gradients ready
// and which tensor completes each bucket.
func (e *engine) planBackward() {
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

// event returns an event for the current step.
func (e *engine) event() backend.Event {
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
func (e *engine) recordOn(stream int, at Src) backend.Event {
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
// ends), else a new one. Recording a timing event costs a GPU's host about
// 1.6 µs, so sharing one between consecutive collectives halves the
// runtime's cost per collective. Sharing is only right while the host
// issues without blocking: a collective queued after a Wait would else be
// timed from before the wait.
func (e *engine) startEvent(stream int, at Src) backend.Event {
	if ev := e.lastRec[stream]; ev != nil {
		return ev
	}
	return e.recordOn(stream, at)
}

// queued notes that work other than an event record was queued on stream.
func (e *engine) queued(stream int) { e.lastRec[stream] = nil }

// hostBlocked notes that the host waited: no recorded event may start what
// is queued from now on.
func (e *engine) hostBlocked() { clear(e.lastRec) }

// addTimed appends a record for the watchdog and the reports.
func (e *engine) addTimed(r timed) {
	e.mu.Lock()
	e.recs = append(e.recs, r)
	e.mu.Unlock()
}

// fatal reports an error of the running plan, naming this rank, the step
// and the statement, and aborts the whole job so that no rank hangs.
func (e *engine) fatal(at Src, err error) {
	pos := ""
	if at != "" {
		pos = string(at) + ": "
	}
	fmt.Fprintf(os.Stderr, "%s: rank %d (%s): error: step %s: %s%v\n", proc.Name(), e.rank, e.h.Name, e.stepName(), pos, err)
	e.h.Abort(1)
	os.Exit(1)
}

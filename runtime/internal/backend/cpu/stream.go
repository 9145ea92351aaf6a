package cpu

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// cpuStream is a goroutine that runs queued operations in order.
type cpuStream struct {
	b     *cpuBackend
	index int
	name  string
	comm  mpi.Comm
	// hier are the communicators of hierarchical allreduces (hier.go), or
	// nil when the plan has none.
	hier *hierComms

	mu     sync.Mutex
	cond   sync.Cond
	q      []cpuOp
	spare  []cpuOp
	closed bool
	exited chan struct{}
	// held, unflushed, visible: see flush. running: claimed work is being
	// run (by the goroutine or the host), see Synchronize.
	held      bool
	unflushed bool
	visible   int
	running   bool

	// Owned by whoever runs claimed work (running).
	err       error
	debt      time.Duration
	lastYield time.Time
	scratch   []byte // C memory for MPI, see scratchBytes
	// stages are the staging buffers of out-of-place reduce-scatters
	// (into.go); the host creates them as it queues the collectives.
	stages map[stageKey]backend.Buffer
	batch  mpi.Batch // see batch.go
	// hierCmd is the batch's command index of a hierarchical allreduce's
	// piece (-1: none); phases sums the phase times of the pieces of the
	// hierarchical allreduce in progress, phased says it has some (hier.go).
	hierCmd int
	phases  [3]time.Duration
	phased  bool
	// syncMarker is the marker of Synchronize (owned by the host).
	syncMarker cpuMarker
}

// scratchBytes returns n bytes of C memory owned by the stream, for MPI
// calls that need a buffer of their own (pieces of a reduce-scatter). It
// is kept for the next call and freed when the stream closes.
func (s *cpuStream) scratchBytes(n int64) ([]byte, error) {
	if int64(len(s.scratch)) < n {
		s.freeScratch()
		p, err := mpi.Malloc(n)
		if err != nil {
			return nil, err
		}
		s.scratch = unsafe.Slice((*byte)(p), n)
	}
	return s.scratch[:n], nil
}

func (s *cpuStream) freeScratch() {
	if len(s.scratch) > 0 {
		mpi.Free(unsafe.Pointer(&s.scratch[0]))
		s.scratch = nil
	}
}

// yieldEvery bounds how long a thread runs MPI calls without passing
// through Go's scheduler. Go's system monitor forcibly takes the processor
// of a goroutine that has not been rescheduled for 10 ms, and after each
// such take it polls every 20 us for a while: on a machine with as many
// ranks as cores, each of those wake-ups preempts a rank busy inside a
// collective, far more often than the same loop of MPI calls in C is
// preempted. A runtime.Gosched shortly before the 10 ms keeps the monitor
// asleep. Not much before: a Gosched itself wakes another thread (and, for
// the host's goroutine, locked to its thread, hands the processor over and
// back), so yielding much more often makes the yields a rank's most
// frequent wake-ups (bench/results/2026-12-runtime-comments.md, "Yields").
const yieldEvery = 8 * time.Millisecond

// yieldIfDue reschedules the calling goroutine if it has run yieldEvery
// without doing so.
func (s *cpuStream) yieldIfDue() {
	if now := time.Now(); now.Sub(s.lastYield) >= yieldEvery {
		s.lastYield = now
		goruntime.Gosched()
	}
}

// cpuOp is one queued operation: Go code, a marker, or an MPI call that a
// batch runs in C (batch.go). Markers run even after the stream
// failed, so that whoever waits on them wakes up and sees the error; other
// operations are skipped then. Every kind but opFunc needs no closure:
// the steps allocate nothing (cpuEvent.record says why that matters).
type cpuOp struct {
	kind   opKind
	fn     func() error   // opFunc
	marker *cpuMarker     // opStamp, opSync, opWait
	ticket uint64         // opBarrier, opColl, opCollGo: the turn in the issue order
	coll   backend.CollOp // opColl, opCollGo
	off    int64          // opColl: the first element of the next piece
	busy   time.Duration  // opBusy
	elem   elemOp         // opFill, opCast
	train  *trainOp       // opScale, opSet, opUpdate (update.go)
}

// elemOp is the operand of an element-wise operation.
type elemOp struct {
	dst, src     []byte
	dtype, srcDT elem.DType
	fill         elem.FillParams
}

// opKind says what a cpuOp is.
type opKind uint8

const (
	opFunc    opKind = iota // Go code: fn
	opStamp                 // an event record: reads the clock
	opSync                  // the end of what the host waits for (Synchronize)
	opBarrier               // MPI_Barrier on the stream's communicator
	opColl                  // an allreduce, broadcast or reduce
	opWait                  // waits for a marker (an event of another stream)
	opBusy                  // the simulated compute: Busy
	opFill                  // Fill
	opCast                  // Cast
	opCollGo                // an allgather or reduce-scatter, run from Go (cpuBackend.run)
	opScale                 // Scale
	opSet                   // Set
	opUpdate                // Update
	opDivide                // the division before a PreDivide average
)

// isMarker says whether the op completes a marker.
func (k opKind) isMarker() bool { return k == opStamp || k == opSync }

// blocking says whether the op is an MPI call that a batch runs.
func (k opKind) blocking() bool { return k == opBarrier || k == opColl }

func newCPUStream(b *cpuBackend, index int, name string, comm mpi.Comm) *cpuStream {
	s := &cpuStream{b: b, index: index, name: name, comm: comm, exited: make(chan struct{})}
	s.cond.L = &s.mu
	go s.work()
	return s
}

func (s *cpuStream) Name() string { return s.name }

func (s *cpuStream) enqueue(op cpuOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("stream %q is closed", s.name)
	}
	s.q = append(s.q, op)
	s.unflushed = true
	return nil
}

// The worker sees queued work only when it is flushed (Flush, after the
// runtime queued a whole statement, or a host synchronisation). Work of one
// statement (a start event, a collective, its end event) then reaches the
// worker at once: otherwise a worker that finishes a short collective
// before the host has queued the end event parks, and the end event is
// stamped a wake-up later (tens of microseconds), which the bucket's time
// would wrongly include.

// flush wakes the worker for the work queued so far, unless held.
func (s *cpuStream) flush() { s.flushWake(true) }

// flushWake makes the work queued so far visible, waking the stream's
// goroutine if wake is set.
func (s *cpuStream) flushWake(wake bool) {
	s.mu.Lock()
	if s.unflushed && !s.held {
		s.unflushed = false
		s.visible = len(s.q)
	}
	if wake && s.visible > 0 {
		s.cond.Signal()
	}
	s.mu.Unlock()
}

// hold keeps the worker from seeing work queued from now on until the hold
// is lifted and the work flushed (see cpuBackend.QueueBarrier for why).
func (s *cpuStream) hold() {
	s.mu.Lock()
	s.held = true
	s.mu.Unlock()
}

// unhold lifts a hold; the next flush shows the work to the worker.
func (s *cpuStream) unhold() {
	s.mu.Lock()
	s.held = false
	s.mu.Unlock()
}

// work is the stream's goroutine.
func (s *cpuStream) work() {
	defer close(s.exited)
	s.mu.Lock()
	for {
		for (s.visible == 0 || s.running) && !s.closed {
			s.cond.Wait()
		}
		if s.running { // closed while the host runs claimed work
			s.cond.Wait()
			continue
		}
		if s.visible == 0 {
			s.mu.Unlock()
			return
		}
		s.runClaimed()
	}
}

// runClaimed claims the flushed work, runs it and ends the claim; s.mu is
// held on entry and on return, but not while the work runs.
func (s *cpuStream) runClaimed() {
	work := s.claim()
	s.mu.Unlock()
	s.execute(work)
	s.mu.Lock()
	s.finish(work)
}

// claim takes the flushed part of the queue for execution; s.mu is held.
// Whoever claims runs the work: the stream's goroutine, or the host
// waiting in Synchronize.
func (s *cpuStream) claim() []cpuOp {
	work := append(s.spare[:0], s.q[:s.visible]...)
	rest := copy(s.q, s.q[s.visible:])
	for i := rest; i < len(s.q); i++ {
		s.q[i] = cpuOp{}
	}
	s.q = s.q[:rest]
	s.visible = 0
	s.running = true
	return work
}

// finish ends the run of claimed work; s.mu is held. The
// goroutine is signalled only when work was flushed meanwhile: a wake-up
// that finds nothing to do still costs a thread switch.
func (s *cpuStream) finish(work []cpuOp) {
	s.spare = work[:0]
	s.running = false
	if s.visible > 0 || s.closed {
		s.cond.Signal()
	}
}

// execute runs claimed work in order, handing the barriers and
// collectives that C can run, with the event records around them, to C in
// batches (runBatch).
func (s *cpuStream) execute(work []cpuOp) {
	for i := 0; i < len(work); i++ {
		op := &work[i]
		switch {
		case op.kind.blocking():
			if s.err == nil {
				i = s.runBatch(work, i) - 1
				continue
			}
		case op.kind.isMarker():
			s.complete(op)
		case op.kind == opWait:
			s.waitMarker(op.marker)
		case s.err == nil:
			if err := s.run(op); err != nil {
				s.err = fmt.Errorf("stream %q: %w", s.name, err)
			}
		}
		work[i] = cpuOp{}
		s.yieldIfDue()
	}
}

// complete completes a marker on the Go side, with the stream's error.
func (s *cpuStream) complete(op *cpuOp) {
	if op.kind == opSync {
		// The stream is about to go idle: time it spent beyond what Busy
		// asked for (the fill of the buffers at set-up, a check step's
		// fill, oversleeping) is over, and must not shorten the next
		// step's backward.
		s.debt = 0
	}
	s.takePhases(op.marker)
	op.marker.complete(time.Now(), s.err)
}

// run runs an operation that Go carries out, turning a panic into an
// error so that the runtime can report it and abort the job instead of
// leaving other ranks hanging.
func (s *cpuStream) run(op *cpuOp) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	switch op.kind {
	case opBusy:
		s.sleep(op.busy)
	case opFill:
		t0 := time.Now()
		switch e := &op.elem; {
		case e.fill.Add && e.fill.Unchecked:
			// Nothing reads the sum: the first micro-batch's zeros stay.
		case e.fill.Add:
			elem.AddBytes(e.dst, e.dtype, &e.fill)
		case e.fill.Unchecked:
			elem.ClearBytes(e.dst)
		default:
			elem.FillBytes(e.dst, e.dtype, &e.fill)
		}
		s.debt += time.Since(t0)
	case opCast:
		castBytes(op.elem.dst, op.elem.dtype, op.elem.src, op.elem.srcDT)
	case opScale, opSet, opUpdate, opDivide:
		runTrain(op.kind, op.train)
	case opCollGo:
		s.b.seq.wait(op.ticket)
		defer s.b.seq.done()
		if err := s.b.run(s, &op.coll); err != nil {
			return fmt.Errorf("%s bucket %q: %w", op.coll.Coll, op.coll.Name, err)
		}
	default:
		return op.fn()
	}
	return nil
}

func (s *cpuStream) close() {
	s.mu.Lock()
	s.visible = len(s.q)
	s.closed = true
	s.cond.Signal()
	s.mu.Unlock()
	<-s.exited
	s.freeScratch()
	s.batch.Free()
}

func (s *cpuStream) Fill(dst backend.Span, p elem.FillParams) error {
	b, err := spanBytes(dst)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	return s.enqueue(cpuOp{kind: opFill, elem: elemOp{dst: b, dtype: dst.DType, fill: p}})
}

func (s *cpuStream) Cast(dst, src backend.Span) error {
	if dst.N != src.N {
		return fmt.Errorf("cast: %d elements into %d", src.N, dst.N)
	}
	db, err := spanBytes(dst)
	if err != nil {
		return fmt.Errorf("cast: %w", err)
	}
	sb, err := spanBytes(src)
	if err != nil {
		return fmt.Errorf("cast: %w", err)
	}
	return s.enqueue(cpuOp{kind: opCast, elem: elemOp{dst: db, dtype: dst.DType, src: sb, srcDT: src.DType}})
}

// castBytes converts src (elements of sdt) into dst (as many of ddt) as
// elem.CastBytes does, with runtime/mpi's vectorised C casts for f32 to
// and from f16 and bf16 (a bucket's wire), many times faster than Go's
// software conversions, to the same values (runtime/mpi's
// TestCastMatchesGo).
func castBytes(dst []byte, ddt elem.DType, src []byte, sdt elem.DType) {
	n := int64(len(src)) / sdt.Size()
	if n > 0 && int64(len(dst)) >= n*ddt.Size() && mpi.Cast(unsafe.Pointer(&dst[0]), ddt, unsafe.Pointer(&src[0]), sdt, n) {
		return
	}
	elem.CastBytes(dst, ddt, src, sdt)
}

// Busy sleeps: the host's cores stay free for communication, as a GPU's
// would. The stream keeps a debt of time already spent (fills queued before
// the Busy, and oversleeping, which on Linux is tens of microseconds) and
// pays it from the next Busy, so that many short Busy calls add up to the
// total they ask for. The debt is forgotten when the host waits for the
// stream (Synchronize), at the end of every step at the latest.
func (s *cpuStream) Busy(d time.Duration) error {
	return s.enqueue(cpuOp{kind: opBusy, busy: d})
}

// sleep runs an opBusy of d.
func (s *cpuStream) sleep(d time.Duration) {
	want := d - s.debt
	if want <= 0 {
		s.debt = -want
		return
	}
	t0 := time.Now()
	time.Sleep(want)
	s.debt = max(time.Since(t0)-want, 0)
}

func (s *cpuStream) Record(e backend.Event) error {
	ev, ok := e.(*cpuEvent)
	if !ok {
		return fmt.Errorf("record: not a CPU event")
	}
	return s.enqueue(cpuOp{kind: opStamp, marker: ev.record()})
}

func (s *cpuStream) WaitEvent(e backend.Event) error {
	ev, ok := e.(*cpuEvent)
	if !ok {
		return fmt.Errorf("wait: not a CPU event")
	}
	m := ev.waitFor()
	if m == nil {
		return nil
	}
	if err := s.enqueue(cpuOp{kind: opWait, marker: m}); err != nil {
		m.waiters.Add(-1)
		return err
	}
	return nil
}

// waitMarker runs an opWait: it waits for the marker, then lets it be
// reused (cpuEvent.record).
func (s *cpuStream) waitMarker(m *cpuMarker) {
	if s.err == nil {
		if err := m.wait(); err != nil {
			s.err = fmt.Errorf("stream %q: waiting for an event of a failed stream: %w", s.name, err)
		}
	}
	m.waiters.Add(-1)
}

// Synchronize waits for the stream's work. When the stream's goroutine is
// idle, the host runs the queued work itself instead of waking it (see
// cpuBackend.Flush for why); the other streams' goroutines are woken.
func (s *cpuStream) Synchronize() error {
	// Only the host synchronises a stream, one call at a time, and the
	// marker is done when the call returns: one marker serves every call.
	m := &s.syncMarker
	m.reset()
	err := s.enqueue(cpuOp{kind: opSync, marker: m})
	if err != nil {
		return err
	}
	// Show this stream's work without waking its goroutine, then everyone
	// else's (any of them could be what this stream waits for).
	s.unhold()
	s.flushWake(false)
	s.b.releaseOthers(s)
	s.mu.Lock()
	for !s.running && s.visible > 0 {
		s.runClaimed()
	}
	s.mu.Unlock()
	return m.wait()
}

package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/text"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// cpuBackend implements backend.Backend on the host.
type cpuBackend struct {
	h       *mpihost.Host
	tune    Tuning
	streams []*cpuStream
	bufs    []*cpuBuffer
	seq     sequencer
	// prog is the progress thread of the nonblocking mode, or nil.
	prog *progressThread
	// clock converts the clock readings of batches (batch.go).
	clock monoClock
	// divideAhead: averages are divided on the divider thread (divide.go).
	divideAhead bool
}

// Tuning holds the knobs of the CPU collectives (see tuning.go).
type Tuning struct {
	// chunkBytes splits allreduce, broadcast and reduce into pieces of at
	// most this many bytes, run one after another.
	chunkBytes int64
	// chunkSet: SYNCGEN_CPU_CHUNK chose chunkBytes.
	chunkSet bool
	// nonblocking selects the progress-thread mode (nb.go); inflight
	// is how many pieces of one collective it keeps in flight.
	nonblocking bool
	inflight    int
	// divide is SYNCGEN_CPU_DIVIDE (divide.go); it is not in the
	// Signature, since it changes no MPI call.
	divide divideChoice
	// hier: the plan has hierarchical allreduces; the streams make their
	// communicators (hier.go).
	hier bool
}

// String describes the knobs as the header shows them, naming
// SYNCGEN_CPU_CHUNK when it set the piece size.
func (t Tuning) String() string { return t.summary(t.chunkSet) }

// summary describes the knobs' values, and names SYNCGEN_CPU_CHUNK after
// the piece size when named is set.
func (t Tuning) summary(named bool) string {
	s := "collectives not split"
	if t.chunkBytes != math.MaxInt64 {
		s = "pieces of " + text.Bytes(t.chunkBytes)
		if named {
			s += " (SYNCGEN_CPU_CHUNK)"
		}
	}
	if t.nonblocking {
		s += fmt.Sprintf(", %d in flight", t.inflight)
	}
	return s
}

// chunkElems is the number of elements of dt in one piece of a large
// collective: chunkBytes of them, at least one, and within MPI's int count.
func (t Tuning) chunkElems(dt elem.DType) int64 {
	return min(max(t.chunkBytes/dt.Size(), 1), math.MaxInt32)
}

func New(h *mpihost.Host, tune Tuning) backend.Backend {
	b := &cpuBackend{h: h, tune: tune, clock: newMonoClock()}
	b.divideAhead = tune.divide.ahead(h.LocalSize, runtime.NumCPU())
	b.seq.init()
	if tune.nonblocking {
		b.prog = startProgressThread(h, tune)
	}
	return b
}

func (b *cpuBackend) Name() string { return "cpu" }

func (b *cpuBackend) Versions() []text.KV {
	major, minor := 0, 0
	_ = b.h.Do(func() error { major, minor = mpi.StandardVersion(); return nil })
	kvs := []text.KV{
		{Key: "MPI", Value: b.h.Library},
		{Key: "MPI standard", Value: fmt.Sprintf("%d.%d", major, minor)},
		{Key: "MPI thread level", Value: b.h.Level.String() + " (the runtime serialises every call)"},
		{Key: "collectives", Value: b.describe()},
	}
	if note := b.HierNote(); note != "" {
		kvs = append(kvs, text.KV{Key: "algo hierarchical", Value: note})
	}
	return kvs
}

// describe says how the backend runs collectives.
func (b *cpuBackend) describe() string {
	if b.prog != nil {
		return "nonblocking MPI calls driven by a progress thread, " + b.tune.String()
	}
	s := "blocking MPI calls in issue order, " + b.tune.String()
	if b.divideAhead {
		s += ", averages divided on a thread of their own"
	}
	if b.h.Size == 2 {
		s += ", float averages of one piece divided inside MPI's operator"
	}
	return s
}

func (b *cpuBackend) NewStream(index int, name string, prio plan.Priority) (backend.Stream, error) {
	var comm mpi.Comm
	err := b.h.Do(func() error {
		var err error
		comm, err = mpi.World().Dup()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream %q: duplicating the communicator: %w", name, err)
	}
	var hc *hierComms
	if b.tune.hier {
		err = b.h.Do(func() error {
			var err error
			hc, err = newHierComms(comm, b.h.Rank)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("stream %q: splitting the communicator by host for hierarchical allreduces: %w", name, err)
		}
	}
	s := newCPUStream(b, index, name, comm)
	s.hier = hc
	b.streams = append(b.streams, s)
	return s, nil
}

func (b *cpuBackend) NewEvent() (backend.Event, error) { return &cpuEvent{b: b}, nil }

func (b *cpuBackend) Alloc(dtype elem.DType, elems int64) (backend.Buffer, error) {
	if !dtype.Valid() || elems < 0 {
		return nil, fmt.Errorf("alloc: invalid buffer of %d %s", elems, dtype)
	}
	p, err := mpi.Malloc(elems * dtype.Size())
	if err != nil {
		return nil, err
	}
	buf := &cpuBuffer{p: p, dt: dtype, n: elems}
	b.bufs = append(b.bufs, buf)
	return buf, nil
}

func (b *cpuBackend) Elapsed(start, end backend.Event) (time.Duration, error) {
	ms, me := start.(*cpuEvent).get(), end.(*cpuEvent).get()
	if ms == nil || me == nil {
		return 0, fmt.Errorf("elapsed time of an event that was never recorded")
	}
	if !ms.completed() || !me.completed() {
		return 0, fmt.Errorf("elapsed time of an event that has not completed")
	}
	return me.t.Sub(ms.t), nil
}

func (b *cpuBackend) CopyToHost(dst []byte, src backend.Span) error {
	s, err := spanBytes(src)
	if err != nil {
		return err
	}
	if len(dst) != len(s) {
		return fmt.Errorf("copy to host: %d bytes into %d", len(s), len(dst))
	}
	copy(dst, s)
	return nil
}

func (b *cpuBackend) CopyFromHost(dst backend.Span, src []byte) error {
	d, err := spanBytes(dst)
	if err != nil {
		return err
	}
	if len(d) != len(src) {
		return fmt.Errorf("copy from host: %d bytes into %d", len(src), len(d))
	}
	copy(d, src)
	return nil
}

func (b *cpuBackend) Close() error {
	var errs []error
	for _, s := range b.streams {
		s.close()
	}
	if b.prog != nil {
		b.prog.stop()
	}
	for _, s := range b.streams {
		s := s
		if err := b.h.Do(func() error { return s.comm.Free() }); err != nil {
			errs = append(errs, fmt.Errorf("stream %q: %w", s.name, err))
		}
		if s.hier != nil {
			if err := b.h.Do(s.hier.free); err != nil {
				errs = append(errs, fmt.Errorf("stream %q: %w", s.name, err))
			}
		}
	}
	for _, buf := range b.bufs {
		mpi.Free(buf.p)
		buf.p = nil
	}
	b.bufs = nil
	return text.JoinErrors(errs)
}

// cpuBuffer is C memory.
type cpuBuffer struct {
	p  unsafe.Pointer
	dt elem.DType
	n  int64
}

func (b *cpuBuffer) DType() elem.DType { return b.dt }
func (b *cpuBuffer) Elems() int64      { return b.n }

// spanBytes returns the C memory of s as a byte slice.
func spanBytes(s backend.Span) ([]byte, error) {
	b, ok := s.Buf.(*cpuBuffer)
	if !ok || b == nil || b.p == nil {
		return nil, fmt.Errorf("span of a buffer the CPU backend did not allocate")
	}
	if s.Off < 0 || s.N < 0 || (s.Off+s.N)*s.DType.Size() > b.n*b.dt.Size() {
		return nil, fmt.Errorf("span %d+%d of %s outside a buffer of %d %s", s.Off, s.N, s.DType, b.n, b.dt)
	}
	if s.N == 0 {
		return nil, nil
	}
	p := unsafe.Add(b.p, s.Off*s.DType.Size())
	return unsafe.Slice((*byte)(p), s.N*s.DType.Size()), nil
}

// spanPtr returns the address of s's first element.
func spanPtr(s backend.Span) unsafe.Pointer {
	b := s.Buf.(*cpuBuffer)
	return unsafe.Add(b.p, s.Off*s.DType.Size())
}

// cpuEvent is an event of the CPU backend. Each Record makes a new marker;
// waits and queries use the marker current when they were issued, which is
// what CUDA's semantics ask for.
type cpuEvent struct {
	b     *cpuBackend
	curMu sync.Mutex
	cur   *cpuMarker
}

// cpuMarker is one recording of an event. A marker is reused when its
// event is recorded again (cpuEvent.record), so that the steps allocate
// nothing; a waiter blocks on a condition variable (a channel would be
// one allocation per recording that anyone waits for).
type cpuMarker struct {
	done atomic.Bool
	mu   sync.Mutex
	cond sync.Cond // L is mu, set by the first waiter that blocks
	// t and err are written before done is set, and read after it is.
	t   time.Time
	err error
	// pending, while a batch that records the marker runs, is where the
	// batch writes its clock reading (batch.go); nil otherwise.
	pending atomic.Pointer[int64]
	// waiters counts the queued operations that wait for the marker
	// (cpuStream.WaitEvent): it is not reused while any is left.
	waiters atomic.Int32
	// phases, when phased, are the phase times of the hierarchical
	// allreduce that ran just before the marker on its stream (hier.go);
	// written before done is set, like t.
	phases [3]time.Duration
	phased bool
}

// complete marks the marker done at time t, with the stream's error.
func (m *cpuMarker) complete(t time.Time, err error) {
	m.t, m.err = t, err
	m.mu.Lock()
	m.done.Store(true)
	if m.cond.L != nil {
		m.cond.Broadcast()
	}
	m.mu.Unlock()
}

// wait blocks until the marker is done and returns its error.
func (m *cpuMarker) wait() error {
	if !m.done.Load() {
		m.mu.Lock()
		if m.cond.L == nil {
			m.cond.L = &m.mu
		}
		for !m.done.Load() {
			m.cond.Wait()
		}
		m.mu.Unlock()
	}
	return m.err
}

// reset makes a done marker that nobody refers to any more new again.
func (m *cpuMarker) reset() {
	m.mu.Lock()
	m.done.Store(false)
	m.err = nil
	m.phased = false
	m.mu.Unlock()
}

// stamped says whether the stream has passed the marker: it completed, or
// a batch still running has read the clock for it.
func (m *cpuMarker) stamped() bool {
	if m.completed() {
		return true
	}
	p := m.pending.Load()
	return p != nil && atomic.LoadInt64(p) != 0
}

func (m *cpuMarker) completed() bool { return m.done.Load() }

func (e *cpuEvent) get() *cpuMarker {
	e.curMu.Lock()
	defer e.curMu.Unlock()
	return e.cur
}

// record gives the event a marker for a new recording: the previous one,
// reset, when nothing can still look at it, else a new one. Why reuse:
// with the collector paused during the steps (gcquiet.go), every
// allocation of a step is fresh memory, and the heap grows page fault by
// page fault between the ranks' collectives; a new marker per event
// (three a step) made allocation and page faults a large part of a small
// collective's step (bench/results/2026-12-runtime-comments.md, "Event
// markers"). With markers reused (and the other per-step allocations gone,
// TestStepsAllocateNothing) the steps allocate nothing.
// The previous marker is free once it completed (its stamp op ran) and no
// queued wait refers to it; the host is the only one that records, and
// the watchdog's Query looks under curMu.
func (e *cpuEvent) record() *cpuMarker {
	e.curMu.Lock()
	defer e.curMu.Unlock()
	m := e.cur
	if m == nil || !m.completed() || m.waiters.Load() != 0 {
		m = &cpuMarker{}
	} else {
		m.reset()
	}
	e.cur = m
	return m
}

// waitFor returns the event's current marker, counted as waited for, or
// nil when the event was never recorded.
func (e *cpuEvent) waitFor() *cpuMarker {
	e.curMu.Lock()
	defer e.curMu.Unlock()
	if e.cur != nil {
		e.cur.waiters.Add(1)
	}
	return e.cur
}

func (e *cpuEvent) Synchronize() error {
	e.b.releaseAll()
	m := e.get()
	if m == nil {
		return nil
	}
	return m.wait()
}

func (e *cpuEvent) Query() (bool, error) {
	// Under the lock: the watchdog queries from its own goroutine, and the
	// host may reuse the marker (record).
	e.curMu.Lock()
	defer e.curMu.Unlock()
	m := e.cur
	if m == nil {
		return true, nil
	}
	if !m.completed() {
		// Passed by a running batch: the event happened.
		return m.stamped(), nil
	}
	return true, m.err
}

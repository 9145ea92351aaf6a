package runtime

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/syncgen/syncgen/runtime/mpi"
)

// cpuStream is a goroutine that runs queued operations in order.
type cpuStream struct {
	b     *cpuBackend
	index int
	name  string
	comm  mpi.Comm

	mu     sync.Mutex
	cond   sync.Cond
	q      []cpuOp
	spare  []cpuOp
	closed bool
	held   bool
	exited chan struct{}

	// Owned by the worker goroutine.
	err  error
	debt time.Duration
}

// cpuOp is one queued operation. Markers (event records) run even after
// the stream failed, so that whoever waits on them wakes up and sees the
// error; other operations are skipped then.
type cpuOp struct {
	fn     func() error
	marker bool
}

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
	if !s.held {
		s.cond.Signal()
	}
	return nil
}

// hold keeps the worker from seeing newly queued work until release (see
// cpuBackend.QueueBarrier for why).
func (s *cpuStream) hold() {
	s.mu.Lock()
	s.held = true
	s.mu.Unlock()
}

// release lets the worker run what was queued while held.
func (s *cpuStream) release() {
	s.mu.Lock()
	if s.held {
		s.held = false
		s.cond.Signal()
	}
	s.mu.Unlock()
}

// work is the stream's goroutine.
func (s *cpuStream) work() {
	defer close(s.exited)
	for {
		s.mu.Lock()
		for (len(s.q) == 0 || s.held) && !s.closed {
			s.cond.Wait()
		}
		if len(s.q) == 0 {
			s.mu.Unlock()
			return
		}
		batch := s.q
		s.q = s.spare[:0]
		s.mu.Unlock()
		for i := range batch {
			if s.err == nil || batch[i].marker {
				if err := s.run(batch[i].fn); err != nil && s.err == nil {
					s.err = fmt.Errorf("stream %q: %w", s.name, err)
				}
			}
			batch[i] = cpuOp{}
		}
		s.mu.Lock()
		s.spare = batch[:0]
		s.mu.Unlock()
	}
}

// run calls fn, turning a panic into an error so that the runtime can
// report it and abort the job instead of leaving other ranks hanging.
func (s *cpuStream) run(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn()
}

func (s *cpuStream) close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Signal()
	s.mu.Unlock()
	<-s.exited
}

func (s *cpuStream) Fill(dst Span, p FillParams) error {
	b, err := spanBytes(dst)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	return s.enqueue(cpuOp{fn: func() error {
		t0 := time.Now()
		fillBytes(b, dst.DType, &p)
		s.debt += time.Since(t0)
		return nil
	}})
}

func (s *cpuStream) Cast(dst, src Span) error {
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
	return s.enqueue(cpuOp{fn: func() error {
		castBytes(db, dst.DType, sb, src.DType)
		return nil
	}})
}

// Busy sleeps: the host's cores stay free for communication, as a GPU's
// would. The stream keeps a debt of time already spent (fills queued before
// the Busy, and oversleeping, which on Linux is tens of microseconds) and
// pays it from the next Busy, so that many short Busy calls add up to the
// total they ask for.
func (s *cpuStream) Busy(d time.Duration) error {
	return s.enqueue(cpuOp{fn: func() error {
		want := d - s.debt
		if want <= 0 {
			s.debt = -want
			return nil
		}
		t0 := time.Now()
		time.Sleep(want)
		s.debt = max(time.Since(t0)-want, 0)
		return nil
	}})
}

func (s *cpuStream) Record(e Event) error {
	ev, ok := e.(*cpuEvent)
	if !ok {
		return fmt.Errorf("record: not a CPU event")
	}
	m := &cpuMarker{done: make(chan struct{})}
	ev.set(m)
	return s.enqueue(cpuOp{marker: true, fn: func() error {
		m.t = time.Now()
		m.err = s.err
		close(m.done)
		return nil
	}})
}

func (s *cpuStream) WaitEvent(e Event) error {
	ev, ok := e.(*cpuEvent)
	if !ok {
		return fmt.Errorf("wait: not a CPU event")
	}
	m := ev.get()
	if m == nil {
		return nil
	}
	return s.enqueue(cpuOp{fn: func() error {
		<-m.done
		if m.err != nil {
			return fmt.Errorf("waiting for an event of a failed stream: %w", m.err)
		}
		return nil
	}})
}

func (s *cpuStream) Synchronize() error {
	s.b.releaseAll()
	m := &cpuMarker{done: make(chan struct{})}
	err := s.enqueue(cpuOp{marker: true, fn: func() error {
		m.err = s.err
		close(m.done)
		return nil
	}})
	if err != nil {
		return err
	}
	<-m.done
	return m.err
}

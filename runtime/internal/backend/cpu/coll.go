package cpu

// Collectives of the CPU backend.
//
// Why blocking calls, in issue order: Open MPI 4.1's nonblocking
// collectives (coll/libnbc) are slower than its blocking ones (coll/tuned)
// at every size, by far more than the 5% a runtime may lose to a plain
// MPI_Allreduce (bench/results/2026-12-runtime-comments.md, "Blocking
// collectives"). So each stream runs its collectives itself, as blocking
// MPI calls on its own communicator.
//
// Blocking calls from several streams could deadlock (rank 0 inside stream
// A's allreduce, rank 1 inside stream B's), so the backend runs every
// collective of the process in one global order: the order in which the
// host issued them, which is program order and hence the same on every
// rank. A stream whose collective is next waits for its turn (sequencer).
// That cannot deadlock either: a statement depends only on work issued
// before it (the language guarantees it), and that work completes without
// waiting for anything issued later. The price is that collectives of
// different streams do not overlap each other on the CPU, which a single
// MPI progress thread would not give either; they still overlap compute.
//
// Why chunks: from 32 MiB on, MPI_Allreduce falls off a cliff, and the
// cause is glibc, not the algorithm: Open MPI's allreduce mallocs a
// scratch buffer as large as the message, and glibc serves a malloc above
// its mmap threshold with a fresh mapping. The threshold follows the
// largest block freed, but only up to 32 MiB, so from 32 MiB on every call
// maps, page-faults and unmaps its scratch
// (bench/results/2026-12-runtime-comments.md, "The glibc cliff"). Large
// allreduce, broadcast and reduce calls are therefore split into pieces of
// chunkBytes (SYNCGEN_CPU_CHUNK, default 1 MiB), run back to back, so the
// scratch buffers stay in glibc's heap. A piece must also end well within
// 10 ms (yieldEvery says why), and a piece whose buffer and scratch fit in
// a core's L2 cache is reduced faster per byte than a larger one, so much
// that many 1 MiB calls beat fewer 4 or 16 MiB ones (defaultCPUChunk).
// allgather and reducescatter are split the same way, a piece being the same
// elements of every rank's block (chunkBytes in all): an allgather piece
// is one MPI_Allgather with a datatype whose extent is a whole block, a
// reducescatter piece one MPI_Reduce_scatter_block on the pieces copied
// side by side into a scratch buffer (the reduction wants them
// contiguous).

import (
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// sequencer hands out turns in issue order.
type sequencer struct {
	mu     sync.Mutex
	cond   sync.Cond
	issued uint64
	next   uint64
}

func (q *sequencer) init() { q.cond.L = &q.mu }

// take returns the next ticket (called by the host, in program order).
func (q *sequencer) take() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.issued
	q.issued++
	return t
}

// wait blocks until ticket t is next.
func (q *sequencer) wait(t uint64) {
	q.mu.Lock()
	for q.next != t {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// done ends the current turn.
func (q *sequencer) done() { q.doneN(1) }

// doneN ends the current turn and the n-1 after it (a batch's).
func (q *sequencer) doneN(n uint64) {
	if n == 0 {
		return
	}
	q.mu.Lock()
	q.next += n
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (b *cpuBackend) Collectives(ops []backend.CollOp) error {
	for i := range ops {
		op := &ops[i]
		s, ok := op.Stream.(*cpuStream)
		if !ok {
			return fmt.Errorf("%s %q: not a CPU stream", op.Coll, op.Name)
		}
		if _, err := spanBytes(op.Buf); err != nil && op.Buf.N > 0 {
			return fmt.Errorf("%s %q: %w", op.Coll, op.Name, err)
		}
		if op.Out.N > 0 {
			if err := b.queueInto(s, op); err != nil {
				return fmt.Errorf("%s %q: %w", op.Coll, op.Name, err)
			}
			continue
		}
		if (op.Coll == plan.CollAllGather || op.Coll == plan.CollReduceScatter) && op.Buf.N%int64(b.h.Size) != 0 {
			return fmt.Errorf("%s %q: %d elements do not split into %d ranks", op.Coll, op.Name, op.Buf.N, b.h.Size)
		}
		if op.PreDivide && op.Op == plan.Avg && op.Buf.N > 0 {
			// Every rank's input divided first, then summed (CollOp).
			buf, _ := spanBytes(op.Buf)
			if err := s.enqueue(cpuOp{kind: opDivide, train: &trainOp{buf: buf, dtype: op.Buf.DType, factor: float64(b.h.Size)}}); err != nil {
				return err
			}
			summed := *op
			summed.Op = plan.Sum
			op = &summed
		}
		if err := b.queueColl(s, op); err != nil {
			return err
		}
	}
	for i := range ops {
		ops[i].Stream.(*cpuStream).unhold()
	}
	return nil
}

// queueColl queues in-place collective op on stream s, in the way of the
// backend's mode: batched, run by the stream in Go, or by the progress
// thread.
func (b *cpuBackend) queueColl(s *cpuStream, op *backend.CollOp) error {
	if b.prog == nil && batchable(op.Coll) {
		return s.enqueue(cpuOp{kind: opColl, ticket: b.seq.take(), coll: *op})
	}
	if b.prog == nil {
		return s.enqueue(cpuOp{kind: opCollGo, ticket: b.seq.take(), coll: *op})
	}
	// Nonblocking mode: the progress thread runs it (nb.go). The queue
	// outlives op (the caller reuses it): a copy.
	c := *op
	return s.enqueue(cpuOp{fn: func() error {
		if err := b.prog.run(s, &c); err != nil {
			return fmt.Errorf("%s bucket %q: %w", c.Coll, c.Name, err)
		}
		return nil
	}})
}

// run performs an allgather or reduce-scatter on stream s's communicator
// (allreduce, broadcast and reduce run in batches, batch.go).
func (b *cpuBackend) run(s *cpuStream, op *backend.CollOp) error {
	n := op.Buf.N
	if n == 0 {
		return nil
	}
	if op.Coll != plan.CollAllGather && op.Coll != plan.CollReduceScatter {
		return fmt.Errorf("%s is not run piecewise", op.Coll)
	}
	dt := op.Buf.DType
	esz := dt.Size()
	base := spanPtr(op.Buf)
	per := n / int64(b.h.Size)
	// A piece holds the same elements of every rank's block, chunkBytes in
	// all.
	piece := max(b.tune.chunkElems(dt)/int64(b.h.Size), 1)
	if per <= piece {
		return b.blocks(s, op, base, per)
	}
	for off := int64(0); off < per; off += piece {
		cnt := min(piece, per-off)
		var err error
		if op.Coll == plan.CollAllGather {
			b.h.Lock()
			err = s.comm.AllgatherStrided(unsafe.Add(base, off*esz), int(cnt), per, dt)
			b.h.Unlock()
		} else {
			err = b.reduceScatterPiece(s, op, base, per, off, cnt)
		}
		if err != nil {
			return fmt.Errorf("elements %d..%d of each rank's %d: %w", off, off+cnt, per, err)
		}
		s.yieldIfDue()
	}
	if op.Coll == plan.CollReduceScatter && op.Op == plan.Avg {
		mine := unsafe.Slice((*byte)(unsafe.Add(base, int64(b.h.Rank)*per*esz)), per*esz)
		divideAvg(mine, dt, b.h.Size)
	}
	return nil
}

// blocks runs an allgather or reduce-scatter in one MPI call, in place on
// size blocks of per elements.
func (b *cpuBackend) blocks(s *cpuStream, op *backend.CollOp, base unsafe.Pointer, per int64) error {
	if per > math.MaxInt32 {
		return fmt.Errorf("%d elements per rank exceed MPI's int count", per)
	}
	dt := op.Buf.DType
	b.h.Lock()
	defer b.h.Unlock()
	if op.Coll == plan.CollAllGather {
		return s.comm.Allgather(base, int(per), dt)
	}
	if err := s.comm.ReduceScatterBlock(base, int(per), dt, mpi.Op(op.Op)); err != nil {
		return err
	}
	// MPI leaves rank r's reduced block at the start of the buffer; NCCL's
	// in-place form leaves it in block r. Move it there.
	esz := dt.Size()
	rank := b.h.Rank
	mine := unsafe.Slice((*byte)(unsafe.Add(base, int64(rank)*per*esz)), per*esz)
	if rank != 0 {
		copy(mine, unsafe.Slice((*byte)(base), per*esz))
	}
	if op.Op == plan.Avg {
		divideAvg(mine, dt, b.h.Size)
	}
	return nil
}

// reduceScatterPiece reduce-scatters elements off..off+cnt of every rank's
// block of per elements: MPI's reduce-scatter wants the pieces side by
// side, so they are copied into the stream's scratch buffer, reduced there
// in place, and this rank's result copied back into its block.
func (b *cpuBackend) reduceScatterPiece(s *cpuStream, op *backend.CollOp, base unsafe.Pointer, per, off, cnt int64) error {
	esz := op.Buf.DType.Size()
	size := int64(b.h.Size)
	scratch, err := s.scratchBytes(size * cnt * esz)
	if err != nil {
		return err
	}
	at := func(block, elem, n int64) []byte {
		return unsafe.Slice((*byte)(unsafe.Add(base, (block*per+elem)*esz)), n*esz)
	}
	for r := int64(0); r < size; r++ {
		copy(scratch[r*cnt*esz:], at(r, off, cnt))
	}
	b.h.Lock()
	err = s.comm.ReduceScatterBlock(unsafe.Pointer(&scratch[0]), int(cnt), op.Buf.DType, mpi.Op(op.Op))
	b.h.Unlock()
	if err != nil {
		return err
	}
	copy(at(int64(b.h.Rank), off, cnt), scratch[:cnt*esz])
	return nil
}

// QueueBarrier implements backend.StepAligner: two barriers on s's communicator,
// in the global issue order like every collective.
//
// Two, because the ranks reach the step's start far apart (each host has
// just done its own bookkeeping for the previous step), and a barrier
// releases the rank that arrives last first: the others learn of its
// arrival a message later, and the collective that follows starts with
// them late, which its time then includes. The second barrier finds the
// ranks together and releases them together, which a small collective's
// time shows (bench/results/2026-12-runtime-comments.md, "Two barriers").
//
// The stream is held from the barrier until its first collective has been
// queued and flushed (or the host blocks on any stream): otherwise the rank
// that reaches the barrier last leaves it at once, finds nothing more queued
// while its host is still issuing the step, and parks, and the wake-up (tens
// of microseconds) lands between the barrier and the collective, where every
// other rank waits for it. Held, the barrier and the collective run back to
// back on the stream's thread, as in a plain MPI program.
func (b *cpuBackend) QueueBarrier(st backend.Stream) error {
	s, ok := st.(*cpuStream)
	if !ok {
		return fmt.Errorf("barrier: not a CPU stream")
	}
	s.hold()
	if b.prog != nil {
		return s.enqueue(cpuOp{fn: func() error { return b.prog.barrier(s) }})
	}
	for range 2 {
		if err := s.enqueue(cpuOp{kind: opBarrier, ticket: b.seq.take()}); err != nil {
			return err
		}
	}
	return nil
}

// EventTime implements backend.StepAligner.
func (b *cpuBackend) EventTime(e backend.Event) (time.Time, error) {
	m := e.(*cpuEvent).get()
	if m == nil || !m.completed() {
		return time.Time{}, fmt.Errorf("the event has not completed")
	}
	return m.t, nil
}

// Flush implements backend.Flusher: the runtime queued a whole statement. The work
// becomes visible to stream goroutines that are running, but idle ones are
// not woken: the host wakes them when it blocks (Synchronize), and runs the
// stream it waits for itself. Waking a goroutine costs a thread wake-up,
// and on a machine with as many ranks as cores every extra runnable thread
// around a collective slows it down; "queue a collective, wait for it" then
// runs the collective on the host's thread, as a plain MPI program does.
// The host issues a step's statements in microseconds and then waits, so
// the streams start at most that much later than they were queued.
func (b *cpuBackend) Flush() {
	for _, s := range b.streams {
		s.flushWake(false)
	}
}

// Start implements backend.Flusher.
func (b *cpuBackend) Start() { b.releaseAll() }

// releaseAll lifts every hold and flushes every stream: the host is about
// to block, and any stream could be what it waits for.
func (b *cpuBackend) releaseAll() { b.releaseOthers(nil) }

// releaseOthers is releaseAll except for stream self, whose work the host
// is about to run itself (Synchronize).
func (b *cpuBackend) releaseOthers(self *cpuStream) {
	for _, s := range b.streams {
		if s != self {
			s.unhold()
			s.flush()
		}
	}
}

// Barrier implements backend.Barrierer: one MPI barrier on s's
// communicator, in the global issue order like every collective (the
// nonblocking mode's progress thread runs it as an MPI_Ibarrier).
func (b *cpuBackend) Barrier(st backend.Stream) error {
	s, ok := st.(*cpuStream)
	if !ok {
		return fmt.Errorf("barrier: not a CPU stream")
	}
	if b.prog != nil {
		return s.enqueue(cpuOp{fn: func() error { return b.prog.barrier(s) }})
	}
	return s.enqueue(cpuOp{kind: opBarrier, ticket: b.seq.take()})
}

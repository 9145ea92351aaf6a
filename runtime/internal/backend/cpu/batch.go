package cpu

// Batches: a stream hands its barrier, its timing events and its
// collective to C in one call (mpi.Batch).
//
// Why: every call from Go into C costs a Go process more than the call
// itself: the scheduler's bookkeeping on the way in and out, and, when Go's
// system monitor sleeps, a wake-up of it. A small collective takes a few
// microseconds, so the Go code between the step's barrier, the start event,
// the MPI call and the end event shows in its time: a loop of small
// allreduces called from Go loses much of C's bandwidth, and less when the
// whole loop runs in one call into C
// (bench/results/2026-12-runtime-comments.md, "Batches"). In a batch the
// barrier, the clock reads and the collective run back to back in C, as
// in a plain MPI program.
//
// A batch starts at a barrier or collective (clock reads queued before it
// run alone, on the Go side, so that whoever waits for them is not held up
// by the collective), takes the barriers and clock reads that follow, at
// most one collective, and the clock reads after it: the end event is
// published as soon as the collective is done. A collective larger than
// one piece (SYNCGEN_CPU_CHUNK) ends the batch after its first piece and
// takes one batch per piece after that. Batched barriers and
// collectives keep their place in the backend's global issue order
// (sequencer): a batch takes consecutive turns only.

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// batchable says whether the blocking CPU backend runs collective c in a
// batch; allgather and reduce-scatter pieces need Go code between their MPI
// calls (coll.go).
func batchable(c plan.Coll) bool {
	return c == plan.CollAllReduce || c == plan.CollBroadcast || c == plan.CollReduce
}

// runBatch runs ops[first:] up to the end of one batch, starting at the
// blocking operation ops[first], and returns the index of the first
// operation it did not run.
func (s *cpuStream) runBatch(ops []cpuOp, first int) int {
	s.batch.Reset()
	s.hierCmd = -1
	end, turns, partial := s.fillBatch(ops, first)
	done, err := s.runFilled(ops, first, turns)
	if s.hierCmd >= 0 && done > s.hierCmd {
		s.addPhases(s.batch.Phases(s.hierCmd))
	}
	if partial && err == nil {
		// Back to Go between the pieces of a large collective, as before
		// batches: the stream yields when due (yieldIfDue), which with
		// more ranks than cores beat running every piece in one call
		// into C (bench/results/2026-12-runtime-comments.md, "Batches").
		ops[end].off += s.b.tune.chunkElems(ops[end].coll.Buf.DType)
	}
	s.completeMarkers(ops, first, end, done)
	if err != nil {
		s.err = fmt.Errorf("stream %q: %w", s.name, s.batchError(&ops[first+done], err))
		// The markers after the failed call are published by the Go path,
		// with the error, like every marker after a failure.
		clear(ops[first : first+done+1])
		return first + done + 1
	}
	clear(ops[first:end])
	s.yieldIfDue()
	return end
}

// fillBatch adds ops[first:] to the stream's batch up to the end of one
// batch: operations that follow each other in the stream's turn order, at
// most one collective, and of a large collective one piece. It returns the
// index of the first operation left out, how many turns the batch takes,
// and whether it ends inside a collective (more pieces to come).
func (s *cpuStream) fillBatch(ops []cpuOp, first int) (end int, turns uint64, partial bool) {
	nb := &s.batch
	firstTicket := ops[first].ticket
	next := firstTicket
	end = first
	sawColl := false
loop:
	for ; end < len(ops) && !nb.Full(); end++ {
		op := &ops[end]
		if op.kind.blocking() && (sawColl || op.ticket != next) {
			break
		}
		switch op.kind {
		case opStamp:
			// The watchdog may ask whether the event happened while the
			// batch runs (cpuMarker.stamped).
			op.marker.pending.Store(nb.Stamp())
			continue
		case opBarrier:
			nb.Barrier(s.comm)
		case opColl:
			if !s.addPiece(op) {
				// More pieces to come: the batch ends here, and the
				// collective keeps its turn until its last piece.
				partial = true
				break loop
			}
			sawColl = true
		default:
			break loop
		}
		next++
	}
	return end, next - firstTicket, partial
}

// runFilled runs the batch in its turn, holding the MPI lock. It returns
// how many of its operations succeeded, and the error of the next.
func (s *cpuStream) runFilled(ops []cpuOp, first int, turns uint64) (int, error) {
	b := s.b
	b.seq.wait(ops[first].ticket)
	b.h.Lock()
	done, err := s.batch.Run()
	b.h.Unlock()
	if err != nil {
		// The turns up to the failed call are used; the job is about to
		// end (the stream's error reaches the host), as on the Go path.
		turns = 0
		for i := first; i <= first+done; i++ {
			if ops[i].kind.blocking() {
				turns++
			}
		}
	}
	b.seq.doneN(turns)
	return done, err
}

// completeMarkers publishes the events of ops[first:end]: those of the
// done operations that ran complete at the times the batch read.
func (s *cpuStream) completeMarkers(ops []cpuOp, first, end, done int) {
	b, nb := s.b, &s.batch
	afterColl := false
	for i := first; i < end; i++ {
		afterColl = afterColl || ops[i].kind == opColl
		if m := ops[i].marker; m != nil {
			m.pending.Store(nil)
			if i < first+done {
				if afterColl {
					s.takePhases(m)
				}
				m.complete(b.clock.at(nb.Time(i-first)), nil)
			}
		}
	}
}

// batchError names what failed: the step barrier, a piece of a large
// collective, or a collective.
func (s *cpuStream) batchError(failed *cpuOp, err error) error {
	switch c := failed.coll; {
	case failed.kind == opBarrier:
		return fmt.Errorf("step barrier: %w", err)
	case c.Buf.N > s.b.tune.chunkElems(c.Buf.DType):
		piece := min(s.b.tune.chunkElems(c.Buf.DType), c.Buf.N-failed.off)
		return fmt.Errorf("%s bucket %q: elements %d..%d of %d: %w", c.Coll, c.Name, failed.off, failed.off+piece, c.Buf.N, err)
	default:
		return fmt.Errorf("%s bucket %q: %w", c.Coll, c.Name, err)
	}
}

// addPiece appends the next piece of op's collective, from element op.off,
// to the stream's batch, and says whether it is the last.
func (s *cpuStream) addPiece(op *cpuOp) (last bool) {
	c := &op.coll
	chunk := s.b.tune.chunkElems(c.Buf.DType)
	n := c.Buf.N - op.off
	last = n <= chunk
	n = min(n, chunk)
	x := mpi.Coll{
		Comm:  s.comm,
		Buf:   unsafe.Add(spanPtr(c.Buf), op.off*c.Buf.DType.Size()),
		Count: n,
		Chunk: chunk,
		DType: c.Buf.DType,
		Op:    mpi.Op(c.Op),
		Root:  c.Root,
		Rank:  s.b.h.Rank,
		Size:  s.b.h.Size,
	}
	// A collective of one piece is not divided ahead even with the divider
	// on: there is no next piece to overlap, and the half the divider
	// would take must come back from its core's cache. At two ranks MPI's
	// operator divides it instead; both ranks choose so, since they agree
	// on the plan, the world and the piece size (and MPI needs the same
	// operator on both), where SYNCGEN_CPU_DIVIDE may differ.
	onePiece := op.off == 0 && last
	switch {
	case c.Op != plan.Avg:
	case onePiece && s.b.h.Size == 2:
		x.Divide = mpi.DivideInOperator
	case s.b.divideAhead && !onePiece:
		x.Divide = mpi.DivideAhead
		if last {
			x.Divide = mpi.DivideLast
		}
	}
	switch c.Coll {
	case plan.CollAllReduce:
		if hc := s.hier; c.Hier && hc != nil && hc.even {
			x.Intra, x.Inter, x.LocalRank, x.LocalSize = hc.intra, hc.inter, hc.lrank, hc.lsize
			s.hierCmd = s.batch.Len()
			s.batch.AllreduceHier(x)
			break
		}
		s.batch.Allreduce(x)
	case plan.CollBroadcast:
		s.batch.Bcast(x)
	case plan.CollReduce:
		s.batch.Reduce(x)
	}
	return last
}

// monoClock turns the monotonic clock readings of a batch into time.Time
// values that compare exactly with time.Now's: Go reads the same clock
// (CLOCK_MONOTONIC), so one reading of both, taken once, relates them.
type monoClock struct {
	base   time.Time
	baseNS int64
}

// newMonoClock relates the two clocks, keeping the tightest of a few tries
// (a call into C between two reads of Go's clock).
func newMonoClock() monoClock {
	var c monoClock
	best := int64(math.MaxInt64)
	for range 8 {
		a := mpi.MonotonicNanos()
		now := time.Now()
		z := mpi.MonotonicNanos()
		if z-a < best {
			best = z - a
			c = monoClock{base: now, baseNS: a + (z-a)/2}
		}
	}
	return c
}

// at converts a reading of mpi.MonotonicNanos.
func (c monoClock) at(ns int64) time.Time { return c.base.Add(time.Duration(ns - c.baseNS)) }

package mpi

/*
#include <stdlib.h>
#include "sg_mpi.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// Batch is a list of MPI calls and clock reads that Run performs in one
// call into C, back to back. A Go process pays for every call into C more
// than the call itself (the scheduler's bookkeeping on the way in and out,
// and waking Go's system monitor when it sleeps), which shows in a
// collective of a few microseconds; a batch pays it once for a barrier, the
// clock reads around a collective and the collective, so that they run as
// close together as in a plain C program.
//
// A batch holds at most BatchCap commands, in C memory allocated on first
// use and kept until Free (never moved, so that StampAddr stays valid). A
// Batch is not safe for concurrent use.
type Batch struct {
	cmds []C.sg_cmd // C memory, BatchCap long
	n    int
}

// BatchCap is the most commands a Batch holds.
const BatchCap = 64

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() { b.n = 0 }

// Len returns the number of commands.
func (b *Batch) Len() int { return b.n }

// Full says whether the batch holds BatchCap commands.
func (b *Batch) Full() bool { return b.n == BatchCap }

// Free releases the batch's C memory.
func (b *Batch) Free() {
	if len(b.cmds) > 0 {
		C.free(unsafe.Pointer(&b.cmds[0]))
	}
	b.cmds, b.n = nil, 0
}

// add appends a zeroed command and returns it.
func (b *Batch) add(kind C.int32_t) *C.sg_cmd {
	if b.cmds == nil {
		p := C.calloc(BatchCap, C.size_t(unsafe.Sizeof(C.sg_cmd{})))
		if p == nil {
			panic("mpi: out of C memory for a batch")
		}
		b.cmds = unsafe.Slice((*C.sg_cmd)(p), BatchCap)
	}
	if b.n == BatchCap {
		panic("mpi: batch full")
	}
	c := &b.cmds[b.n]
	*c = C.sg_cmd{kind: kind}
	b.n++
	return c
}

// Barrier appends an MPI_Barrier on comm.
func (b *Batch) Barrier(comm Comm) {
	c := b.add(C.SG_CMD_BARRIER)
	c.comm = comm.c
}

// Stamp appends a read of the monotonic clock and returns where the batch
// will write it: zero until the read is done, which another goroutine may
// watch with atomic.LoadInt64 while Run is in progress (until the next
// Reset). Time returns it after Run.
func (b *Batch) Stamp() *int64 {
	c := b.add(C.SG_CMD_STAMP)
	return (*int64)(unsafe.Pointer(&c.t))
}

// Coll describes one in-place allreduce, broadcast or reduce of a batch.
type Coll struct {
	Comm       Comm
	Buf        unsafe.Pointer // C memory
	Count      int64          // elements
	Chunk      int64          // elements per MPI call (a large collective runs in pieces)
	DType      elem.DType
	Op         Op  // allreduce and reduce; Avg sums, then divides by Size
	Root       int // broadcast and reduce
	Rank, Size int // this rank in Comm, and Comm's size
	// Divide says where an average's division runs (zero: DivideInline).
	Divide Divide
	// AllreduceHier only: the ranks of Comm on this host (Intra, where
	// this rank is LocalRank of LocalSize) and those with this rank's
	// local rank on every host (Inter).
	Intra, Inter         Comm
	LocalRank, LocalSize int
}

// Divide is where a batch divides the result of an average, piece by
// piece. Every choice gives the same values; they differ in which thread
// pays for the pass over the buffer.
type Divide int32

const (
	// DivideInline divides each piece on the MPI thread, after its call.
	DivideInline Divide = C.SG_AVG_INLINE
	// DivideAhead hands each piece to the divider thread, which divides it
	// while the MPI thread runs what follows (the next piece).
	DivideAhead Divide = C.SG_AVG_POST
	// DivideLast marks the last piece of a collective whose other pieces
	// went ahead: the two threads split it, and the command ends once
	// every division handed over is done.
	DivideLast Divide = C.SG_AVG_LAST
	// DivideInOperator divides inside MPI's operator, which adds and then
	// divides each block as MPI reduces it: exact only where MPI applies
	// the operator once to each element, a Comm of two ranks, so the
	// batch does so for float averages over two ranks and divides inline
	// otherwise. Both ranks must choose it for the same collective.
	DivideInOperator Divide = C.SG_AVG_OP
)

// Allreduce appends an in-place allreduce.
func (b *Batch) Allreduce(x Coll) { b.coll(C.SG_CMD_ALLREDUCE, x) }

// AllreduceHier appends an in-place allreduce in the hierarchical form:
// reduce-scatter on x.Intra, allreduce of this rank's block on x.Inter,
// allgather on x.Intra. Every host must hold the same number of ranks.
func (b *Batch) AllreduceHier(x Coll) {
	b.coll(C.SG_CMD_ALLREDUCE_HIER, x)
	c := &b.cmds[b.n-1]
	c.intra = x.Intra.c
	c.inter = x.Inter.c
	c.lrank = C.int32_t(x.LocalRank)
	c.lsize = C.int32_t(x.LocalSize)
}

// Bcast appends a broadcast from x.Root.
func (b *Batch) Bcast(x Coll) { b.coll(C.SG_CMD_BCAST, x) }

// Reduce appends an in-place reduce onto x.Root; the other ranks' buffers
// are left unchanged.
func (b *Batch) Reduce(x Coll) { b.coll(C.SG_CMD_REDUCE, x) }

func (b *Batch) coll(kind C.int32_t, x Coll) {
	c := b.add(kind)
	c.comm = x.Comm.c
	c.buf = x.Buf
	c.count = C.int64_t(x.Count)
	c.chunk = C.int64_t(x.Chunk)
	c.dtype = C.int32_t(x.DType)
	c.op = C.int32_t(x.Op)
	if x.Op == Avg {
		c.avg = C.int32_t(max(x.Divide, DivideInline))
	}
	c.root = C.int32_t(x.Root)
	c.rank = C.int32_t(x.Rank)
	c.size = C.int32_t(x.Size)
}

// Avg is the reduction code of an average (package plan's RedOp Avg):
// MPI sums, then the batch divides by the number of ranks.
const Avg Op = C.SG_AVG

// Run performs the commands in order and returns how many succeeded; when
// that is less than Len, err says why the next one failed.
func (b *Batch) Run() (int, error) {
	if b.n == 0 {
		return 0, nil
	}
	done := int(C.sg_run(&b.cmds[0], C.int(b.n)))
	if done == b.n {
		return done, nil
	}
	c := &b.cmds[done]
	err := check(callName(c.kind), c.rc)
	if c.count > 0 && c.chunk > 0 && c.count > c.chunk {
		end := min(int64(c.at)+int64(c.chunk), int64(c.count))
		err = fmt.Errorf("elements %d..%d of %d: %w", int64(c.at), end, int64(c.count), err)
	}
	return done, err
}

// Time returns the clock read by command i (a Stamp) in the last Run, in
// the nanoseconds of MonotonicNanos.
func (b *Batch) Time(i int) int64 { return int64(b.cmds[i].t) }

// Phases returns, for command i of the last Run (an AllreduceHier), the
// nanoseconds its reduce-scatter inside the host, allreduce across hosts
// and allgather inside the host took, summed over its pieces.
func (b *Batch) Phases(i int) [3]int64 {
	c := &b.cmds[i]
	return [3]int64{int64(c.phase_ns[0]), int64(c.phase_ns[1]), int64(c.phase_ns[2])}
}

func callName(kind C.int32_t) string {
	switch kind {
	case C.SG_CMD_BARRIER:
		return "MPI_Barrier"
	case C.SG_CMD_ALLREDUCE:
		return "MPI_Allreduce"
	case C.SG_CMD_ALLREDUCE_HIER:
		return "hierarchical allreduce (MPI_Reduce_scatter, MPI_Allreduce, MPI_Allgatherv)"
	case C.SG_CMD_BCAST:
		return "MPI_Bcast"
	case C.SG_CMD_REDUCE:
		return "MPI_Reduce"
	}
	return fmt.Sprintf("batch command %d", int(kind))
}

// MonotonicNanos reads CLOCK_MONOTONIC, the clock of Batch.Time (and of Go's
// own monotonic readings on Linux).
func MonotonicNanos() int64 { return int64(C.sg_monotonic_ns()) }

package cpu

// Out-of-place collectives (backend.CollOp.Out) on the CPU backend.
//
// Each runs as the in-place collective on the output, after a copy of the
// input into it on the same stream: an allreduce, broadcast or reduce
// copies the input into the output and works there; an allgather copies
// it into this rank's slice of the output and gathers in place; a
// reduce-scatter copies it into a staging buffer of the stream, reduces
// there in place and copies this rank's slice out. So one implementation
// of each collective, with its pieces, batches, nonblocking mode and
// hierarchical form, serves both forms, and the input is never written.
// The copies are part of the collective's time, as the reads of a
// separate send buffer are part of MPI's out-of-place calls.

import (
	"fmt"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// queueInto queues out-of-place collective op on stream s.
func (b *cpuBackend) queueInto(s *cpuStream, op *backend.CollOp) error {
	size, rank := int64(b.h.Size), int64(b.h.Rank)
	if op.Out.DType != op.Buf.DType {
		return fmt.Errorf("out of place from %s into %s", op.Buf.DType, op.Out.DType)
	}
	in := *op
	in.Out = backend.Span{}
	in.Buf = op.Out
	switch op.Coll {
	case plan.CollAllReduce, plan.CollBroadcast, plan.CollReduce:
		if op.Out.N != op.Buf.N {
			return fmt.Errorf("%d elements into %d", op.Buf.N, op.Out.N)
		}
		if err := s.Cast(op.Out, op.Buf); err != nil {
			return err
		}
		return b.queueColl(s, &in)
	case plan.CollAllGather:
		if op.Out.N != size*op.Buf.N {
			return fmt.Errorf("%d elements gathered into %d, want %d", op.Buf.N, op.Out.N, size*op.Buf.N)
		}
		mine := op.Out
		mine.Off += rank * op.Buf.N
		mine.N = op.Buf.N
		if err := s.Cast(mine, op.Buf); err != nil {
			return err
		}
		return b.queueColl(s, &in)
	case plan.CollReduceScatter:
		if op.Buf.N != size*op.Out.N {
			return fmt.Errorf("%d elements scattered into %d each, want %d", op.Buf.N, op.Out.N, op.Buf.N/size)
		}
		stage, err := s.stage(op.Buf.DType, op.Buf.N)
		if err != nil {
			return err
		}
		in.Buf = stage
		if err := s.Cast(stage, op.Buf); err != nil {
			return err
		}
		if err := b.queueColl(s, &in); err != nil {
			return err
		}
		mine := stage
		mine.Off = rank * op.Out.N
		mine.N = op.Out.N
		return s.Cast(op.Out, mine)
	}
	return fmt.Errorf("no out-of-place form of %s", op.Coll)
}

// stageKey names a staging buffer: its dtype and length.
type stageKey struct {
	dt elem.DType
	n  int64
}

// stage returns the stream's staging buffer of n elements of dt for
// out-of-place reduce-scatters, allocated the first time (the plan's
// lengths are fixed, so there are few) and freed with the backend. The
// stream's operations run one after another, so the collectives that
// share one never overlap.
func (s *cpuStream) stage(dt elem.DType, n int64) (backend.Span, error) {
	k := stageKey{dt, n}
	if buf, ok := s.stages[k]; ok {
		return backend.Span{Buf: buf, N: n, DType: dt}, nil
	}
	buf, err := s.b.Alloc(dt, n)
	if err != nil {
		return backend.Span{}, fmt.Errorf("staging buffer: %w", err)
	}
	if s.stages == nil {
		s.stages = map[stageKey]backend.Buffer{}
	}
	s.stages[k] = buf
	return backend.Span{Buf: buf, N: n, DType: dt}, nil
}

package predict

import (
	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

// Schedule converts the step of prog, run at ranks ranks, to the cost
// model's schedule. Collectives are numbered as the runtime numbers its
// table's rows: one id per collective statement, group members included,
// in program order.
func Schedule(prog *ir.Program, ranks int) *costmodel.Schedule {
	s := &costmodel.Schedule{Ranks: ranks}
	for _, st := range prog.Streams {
		s.Streams = append(s.Streams, st.Name)
	}
	for i := range prog.Tensors {
		t := &prog.Tensors[i]
		s.Tensors = append(s.Tensors, costmodel.Tensor{Bytes: t.Bytes(), Bucket: t.Bucket, Frozen: t.Frozen})
	}
	for i := range prog.Buckets {
		b := &prog.Buckets[i]
		cb := costmodel.Bucket{Name: b.Name, Bytes: prog.ElemsAt(i, ranks) * b.Wire.Size(), DType: b.Wire.String()}
		for _, ti := range b.Tensors {
			t := &prog.Tensors[ti]
			if t.DType != b.Wire {
				// Read in one dtype, written in the other.
				// Saturated: a tensor the checker accepts may have
				// more bytes than an int64 holds.
				cb.CastBytes = costmodel.SatAdd(cb.CastBytes,
					costmodel.SatAdd(costmodel.SatMul(t.Elems, t.DType.Size()), costmodel.SatMul(t.Elems, b.Wire.Size())))
			}
		}
		s.Buckets = append(s.Buckets, cb)
	}
	id := 0
	s.Step = costmodel.Accumulate(ops(prog, ranks, prog.Step, &id), prog.Accumulate)
	return s
}

// ops converts statements; id numbers the collectives.
func ops(prog *ir.Program, ranks int, stmts []ir.Stmt, id *int) []costmodel.Op {
	var out []costmodel.Op
	for i := range stmts {
		st := &stmts[i]
		o := costmodel.Op{Stream: st.Stream, Dur: st.Duration, Buckets: st.Buckets, AfterStream: st.After.Stream}
		switch st.After.Kind {
		case ir.AfterReady:
			o.After = costmodel.AfterReady
		case ir.AfterStream:
			o.After = costmodel.AfterStream
		case ir.AfterSynced:
			o.After = costmodel.AfterSynced
		}
		switch st.Kind {
		case ir.StmtBackward:
			o.Kind = costmodel.OpBackward
			o.Tensors = st.Tensors
		case ir.StmtCompute:
			o.Kind = costmodel.OpCompute
		case ir.StmtWait:
			o.Kind = costmodel.OpWait
		case ir.StmtGroup:
			o.Kind = costmodel.OpGroup
			o.Body = ops(prog, ranks, st.Body, id)
		case ir.StmtCollective:
			o.Kind = costmodel.OpCollective
			o.Collective = st.Collective.String()
			if st.Op != ir.NoOp {
				o.Op = st.Op.String()
			}
			o.ID = *id
			*id++
			for k, b := range st.Buckets {
				if k < len(st.Into) {
					o.Bytes = append(o.Bytes, intoBytes(prog, st.Collective, b, st.Into[k], ranks))
					continue
				}
				o.Bytes = append(o.Bytes, movedBytes(st.Collective, prog, b, ranks))
			}
		case ir.StmtUpdate:
			o.Kind = costmodel.OpUpdate
			states := 0
			switch {
			case st.Update.Optimizer == ir.AdamW:
				states = 2
			case st.Update.Momentum != 0:
				states = 1
			}
			for _, b := range st.Buckets {
				bk := &prog.Buckets[b]
				o.Bytes = append(o.Bytes, costmodel.UpdateBytes(states, bk.Elems, costmodel.SatMul(bk.Elems, bk.Wire.Size())))
			}
		case ir.StmtUnscale:
			o.Kind = costmodel.OpUnscale
			o.Agree = st.Agree
		default:
			continue
		}
		out = append(out, o)
	}
	return out
}

// movedBytes is the buffer a collective of bucket b moves: allgather and
// reducescatter work on the whole buffer padded to a multiple of the
// ranks, as the runtime's in-place forms do.
func movedBytes(c ir.Collective, prog *ir.Program, b, ranks int) int64 {
	elems, size := prog.ElemsAt(b, ranks), prog.Buckets[b].Wire.Size()
	if (c == ir.AllGather || c == ir.ReduceScatter) && ranks > 0 {
		n := int64(ranks)
		return (elems + n - 1) / n * n * size
	}
	return elems * size
}

// intoBytes is what an out-of-place collective from bucket src into
// output out moves, as the runtime counts it (nccl-tests' out-of-place
// size): the larger buffer, a reducescatter's source padded to a multiple
// of the ranks.
func intoBytes(prog *ir.Program, c ir.Collective, src, out, ranks int) int64 {
	in := prog.ElemsAt(src, ranks)
	if c == ir.ReduceScatter && ranks > 0 {
		n := int64(ranks)
		in = (in + n - 1) / n * n
	}
	return max(in, prog.ElemsAt(out, ranks)) * prog.Buckets[src].Wire.Size()
}

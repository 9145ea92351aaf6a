package forecast

import (
	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// Schedule converts plan p's recorded step prog, run at ranks ranks, to
// the cost model's schedule; collective ids are prog's, so the
// prediction's rows match the report's.
func Schedule(p *plan.Plan, prog *plan.Program, ranks int) *costmodel.Schedule {
	s := &costmodel.Schedule{Ranks: ranks}
	for _, st := range p.Streams {
		s.Streams = append(s.Streams, st.Name)
	}
	for i := range p.Tensors {
		t := &p.Tensors[i]
		s.Tensors = append(s.Tensors, costmodel.Tensor{Bytes: costmodel.SatMul(t.Elems(), t.DType.Size()), Bucket: t.Bucket, Frozen: t.Frozen})
	}
	for i := range p.Buckets {
		b := &p.Buckets[i]
		cb := costmodel.Bucket{Name: b.Name, Bytes: costmodel.SatMul(b.Elems, b.Wire.Size()), DType: b.Wire.String()}
		for _, ti := range b.Tensors {
			t := &p.Tensors[ti]
			if t.DType != b.Wire {
				// Read in one dtype, written in the other; the sums
				// saturate, as the cost model's do, rather than wrap.
				cast := costmodel.SatAdd(costmodel.SatMul(t.Elems(), t.DType.Size()), costmodel.SatMul(t.Elems(), b.Wire.Size()))
				cb.CastBytes = costmodel.SatAdd(cb.CastBytes, cast)
			}
		}
		s.Buckets = append(s.Buckets, cb)
	}
	s.Step = costmodel.Accumulate(ops(p, ranks, prog.Step), p.Micro())
	return s
}

// ops converts recorded statements.
func ops(p *plan.Plan, ranks int, stmts []plan.Stmt) []costmodel.Op {
	var out []costmodel.Op
	for i := range stmts {
		st := &stmts[i]
		o := costmodel.Op{Stream: st.Stream, Dur: st.Dur, Buckets: st.Buckets, AfterStream: st.After.Stream(), ID: st.ID}
		switch st.After.Kind() {
		case plan.AfterReadyKind:
			o.After = costmodel.AfterReady
		case plan.AfterStreamKind:
			o.After = costmodel.AfterStream
		case plan.AfterSyncedKind:
			o.After = costmodel.AfterSynced
		}
		switch st.Kind {
		case plan.StmtBackward:
			o.Kind = costmodel.OpBackward
			o.Tensors = st.Tensors
		case plan.StmtCompute:
			o.Kind = costmodel.OpCompute
		case plan.StmtWait:
			o.Kind = costmodel.OpWait
		case plan.StmtGroup:
			o.Kind = costmodel.OpGroup
			o.Body = ops(p, ranks, st.Body)
		case plan.StmtColl:
			o.Kind = costmodel.OpCollective
			o.Collective = st.Coll.String()
			op := st.Op
			if st.Coll.Reduces() && op == plan.NoOp {
				op = plan.Sum
			}
			if st.Coll.Reduces() {
				o.Op = op.String()
			}
			for _, b := range st.Buckets {
				bk := &p.Buckets[b]
				n := bk.Elems
				if st.Coll.Info().Sliced {
					r := int64(max(ranks, 1))
					n = (n + r - 1) / r * r
				}
				o.Bytes = append(o.Bytes, n*bk.Wire.Size())
			}
		case plan.StmtUpdate:
			o.Kind = costmodel.OpUpdate
			states := 0
			switch {
			case st.Optim.Kind == optim.AdamW:
				states = 2
			case st.Optim.Momentum != 0:
				states = 1
			}
			for _, b := range st.Buckets {
				bk := &p.Buckets[b]
				o.Bytes = append(o.Bytes, costmodel.UpdateBytes(states, bk.Elems, bk.Elems*bk.Wire.Size()))
			}
		case plan.StmtUnscale:
			o.Kind = costmodel.OpUnscale
			o.Agree = st.Agree
		default:
			continue
		}
		out = append(out, o)
	}
	return out
}

// Predict replays prog's step at ranks ranks against profile prof.
func Predict(p *plan.Plan, prog *plan.Program, ranks int, prof *costmodel.Profile) (*costmodel.Prediction, error) {
	return costmodel.Replay(Schedule(p, prog, ranks), prof)
}

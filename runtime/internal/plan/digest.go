package plan

// Every rank must run the same plan: MPI matches collectives by their order
// on a communicator, so a rank with another plan would hang the job or
// corrupt it. Each rank hashes its plan (the plan's own Hash, its tables and
// the recorded statements); the runtime compares the digests.

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
)

// Digest hashes everything that must agree between ranks.
func Digest(p *Plan, prog *Program) [32]byte {
	h := sha256.New()
	w := func(vals ...any) {
		for _, v := range vals {
			switch x := v.(type) {
			case string:
				_ = binary.Write(h, binary.LittleEndian, int64(len(x)))
				_, _ = io.WriteString(h, x)
			case int:
				_ = binary.Write(h, binary.LittleEndian, int64(x))
			case int64:
				_ = binary.Write(h, binary.LittleEndian, x)
			case bool:
				_ = binary.Write(h, binary.LittleEndian, x)
			default:
				_ = binary.Write(h, binary.LittleEndian, x)
			}
		}
	}
	w(p.Hash, len(p.Tensors), len(p.Streams), len(p.Buckets))
	for _, t := range p.Tensors {
		w(t.Name, uint8(t.DType), len(t.Shape), t.Frozen, t.Bucket, t.Offset)
		for _, d := range t.Shape {
			w(d)
		}
	}
	for _, s := range p.Streams {
		w(s.Name, uint8(s.Priority))
	}
	for _, b := range p.Buckets {
		w(b.Name, uint8(b.Wire), b.Elems, len(b.Tensors), b.PreDivide)
		for _, t := range b.Tensors {
			w(t)
		}
	}
	var stmts func(ss []Stmt)
	stmts = func(ss []Stmt) {
		w(len(ss))
		for _, s := range ss {
			w(uint8(s.Kind), string(s.At), s.Stream, int64(s.Dur), uint8(s.Coll), uint8(s.Op), s.Root,
				uint8(s.After.Kind()), s.After.Stream(), len(s.Buckets))
			for _, b := range s.Buckets {
				w(b)
			}
			if s.Hier {
				// Only when set, so that the digests of flat plans stay.
				w("algo hierarchical")
			}
			o := &s.Optim
			w(uint8(o.Kind), o.LR, o.WeightDecay, o.Momentum, o.Beta1, o.Beta2, o.Eps, o.Master, s.Agree)
			stmts(s.Body)
		}
	}
	stmts(prog.Init)
	stmts(prog.Step)
	if p.Micro() > 1 {
		// Only then, so that the digests of plans without it stay.
		w("accumulate", p.Micro())
	}
	if c := p.Scaler; c != nil {
		w(uint8(c.Rule), c.Init, c.Growth, c.Backoff, c.Interval, c.Hysteresis, c.Min, c.Max)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

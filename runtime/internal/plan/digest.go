package plan

// Every rank must run the same plan: MPI matches collectives by their order
// on a communicator, so a rank with another plan would hang the job or
// corrupt it. Each rank hashes its plan (the plan's own Hash, its tables and
// the recorded statements); the runtime compares the digests.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
)

// hashWriter returns a function that writes values into h without
// ambiguity: a string with its length first, an int as 8 bytes, anything
// else (fixed-size numbers and bools) as encoding/binary writes it.
func hashWriter(h io.Writer) func(vals ...any) {
	return func(vals ...any) {
		for _, v := range vals {
			switch x := v.(type) {
			case string:
				_ = binary.Write(h, binary.LittleEndian, int64(len(x)))
				_, _ = io.WriteString(h, x)
			case int:
				_ = binary.Write(h, binary.LittleEndian, int64(x))
			default:
				_ = binary.Write(h, binary.LittleEndian, x)
			}
		}
	}
}

// hashLayout writes p's tensors and buckets with w: where each tensor's
// elements lie, what both digests cover.
func hashLayout(w func(vals ...any), p *Plan) {
	for _, t := range p.Tensors {
		w(t.Name, uint8(t.DType), len(t.Shape), t.Frozen, t.Bucket, t.Offset)
		for _, d := range t.Shape {
			w(d)
		}
	}
	for _, b := range p.Buckets {
		w(b.Name, uint8(b.Wire), b.Elems, len(b.Tensors), b.PreDivide)
		for _, t := range b.Tensors {
			w(t)
		}
	}
}

// Digest hashes everything that must agree between ranks.
func Digest(p *Plan, prog *Program) [32]byte {
	h := sha256.New()
	w := hashWriter(h)
	w(p.Hash, len(p.Tensors), len(p.Streams), len(p.Buckets))
	for _, s := range p.Streams {
		w(s.Name, uint8(s.Priority))
	}
	hashLayout(w, p)
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

// StateDigest hashes what decides the training state that a checkpoint
// holds, step by step: the tensors and buckets, the backwards, collectives,
// unscales and updates with their operators, targets and optimizers, the
// micro-batches and the loss scaler, and the plan's name. Unlike the
// plan's Hash it leaves out what changes only the run's defaults, timing
// or ordering (the `run` line, durations, streams, dependencies, waits,
// barriers, source positions), so that a checkpoint resumes a plan edited
// only there: a plan whose `run steps` grew continues its run. It is hex,
// as Hash is.
func StateDigest(p *Plan, prog *Program) string {
	h := sha256.New()
	w := hashWriter(h)
	// The plan's name too: another plan of the same tensors and steps (a
	// copy under another file name) writes checkpoints of its own.
	w("syncgen-state-1", p.Name, len(p.Tensors), len(p.Buckets))
	hashLayout(w, p)
	var stmts func(ss []Stmt)
	stmts = func(ss []Stmt) {
		for _, s := range ss {
			switch s.Kind {
			case StmtCompute, StmtWait, StmtBarrier:
				continue
			}
			w(uint8(s.Kind), uint8(s.Coll), uint8(s.Op), s.Root, s.Hier, s.Agree, len(s.Buckets), len(s.Into), len(s.Tensors))
			for _, list := range [][]int{s.Buckets, s.Into, s.Tensors} {
				for _, x := range list {
					w(x)
				}
			}
			o := &s.Optim
			w(uint8(o.Kind), o.LR, o.WeightDecay, o.Momentum, o.Beta1, o.Beta2, o.Eps, o.Master)
			w(len(s.Body))
			stmts(s.Body)
		}
		w("end")
	}
	stmts(prog.Init)
	stmts(prog.Step)
	w(p.Micro())
	if c := p.Scaler; c != nil {
		w(uint8(c.Rule), c.Init, c.Growth, c.Backoff, c.Interval, c.Hysteresis, c.Min, c.Max)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

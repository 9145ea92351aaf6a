package check

import (
	"math"
	"slices"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// Choosing each tensor's fill pattern so that the collectives of a step
// give exact results that the checker can predict.
//
// The ranges, with L the exact-integer limit of the tensor's dtype and of
// its bucket's wire dtype, whichever is smaller (f16 2048, bf16 256, i8 127,
// u8 255, f32 2^24, i32 2^31-1, f64 and i64 2^53), n the world size and G the
// growth of the values through the chain of collectives that touch the
// bucket between two fills (n for each sum or avg):
//
//   - the first reduction is sum (or there is none, or it is min or max):
//     uniform values in [-k, k] ([0, k] for u8), k = L/G, at most 1000;
//     every partial sum of n such values stays within L.
//   - the first reduction is avg: FillAvg with base and deviation in
//     [-k, k] (u8: base in [k, 2k], deviation in [0, k]), k = L/(2G)
//     (u8: L/(3G)); the sum over ranks is n times the base, so the average is
//     exact.
//   - the first reduction is wavg: uniform values as for sum, with G
//     counting the global batch B for each wavg: rank r's value times its
//     share b_r, and every partial sum of those, stay within L because
//     Σ b_r = B. With B > L (bf16 past 256 samples, f16 past 2048) even
//     k = 1 overflows, and over 3 or more ranks the elements whose
//     weighted sums leave the exact range are counted as unchecked.
//   - the first reduction is prod: values in {-2, -1, 1, 2} when 2^n <= L,
//     else in {-1, 1} (u8: only positive ones); products of powers of two
//     are exact in every float, and stay in range.
//
// With gradient accumulation (plan.Plan.Accumulate, M micro-batches a
// step), a backward's fill is the sum of M patterns, each added in the
// tensor's dtype: G counts M too, so that the sums and every partial sum
// stay within L. For prod, {-2, ..., 2} needs (2M)^n <= L; the products
// of sums that are not powers of two and leave L are counted as
// unchecked.
//
// The buffers' first fill, at allocation, sees another chain: the init
// block, then the step's statements before its first backward. Its growth
// counts too (an init allreduce of a bucket that the step only takes the
// maximum of left a bf16 sum over 3 ranks unchecked), and when the step's
// chain reduces nothing, the init chain's first reduction picks the kind.
//
// k is at least 1. When even k = 1 overflows (bf16 with a sum over more
// than 256 ranks, f16 over 2048, i8 over 127, u8 over 255), the checker
// marks the elements whose partial results leave the exact range as
// unchecked instead of guessing; the report counts them.

// maxAmplitude keeps the pattern's values small even where the dtypes
// would allow more.
const maxAmplitude = 1000

// Patterns returns the pattern shape of every tensor in a world of size
// ranks whose weighted averages weigh ranks by shares of batch samples.
func Patterns(p *plan.Plan, prog *plan.Program, size, batch int) []elem.PatternShape {
	shapes := make([]elem.PatternShape, len(p.Tensors))
	chains, firstChains := bucketChains(p, prog)
	for i := range p.Tensors {
		t := &p.Tensors[i]
		limit := t.DType.ExactLimit()
		unsigned := t.DType.Unsigned()
		var chain, firstChain []plan.Stmt
		if t.Bucket >= 0 {
			w := p.Buckets[t.Bucket].Wire
			limit = min(limit, w.ExactLimit())
			unsigned = unsigned || w.Unsigned()
			chain, firstChain = chains[t.Bucket], firstChains[t.Bucket]
		}
		shapes[i] = patternFor(chain, firstChain, limit, unsigned, size, batch, p.Micro())
	}
	return shapes
}

// chainOps returns the first reduction of chain (NoOp for none) and the
// growth of the values through it: size for each sum or avg, batch for
// each wavg (its weighted sum is at most batch times the largest value).
func chainOps(chain []plan.Stmt, size, batch int) (first plan.RedOp, growth float64) {
	first, growth = plan.NoOp, 1.0
	for _, s := range chain {
		if !s.Coll.Reduces() {
			continue
		}
		if first == plan.NoOp {
			first = s.Op
		}
		switch s.Op {
		case plan.Sum, plan.Avg:
			growth *= float64(size)
		case plan.WAvg:
			growth *= float64(batch)
		}
	}
	return first, growth
}

// patternFor picks the pattern for a tensor whose bucket sees chain
// between two backward passes and firstChain after its first fill, in a
// plan whose steps have micros micro-batches.
func patternFor(chain, firstChain []plan.Stmt, limit int64, unsigned bool, size, batch, micros int) elem.PatternShape {
	first, growth := chainOps(chain, size, batch)
	initFirst, initGrowth := chainOps(firstChain, size, batch)
	if first == plan.NoOp {
		first = initFirst
	}
	// A backward's fill is the sum of the step's micro-batches.
	growth = max(growth*float64(micros), initGrowth)
	amp := func(div float64) int32 {
		k := float64(limit) / div
		if k > maxAmplitude {
			k = maxAmplitude
		}
		if k < 1 {
			k = 1
		}
		return int32(k)
	}
	switch first {
	case plan.Avg:
		if unsigned {
			k := amp(3 * growth)
			return elem.PatternShape{Kind: elem.FillAvg, Lo: k, Hi: 2 * k, Dev: k}
		}
		k := amp(2 * growth)
		return elem.PatternShape{Kind: elem.FillAvg, Lo: -k, Hi: k, Dev: k}
	case plan.Prod:
		// An accumulated value is a sum of micros values: its
		// magnitude, up to 2*micros, raised to the size-th power.
		two := size < 62 && math.Pow(float64(2*micros), float64(size)) <= float64(limit)
		return elem.PatternShape{Kind: elem.FillProd, Two: two, Neg: !unsigned}
	default:
		k := amp(growth)
		if unsigned {
			return elem.PatternShape{Kind: elem.FillUniform, Lo: 0, Hi: k}
		}
		return elem.PatternShape{Kind: elem.FillUniform, Lo: -k, Hi: k}
	}
}

// bucketChains returns, per bucket, the collectives that touch it between
// one backward pass and the next: the statements after the step's last
// backward, then those before its first (the next step's); and those that
// touch it after the first fill: the init block, then the statements before
// the step's first backward. Without a backward in the step, the chain is
// the init block and one step, and there is no other. A backward in pieces
// counts only for the buckets of its tensors.
func bucketChains(p *plan.Plan, prog *plan.Program) (chains, firstChains [][]plan.Stmt) {
	steps := plan.Flat(prog.Step)
	init := plan.Flat(prog.Init)
	chains = make([][]plan.Stmt, len(p.Buckets))
	firstChains = make([][]plan.Stmt, len(p.Buckets))
	for b := range p.Buckets {
		first, last := -1, -1
		for i, s := range steps {
			if s.Kind == plan.StmtBackward && fillsBucket(p, s, b) {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		var seq, firstSeq []plan.Stmt
		if last >= 0 {
			seq = append(seq, steps[last+1:]...)
			seq = append(seq, steps[:first]...)
			firstSeq = append(slices.Clone(init), steps[:first]...)
		} else {
			seq = append(slices.Clone(init), steps...)
		}
		chains[b], firstChains[b] = collsOf(seq, b), collsOf(firstSeq, b)
	}
	return chains, firstChains
}

// fillsBucket reports whether backward s fills gradients of bucket b: a
// whole backward fills every bucket, a piece those of its tensors.
func fillsBucket(p *plan.Plan, s plan.Stmt, b int) bool {
	if s.Tensors == nil {
		return true
	}
	for _, t := range s.Tensors {
		if t >= 0 && t < len(p.Tensors) && p.Tensors[t].Bucket == b {
			return true
		}
	}
	return false
}

// collsOf returns the collectives of seq that touch bucket b.
func collsOf(seq []plan.Stmt, b int) []plan.Stmt {
	var out []plan.Stmt
	for _, s := range seq {
		if s.Kind == plan.StmtColl && slices.Contains(s.Buckets, b) {
			out = append(out, s)
		}
	}
	return out
}

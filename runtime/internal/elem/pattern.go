package elem

// The deterministic gradient pattern. Every element a backward pass writes
// is a small integer computed from (rank, step, tensor, element) by a 32-bit
// integer hash, so that every rank can compute what every other rank wrote
// and the result of any collective can be checked exactly. The values are
// small enough that every partial sum or product stays exactly
// representable in the dtypes involved (see choosePattern in analyze.go for
// the ranges).
//
// The formula, which a device kernel reproduces (all arithmetic on uint32
// wraps modulo 2^32, ">>" is a logical shift):
//
//	mix(x):   x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16
//	H(s, i):  mix(s ^ mix(lo32(i) + 0x9e3779b9*hi32(i)))      i = element index in the tensor
//
//	FillUniform: v = Lo + int32(H(SeedA, i) % uint32(Hi-Lo+1))
//	FillAvg:     v = Lo + int32(H(SeedA, i) % uint32(Hi-Lo+1)) + Sign*int32(H(SeedB, i) % uint32(Dev+1))
//	FillProd:    h = H(SeedA, i); v = (Two ? 1 + (h & 1) : 1) * (Neg && (h>>1)&1 == 1 ? -1 : 1)
//
// then v (an int32) is converted to the tensor's dtype, exactly. The host
// computes the seeds (Seed below), so a kernel needs only mix and H.
//
// FillAvg makes averages exact: SeedA depends on (step, tensor) only, so
// every rank has the same base a; SeedB depends on the pair of ranks
// (rank/2), and Sign is +1 on even ranks and -1 on odd ones, so the two
// ranks of a pair add +d and -d and the sum over all ranks is size*a (the
// last rank of an odd world has Sign 0). The average is then exactly a.

import "math/bits"

// FillKind selects the formula of a FillParams.
type FillKind uint8

// The fill formulas.
const (
	FillUniform FillKind = iota
	FillAvg
	FillProd
)

var fillKindNames = [...]string{"uniform", "avg", "prod"}

// String returns the kind's name.
func (k FillKind) String() string {
	if int(k) < len(fillKindNames) {
		return fillKindNames[k]
	}
	return "fill?"
}

// FillParams is everything a backend needs to fill one tensor's gradient:
// element i gets FillValue(p, i).
type FillParams struct {
	Kind FillKind
	// SeedA and SeedB seed the hash (see Seed).
	SeedA, SeedB uint32
	// Lo and Hi bound the base value (FillUniform, FillAvg); Hi >= Lo.
	Lo, Hi int32
	// Dev bounds the deviation of FillAvg: d in [0, Dev].
	Dev int32
	// Sign is the sign of the deviation of FillAvg: +1, -1 or 0.
	Sign int32
	// Two allows magnitude 2 in FillProd, Neg allows negative values.
	Two, Neg bool
	// Unchecked says that no check reads the values of this fill (the
	// step is not checked, and every backward rewrites every gradient): a
	// backend may write zeros instead, which costs a memset instead of two
	// hashes an element. The CPU backend does, so that a simulated backward
	// lasts what the plan says rather than as long as the pattern takes to
	// compute; the GPU backend fills the pattern anyway (it is fast there).
	Unchecked bool
	// Add adds the pattern's values to what dst holds instead of
	// overwriting it, in dst's dtype (the sum rounded to it, integers
	// saturating, as Cast rounds): the backward of a micro-batch after the
	// first accumulates its gradient. With Unchecked it may do nothing.
	Add bool
}

// Mix is the 32-bit integer hash ("lowbias32" by Chris Wellons).
func Mix(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x7feb352d
	x ^= x >> 15
	x *= 0x846ca68b
	x ^= x >> 16
	return x
}

// ElemHash is H(seed, i) of the formula.
func ElemHash(seed uint32, i int64) uint32 {
	u := uint64(i)
	return Mix(seed ^ Mix(uint32(u)+0x9e3779b9*uint32(u>>32)))
}

// Seed folds words into a seed: s = 0x811c9dc5, then s = Mix(s ^ w) for
// each word. The runtime uses Seed(1, rank, step, tensor) for FillUniform
// and FillProd, Seed(2, step, tensor) and Seed(3, rank/2, step, tensor) for
// FillAvg. step counts every step the program runs (init is step
// InitStep, then warm-up and measured steps from 0).
func Seed(words ...uint32) uint32 {
	s := uint32(0x811c9dc5)
	for _, w := range words {
		s = Mix(s ^ w)
	}
	return s
}

// MicroStep is the step number that seeds micro-batch m of step (from
// 0): step itself for the first, so that a step of one micro-batch fills
// what it always did, and a hash of both for the others.
func MicroStep(step uint32, m int) uint32 {
	if m == 0 {
		return step
	}
	return Seed(4, step, uint32(m))
}

// InitStep is the step number of the values buffers hold before the first
// backward pass writes them (they are filled once when allocated).
const InitStep = 0xffffffff

// FillValue returns element i of the pattern.
func FillValue(p *FillParams, i int64) int32 {
	switch p.Kind {
	case FillProd:
		return prodValue(p, ElemHash(p.SeedA, i))
	case FillAvg:
		a := p.Lo + int32(modOf(ElemHash(p.SeedA, i), uint32(p.Hi-p.Lo+1)))
		d := int32(modOf(ElemHash(p.SeedB, i), uint32(p.Dev+1)))
		return a + p.Sign*d
	default:
		return p.Lo + int32(modOf(ElemHash(p.SeedA, i), uint32(p.Hi-p.Lo+1)))
	}
}

// ValueRange returns bounds of the values of pattern p: every FillValue
// lies in [lo, hi].
func (p *FillParams) ValueRange() (lo, hi int64) {
	switch p.Kind {
	case FillProd:
		return -2, 2
	case FillAvg:
		d := int64(p.Dev) * max(int64(p.Sign), -int64(p.Sign))
		return int64(p.Lo) - d, int64(p.Hi) + d
	default:
		return int64(p.Lo), int64(p.Hi)
	}
}

// prodValue is FillProd's value for hash h.
func prodValue(p *FillParams, h uint32) int32 {
	v := int32(1)
	if p.Two {
		v += int32(h & 1)
	}
	if p.Neg && (h>>1)&1 == 1 {
		v = -v
	}
	return v
}

// modOf returns h % d, where d = 0 stands for 2^32 (a span covering every
// int32, which wraps to 0 in uint32).
func modOf(h, d uint32) uint32 {
	if d == 0 {
		return h
	}
	return h % d
}

// modulus computes h % d for any uint32 h with two multiplications instead
// of a division by a divisor unknown at compile time (Lemire, Kaser and
// Kurz, "Faster remainder by direct computation", 2019), which the fill
// does for every element (bench/results/2026-12-runtime-comments.md,
// "Fill and conversions"): with m = ceil(2^64/d),
// h % d = ((m*h mod 2^64) * d) >> 64, exactly, for every 32-bit h and d.
// d = 0 stands for 2^32, as in modOf.
type modulus struct {
	d uint32
	m uint64
}

func newModulus(d uint32) modulus {
	if d == 0 {
		return modulus{}
	}
	return modulus{d: d, m: ^uint64(0)/uint64(d) + 1} // d = 1 wraps m to 0: h % 1 = 0
}

// of returns h % d.
func (q modulus) of(h uint32) uint32 {
	if q.d == 0 {
		return h
	}
	hi, _ := bits.Mul64(q.m*uint64(h), uint64(q.d))
	return uint32(hi)
}

// PatternShape is the rank- and step-independent part of a tensor's
// pattern, chosen once from the dtypes, the world size and the collectives
// that touch the tensor's bucket (see choosePattern).
type PatternShape struct {
	Kind     FillKind
	Lo, Hi   int32
	Dev      int32
	Two, Neg bool
}

// Params returns the fill parameters of tensor t on rank for step.
func (s PatternShape) Params(rank, size int, step uint32, tensor int) FillParams {
	p := FillParams{Kind: s.Kind, Lo: s.Lo, Hi: s.Hi, Dev: s.Dev, Two: s.Two, Neg: s.Neg}
	switch s.Kind {
	case FillAvg:
		p.SeedA = Seed(2, step, uint32(tensor))
		p.SeedB = Seed(3, uint32(rank/2), step, uint32(tensor))
		switch {
		case size%2 == 1 && rank == size-1:
			p.Sign = 0
		case rank%2 == 0:
			p.Sign = 1
		default:
			p.Sign = -1
		}
	default:
		p.SeedA = Seed(1, uint32(rank), step, uint32(tensor))
	}
	return p
}

// FillInts writes elements i0, i0+1, ... of pattern p into out, with one
// loop per formula so that the hot loops carry no switch. It gives exactly
// FillValue's values (the tests compare them); its cost an element is in
// bench/results/2026-12-runtime-comments.md, "Fill and conversions".
func FillInts(out []int32, p *FillParams, i0 int64) {
	switch p.Kind {
	case FillProd:
		for j := range out {
			out[j] = prodValue(p, ElemHash(p.SeedA, i0+int64(j)))
		}
	case FillAvg:
		span, dev := newModulus(uint32(p.Hi-p.Lo+1)), newModulus(uint32(p.Dev+1))
		for j := range out {
			i := i0 + int64(j)
			out[j] = p.Lo + int32(span.of(ElemHash(p.SeedA, i))) + p.Sign*int32(dev.of(ElemHash(p.SeedB, i)))
		}
	default:
		FillBase(out, p, i0)
	}
}

// FillBase writes Lo + H(SeedA, i) % (Hi-Lo+1) for elements i0.. into out:
// the whole of FillUniform, and the base of FillAvg, which is the same on
// every rank.
func FillBase(out []int32, p *FillParams, i0 int64) {
	span := newModulus(uint32(p.Hi - p.Lo + 1))
	for j := range out {
		out[j] = p.Lo + int32(span.of(ElemHash(p.SeedA, i0+int64(j))))
	}
}

// FillDev writes FillAvg's deviation H(SeedB, i) % (Dev+1), before its
// sign, for elements i0.. into out; it is the same on both ranks of a pair.
func FillDev(out []int32, p *FillParams, i0 int64) {
	dev := newModulus(uint32(p.Dev + 1))
	for j := range out {
		out[j] = int32(dev.of(ElemHash(p.SeedB, i0+int64(j))))
	}
}

package optim

import (
	"math"
	"math/rand"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// The first steps of each optimizer, computed by hand from torch.optim's
// formulas, agree with Apply to float32 rounding.
func TestFirstStepByHand(t *testing.T) {
	const g, p = 0.5, 0.25
	sgd := Spec{Kind: SGD, LR: 0.1, Momentum: 0.9, WeightDecay: 0.01}.Hyper(1, elem.F32)
	np, m, _ := sgd.Apply(g, p, 0, 0)
	// d = g + wd*p; buf = d (momentum*0 + d); p -= lr*buf.
	d := g + 0.01*p
	if math.Abs(m-d) > 1e-7 || math.Abs(np-(p-0.1*d)) > 1e-7 {
		t.Errorf("sgd: p %v m %v, want %v %v", np, m, p-0.1*d, d)
	}
	adam := Spec{Kind: AdamW, LR: 0.001, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}.Hyper(1, elem.F32)
	np, m, v := adam.Apply(g, p, 0, 0)
	// Step 1: mhat = g, vhat = g*g, so p = p*(1-lr*wd) - lr*g/(|g|+eps).
	want := p*(1-0.001*0.01) - 0.001*g/(math.Abs(g)+1e-8)
	if math.Abs(np-want) > 1e-7 || math.Abs(m-0.1*g) > 1e-8 || math.Abs(v-0.001*g*g) > 1e-9 {
		t.Errorf("adamw: p %v m %v v %v, want %v %v %v", np, m, v, want, 0.1*g, 0.001*g*g)
	}
	// A skipped step does not count: t numbers the updates applied.
	if a, b := adam.C[5], (Spec{Kind: AdamW, LR: 0.001, Beta1: 0.9, Beta2: 0.999}.Hyper(2, elem.F32)).C[5]; a == b {
		t.Errorf("adamw's step size does not depend on t: %v", a)
	}
}

// UpdateBytes (split over goroutines, with the f32 fast path) gives what
// Apply gives element by element, for every pair of float dtypes.
func TestUpdateBytesIsApply(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	floats := []elem.DType{elem.F64, elem.F32, elem.F16, elem.BF16}
	specs := []Spec{{Kind: SGD, LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4}, {Kind: SGD, LR: 0.5},
		{Kind: AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}}
	const n = 200_000 // past the grain, so that it is split
	for _, gdt := range floats {
		for _, pdt := range floats {
			for _, spec := range specs {
				h := spec.Hyper(3, pdt)
				vals := func(dt elem.DType) ([]byte, []float64) {
					v := make([]float64, n)
					for i := range v {
						v[i] = elem.RoundTo(rng.NormFloat64(), dt)
					}
					b := make([]byte, n*int(dt.Size()))
					elem.StoreAll(b, dt, v)
					return b, v
				}
				gb, g := vals(gdt)
				pb, p := vals(pdt)
				var sb [2][]byte
				var s [2][]float64
				for k := range spec.States() {
					sb[k], s[k] = vals(pdt)
					for i := range s[k] {
						s[k][i] = math.Abs(s[k][i]) // a second moment is never negative
					}
					elem.StoreAll(sb[k], pdt, s[k])
				}
				out := make([]byte, n*2)
				UpdateBytes(&h, &Memory{Grad: gb, Param: pb, State: sb, Out: out, GradDT: gdt, ParamDT: pdt, OutDT: elem.BF16})
				got := make([]float64, n)
				elem.LoadAll(got, pb, pdt)
				gotOut := make([]float64, n)
				elem.LoadAll(gotOut, out, elem.BF16)
				for i := range n {
					var s0, s1 float64
					if s[0] != nil {
						s0 = s[0][i]
					}
					if s[1] != nil {
						s1 = s[1][i]
					}
					np, _, _ := h.Apply(g[i], p[i], s0, s1)
					if want := elem.RoundTo(np, pdt); got[i] != want && !(math.IsNaN(want) && math.IsNaN(got[i])) {
						t.Fatalf("%v %s grads, %s params: element %d: %v, want %v", spec.Kind, gdt, pdt, i, got[i], want)
					}
					if want := elem.RoundTo(np, elem.BF16); gotOut[i] != want && !(math.IsNaN(want) && math.IsNaN(gotOut[i])) {
						t.Fatalf("%v %s grads, %s params: out %d: %v, want %v", spec.Kind, gdt, pdt, i, gotOut[i], want)
					}
				}
			}
		}
	}
}

// ScaleBytes scales exactly, and says whether a result is not finite.
func TestScaleBytes(t *testing.T) {
	b := make([]byte, 2*3)
	elem.StoreAll(b, elem.F16, []float64{3, -5, 1000})
	if ScaleBytes(b, elem.F16, 64) != false {
		t.Fatal("3*64, -5*64 and 1000*64 = 64000 are finite in f16")
	}
	if ScaleBytes(b, elem.F16, 2) != true {
		t.Fatal("128000 overflows f16")
	}
	got := make([]float64, 3)
	elem.LoadAll(got, b, elem.F16)
	if got[0] != 384 || got[1] != -640 || !math.IsInf(got[2], 1) {
		t.Fatalf("scaled: %v", got)
	}
}

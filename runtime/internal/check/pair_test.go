package check

import (
	"fmt"
	"math"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// pairWeights are the two ranks' shares of a batch of 9 in the tests'
// weighted averages: 1/9 makes fractions of every sum.
var pairWeights = []int{5, 4}

// pairEngine is the checker of rank in a world of two ranks for one tensor
// of tdt in a bucket of wire dtype, n elements, that a backward fills and
// chain then reduces (with pre, an `op avg` divides before the sum), in
// memory of a hostBackend. The weighted averages weigh by pairWeights.
func pairEngine(tdt, wire elem.DType, n int64, pre bool, chain []plan.Stmt, rank int) (*testRank, *hostBackend) {
	p := &plan.Plan{
		Tensors: []plan.Tensor{{Name: "t", DType: tdt, Shape: []int64{n}, Bucket: 0}},
		Buckets: []plan.Bucket{{Name: "b", Wire: wire, Elems: n, Tensors: []int{0}, PreDivide: pre}},
		Streams: []plan.Stream{{Name: "comm"}},
	}
	prog := &plan.Program{Step: append([]plan.Stmt{{Kind: plan.StmtBackward}}, chain...)}
	be := &hostBackend{}
	bucket := &hostBuffer{dt: wire, b: make([]byte, n*wire.Size())}
	store := backend.Span{Buf: bucket, N: n, DType: tdt}
	if tdt != wire {
		store.Buf = &hostBuffer{dt: tdt, b: make([]byte, n*tdt.Size())}
	}
	mem := &backend.Layout{Buckets: []backend.BucketMem{{Buf: bucket, Elems: n}},
		Tensors: []backend.TensorMem{{Elems: n, Store: store, InPlace: tdt == wire}}}
	shapes := Patterns(p, prog, 2, 9)
	e := &testRank{model: New(p, rank, 2, shapes, mem, []int{0}, be), shapes: shapes, mem: mem}
	e.model.Apply(prog.Step, 5, StepTrain{Scale: 1, Weights: pairWeights})
	return e, be
}

// pairArith is one backend's arithmetic of a reduction of two values of a
// float dtype, written out as that backend computes it.
type pairArith struct {
	name      string
	add, mul  func(a, b float64, dt elem.DType) float64
	avg       func(a, b float64, dt elem.DType) float64 // without a division before the sum
	preDivide func(a float64, dt elem.DType) float64
}

// cpuArith is the CPU backend's: Open MPI's float and double operators,
// runtime/mpi's 16-bit ones (in float32, one rounding to the format: the C
// code that TestReduceHalfMatchesGo compares with these Go conversions),
// and the average as the sum then avg_divide's division (elem.AvgOf).
var cpuArith = pairArith{
	name:      "cpu",
	add:       cpuAdd,
	mul:       cpuMul,
	avg:       func(a, b float64, dt elem.DType) float64 { return elem.AvgOf(cpuAdd(a, b, dt), dt, 2) },
	preDivide: func(a float64, dt elem.DType) float64 { return elem.AvgOf(a, dt, 2) },
}

func cpuAdd(a, b float64, dt elem.DType) float64 {
	if dt == elem.F64 {
		return a + b
	}
	return round32(float32(a)+float32(b), dt)
}

func cpuMul(a, b float64, dt elem.DType) float64 {
	if dt == elem.F64 {
		return a * b
	}
	return round32(float32(a)*float32(b), dt)
}

// round32 stores a float32 result in dt as the CPU backend does: as it
// is in f32, rounded once to nearest even in a 16-bit format.
func round32(x float32, dt elem.DType) float64 {
	switch dt {
	case elem.F16:
		return float64(elem.F16ToF32(elem.F32ToF16(x)))
	case elem.BF16:
		return float64(elem.BF16ToF32(elem.F32ToBF16(x)))
	}
	return float64(x)
}

// ncclArith is NCCL's at two ranks (reduce_kernel.h): one IEEE operation
// of the format (__hadd and __hmul on the 16-bit formats: correctly
// rounded), and ncclAvg as PreMulSum, each input multiplied by 1/2 in the
// format before the sum. A division before the sum is the runtime's
// kernel, the CPU backend's arithmetic.
var ncclArith = pairArith{
	name: "nccl",
	add:  func(a, b float64, dt elem.DType) float64 { return elem.RoundTo(a+b, dt) },
	mul:  func(a, b float64, dt elem.DType) float64 { return elem.RoundTo(a*b, dt) },
	avg: func(a, b float64, dt elem.DType) float64 {
		return elem.RoundTo(elem.RoundTo(a*0.5, dt)+elem.RoundTo(b*0.5, dt), dt)
	},
	preDivide: func(a float64, dt elem.DType) float64 { return elem.AvgOf(a, dt, 2) },
}

// replayPair computes what each of two ranks holds of one element after
// chain, from the ranks' fill values, with arithmetic ar: the casts to and
// from the wire, a weighted average's weighing and division
// (optim.Scaled, the same kernel on both backends), a division before the
// sum, and the reductions. Only allreduce and reduce.
func replayPair(v [2]float64, tdt, wire elem.DType, pre bool, chain []plan.Stmt, ar pairArith) [2]float64 {
	for r := range v {
		v[r] = elem.RoundTo(v[r], tdt)
	}
	for _, s := range chain {
		var in [2]float64
		for r := range in {
			in[r] = elem.RoundTo(v[r], wire)
			switch {
			case s.Op == plan.WAvg:
				in[r] = optim.Scaled(in[r], float64(pairWeights[r]), wire)
			case s.Op == plan.Avg && pre:
				in[r] = ar.preDivide(in[r], wire)
			}
		}
		var red float64
		switch s.Op {
		case plan.Sum, plan.WAvg:
			red = ar.add(in[0], in[1], wire)
		case plan.Avg:
			red = ar.add(in[0], in[1], wire)
			if !pre {
				red = ar.avg(in[0], in[1], wire)
			}
		case plan.Prod:
			red = ar.mul(in[0], in[1], wire)
		case plan.Min:
			red = math.Min(in[0], in[1])
		}
		if s.Op == plan.WAvg {
			red = optim.Scaled(red, 1/9.0, wire)
		}
		for r := range in {
			if s.Coll == plan.CollAllReduce || r == s.Root {
				in[r] = red
			}
			v[r] = elem.RoundTo(in[r], tdt)
		}
	}
	return v
}

// pairChains are chains of two collectives whose second reduces values
// that the first left as fractions (a weighted average's 1/9, the halves
// that a division before the sum leaves on the ranks other than a reduce's
// root) or as integers whose sum or product leaves the exact range.
func pairChains() [][]plan.Stmt {
	st := func(coll plan.Coll, op plan.RedOp, root int) plan.Stmt {
		return plan.Stmt{Kind: plan.StmtColl, Coll: coll, Op: op, Root: root, Buckets: []int{0}}
	}
	firsts := []plan.Stmt{
		st(plan.CollAllReduce, plan.WAvg, 0), st(plan.CollReduce, plan.WAvg, 0), st(plan.CollReduce, plan.Avg, 0),
		st(plan.CollAllReduce, plan.Min, 0), st(plan.CollReduce, plan.Sum, 1),
	}
	seconds := []plan.Stmt{
		st(plan.CollAllReduce, plan.Sum, 0), st(plan.CollAllReduce, plan.Avg, 0), st(plan.CollAllReduce, plan.Prod, 0),
		st(plan.CollAllReduce, plan.WAvg, 0), st(plan.CollReduce, plan.Sum, 1), st(plan.CollReduce, plan.Avg, 0),
	}
	var chains [][]plan.Stmt
	for _, a := range firsts {
		for _, b := range seconds {
			chains = append(chains, []plan.Stmt{a, b})
		}
	}
	return chains
}

// At two ranks the checker predicts sums, averages and products of any
// values, fractions included, on every float dtype and wire: what both the
// CPU backend's arithmetic and NCCL's give (each one operation, so the
// order cannot matter). Only results that overflow the dtype are left
// unchecked (f16 products past 65504).
func TestPairReductionsChecked(t *testing.T) {
	const n = 300
	floats := []elem.DType{elem.F64, elem.F32, elem.F16, elem.BF16}
	for _, tdt := range floats {
		for _, wire := range floats {
			for _, pre := range []bool{false, true} {
				for _, chain := range pairChains() {
					name := fmt.Sprintf("%s on %s wire (divide before %v), %s %s then %s %s", tdt, wire, pre,
						chain[0].Coll, chain[0].Op, chain[1].Coll, chain[1].Op)
					unchecked := 0
					for rank := range 2 {
						e, _ := pairEngine(tdt, wire, n, pre, chain, rank)
						want := make([]float64, n)
						e.model.newSim(0).run(0, want)
						for i := range int64(n) {
							var fill [2]float64
							for r := range fill {
								p := e.shapes[0].Params(r, 2, 5, 0)
								fill[r] = float64(elem.FillValue(&p, i))
							}
							for _, ar := range []pairArith{cpuArith, ncclArith} {
								got := replayPair(fill, tdt, wire, pre, chain, ar)[rank]
								switch {
								case math.IsInf(want[i], 0):
									t.Fatalf("%s, rank %d, element %d: the checker calls it undefined", name, rank, i)
								case math.IsNaN(want[i]):
									if !math.IsInf(got, 0) {
										t.Fatalf("%s, rank %d, element %d: unchecked, but %s gives %v", name, rank, i, ar.name, got)
									}
									unchecked++
								case got != want[i]:
									t.Fatalf("%s, rank %d, element %d: %s gives %v, the checker expects %v (fills %v)",
										name, rank, i, ar.name, got, want[i], fill)
								}
							}
						}
					}
					if unchecked > 0 && !(chain[1].Op == plan.Prod && (tdt == elem.F16 || wire == elem.F16)) {
						t.Errorf("%s: %d elements unchecked", name, unchecked)
					}
				}
			}
		}
	}
}

// A wrong element among values that only a two-rank reduction of
// fractions predicts is found: bf16 gradients, weighted averages (of
// shares 5 and 4 of 9) summed again.
func TestPairCheckFindsWrongElement(t *testing.T) {
	const n = 500
	chain := []plan.Stmt{
		{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: plan.WAvg, Buckets: []int{0}},
		{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: plan.Sum, Buckets: []int{0}},
	}
	for _, c := range []struct{ tdt, wire elem.DType }{{elem.BF16, elem.BF16}, {elem.F32, elem.F16}, {elem.F64, elem.F64}} {
		e, _ := pairEngine(c.tdt, c.wire, n, false, chain, 1)
		vals := make([]float64, n)
		fractions := 0
		for i := range vals {
			var fill [2]float64
			for r := range fill {
				p := e.shapes[0].Params(r, 2, 5, 0)
				fill[r] = float64(elem.FillValue(&p, int64(i)))
			}
			vals[i] = replayPair(fill, c.tdt, c.wire, false, chain, cpuArith)[1]
			if vals[i] != math.Trunc(vals[i]) {
				fractions++
			}
		}
		if fractions < n/2 {
			t.Fatalf("%s on %s: %d of %d results are fractions, want most", c.tdt, c.wire, fractions, n)
		}
		elem.StoreAll(storeBytes(e, 0), c.tdt, vals)
		r, err := e.model.CheckBucket(0)
		if err != nil || r.Wrong != 0 || r.Unchecked != 0 {
			t.Fatalf("%s on %s: %+v, %v; want every element checked and right", c.tdt, c.wire, r, err)
		}
		// The dtype's next value, at an element holding a fraction.
		k := 0
		for vals[k] == math.Trunc(vals[k]) {
			k++
		}
		vals[k] = neighbour(vals[k], c.tdt)
		elem.StoreAll(storeBytes(e, 0), c.tdt, vals)
		r, err = e.model.CheckBucket(0)
		if err != nil || r.Wrong != 1 || r.Unchecked != 0 || r.First == "" {
			t.Fatalf("%s on %s, element %d changed: %+v, %v; want 1 wrong", c.tdt, c.wire, k, r, err)
		}
	}
}

// neighbour is the value of dt next to x, away from zero.
func neighbour(x float64, dt elem.DType) float64 {
	switch dt {
	case elem.F64:
		return math.Float64frombits(math.Float64bits(x) + 1)
	case elem.F32:
		return float64(math.Float32frombits(math.Float32bits(float32(x)) + 1))
	case elem.F16:
		return elem.F16Value(elem.F16Bits(x) + 1)
	}
	return elem.BF16Value(elem.BF16Bits(x) + 1)
}

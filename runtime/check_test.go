package runtime

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// testEngine builds just enough of an engine for the checker: one tensor of
// tdt in one bucket of wire dtype, n elements, seen by chain.
func testEngine(tdt, wire DType, n int64, size, rank int, chain []stmt) *engine {
	p := &Plan{
		Tensors: []Tensor{{Name: "t", DType: tdt, Shape: []int64{n}, Bucket: 0}},
		Buckets: []Bucket{{Name: "b", Wire: wire, Elems: n, Tensors: []int{0}}},
		Streams: []Stream{{Name: "comm"}},
	}
	prog := &program{step: append([]stmt{{kind: sBackward}}, chain...)}
	e := &engine{plan: p, prog: prog, rank: rank, size: size}
	e.shapes = choosePatterns(p, prog, size)
	padded := n
	if padded%int64(size) != 0 {
		padded += int64(size) - padded%int64(size)
	}
	e.buckets = []bucketMem{{elems: padded}}
	e.backOrder = []int{0}
	e.model = newModel(e)
	e.model.apply(prog.step, 5)
	return e
}

// reduceInOrder reduces vals in the given order with the dtype's rounding
// after every operation, as an MPI implementation may.
func reduceInOrder(vals []float64, order []int, op RedOp, dt DType) float64 {
	acc := vals[order[0]]
	for _, i := range order[1:] {
		v := vals[i]
		switch op {
		case Sum, Avg:
			acc = RoundTo(acc+v, dt)
		case Prod:
			acc = RoundTo(acc*v, dt)
		case Min:
			acc = math.Min(acc, v)
		case Max:
			acc = math.Max(acc, v)
		}
	}
	if op == Avg {
		acc = AvgOf(acc, dt, len(vals))
	}
	return acc
}

// The checker's predictions agree with the arithmetic of the dtype in any
// reduction order, and nothing is left unchecked for worlds of up to 8
// ranks: the pattern's ranges keep every partial result exact.
func TestCheckerPredictsAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	dts := []DType{F64, F32, F16, BF16, I64, I32, I8, U8}
	for _, tdt := range dts {
		for _, wire := range []DType{tdt, F32, BF16} {
			for op := Sum; op <= Prod; op++ {
				for size := 1; size <= 8; size++ {
					const n = 300
					chain := []stmt{{kind: sColl, coll: CollAllReduce, op: op, buckets: []int{0}}}
					e := testEngine(tdt, wire, n, size, 0, chain)
					want := make([]float64, n)
					e.model.newSim(0).run(0, want)
					// Brute force: every rank's fill value, cast to the
					// wire, reduced in a random order, cast back.
					for i := int64(0); i < n; i++ {
						vals := make([]float64, size)
						for r := range vals {
							p := e.shapes[0].Params(r, size, 5, 0)
							vals[r] = RoundTo(RoundTo(float64(FillValue(&p, i)), tdt), wire)
						}
						got := RoundTo(reduceInOrder(vals, rng.Perm(size), op, wire), tdt)
						if math.IsNaN(want[i]) {
							t.Fatalf("%s on %s wire, %s over %d ranks: element %d unchecked", tdt, wire, op, size, i)
						}
						if got != want[i] {
							t.Fatalf("%s on %s wire, %s over %d ranks: element %d: arithmetic gives %v, checker expects %v (inputs %v)",
								tdt, wire, op, size, i, got, want[i], vals)
						}
					}
				}
			}
		}
	}
}

// The collectives' semantics, replayed for one element position.
func TestSimSemantics(t *testing.T) {
	s := &sim{slice: 3, wire: F32, tdt: F32, limit: float64(F32.ExactLimit()), red: make([]float64, 1)}
	for r := 0; r < 4; r++ {
		s.vals = append(s.vals, make([]float64, 1))
	}
	apply := func(op *stmt, x []float64, pos int64) {
		for r := range x {
			s.vals[r][0] = x[r]
		}
		s.off = pos
		s.applyBlock(op, 0, 1)
		for r := range x {
			x[r] = s.vals[r][0]
		}
	}
	x := []float64{1, 2, 3, 4}
	apply(&stmt{coll: CollReduce, op: Sum, root: 2}, x, 0)
	if x[2] != 10 || x[0] != 1 || x[3] != 4 {
		t.Errorf("reduce to 2: %v", x)
	}
	x = []float64{1, 2, 3, 4}
	apply(&stmt{coll: CollBroadcast, root: 3}, x, 0)
	if x[0] != 4 || x[2] != 4 {
		t.Errorf("broadcast from 3: %v", x)
	}
	x = []float64{1, 2, 3, 4}
	apply(&stmt{coll: CollAllGather}, x, 7) // position 7: slice 2
	if x[0] != 3 || x[3] != 3 {
		t.Errorf("allgather at slice 2: %v", x)
	}
	x = []float64{1, 2, 3, 4}
	apply(&stmt{coll: CollReduceScatter, op: Max}, x, 4) // slice 1
	if x[1] != 4 || !math.IsInf(x[0], 1) || !math.IsInf(x[2], 1) {
		t.Errorf("reducescatter at slice 1: %v", x)
	}
	// A reduction over an undefined value is undefined; over an inexact
	// one, inexact.
	if v := s.reduce(Sum, []float64{1, undefined}); !math.IsInf(v, 1) {
		t.Errorf("sum with undefined = %v", v)
	}
	if v := s.reduce(Sum, []float64{1, math.NaN()}); !math.IsNaN(v) {
		t.Errorf("sum with NaN = %v", v)
	}
	if v := s.reduce(Sum, []float64{1 << 23, 1 << 23, 1}); !math.IsNaN(v) {
		t.Errorf("sum past f32's exact range = %v, want NaN", v)
	}
}

func TestIntervals(t *testing.T) {
	u := union([]interval{{5, 10}, {0, 3}, {2, 4}, {9, 12}})
	if len(u) != 2 || u[0] != (interval{0, 4}) || u[1] != (interval{5, 12}) {
		t.Fatalf("union = %v", u)
	}
	x := intersect(nil, u, []interval{{3, 6}, {11, 20}})
	if length(x) != 1+1+1 {
		t.Fatalf("intersect = %v", x)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if p := percentile(ds, 50); p != 5 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(ds, 90); p != 9 {
		t.Errorf("p90 = %v", p)
	}
}

// Beyond the documented limits the checker says "unchecked" instead of
// guessing: bf16 sums over 600 ranks cannot stay exact.
func TestCheckerGivesUpBeyondLimits(t *testing.T) {
	chain := []stmt{{kind: sColl, coll: CollAllReduce, op: Sum, buckets: []int{0}}}
	e := testEngine(BF16, BF16, 200, 600, 0, chain)
	want := make([]float64, 200)
	e.model.newSim(0).run(0, want)
	nan := 0
	for _, w := range want {
		if math.IsNaN(w) {
			nan++
		}
	}
	if nan == 0 {
		t.Errorf("no element unchecked for bf16 sums over 600 ranks")
	}
}

// The checker's shortcuts for the first reduction after a fill (sums
// without per-element tests, the avg pattern's base alone, a table of
// averages) predict what brute force computes for reducescatter and
// reduce too, on every rank.
func TestCheckerReduceScatterAndReduce(t *testing.T) {
	for _, c := range []struct{ tdt, wire DType }{{F32, BF16}, {BF16, BF16}, {F16, F16}, {I32, I32}} {
		for _, op := range []RedOp{Sum, Avg} {
			for size := 2; size <= 5; size++ {
				for _, coll := range []Coll{CollReduceScatter, CollReduce} {
					chain := []stmt{{kind: sColl, coll: coll, op: op, root: size - 1, buckets: []int{0}}}
					const n = 403
					for rank := 0; rank < size; rank++ {
						e := testEngine(c.tdt, c.wire, n, size, rank, chain)
						want := make([]float64, n)
						e.model.newSim(0).run(0, want)
						slice := e.buckets[0].elems / int64(size)
						for i := int64(0); i < n; i++ {
							vals := make([]float64, size)
							for r := range vals {
								p := e.shapes[0].Params(r, size, 5, 0)
								vals[r] = RoundTo(RoundTo(float64(FillValue(&p, i)), c.tdt), c.wire)
							}
							red := RoundTo(reduceInOrder(vals, rng0(size), op, c.wire), c.tdt)
							exp := RoundTo(vals[rank], c.tdt) // reduce: the others keep theirs
							switch {
							case coll == CollReduceScatter && min(i/slice, int64(size-1)) == int64(rank):
								exp = red
							case coll == CollReduceScatter:
								exp = math.Inf(1) // undefined
							case rank == size-1:
								exp = red
							}
							if want[i] != exp {
								t.Fatalf("%s on %s, %s %s over %d ranks, rank %d, element %d: checker expects %v, brute force %v",
									c.tdt, c.wire, coll, op, size, rank, i, want[i], exp)
							}
						}
					}
				}
			}
		}
	}
}

// rng0 is the identity order 0..n-1.
func rng0(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
	}
	return o
}

// The buffers' first fill sees the init block's collectives: the pattern's
// range must keep them exact too. An init allreduce avg of f32 tensors on a
// bf16 wire, in a bucket whose step only takes the maximum, was filled
// for the maximum (k = 256) and its sums over 3 ranks left bf16's range:
// unchecked.
func TestCheckerInitChainExact(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, c := range []struct {
		tdt, wire DType
		init      RedOp
		step      []RedOp
	}{
		{F32, BF16, Avg, []RedOp{Max}},
		{BF16, BF16, Sum, []RedOp{Min}},
		{F16, F16, Sum, nil},
		{I8, I8, Avg, []RedOp{Sum}},
	} {
		for size := 1; size <= 8; size++ {
			const n = 300
			p := &Plan{
				Tensors: []Tensor{{Name: "t", DType: c.tdt, Shape: []int64{n}, Bucket: 0}},
				Buckets: []Bucket{{Name: "b", Wire: c.wire, Elems: n, Tensors: []int{0}}},
				Streams: []Stream{{Name: "comm"}},
			}
			prog := &program{init: []stmt{{kind: sColl, coll: CollAllReduce, op: c.init, buckets: []int{0}}}, step: []stmt{{kind: sBackward}}}
			for _, op := range c.step {
				prog.step = append(prog.step, stmt{kind: sColl, coll: CollAllReduce, op: op, buckets: []int{0}})
			}
			e := &engine{plan: p, prog: prog, rank: 0, size: size}
			e.shapes = choosePatterns(p, prog, size)
			e.buckets = []bucketMem{{elems: n}}
			e.backOrder = []int{0}
			e.model = newModel(e)
			e.model.apply(prog.init, InitStep)
			want := make([]float64, n)
			e.model.newSim(0).run(0, want)
			for i := int64(0); i < n; i++ {
				vals := make([]float64, size)
				for r := range vals {
					fp := e.shapes[0].Params(r, size, InitStep, 0)
					vals[r] = RoundTo(RoundTo(float64(FillValue(&fp, i)), c.tdt), c.wire)
				}
				got := RoundTo(reduceInOrder(vals, rng.Perm(size), c.init, c.wire), c.tdt)
				if math.IsNaN(want[i]) {
					t.Fatalf("%s on %s wire, init %s then step %v over %d ranks: element %d unchecked", c.tdt, c.wire, c.init, c.step, size, i)
				}
				if got != want[i] {
					t.Fatalf("%s on %s wire, init %s over %d ranks: element %d: arithmetic gives %v, checker expects %v", c.tdt, c.wire, c.init, size, i, got, want[i])
				}
			}
		}
	}
}

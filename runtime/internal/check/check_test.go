package check

import (
	"fmt"
	"math"
	"math/rand"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// testRank is a rank's checker and what the tests read of it: the model,
// the tensors' patterns and their memory.
type testRank struct {
	model  *Model
	shapes []elem.PatternShape
	mem    *backend.Layout
}

// newTestRank returns the checker of rank in a world of size ranks for p
// and prog, the tensors' memory mem on be (which may be nil when nothing is
// read), backward making every tensor ready.
func newTestRank(p *plan.Plan, prog *plan.Program, rank, size int, mem *backend.Layout, be backend.Backend) *testRank {
	var backOrder []int
	for i := range p.Tensors {
		backOrder = append(backOrder, i)
	}
	shapes := Patterns(p, prog, size, size)
	return &testRank{model: New(p, rank, size, shapes, mem, backOrder, be), shapes: shapes, mem: mem}
}

// rankFills returns element i of tensor 0's fill on every rank of a world
// of size at step: the inputs that a reduction of it combines.
func rankFills(e *testRank, size int, step uint32, i int) []float64 {
	vals := make([]float64, size)
	for r := range vals {
		ps := e.shapes[0].Params(r, size, step, 0)
		vals[r] = float64(elem.FillValue(&ps, int64(i)))
	}
	return vals
}

// testEngine builds just enough of a rank for the checker: one tensor of
// tdt in one bucket of wire dtype, n elements, seen by chain.
func testEngine(tdt, wire elem.DType, n int64, size, rank int, chain []plan.Stmt) *testRank {
	p := &plan.Plan{
		Tensors: []plan.Tensor{{Name: "t", DType: tdt, Shape: []int64{n}, Bucket: 0}},
		Buckets: []plan.Bucket{{Name: "b", Wire: wire, Elems: n, Tensors: []int{0}}},
		Streams: []plan.Stream{{Name: "comm"}},
	}
	prog := &plan.Program{Step: append([]plan.Stmt{{Kind: plan.StmtBackward}}, chain...)}
	padded := n
	if padded%int64(size) != 0 {
		padded += int64(size) - padded%int64(size)
	}
	e := newTestRank(p, prog, rank, size, &backend.Layout{Buckets: []backend.BucketMem{{Elems: padded}}}, nil)
	e.model.Apply(prog.Step, 5, StepTrain{Scale: 1})
	return e
}

// reduceInOrder reduces vals in the given order with the dtype's rounding
// after every operation, as an MPI implementation may.
func reduceInOrder(vals []float64, order []int, op plan.RedOp, dt elem.DType) float64 {
	acc := vals[order[0]]
	for _, i := range order[1:] {
		v := vals[i]
		switch op {
		case plan.Sum, plan.Avg:
			acc = elem.RoundTo(acc+v, dt)
		case plan.Prod:
			acc = elem.RoundTo(acc*v, dt)
		case plan.Min:
			acc = math.Min(acc, v)
		case plan.Max:
			acc = math.Max(acc, v)
		}
	}
	if op == plan.Avg {
		acc = elem.AvgOf(acc, dt, len(vals))
	}
	return acc
}

// The checker's predictions agree with the arithmetic of the dtype in any
// reduction order, and nothing is left unchecked for worlds of up to 8
// ranks: the pattern's ranges keep every partial result exact.
func TestCheckerPredictsAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	dts := []elem.DType{elem.F64, elem.F32, elem.F16, elem.BF16, elem.I64, elem.I32, elem.I8, elem.U8}
	for _, tdt := range dts {
		for _, wire := range []elem.DType{tdt, elem.F32, elem.BF16} {
			for op := plan.Sum; op <= plan.Prod; op++ {
				for size := 1; size <= 8; size++ {
					const n = 300
					chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: op, Buckets: []int{0}}}
					e := testEngine(tdt, wire, n, size, 0, chain)
					want := make([]float64, n)
					e.model.newSim(0).run(0, want)
					// Brute force: every rank's fill value, cast to the
					// wire, reduced in a random order, cast back.
					for i := int64(0); i < n; i++ {
						vals := make([]float64, size)
						for r := range vals {
							p := e.shapes[0].Params(r, size, 5, 0)
							vals[r] = elem.RoundTo(elem.RoundTo(float64(elem.FillValue(&p, i)), tdt), wire)
						}
						got := elem.RoundTo(reduceInOrder(vals, rng.Perm(size), op, wire), tdt)
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
	s := &sim{slice: 3, wire: elem.F32, tdt: elem.F32, limit: float64(elem.F32.ExactLimit()), red: make([]float64, 1), mult: 1, maxWire: math.MaxFloat32}
	for r := 0; r < 4; r++ {
		s.vals = append(s.vals, make([]float64, 1))
	}
	apply := func(op *plan.Stmt, x []float64, pos int64) {
		for r := range x {
			s.vals[r][0] = x[r]
		}
		s.off = pos
		s.applyBlock(op, 0, 1, 0)
		for r := range x {
			x[r] = s.vals[r][0]
		}
	}
	x := []float64{1, 2, 3, 4}
	apply(&plan.Stmt{Coll: plan.CollReduce, Op: plan.Sum, Root: 2}, x, 0)
	if x[2] != 10 || x[0] != 1 || x[3] != 4 {
		t.Errorf("reduce to 2: %v", x)
	}
	x = []float64{1, 2, 3, 4}
	apply(&plan.Stmt{Coll: plan.CollBroadcast, Root: 3}, x, 0)
	if x[0] != 4 || x[2] != 4 {
		t.Errorf("broadcast from 3: %v", x)
	}
	x = []float64{1, 2, 3, 4}
	apply(&plan.Stmt{Coll: plan.CollAllGather}, x, 7) // position 7: slice 2
	if x[0] != 3 || x[3] != 3 {
		t.Errorf("allgather at slice 2: %v", x)
	}
	x = []float64{1, 2, 3, 4}
	apply(&plan.Stmt{Coll: plan.CollReduceScatter, Op: plan.Max}, x, 4) // slice 1
	if x[1] != 4 || !math.IsInf(x[0], 1) || !math.IsInf(x[2], 1) {
		t.Errorf("reducescatter at slice 1: %v", x)
	}
	// A reduction over an undefined value is undefined; over an inexact
	// one, inexact.
	if v := s.reduce(plan.Sum, []float64{1, undefined}); !math.IsInf(v, 1) {
		t.Errorf("sum with undefined = %v", v)
	}
	if v := s.reduce(plan.Sum, []float64{1, math.NaN()}); !math.IsNaN(v) {
		t.Errorf("sum with NaN = %v", v)
	}
	if v := s.reduce(plan.Sum, []float64{1 << 23, 1 << 23, 1}); !math.IsNaN(v) {
		t.Errorf("sum past f32's exact range = %v, want NaN", v)
	}
}

// Beyond the documented limits the checker says "unchecked" instead of
// guessing: bf16 sums over 600 ranks cannot stay exact.
func TestCheckerGivesUpBeyondLimits(t *testing.T) {
	chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: plan.Sum, Buckets: []int{0}}}
	e := testEngine(elem.BF16, elem.BF16, 200, 600, 0, chain)
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
	for _, c := range []struct{ tdt, wire elem.DType }{{elem.F32, elem.BF16}, {elem.BF16, elem.BF16}, {elem.F16, elem.F16}, {elem.I32, elem.I32}} {
		for _, op := range []plan.RedOp{plan.Sum, plan.Avg} {
			for size := 2; size <= 5; size++ {
				for _, coll := range []plan.Coll{plan.CollReduceScatter, plan.CollReduce} {
					chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: coll, Op: op, Root: size - 1, Buckets: []int{0}}}
					const n = 403
					for rank := 0; rank < size; rank++ {
						e := testEngine(c.tdt, c.wire, n, size, rank, chain)
						want := make([]float64, n)
						e.model.newSim(0).run(0, want)
						slice := e.mem.Buckets[0].Elems / int64(size)
						for i := int64(0); i < n; i++ {
							vals := make([]float64, size)
							for r := range vals {
								p := e.shapes[0].Params(r, size, 5, 0)
								vals[r] = elem.RoundTo(elem.RoundTo(float64(elem.FillValue(&p, i)), c.tdt), c.wire)
							}
							red := elem.RoundTo(reduceInOrder(vals, rng0(size), op, c.wire), c.tdt)
							exp := elem.RoundTo(vals[rank], c.tdt) // reduce: the others keep theirs
							switch {
							case coll == plan.CollReduceScatter && min(i/slice, int64(size-1)) == int64(rank):
								exp = red
							case coll == plan.CollReduceScatter:
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

// Values that a reducescatter leaves undefined stay undefined through the
// reductions after it (neither checked nor counted), with a loss scale as
// without one: the scaled values' bound once made them unchecked.
func TestUndefinedStaysUndefinedWhenScaled(t *testing.T) {
	const n, size = 10, 2
	for _, scale := range []float64{1, 8} {
		for _, next := range []plan.Coll{plan.CollAllReduce, plan.CollReduce} {
			chain := []plan.Stmt{
				{Kind: plan.StmtColl, Coll: plan.CollReduceScatter, Op: plan.Min, Buckets: []int{0}},
				{Kind: plan.StmtColl, Coll: next, Op: plan.Min, Root: 1, Buckets: []int{0}},
			}
			p := &plan.Plan{
				Tensors: []plan.Tensor{{Name: "t", DType: elem.F32, Shape: []int64{n}, Bucket: 0}},
				Buckets: []plan.Bucket{{Name: "b", Wire: elem.F32, Elems: n, Tensors: []int{0}}},
				Streams: []plan.Stream{{Name: "comm"}},
			}
			prog := &plan.Program{Step: append([]plan.Stmt{{Kind: plan.StmtBackward}}, chain...)}
			for rank := range size {
				e := newTestRank(p, prog, rank, size, &backend.Layout{Buckets: []backend.BucketMem{{Elems: n}}}, nil)
				e.model.Apply(prog.Step, 5, StepTrain{Scale: scale})
				want := make([]float64, n)
				e.model.newSim(0).run(0, want)
				for i, w := range want {
					// Every element has an undefined input but on rank 0
					// after a reduce to rank 1, where rank 0 keeps its
					// reduce-scattered slice.
					defined := next == plan.CollReduce && rank == 0 && i < n/size
					if math.IsNaN(w) || defined == math.IsInf(w, 1) {
						t.Fatalf("scale %v, reducescatter then %s, rank %d, element %d: checker expects %v", scale, next, rank, i, w)
					}
				}
			}
		}
	}
}

// A loss scaler scales float gradients only: an integer tensor's values
// carry no scale, in a plan with a scaler as without, and its products are
// checked. The checker once multiplied them by the scale (wrong elements
// after a max) or gave up on their products (unchecked).
func TestIntegerGradientsCarryNoScale(t *testing.T) {
	const n, size = 300, 2
	for _, op := range []plan.RedOp{plan.Max, plan.Prod} {
		chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: op, Buckets: []int{0}}}
		p := &plan.Plan{
			Tensors: []plan.Tensor{{Name: "t", DType: elem.I8, Shape: []int64{n}, Bucket: 0}},
			Buckets: []plan.Bucket{{Name: "b", Wire: elem.I8, Elems: n, Tensors: []int{0}}},
			Streams: []plan.Stream{{Name: "comm"}},
		}
		prog := &plan.Program{Step: append([]plan.Stmt{{Kind: plan.StmtBackward}}, chain...)}
		e := newTestRank(p, prog, 0, size, &backend.Layout{Buckets: []backend.BucketMem{{Elems: n}}}, nil)
		e.model.Apply(prog.Step, 5, StepTrain{Scale: 8})
		want := make([]float64, n)
		e.model.newSim(0).run(0, want)
		for i := range want {
			vals := rankFills(e, size, 5, i)
			if exp := reduceInOrder(vals, rng0(size), op, elem.I8); want[i] != exp {
				t.Fatalf("%s of i8 gradients at scale 8, element %d: checker expects %v, brute force %v", op, i, want[i], exp)
			}
		}
	}
}

// An average divided before the sum divides every rank's input in place:
// a reduce leaves the ranks other than its root with their input divided
// by the number of ranks, where the checker once expected it unchanged.
func TestReduceDividedBeforeKeepsDividedInputs(t *testing.T) {
	const n = 300
	for _, wire := range []elem.DType{elem.F32, elem.F16} {
		for size := 2; size <= 4; size++ {
			p := &plan.Plan{
				Tensors: []plan.Tensor{{Name: "t", DType: elem.F32, Shape: []int64{n}, Bucket: 0}},
				Buckets: []plan.Bucket{{Name: "b", Wire: wire, Elems: n, Tensors: []int{0}, PreDivide: true}},
				Streams: []plan.Stream{{Name: "comm"}},
			}
			const root = 1
			prog := &plan.Program{Step: []plan.Stmt{{Kind: plan.StmtBackward},
				{Kind: plan.StmtColl, Coll: plan.CollReduce, Op: plan.Avg, Root: root, Buckets: []int{0}}}}
			for rank := range size {
				e := newTestRank(p, prog, rank, size, &backend.Layout{Buckets: []backend.BucketMem{{Elems: n}}}, nil)
				e.model.Apply(prog.Step, 5, StepTrain{Scale: 1})
				want := make([]float64, n)
				e.model.newSim(0).run(0, want)
				for i := range want {
					vals := rankFills(e, size, 5, i)
					for r := range vals {
						vals[r] = elem.AvgOf(vals[r], wire, size)
					}
					exp := vals[rank]
					if rank == root {
						exp = reduceInOrder(vals, rng0(size), plan.Sum, wire)
						if size == 3 {
							exp = math.NaN() // a sum of thirds: its rounding depends on the order
						}
					}
					if got := want[i]; got != exp && !(math.IsNaN(got) && math.IsNaN(exp)) {
						t.Fatalf("reduce avg divided before on %s over %d ranks to %d, rank %d, element %d: checker expects %v, want %v",
							wire, size, root, rank, i, got, exp)
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
		tdt, wire elem.DType
		init      plan.RedOp
		step      []plan.RedOp
	}{
		{elem.F32, elem.BF16, plan.Avg, []plan.RedOp{plan.Max}},
		{elem.BF16, elem.BF16, plan.Sum, []plan.RedOp{plan.Min}},
		{elem.F16, elem.F16, plan.Sum, nil},
		{elem.I8, elem.I8, plan.Avg, []plan.RedOp{plan.Sum}},
	} {
		for size := 1; size <= 8; size++ {
			const n = 300
			p := &plan.Plan{
				Tensors: []plan.Tensor{{Name: "t", DType: c.tdt, Shape: []int64{n}, Bucket: 0}},
				Buckets: []plan.Bucket{{Name: "b", Wire: c.wire, Elems: n, Tensors: []int{0}}},
				Streams: []plan.Stream{{Name: "comm"}},
			}
			prog := &plan.Program{Init: []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: c.init, Buckets: []int{0}}}, Step: []plan.Stmt{{Kind: plan.StmtBackward}}}
			for _, op := range c.step {
				prog.Step = append(prog.Step, plan.Stmt{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: op, Buckets: []int{0}})
			}
			e := newTestRank(p, prog, 0, size, &backend.Layout{Buckets: []backend.BucketMem{{Elems: n}}}, nil)
			e.model.Apply(prog.Init, elem.InitStep, StepTrain{Scale: 1})
			want := make([]float64, n)
			e.model.newSim(0).run(0, want)
			for i := int64(0); i < n; i++ {
				vals := make([]float64, size)
				for r := range vals {
					fp := e.shapes[0].Params(r, size, elem.InitStep, 0)
					vals[r] = elem.RoundTo(elem.RoundTo(float64(elem.FillValue(&fp, i)), c.tdt), c.wire)
				}
				got := elem.RoundTo(reduceInOrder(vals, rng.Perm(size), c.init, c.wire), c.tdt)
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

// hostBackend is just enough of a backend for checkBucket: buffers in Go
// memory and CopyToHost, which it counts.
type hostBackend struct {
	backend.Backend // nil: any other method panics
	copies          int
}

type hostBuffer struct {
	dt elem.DType
	b  []byte
}

func (h *hostBuffer) DType() elem.DType { return h.dt }
func (h *hostBuffer) Elems() int64      { return int64(len(h.b)) / h.dt.Size() }

func (h *hostBackend) CopyToHost(dst []byte, src backend.Span) error {
	h.copies++
	b := src.Buf.(*hostBuffer).b
	copy(dst, b[src.Off*src.DType.Size():(src.Off+src.N)*src.DType.Size()])
	return nil
}

// bucketEngine builds an engine whose bucket 0 (wire dtype wire) holds
// tensors of the given dtypes and element counts, in memory of a
// hostBackend: tensors of the wire dtype are views of the bucket's buffer,
// the others live in one buffer per dtype, 64-byte aligned, as the engine
// lays them out. The step is a backward and an allreduce of op.
func bucketEngine(dts []elem.DType, elems []int64, wire elem.DType, op plan.RedOp, size, rank int) (*testRank, *hostBackend) {
	p := &plan.Plan{Streams: []plan.Stream{{Name: "comm"}}}
	b := plan.Bucket{Name: "b", Wire: wire}
	for i, dt := range dts {
		p.Tensors = append(p.Tensors, plan.Tensor{Name: fmt.Sprintf("t%d", i), DType: dt, Shape: []int64{elems[i]}, Bucket: 0, Offset: b.Elems})
		b.Tensors = append(b.Tensors, i)
		b.Elems += elems[i]
	}
	p.Buckets = []plan.Bucket{b}
	prog := &plan.Program{Step: []plan.Stmt{{Kind: plan.StmtBackward}, {Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: op, Buckets: []int{0}}}}
	be := &hostBackend{}
	bucket := &hostBuffer{dt: wire, b: make([]byte, b.Elems*wire.Size())}
	mem := &backend.Layout{Buckets: []backend.BucketMem{{Buf: bucket, Elems: b.Elems}}}
	arenas := map[elem.DType]*hostBuffer{}
	for i, dt := range dts {
		tm := backend.TensorMem{Elems: elems[i]}
		if dt == wire {
			tm.Store, tm.InPlace = backend.Span{Buf: bucket, Off: p.Tensors[i].Offset, N: elems[i], DType: dt}, true
		} else {
			a := arenas[dt]
			if a == nil {
				a = &hostBuffer{dt: dt}
				arenas[dt] = a
			}
			off := (a.Elems()*dt.Size() + 63) &^ 63 / dt.Size()
			a.b = append(a.b, make([]byte, (off+elems[i])*dt.Size()-int64(len(a.b)))...)
			tm.Store = backend.Span{Buf: a, Off: off, N: elems[i], DType: dt}
		}
		mem.Tensors = append(mem.Tensors, tm)
	}
	e := newTestRank(p, prog, rank, size, mem, be)
	e.model.Apply(prog.Step, 5, StepTrain{Scale: 1})
	return e, be
}

// storeBytes returns the bytes of tensor t's gradient in e's hostBackend.
func storeBytes(e *testRank, t int) []byte {
	s := e.mem.Tensors[t].Store
	return s.Buf.(*hostBuffer).b[s.Off*s.DType.Size() : (s.Off+s.N)*s.DType.Size()]
}

// TestCheckBucketFindsEveryWrongElement: a bucket of tensors of every size
// around the checker's block (none, one element, thousands, tens of
// thousands), some cast to the wire dtype and some not, checked in one
// batch and in many small ones, by several workers: with every element as
// brute force computes it the check finds nothing wrong; with elements
// changed it counts exactly those and names the first in the bucket's
// order, and tensors past the chain limit are counted unchecked.
func TestCheckBucketFindsEveryWrongElement(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(8)) // several workers even on a small machine
	defer func(b int64) { checkBatchBytes = b }(checkBatchBytes)
	var dts []elem.DType
	var elems []int64
	add := func(dt elem.DType, n ...int64) {
		for _, x := range n {
			dts, elems = append(dts, dt), append(elems, x)
		}
	}
	add(elem.F32, 1, 1, 3, 0, 8191, 8192, 8193)
	add(elem.F16, 5, 9000)
	add(elem.F32, 20000, 2)
	add(elem.BF16, 1)
	add(elem.I32, 300)
	for i := 0; i < 700; i++ {
		add(elem.F32, int64(1+i%3))
	}
	const size, rank = 3, 1
	for _, op := range []plan.RedOp{plan.Sum, plan.Avg, plan.Max} {
		e, be := bucketEngine(dts, elems, elem.F32, op, size, rank)
		// Every element as brute force computes it: the fill values of
		// every rank, cast to the wire, reduced, cast back.
		for ti, dt := range dts {
			vals := make([]float64, elems[ti])
			for i := range vals {
				in := make([]float64, size)
				for r := range in {
					p := e.shapes[ti].Params(r, size, 5, ti)
					in[r] = elem.RoundTo(elem.RoundTo(float64(elem.FillValue(&p, int64(i))), dt), elem.F32)
				}
				vals[i] = elem.RoundTo(reduceInOrder(in, rng0(size), op, elem.F32), dt)
			}
			elem.StoreAll(storeBytes(e, ti), dt, vals)
		}
		for _, batch := range []int64{64 << 20, 1000} {
			checkBatchBytes = batch
			be.copies = 0
			r, err := e.model.CheckBucket(0)
			if err != nil || r.Wrong != 0 || r.Unchecked != 0 || r.First != "" {
				t.Fatalf("%s, batches of %d bytes: %+v, %v; want nothing wrong", op, batch, r, err)
			}
			// One copy for each run of neighbouring tensors of the wire
			// dtype and for each other tensor, in one batch.
			if runs := 7; batch > 1000 && be.copies != runs {
				t.Errorf("%s: %d copies to the host, want %d", op, be.copies, runs)
			}
		}
		// Change elements, from the last tensor to the first: the first
		// in the bucket's order is element 4096 of t5, the block's middle.
		changed := [][2]int64{{len64(dts) - 1, 0}, {401, 1}, {12, 299}, {9, 19999}, {8, 8999}, {6, 8192}, {5, 4096}}
		for _, c := range changed {
			b := storeBytes(e, int(c[0]))
			dt := dts[c[0]]
			v := make([]float64, elems[c[0]])
			elem.LoadAll(v, b, dt)
			v[c[1]]++
			elem.StoreAll(b, dt, v)
		}
		for _, batch := range []int64{64 << 20, 1000} {
			checkBatchBytes = batch
			r, err := e.model.CheckBucket(0)
			if err != nil || r.Wrong != int64(len(changed)) || r.Unchecked != 0 {
				t.Fatalf("%s, batches of %d bytes: %+v, %v; want %d wrong", op, batch, r, err, len(changed))
			}
			if !strings.HasPrefix(r.First, `tensor "t5" element 4096:`) {
				t.Errorf("%s, batches of %d bytes: first %q, want t5's element 4096", op, batch, r.First)
			}
		}
		// Tensors past the chain limit are counted, not checked.
		e.model.broken[5], e.model.broken[6] = true, true
		r, err := e.model.CheckBucket(0)
		if err != nil || r.Unchecked != elems[5]+elems[6] || r.Wrong != int64(len(changed)-2) || !strings.HasPrefix(r.First, `tensor "t8" element 8999:`) {
			t.Errorf("%s with t5 and t6 unchecked: %+v, %v", op, r, err)
		}
	}
}

func len64[T any](s []T) int64 { return int64(len(s)) }

// TestCheckCostPerTensor: checking a bucket of thousands of one-element
// tensors allocates nothing once the checker's buffers exist; each tensor
// used to start goroutines and allocate buffers and a simulator of its
// own (bench/results/2026-12-runtime-comments.md, "The cost of a check").
func TestCheckCostPerTensor(t *testing.T) {
	const n = 5000
	dts, elems := make([]elem.DType, n), make([]int64, n)
	for i := range dts {
		dts[i], elems[i] = elem.F32, 1
	}
	e, _ := bucketEngine(dts, elems, elem.F32, plan.Avg, 4, 1)
	if _, err := e.model.CheckBucket(0); err != nil {
		t.Fatal(err)
	}
	// The workers' goroutines and the result's message allocate a little
	// per check, not per tensor.
	allocs := testing.AllocsPerRun(5, func() {
		r, _ := e.model.CheckBucket(0)
		if r.Wrong < n/2 {
			t.Fatalf("%d wrong of %d elements in a zero bucket", r.Wrong, n)
		}
	})
	if allocs > 50 {
		t.Errorf("%.0f allocations to check %d tensors, want a few per check", allocs, n)
	}
}

// TestProdAfterReductionUnchecked pins what docs/runtime.md says of a prod
// after another reduction: the product multiplies values of the first
// reduction's range (up to k, n·k after a sum), which stay exact only
// while the product of n of them stays within L, so most elements are
// unchecked from 2 ranks on with the 8-bit integers, from 3 with f16, bf16
// and f32, 4 with i32 and 6 with f64 and i64; below, none are, except
// after a sum, some one rank earlier. At 2 ranks a float product is one
// rounding and predicted whatever its size, unless it overflows: f16's
// products past 65504 are unchecked (TestPairReductionsChecked).
func TestProdAfterReductionUnchecked(t *testing.T) {
	from := map[elem.DType]int{elem.F16: 3, elem.BF16: 3, elem.I8: 2, elem.U8: 2, elem.F32: 3, elem.I32: 4, elem.F64: 6, elem.I64: 6}
	for dt, most := range from {
		for _, first := range []plan.RedOp{plan.Min, plan.Max, plan.Sum, plan.Avg} {
			share := func(size int) float64 {
				chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: first, Buckets: []int{0}}, {Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: plan.Prod, Buckets: []int{0}}}
				const n = 2000
				e := testEngine(dt, dt, n, size, 0, chain)
				want := make([]float64, n)
				e.model.newSim(0).run(0, want)
				nan := 0
				for _, w := range want {
					if math.IsNaN(w) {
						nan++
					}
				}
				return float64(nan) / n
			}
			if s := share(most); s < 0.5 {
				t.Errorf("%s, %s then prod over %d ranks: %.0f%% unchecked, want most", dt, first, most, 100*s)
			}
			if s := share(most - 1); s > 0 && (first != plan.Sum || s >= 0.5) && !(dt == elem.F16 && most-1 == 2) {
				t.Errorf("%s, %s then prod over %d ranks: %.0f%% unchecked, want none", dt, first, most-1, 100*s)
			}
			if most > 2 {
				if s := share(most - 2); s > 0 {
					t.Errorf("%s, %s then prod over %d ranks: %.0f%% unchecked, want none", dt, first, most-2, 100*s)
				}
			}
		}
	}
}

// accEngine is testEngine for a plan whose steps have micro micro-batches.
func accEngine(tdt, wire elem.DType, n int64, size, micro int, chain []plan.Stmt) *testRank {
	p := &plan.Plan{
		Tensors:    []plan.Tensor{{Name: "t", DType: tdt, Shape: []int64{n}, Bucket: 0}},
		Buckets:    []plan.Bucket{{Name: "b", Wire: wire, Elems: n, Tensors: []int{0}}},
		Streams:    []plan.Stream{{Name: "comm"}},
		Accumulate: micro,
	}
	prog := &plan.Program{Step: append([]plan.Stmt{{Kind: plan.StmtBackward}}, chain...)}
	e := newTestRank(p, prog, 0, size, &backend.Layout{Buckets: []backend.BucketMem{{Elems: n}}}, nil)
	e.model.Apply(prog.Step, 5, StepTrain{Scale: 1})
	return e
}

// With gradient accumulation the checker predicts, in any reduction order,
// what each rank's sum of its micro-batches' patterns (each added in the
// tensor's dtype, as elem.AddBytes adds) reduces to; sums and averages
// stay exact (nothing unchecked), and where a product cannot, the element
// is unchecked rather than guessed.
func TestCheckerPredictsAccumulatedAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, tdt := range []elem.DType{elem.F64, elem.F32, elem.F16, elem.BF16, elem.I32, elem.I8, elem.U8} {
		for _, wire := range []elem.DType{tdt, elem.F32} {
			for _, op := range []plan.RedOp{plan.Sum, plan.Avg, plan.Max, plan.Prod} {
				for _, size := range []int{1, 2, 3, 5} {
					for _, micro := range []int{2, 4} {
						const n = 200
						chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: op, Buckets: []int{0}}}
						e := accEngine(tdt, wire, n, size, micro, chain)
						want := make([]float64, n)
						e.model.newSim(0).run(0, want)
						for i := int64(0); i < n; i++ {
							vals := make([]float64, size)
							for r := range vals {
								acc := 0.0
								for m := range micro {
									p := e.shapes[0].Params(r, size, elem.MicroStep(5, m), 0)
									acc = elem.RoundTo(acc+float64(elem.FillValue(&p, i)), tdt)
								}
								vals[r] = elem.RoundTo(acc, wire)
							}
							got := elem.RoundTo(reduceInOrder(vals, rng.Perm(size), op, wire), tdt)
							switch {
							case math.IsNaN(want[i]) && op != plan.Prod:
								t.Fatalf("%s on %s wire, %s over %d ranks of %d micro-batches: element %d unchecked", tdt, wire, op, size, micro, i)
							case !math.IsNaN(want[i]) && got != want[i]:
								t.Fatalf("%s on %s wire, %s over %d ranks of %d micro-batches: element %d: arithmetic gives %v, checker expects %v (inputs %v)",
									tdt, wire, op, size, micro, i, got, want[i], vals)
							}
						}
					}
				}
			}
		}
	}
}

// Accumulated sums whose partial sums leave the exact range are unchecked,
// the others predicted: u8 gradients of 600 micro-batches (values 0 and
// 1: sums of about 300, past u8's 255, where the additions saturate).
func TestCheckerAccumulatedGivesUp(t *testing.T) {
	chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: plan.Sum, Buckets: []int{0}}}
	e := accEngine(elem.U8, elem.U8, 200, 1, 600, chain)
	want := make([]float64, 200)
	e.model.newSim(0).run(0, want)
	for i, w := range want {
		sum := 0.0
		for m := range 600 {
			p := e.shapes[0].Params(0, 1, elem.MicroStep(5, m), 0)
			sum += float64(elem.FillValue(&p, int64(i)))
		}
		if math.IsNaN(w) != (sum > 255) || !math.IsNaN(w) && w != sum {
			t.Fatalf("element %d: the checker expects %v of a sum of %v", i, w, sum)
		}
	}
}

// An output's values that still carry the loss scale (a power of two) are
// summed exactly, as their unscaled multiples would be, unless the sum
// leaves the wire's finite range; on an integer wire the exact limit is
// the largest value and no factor widens it.
func TestReduceScaledValues(t *testing.T) {
	sim := func(dt elem.DType) *sim {
		// Three ranks: the general rule (two are predicted pairwise,
		// whatever the values).
		return &sim{wire: dt, tdt: dt, limit: float64(dt.ExactLimit()), mult: 1, maxWire: MaxFinite(dt), vals: make([][]float64, 3)}
	}
	const scale = 65536
	cases := []struct {
		dt   elem.DType
		op   plan.RedOp
		x    []float64
		want float64 // NaN: not predicted
	}{
		{elem.F32, plan.Sum, []float64{1000 * scale, -999 * scale}, scale},
		{elem.F32, plan.Sum, []float64{1000 * scale, 999 * scale}, 1999 * scale},
		{elem.F32, plan.Avg, []float64{1000 * scale, 998 * scale, 999 * scale}, 999 * scale},
		{elem.F16, plan.Sum, []float64{1024 * 32, 1000 * 32}, 2024 * 32},
		{elem.F16, plan.Sum, []float64{1024 * 64, 1024 * 64}, math.NaN()}, // past 65504
		{elem.F32, plan.Sum, []float64{(1 << 24) + 1, 1}, math.NaN()},     // odd: past the exact limit
		{elem.I8, plan.Sum, []float64{64, 64}, math.NaN()},                // 128 is no i8
	}
	for _, c := range cases {
		got := sim(c.dt).reduce(c.op, c.x)
		if got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("%v %v of %v = %v, want %v", c.dt, c.op, c.x, got, c.want)
		}
	}
}

// The maximum or minimum of loss-scaled values is one of them: it is
// predicted whenever each input is finite once scaled, even where their
// sum would leave the wire's range, which only a sum or an average must
// stay in. (The sim's values are unscaled; mult is the scale.)
func TestScaledMaxOfLargeValues(t *testing.T) {
	vals := [][]float64{{2000, -2000}, {1500, -1900}, {-3000, 100}}
	for _, c := range []struct {
		op   plan.RedOp
		want []float64 // NaN: not predicted
	}{
		{plan.Max, []float64{2000, 100}},
		{plan.Min, []float64{-3000, -2000}},
		{plan.Sum, []float64{math.NaN(), math.NaN()}}, // 16 times 6500 or 4000 is past f16's 65504
	} {
		s := &sim{wire: elem.F16, tdt: elem.F16, limit: float64(elem.F16.ExactLimit()), mult: 16,
			maxWire: MaxFinite(elem.F16), vals: vals, red: make([]float64, 2)}
		got := s.sumBlock(c.op, 2)
		for j := range got {
			if got[j] != c.want[j] && !(math.IsNaN(got[j]) && math.IsNaN(c.want[j])) {
				t.Errorf("%v: element %d = %v, want %v", c.op, j, got[j], c.want[j])
			}
		}
	}
}

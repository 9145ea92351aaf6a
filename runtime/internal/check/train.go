package check

// The training step in the Model: the loss scale that the backward's
// gradients carry, injected overflows, and a reference of every updated
// bucket's parameters and optimizer state, advanced in Go by the same
// arithmetic (optim) as the backends from the gradients the Model
// predicts, and compared with what each rank holds.

import (
	"fmt"
	"math"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// Training is what the Model is told of the training step.
type Training struct {
	// Params[b] is bucket b's parameters (Updated false: never updated).
	Params []Params
	// Injections are the overflows put into gradients (engine.Injection).
	Injections []Injection
	// Reference: keep the reference parameters (checks are on).
	Reference bool
}

// Params is one updated bucket's parameters and state on the backend.
type Params struct {
	Spec  optim.Spec
	DType elem.DType
	Param backend.Span
	State [2]backend.Span
	// Base is the bucket element that the spans' element 0 holds.
	Base int64
	// Sharded: the update reads and writes this rank's slice only.
	Sharded bool
	// Updated: an update reads the bucket.
	Updated bool
}

// Injection is an overflow put into element 0 of a tensor's gradient.
type Injection struct{ Tensor, Rank, Step int }

// StepTrain is how one step of the training step went.
type StepTrain struct {
	// Step counts from 0, warm-up included (-1: init).
	Step int
	// Scale is the step's loss scale (1 without a scaler).
	Scale float64
	// Skipped: the step overflowed and changed no parameter.
	Skipped bool
	// T numbers the step's update (optim.Spec.Hyper's t).
	T int
	// Weights are the ranks' weights of the step's weighted averages, the
	// shares of the global batch in force (nil: 1 each). The Model keeps
	// the slice: the caller replaces it rather than change it.
	Weights []int
}

// reference is one bucket's reference parameters and state, as values of
// the parameter dtype (NaN: not predictable): p, then the state the
// optimizer keeps.
type reference struct {
	p  values
	s  [2]values
	ok bool
}

// values holds one array of the reference in the narrowest type that
// holds the parameter dtype exactly: float32 for f32, f16 and bf16 (half
// the memory of float64, which a model of hundreds of millions of
// parameters needs), float64 for f64. A zero values (no state) reads 0.
type values struct {
	f32 []float32
	f64 []float64
}

func newValues(n int64, dt elem.DType) values {
	if dt == elem.F64 {
		return values{f64: make([]float64, n)}
	}
	return values{f32: make([]float32, n)}
}

func (v values) get(k int64) float64 {
	switch {
	case v.f64 != nil:
		return v.f64[k]
	case v.f32 != nil:
		return float64(v.f32[k])
	}
	return 0
}

func (v values) set(k int64, x float64) {
	switch {
	case v.f64 != nil:
		v.f64[k] = x
	case v.f32 != nil:
		v.f32[k] = float32(x)
	}
}

// forgetAt makes element k of the reference unpredictable.
func (r *reference) forgetAt(k int64) {
	r.p.set(k, math.NaN())
	r.s[0].set(k, math.NaN())
	r.s[1].set(k, math.NaN())
}

// SetTraining tells the Model of the training step, and sets up the
// reference parameters (optim.InitialParam, state zero).
func (m *Model) SetTraining(tr Training) {
	m.tr = tr
	m.ref = make([]reference, len(m.plan.Buckets))
	if !tr.Reference {
		return
	}
	for b, pm := range tr.Params {
		if !pm.Updated {
			continue
		}
		n := m.plan.Buckets[b].Elems
		ref := reference{p: newValues(n, pm.DType), ok: true}
		for k := range pm.Spec.States() {
			ref.s[k] = newValues(n, pm.DType)
		}
		for _, t := range m.plan.Buckets[b].Tensors {
			tn := &m.plan.Tensors[t]
			for i := range tn.Elems() {
				ref.p.set(tn.Offset+i, elem.RoundTo(optim.InitialParam(t, i), pm.DType))
			}
		}
		m.ref[b] = ref
	}
}

// injectedRank is the rank whose element 0 of tensor t the current step
// injects, or -1.
func (m *Model) injectedRank(t int) int {
	for _, in := range m.tr.Injections {
		if in.Tensor == t && in.Step == m.step.Step {
			return in.Rank
		}
	}
	return -1
}

// MaxFinite is the largest finite value of dt (the integers' largest).
func MaxFinite(dt elem.DType) float64 {
	switch dt {
	case elem.F64:
		return math.MaxFloat64
	case elem.F32:
		return math.MaxFloat32
	case elem.F16:
		return 65504
	case elem.BF16:
		return elem.BF16Value(0x7f7f)
	}
	return math.Inf(1)
}

// updateReference advances the reference of every bucket that update s
// reads, from the gradients the Model predicts for the element's owner:
// this rank, or, for a sharded update, the rank whose slice it is.
func (m *Model) updateReference(s *plan.Stmt) {
	if !m.tr.Reference || m.step.Skipped {
		return
	}
	for _, b := range s.Buckets {
		pm := &m.tr.Params[b]
		ref := &m.ref[b]
		if !ref.ok {
			continue
		}
		h := pm.Spec.Hyper(m.step.T, pm.DType)
		per := m.mem.Buckets[b].Elems / int64(m.size)
		for _, t := range m.plan.Buckets[b].Tensors {
			if m.broken[t] {
				m.forget(ref, t)
				continue
			}
			sim := m.newSim(t)
			tn := &m.plan.Tensors[t]
			block := checkBlockFor(m.size)
			for i0 := int64(0); i0 < tn.Elems(); i0 += int64(block) {
				n := int(min(int64(block), tn.Elems()-i0))
				sim.memValues(i0, n)
				for j := range n {
					k := tn.Offset + i0 + int64(j)
					r := m.rank
					if pm.Sharded {
						r = int(min(k/max(per, 1), int64(m.size-1)))
					}
					g := sim.vals[r][j]
					if !known(g) {
						ref.forgetAt(k)
						continue
					}
					p, s0, s1 := h.Apply(g, ref.p.get(k), ref.s[0].get(k), ref.s[1].get(k))
					ref.p.set(k, elem.RoundTo(p, pm.DType))
					ref.s[0].set(k, elem.RoundTo(s0, pm.DType))
					ref.s[1].set(k, elem.RoundTo(s1, pm.DType))
				}
			}
		}
	}
}

// forget makes tensor t's reference unpredictable.
func (m *Model) forget(ref *reference, t int) {
	tn := &m.plan.Tensors[t]
	for k := tn.Offset; k < tn.Offset+tn.Elems(); k++ {
		ref.forgetAt(k)
	}
}

// memValues leaves in s.vals what every rank's memory holds of elements
// i0..i0+n of the tensor after the chain so far: the loss scale applied,
// NaN where that is not predictable.
func (s *sim) memValues(i0 int64, n int) {
	if len(s.ints) < n {
		s.ints = make([]int32, n)
		s.base = make([]int32, n)
		s.dev = make([]int32, n)
		s.red = make([]float64, n)
	}
	for r := range s.vals {
		s.vals[r] = grow(s.vals[r], n)
	}
	if s.baseOnly {
		elem.FillBase(s.base[:n], &s.params[0], i0)
	} else {
		s.fill(i0, n)
	}
	s.replay(i0, n)
	for r := range s.vals {
		s.scaleOut(s.vals[r][:n])
	}
}

// applyUpdate replays the update at chain position k: a sharded update
// (the last collective before it reduce-scattered the bucket) writes each
// rank's new parameters into its slice of the gradients, rounded to the
// tensor's dtype; an
// update that reads the whole bucket leaves the gradients as they are,
// and so does a skipped step.
func (s *sim) applyUpdate(i0 int64, n int, k int) {
	m := s.m
	sharded := false
	for j := k - 1; j >= 0; j-- {
		if c := &s.chain[j]; c.Kind == plan.StmtColl {
			sharded = c.Coll == plan.CollReduceScatter
			break
		}
	}
	b := m.plan.Tensors[s.t].Bucket
	if !sharded || m.step.Skipped || b < 0 {
		return
	}
	ref := &m.ref[b]
	last := int64(len(s.vals) - 1)
	for j := range n {
		k := s.off + i0 + int64(j)
		owner := min(k/max(s.slice, 1), last)
		v := math.NaN()
		if ref.ok && known(ref.p.get(k)) {
			v = elem.RoundTo(ref.p.get(k), s.tdt)
		}
		s.vals[owner][j] = v
	}
	s.mult = 1
}

// CheckParams compares bucket b's parameters and optimizer state on this
// rank (its slice, for a sharded update) with the reference. The streams
// must have drained.
func (m *Model) CheckParams(b int) (Result, error) {
	var res Result
	pm := &m.tr.Params[b]
	ref := &m.ref[b]
	if !pm.Updated || !ref.ok {
		return res, nil
	}
	lo, hi := int64(0), m.plan.Buckets[b].Elems
	if pm.Sharded {
		per := m.mem.Buckets[b].Elems / int64(m.size)
		lo, hi = int64(m.rank)*per, min(int64(m.rank+1)*per, hi)
	}
	if hi <= lo {
		return res, nil
	}
	spans := []backend.Span{pm.Param, pm.State[0], pm.State[1]}
	want := []values{ref.p, ref.s[0], ref.s[1]}
	what := []string{"parameter", "momentum", "second moment"}
	if pm.Spec.Kind == optim.AdamW {
		what[1] = "first moment"
	}
	got := make([]float64, hi-lo)
	for k, sp := range spans {
		if sp.Buf == nil {
			continue
		}
		sp.Off, sp.N = lo-pm.Base, hi-lo
		host := make([]byte, sp.Bytes())
		if err := m.be.CopyToHost(host, sp); err != nil {
			return res, fmt.Errorf("reading the %ss of bucket %q: %w", what[k], m.plan.Buckets[b].Name, err)
		}
		elem.LoadAll(got, host, sp.DType)
		for _, t := range m.plan.Buckets[b].Tensors {
			tn := &m.plan.Tensors[t]
			a, z := max(lo, tn.Offset), min(hi, tn.Offset+tn.Elems())
			for i := a; i < z; i++ {
				w, g := want[k].get(i), got[i-lo]
				switch {
				case math.IsNaN(w):
					res.Unchecked++
				case g != w:
					res.Wrong++
					if res.First == "" {
						res.First = fmt.Sprintf("tensor %q element %d: %s %v, want %v", tn.Name, i-tn.Offset, what[k], g, w)
					}
				}
			}
		}
	}
	return res, nil
}

// SetReference sets the reference of bucket b's parameters and state (a
// resumed checkpoint's, as values of the parameter dtype over the whole
// bucket).
func (m *Model) SetReference(b int, p, s0, s1 []float64) {
	ref := &m.ref[b]
	if !ref.ok {
		return
	}
	arrays := []*values{&ref.p, &ref.s[0], &ref.s[1]}
	for k, vals := range [][]float64{p, s0, s1} {
		for i, v := range vals {
			arrays[k].set(int64(i), v)
		}
	}
}

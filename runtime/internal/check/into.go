package check

// Output buffers of out-of-place collectives (`into NAME`). An output holds
// no tensors, so the per-tensor chains do not describe it. The Model keeps
// instead, for every output, a recipe of its contents: the collective that
// last wrote it and what that collective read, frozen at the time (the
// source bucket's tensors as they were, or the recipe of the output it
// read), or, for a collective in place on the output, the recipe before
// it. Checking replays the recipe for every rank at once, over the
// output's own positions: an allreduce, broadcast or reduce maps position
// i to the source's i; an allgather from a source of L elements maps i to
// rank i/L's position i mod L; a reducescatter into L elements reduces
// every rank's position r*L+i into rank r's i. So a chain such as a
// reducescatter into a shard and an allgather of the shard into a full
// buffer is checked against the reduction of the source, element by
// element, with the same exact arithmetic as the in-place forms.
//
// The source of an out-of-place collective is not changed, so its tensors'
// chains do not grow: checking the source bucket then checks that it was
// left as it was. Where a value cannot be predicted (a reduce's other
// ranks, padding, the ranges the in-place forms leave unchecked) it is
// skipped or counted unchecked as there.

import (
	"fmt"
	"math"
	"slices"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// recipe is how an output buffer's contents came about.
type recipe struct {
	// coll is the collective that wrote it last (with Weights as it ran).
	coll plan.Stmt
	// inPlace: coll ran in place on the output, whose contents before it
	// prev describes (nil: never written, undefined).
	inPlace bool
	prev    *recipe
	// Out of place: the source bucket src, an output (srcOut, nil if
	// never written) or a bucket of tensors as they were (tensors).
	src     int
	srcOut  *recipe
	tensors []tensorState
}

// tensorState is one tensor's entry in the Model, frozen.
type tensorState struct {
	t        int
	fill     uint32
	chain    []plan.Stmt
	broken   bool
	scale    float64
	injected int
}

// isOutput reports whether bucket b is an output buffer.
func (m *Model) isOutput(b int) bool { return m.plan.Buckets[b].Out != nil }

// applyColl advances the Model over collective s (expanded from a group),
// which touches an output buffer: out of place, or in place on an output.
// It reports whether it did (false: an ordinary in-place collective).
func (m *Model) applyColl(s plan.Stmt) bool {
	if m.outs == nil {
		m.outs = make([]*recipe, len(m.plan.Buckets))
	}
	if s.Into != nil {
		src, out := s.Buckets[0], s.Into[0]
		r := &recipe{coll: s, src: src}
		if m.isOutput(src) {
			r.srcOut = m.outs[src]
		} else {
			for _, t := range m.plan.Buckets[src].Tensors {
				r.tensors = append(r.tensors, tensorState{t: t, fill: m.fill[t], chain: slices.Clone(m.chain[t]), broken: m.broken[t],
					scale: m.fillScale[t], injected: m.injected[t]})
			}
		}
		m.outs[out] = r
		return true
	}
	if !slices.ContainsFunc(s.Buckets, m.isOutput) {
		return false
	}
	for _, b := range s.Buckets {
		if m.isOutput(b) {
			m.outs[b] = &recipe{coll: s, inPlace: true, prev: m.outs[b], src: b}
		}
	}
	// The statement's ordinary buckets go the usual way.
	s.Buckets = slices.DeleteFunc(slices.Clone(s.Buckets), m.isOutput)
	m.applyTensors(s)
	return true
}

// checkOutput compares output bucket b on this rank with its recipe.
func (m *Model) checkOutput(b int) (Result, error) {
	var res Result
	n := m.plan.Buckets[b].Elems
	dt := m.plan.Buckets[b].Wire
	if n == 0 {
		return res, nil
	}
	host := make([]byte, n*dt.Size())
	span := m.mem.Buckets[b].Span
	span.N = n
	if err := m.be.CopyToHost(host, span); err != nil {
		return res, fmt.Errorf("reading output %q: %w", m.plan.Buckets[b].Name, err)
	}
	got := make([]float64, n)
	elem.LoadAll(got, host, dt)
	const block = 4096
	for i0 := int64(0); i0 < n; i0 += block {
		k := min(block, n-i0)
		want := m.outVals(m.outs[b], b, i0, k)[m.rank]
		for j, x := range want {
			switch {
			case math.IsInf(x, 1):
			case math.IsNaN(x):
				res.Unchecked++
			case got[i0+int64(j)] != x:
				res.Wrong++
				if res.First == "" {
					res.First = fmt.Sprintf("output %q element %d: got %v, want %v", m.plan.Buckets[b].Name, i0+int64(j), got[i0+int64(j)], x)
				}
			}
		}
	}
	return res, nil
}

// outVals returns every rank's values of positions i0..i0+n of output
// bucket b as recipe r left them (undefined for r nil).
func (m *Model) outVals(r *recipe, b int, i0, n int64) [][]float64 {
	vals := m.undefinedVals(n)
	if r == nil {
		return vals
	}
	s := &r.coll
	red := m.outSim(m.plan.Buckets[b].Wire)
	size := int64(m.size)
	col := make([]float64, m.size)
	reduceAt := func(in [][]float64, j int) float64 {
		for q := range in {
			col[q] = in[q][j]
		}
		return red.reduce(s.Op, col)
	}
	if r.inPlace {
		in := m.outVals(r.prev, b, i0, n)
		slice := max(m.mem.Buckets[b].Elems/size, 1)
		for j := range n {
			owner := min((i0+j)/slice, size-1)
			switch s.Coll {
			case plan.CollAllReduce:
				x := reduceAt(in, int(j))
				for q := range vals {
					vals[q][j] = x
				}
			case plan.CollReduce:
				for q := range vals {
					vals[q][j] = in[q][j]
				}
				vals[s.Root][j] = reduceAt(in, int(j))
			case plan.CollBroadcast:
				for q := range vals {
					vals[q][j] = in[s.Root][j]
				}
			case plan.CollAllGather:
				for q := range vals {
					vals[q][j] = in[owner][j]
				}
			case plan.CollReduceScatter:
				vals[owner][j] = reduceAt(in, int(j))
			}
		}
		return vals
	}
	switch s.Coll {
	case plan.CollAllReduce, plan.CollReduce, plan.CollBroadcast:
		in := m.srcVals(r, i0, n)
		for j := range n {
			switch s.Coll {
			case plan.CollAllReduce:
				x := reduceAt(in, int(j))
				for q := range vals {
					vals[q][j] = x
				}
			case plan.CollReduce:
				vals[s.Root][j] = reduceAt(in, int(j)) // the others: undefined
			case plan.CollBroadcast:
				for q := range vals {
					vals[q][j] = in[s.Root][j]
				}
			}
		}
	case plan.CollAllGather:
		// Position i holds rank i/L's position i mod L of the source.
		l := m.plan.Buckets[r.src].Elems
		for j := int64(0); j < n; {
			q, k := (i0+j)/max(l, 1), (i0+j)%max(l, 1)
			run := min(n-j, l-k)
			in := m.srcVals(r, k, run)
			for x := range run {
				for p := range vals {
					vals[p][j+x] = in[q][x]
				}
			}
			j += run
		}
	case plan.CollReduceScatter:
		// Rank p's position i is the reduction of every rank's p*L+i.
		l := m.plan.Buckets[b].Elems
		for p := range vals {
			in := m.srcVals(r, int64(p)*l+i0, n)
			for j := range n {
				vals[p][j] = reduceAt(in, int(j))
			}
		}
	}
	return vals
}

// srcVals returns every rank's values of positions i0..i0+n of the source
// of out-of-place recipe r, as the collective read them: in the source's
// wire dtype, undefined where no tensor lies (padding).
func (m *Model) srcVals(r *recipe, i0, n int64) [][]float64 {
	if m.isOutput(r.src) {
		return m.outVals(r.srcOut, r.src, i0, n)
	}
	vals := m.undefinedVals(n)
	wire := m.plan.Buckets[r.src].Wire
	for _, ts := range r.tensors {
		t := &m.plan.Tensors[ts.t]
		lo, hi := max(t.Offset, i0), min(t.Offset+t.Elems(), i0+n)
		if lo >= hi {
			continue
		}
		if ts.broken {
			for q := range vals {
				for j := lo; j < hi; j++ {
					vals[q][j-i0] = math.NaN()
				}
			}
			continue
		}
		tv := m.tensorVals(ts, lo-t.Offset, int(hi-lo))
		for q := range vals {
			copy(vals[q][lo-i0:hi-i0], tv[q])
		}
	}
	// Tensors of another dtype are cast into the wire buffer first.
	for q := range vals {
		for j, x := range vals[q] {
			if known(x) {
				vals[q][j] = elem.RoundTo(x, wire)
			}
		}
	}
	return vals
}

// tensorVals returns every rank's values of elements i0..i0+n of tensor
// ts.t as its frozen state says memory held them (the loss scale not yet
// undone included).
func (m *Model) tensorVals(ts tensorState, i0 int64, n int) [][]float64 {
	t := ts.t
	// The simulator reads the Model's entry of the tensor: swap the
	// frozen state in for the replay (checks run on one goroutine here).
	fill, chain, scale, inj := m.fill[t], m.chain[t], m.fillScale[t], m.injected[t]
	m.fill[t], m.chain[t], m.fillScale[t], m.injected[t] = ts.fill, ts.chain, ts.scale, ts.injected
	defer func() { m.fill[t], m.chain[t], m.fillScale[t], m.injected[t] = fill, chain, scale, inj }()
	s := m.newSim(t)
	for r := range s.vals {
		s.vals[r] = grow(s.vals[r], n)
	}
	if len(s.ints) < n {
		s.ints, s.base, s.dev, s.red = make([]int32, n), make([]int32, n), make([]int32, n), make([]float64, n)
	}
	if s.baseOnly {
		elem.FillBase(s.base[:n], &s.params[0], i0)
	} else {
		s.fill(i0, n)
	}
	s.replay(i0, n)
	out := make([][]float64, m.size)
	for r := range out {
		out[r] = slices.Clone(s.vals[r][:n])
		s.scaleOut(out[r])
	}
	return out
}

// undefinedVals returns n undefined values for every rank.
func (m *Model) undefinedVals(n int64) [][]float64 {
	vals := make([][]float64, m.size)
	for q := range vals {
		vals[q] = make([]float64, n)
		for j := range vals[q] {
			vals[q][j] = undefined
		}
	}
	return vals
}

// outSim returns a simulator that reduces values in wire dtype dt as the
// in-place forms do (exact sums within the dtype's exact range, the
// backend's average rounding).
func (m *Model) outSim(dt elem.DType) *sim {
	return &sim{m: m, t: -1, wire: dt, tdt: dt, limit: float64(dt.ExactLimit()), mult: 1, maxWire: MaxFinite(dt), inject: -1,
		vals: make([][]float64, m.size)}
}

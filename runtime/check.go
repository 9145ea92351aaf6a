package runtime

// Exact checks. The checker keeps a model of what every tensor holds: the
// step whose fill pattern it last received, and the collectives applied to
// its bucket since. To check an element it recomputes every rank's fill
// value (pattern.go), replays the collectives over that vector of values
// exactly as they are defined (allreduce: everyone gets the reduction;
// broadcast: everyone gets root's; reduce: root gets the reduction, the
// others keep theirs; allgather: slice r everywhere gets rank r's slice r;
// reducescatter: rank r's slice r gets the reduction, the other slices
// become undefined), including the casts to and from the wire dtype and
// the backend's avg rounding (AvgOf), and compares with what this rank
// holds. Elements whose expected value is undefined (the other ranks'
// slices after a reducescatter) are skipped; those whose partial results
// would leave the exact integer range of the dtype are counted as
// unchecked rather than guessed.

import (
	"fmt"
	"math"
	goruntime "runtime"
	"sync"
)

// maxChain bounds the collectives remembered per tensor between fills; a
// tensor that sees more (a bucket that no backward refills) is no longer
// checked.
const maxChain = 64

// model is the checker's knowledge of every tensor's contents.
type model struct {
	e      *engine
	fill   []uint32
	chain  [][]stmt
	broken []bool
	// host receives the tensor being checked. It is kept from tensor to
	// tensor and from check to check: fresh memory costs a page fault per
	// page, which on virtual machines cost more than the check itself.
	host []byte
}

func newModel(e *engine) *model {
	n := len(e.plan.Tensors)
	m := &model{e: e, fill: make([]uint32, n), chain: make([][]stmt, n), broken: make([]bool, n)}
	for i := range m.fill {
		m.fill[i] = InitStep
	}
	return m
}

// apply advances the model over one block of statements (groups expanded,
// see flat) run with fill step seed.
func (m *model) apply(block []stmt, seed uint32) {
	p := m.e.plan
	for _, s := range block {
		switch s.kind {
		case sBackward:
			for _, t := range m.e.backOrder {
				m.fill[t] = seed
				m.chain[t] = m.chain[t][:0]
				m.broken[t] = false
			}
		case sColl:
			for _, b := range s.buckets {
				for _, t := range p.Buckets[b].Tensors {
					if len(m.chain[t]) >= maxChain {
						m.broken[t] = true
						continue
					}
					m.chain[t] = append(m.chain[t], s)
				}
			}
		}
	}
}

// checkResult counts one bucket's elements.
type checkResult struct {
	wrong     int64
	unchecked int64
	// first describes the first wrong element, for the error message.
	first string
}

// checkBucket compares every element of bucket b's tensors on this rank
// with the model. The streams must have drained. Large tensors are checked
// by several goroutines (the host's cores are idle between steps).
func (m *model) checkBucket(b int) (checkResult, error) {
	var res checkResult
	e := m.e
	for _, t := range e.plan.Buckets[b].Tensors {
		tm := &e.tensors[t]
		if int64(cap(m.host)) < tm.store.Bytes() {
			m.host = make([]byte, tm.store.Bytes())
		}
		host := m.host[:tm.store.Bytes()]
		if err := e.be.CopyToHost(host, tm.store); err != nil {
			return res, fmt.Errorf("reading %q: %w", e.plan.Tensors[t].Name, err)
		}
		if m.broken[t] {
			res.unchecked += tm.elems
			continue
		}
		r := m.checkTensor(t, host)
		res.wrong += r.wrong
		res.unchecked += r.unchecked
		if res.first == "" {
			res.first = r.first
		}
	}
	return res, nil
}

// checkTensor compares tensor t's elements (host holds them) with the
// model, in blocks spread over the available cores.
func (m *model) checkTensor(t int, host []byte) checkResult {
	e := m.e
	dt := e.plan.Tensors[t].DType
	elems := e.tensors[t].elems
	blocks := (elems + checkBlock - 1) / checkBlock
	workers := int64(max(min(goruntime.GOMAXPROCS(0), 8), 1))
	workers = min(workers, blocks)
	var mu sync.Mutex
	var res checkResult
	firstAt := int64(-1)
	var wg sync.WaitGroup
	for w := int64(0); w < workers; w++ {
		wg.Add(1)
		go func(w int64) {
			defer wg.Done()
			got := make([]float64, checkBlock)
			want := make([]float64, checkBlock)
			s := m.newSim(t)
			var wrong, unchecked int64
			bad := int64(-1)
			var badGot, badWant float64
			for blk := w; blk < blocks; blk += workers {
				i0 := blk * checkBlock
				n := min(checkBlock, elems-i0)
				loadAll(got[:n], host[i0*dt.Size():(i0+n)*dt.Size()], dt)
				s.run(i0, want[:n])
				for j := int64(0); j < n; j++ {
					w := want[j]
					switch {
					case math.IsInf(w, 1):
						// Undefined by the collective's semantics.
					case math.IsNaN(w):
						unchecked++
					case got[j] != w:
						wrong++
						if bad < 0 {
							bad, badGot, badWant = i0+j, got[j], w
						}
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.wrong += wrong
			res.unchecked += unchecked
			if bad >= 0 && (firstAt < 0 || bad < firstAt) {
				firstAt = bad
				res.first = fmt.Sprintf("tensor %q element %d: got %v, want %v", e.plan.Tensors[t].Name, bad, badGot, badWant)
			}
		}(w)
	}
	wg.Wait()
	return res
}

// checkBlock is how many elements the checker simulates at a time.
const checkBlock = 8192

// sim replays one tensor's history for blocks of elements.
type sim struct {
	m      *model
	t      int
	params []FillParams
	vals   [][]float64 // [rank][element of block]
	tdt    DType
	wire   DType
	off    int64 // the tensor's offset in its bucket
	slice  int64 // elements per rank slice of the padded bucket
	chain  []stmt
	limit  float64
	// fillExact: every value of every rank's pattern is exact in the wire
	// dtype (see applyBlock). sumFirst: the first collective sums or
	// averages such values without leaving the exact range (sumFilled).
	// baseOnly: it is an allreduce or reducescatter of the avg pattern,
	// which needs only the pattern's base. first: the collective being
	// replayed is the first.
	fillExact, sumFirst, baseOnly, first bool
	// avgTab[a-Lo] is the average of the first collective for base a,
	// when baseOnly holds for an avg.
	avgTab []float64
	ints   []int32
	base   []int32 // the avg pattern's base and deviation (fill)
	dev    []int32
	red    []float64
}

func (m *model) newSim(t int) *sim {
	e := m.e
	pt := &e.plan.Tensors[t]
	s := &sim{m: m, t: t, tdt: pt.DType, wire: pt.DType, chain: m.chain[t]}
	s.params = make([]FillParams, e.size)
	for r := range s.params {
		s.params[r] = e.shapes[t].Params(r, e.size, m.fill[t], t)
	}
	s.vals = make([][]float64, e.size)
	for r := range s.vals {
		s.vals[r] = make([]float64, checkBlock)
	}
	if pt.Bucket >= 0 {
		s.wire = e.plan.Buckets[pt.Bucket].Wire
		s.off = pt.Offset
		s.slice = e.buckets[pt.Bucket].elems / int64(e.size)
	}
	s.limit = float64(s.wire.ExactLimit())
	s.fillExact = true
	allAvg := true
	var bound int64 // of any sum of one value per rank
	for r := range s.params {
		lo, hi := s.params[r].valueRange()
		s.fillExact = s.fillExact && exactIn(lo, hi, s.wire)
		allAvg = allAvg && s.params[r].Kind == FillAvg
		bound += max(-lo, hi)
	}
	if len(s.chain) > 0 {
		first := &s.chain[0]
		s.sumFirst = s.fillExact && first.coll.Reduces() && (first.op == Sum || first.op == Avg) &&
			float64(bound) <= s.limit
		// A reduce's other ranks keep their values, so it needs them all.
		s.baseOnly = s.sumFirst && allAvg && first.coll != CollReduce
		p := &s.params[0]
		if s.baseOnly && first.op == Avg && int64(p.Hi)-int64(p.Lo) < 1<<16 {
			// The average is a function of the base: tabulate it.
			s.avgTab = make([]float64, int64(p.Hi)-int64(p.Lo)+1)
			for k := range s.avgTab {
				s.avgTab[k] = AvgOf(float64(e.size)*float64(int64(p.Lo)+int64(k)), s.wire, e.size)
			}
		}
	}
	return s
}

// exactIn reports whether every integer in [lo, hi] is exactly
// representable in dt, so that casting it to dt changes nothing.
func exactIn(lo, hi int64, dt DType) bool {
	if dt.Unsigned() && lo < 0 {
		return false
	}
	return max(-lo, hi) <= dt.ExactLimit()
}

// undefined marks a value that the collectives leave undefined; NaN marks
// one that cannot be predicted exactly. The pattern never produces either.
var undefined = math.Inf(1)

// run writes the expected values of elements i0.. of this rank into out
// (undefined or NaN where there is nothing to check).
func (s *sim) run(i0 int64, out []float64) {
	n := len(out)
	if len(s.ints) < n {
		s.ints = make([]int32, n)
		s.base = make([]int32, n)
		s.dev = make([]int32, n)
		s.red = make([]float64, n)
	}
	if s.baseOnly {
		fillBase(s.base[:n], &s.params[0], i0) // all the first collective needs
	} else {
		s.fill(i0, n)
	}
	for k := range s.chain {
		s.first = k == 0
		s.applyBlock(&s.chain[k], i0, n)
	}
	s.first = false
	copy(out, s.vals[s.m.e.rank][:n])
}

// fill writes every rank's fill values of elements i0..i0+n into s.vals
// (exact in every dtype: see analyze.go). The avg pattern's base is the
// same on every rank and its deviation the same on both ranks of a pair,
// so each is hashed once, not once per rank: with 4 ranks that is 3 hashes
// an element instead of 8.
func (s *sim) fill(i0 int64, n int) {
	ints := s.ints[:n]
	if len(s.params) > 1 && s.params[0].Kind == FillAvg {
		base, dev := s.base[:n], s.dev[:n]
		fillBase(base, &s.params[0], i0)
		for r := range s.vals {
			p := &s.params[r]
			if r == 0 || p.SeedB != s.params[r-1].SeedB {
				fillDev(dev, p, i0)
			}
			v := s.vals[r][:n]
			for j := range v {
				v[j] = float64(base[j] + p.Sign*dev[j])
			}
		}
		return
	}
	for r := range s.vals {
		v := s.vals[r][:n]
		fillInts(ints, &s.params[r], i0)
		for j := range v {
			v[j] = float64(ints[j])
		}
	}
}

// castAll rounds every known value of the block to dt. Integers within
// dt's exact range are what the pattern makes and stay as they are, which
// saves the rounding code for nearly every element.
func (s *sim) castAll(dt DType, n int) {
	switch dt {
	case F64:
		return
	case F32:
		// The conversion keeps NaN and infinity, so no test is needed.
		for r := range s.vals {
			v := s.vals[r][:n]
			for j, x := range v {
				v[j] = float64(float32(x))
			}
		}
		return
	}
	hi := float64(dt.ExactLimit())
	lo := -hi
	if dt.Unsigned() {
		lo = 0
	}
	for r := range s.vals {
		v := s.vals[r][:n]
		for j, x := range v {
			if x >= lo && x <= hi && x == math.Trunc(x) {
				continue
			}
			if known(x) {
				v[j] = RoundTo(x, dt)
			}
		}
	}
}

// applyBlock replays one collective on elements i0..i0+n of every rank.
// The cast to the wire dtype is skipped for the first collective after the
// fill when every value of the pattern is exact in the wire dtype (always,
// with the ranges choosePatterns picks): it would change nothing.
func (s *sim) applyBlock(op *stmt, i0 int64, n int) {
	cast := s.tdt != s.wire
	if cast && !(s.fillExact && len(s.chain) > 0 && op == &s.chain[0]) {
		s.castAll(s.wire, n)
	}
	vals := s.vals
	switch op.coll {
	case CollAllReduce:
		red := s.reduceBlock(op.op, n)
		for r := range vals {
			copy(vals[r][:n], red)
		}
	case CollReduce:
		copy(vals[op.root][:n], s.reduceBlock(op.op, n))
	case CollBroadcast:
		for r := range vals {
			if r != op.root {
				copy(vals[r][:n], vals[op.root][:n])
			}
		}
	case CollAllGather, CollReduceScatter:
		var red []float64
		if op.coll == CollReduceScatter {
			red = s.reduceBlock(op.op, n)
		}
		last := int64(len(vals) - 1)
		for j := 0; j < n; j++ {
			owner := min((s.off+i0+int64(j))/max(s.slice, 1), last)
			if red == nil {
				v := vals[owner][j]
				for r := range vals {
					vals[r][j] = v
				}
				continue
			}
			for r := range vals {
				vals[r][j] = undefined
			}
			vals[owner][j] = red[j]
		}
	}
	if cast {
		s.castAll(s.tdt, n)
	}
}

// reduceBlock reduces the block across ranks into s.red.
func (s *sim) reduceBlock(op RedOp, n int) []float64 {
	red := s.red[:n]
	if s.first && s.avgTab != nil {
		lo := s.params[0].Lo
		for j, a := range s.base[:n] {
			red[j] = s.avgTab[a-lo]
		}
		return red
	}
	if s.first && s.sumFirst {
		s.sumFilled(red)
		if op == Avg {
			for j, x := range red {
				red[j] = AvgOf(x, s.wire, len(s.vals))
			}
		}
		return red
	}
	col := make([]float64, len(s.vals))
	if (op == Sum || op == Avg) && len(s.vals) <= 16 {
		// The common cases without the per-element column copy.
		for j := range red {
			var sum, bound float64
			ok := true
			for r := range s.vals {
				v := s.vals[r][j]
				if !known(v) || v != math.Trunc(v) {
					ok = false
					break
				}
				sum += v
				bound += math.Abs(v)
			}
			switch {
			case !ok:
				for r := range col {
					col[r] = s.vals[r][j]
				}
				red[j] = s.reduce(op, col)
			case bound > s.limit:
				red[j] = math.NaN()
			case op == Avg:
				red[j] = AvgOf(sum, s.wire, len(s.vals))
			default:
				red[j] = sum
			}
		}
		return red
	}
	for j := range red {
		for r := range col {
			col[r] = s.vals[r][j]
		}
		red[j] = s.reduce(op, col)
	}
	return red
}

// sumFilled writes the sum over ranks of the fill values into red, for
// the first collective of the chain when sumFirst holds: the values are
// integers, exact in the wire dtype, and so is every partial sum (their
// magnitudes add up to at most the exact limit), so the sum is exact in
// any order and needs no per-element tests. With baseOnly it is size
// times the avg pattern's base, since the deviations of each pair of
// ranks cancel (pattern.go), and the ranks' values were never computed.
func (s *sim) sumFilled(red []float64) {
	if s.baseOnly {
		size := float64(len(s.vals))
		for j, a := range s.base[:len(red)] {
			red[j] = size * float64(a)
		}
		return
	}
	copy(red, s.vals[0][:len(red)])
	for _, v := range s.vals[1:] {
		for j, x := range v[:len(red)] {
			red[j] += x
		}
	}
}

// reduce returns the reduction of x in the wire dtype, or NaN when it
// cannot be predicted exactly.
func (s *sim) reduce(op RedOp, x []float64) float64 {
	for _, v := range x {
		if math.IsNaN(v) {
			return math.NaN()
		}
	}
	for _, v := range x {
		if math.IsInf(v, 0) {
			return undefined
		}
	}
	switch op {
	case Sum, Avg:
		var sum, bound float64
		for _, v := range x {
			if v != math.Trunc(v) {
				return math.NaN() // fractions could round differently per order
			}
			sum += v
			bound += math.Abs(v)
		}
		if bound > s.limit {
			return math.NaN()
		}
		if op == Avg {
			return AvgOf(sum, s.wire, len(x))
		}
		return sum
	case Prod:
		prod, bound := 1.0, 1.0
		for _, v := range x {
			if v != math.Trunc(v) {
				return math.NaN()
			}
			prod *= v
			bound *= max(math.Abs(v), 1)
		}
		if bound > s.limit {
			return math.NaN()
		}
		return prod
	case Min:
		v := x[0]
		for _, y := range x[1:] {
			v = math.Min(v, y)
		}
		return v
	case Max:
		v := x[0]
		for _, y := range x[1:] {
			v = math.Max(v, y)
		}
		return v
	}
	return math.NaN()
}

// known reports whether v is a value rather than a marker.
func known(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

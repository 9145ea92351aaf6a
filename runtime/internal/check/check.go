package check

// Exact checks. The checker keeps a Model of what every tensor holds: the
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
// unchecked rather than guessed, except at two ranks, where a float
// reduction is one rounding whatever the values (reducePair).

import (
	"fmt"
	"math"
	"math/bits"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// maxChain bounds the collectives remembered per tensor between fills; a
// tensor that sees more (a bucket that no backward refills) is no longer
// checked.
const maxChain = 64

// Model is the checker's knowledge of every tensor's contents, and what
// it needs to read them: the plan, this rank's place in the world, the
// tensors' fill patterns and memory, and the backend that holds it.
type Model struct {
	plan      *plan.Plan
	rank      int
	size      int
	shapes    []elem.PatternShape
	mem       *backend.Layout
	backOrder []int
	be        backend.Backend

	fill   []uint32
	chain  [][]plan.Stmt
	broken []bool
	// host receives the tensors being checked, a batch at a time. It, the
	// batch's lists and the workers are kept from batch to batch and from
	// check to check: fresh memory costs a page fault per page, and
	// goroutines, buffers and a simulator per tensor made a bucket of
	// one-element tensors cost far more than its elements
	// (bench/results/2026-12-runtime-comments.md, "The cost of a check").
	host    []byte
	batch   []int   // tensors of the batch
	offs    []int64 // their byte offsets in host
	pieces  []piece
	jobs    []int
	workers []*checkWorker
	// avgTabs caches the tables of averages (see sim.avgTab), which are
	// the same for every tensor of a pattern shape and wire dtype: computed
	// per tensor, they cost thousands of roundings each.
	avgMu   sync.Mutex
	avgTabs map[avgKey][]float64

	// The training step (train.go): what it is, the step being applied,
	// each tensor's scale and injected rank at its last fill (-1: none),
	// and the reference parameters of each updated bucket.
	tr        Training
	step      StepTrain
	fillScale []float64
	injected  []int
	ref       []reference
	// outs[b] is the recipe of output bucket b's contents (into.go);
	// nil before a collective touches an output.
	outs []*recipe
}

// avgKey names a table of averages: the base's range and the wire dtype
// (the world size is the engine's).
type avgKey struct {
	lo, hi int32
	wire   elem.DType
}

// New returns the Model of plan p on this rank of a world of size ranks,
// before the first fill: every tensor holds the pattern of elem.InitStep.
// shapes are the tensors' patterns (Patterns), mem their memory on backend
// be, backOrder the order in which a backward makes their gradients ready.
func New(p *plan.Plan, rank, size int, shapes []elem.PatternShape, mem *backend.Layout, backOrder []int, be backend.Backend) *Model {
	n := len(p.Tensors)
	m := &Model{plan: p, rank: rank, size: size, shapes: shapes, mem: mem, backOrder: backOrder, be: be,
		fill: make([]uint32, n), chain: make([][]plan.Stmt, n), broken: make([]bool, n)}
	for i := range m.fill {
		m.fill[i] = elem.InitStep
	}
	m.fillScale = make([]float64, n)
	m.injected = make([]int, n)
	for i := range n {
		m.fillScale[i], m.injected[i] = 1, -1
	}
	return m
}

// Apply advances the Model over one block of statements (groups expanded,
// see plan.Flat) run with fill step seed; st says how the training step
// went (its scale, whether it skipped its updates).
func (m *Model) Apply(block []plan.Stmt, seed uint32, st StepTrain) {
	if st.Scale == 0 {
		st.Scale = 1 // no scaler
	}
	m.step = st
	for _, s := range block {
		switch s.Kind {
		case plan.StmtBackward:
			filled := m.backOrder
			if s.Tensors != nil {
				filled = s.Tensors // a backward in pieces
			}
			for _, t := range filled {
				m.fill[t] = seed
				m.chain[t] = m.chain[t][:0]
				m.broken[t] = false
				m.fillScale[t] = 1
				if m.plan.Tensors[t].DType.IsFloat() {
					m.fillScale[t] = st.Scale // the backward scales float gradients only
				}
				m.injected[t] = m.injectedRank(t)
			}
		case plan.StmtUpdate:
			m.updateReference(&s)
			fallthrough
		case plan.StmtUnscale, plan.StmtColl:
			if s.Op == plan.WAvg {
				s.Weights = st.Weights
			}
			if s.Kind == plan.StmtColl && m.applyColl(s) {
				continue // an output buffer's (into.go)
			}
			m.applyTensors(s)
		}
	}
}

// applyTensors adds statement s to the chains of its buckets' tensors.
func (m *Model) applyTensors(s plan.Stmt) {
	for _, b := range s.Buckets {
		for _, t := range m.plan.Buckets[b].Tensors {
			if len(m.chain[t]) >= maxChain {
				m.broken[t] = true
				continue
			}
			m.chain[t] = append(m.chain[t], s)
		}
	}
}

// Result counts one bucket's elements.
type Result struct {
	// Wrong counts the elements that differ from the model; Unchecked
	// those the model cannot predict exactly.
	Wrong     int64
	Unchecked int64
	// First describes the first wrong element, for the error message.
	First string
}

// checkBatchBytes bounds the host copy of a batch of tensors: a bucket's
// tensors are copied and checked a batch at a time, so that the copy is
// no larger than this or the bucket's largest tensor (as when tensors were
// copied one at a time), whatever the bucket's size. A variable so that
// tests can cut buckets into many batches.
var checkBatchBytes int64 = 64 << 20

// CheckBucket compares every element of bucket b's tensors on this rank
// with the Model. The streams must have drained. The tensors are copied
// to the host in batches, and each batch is checked by several goroutines
// (the host's cores are idle between steps).
func (m *Model) CheckBucket(b int) (Result, error) {
	if m.isOutput(b) {
		return m.checkOutput(b)
	}
	var res Result
	e := m
	tensors := e.plan.Buckets[b].Tensors
	for k := 0; k < len(tensors); {
		// The next batch: tensors up to checkBatchBytes of copies, at
		// least one. A tensor that is no longer checked is counted, not
		// copied.
		m.batch, m.offs = m.batch[:0], m.offs[:0]
		var size int64
		for ; k < len(tensors); k++ {
			t := tensors[k]
			if m.broken[t] {
				res.Unchecked += e.mem.Tensors[t].Elems
				continue
			}
			n := e.mem.Tensors[t].Store.Bytes()
			// Each run of tensors that are copied together starts 8-byte
			// aligned, so that every element is aligned for elem.LoadAll.
			off := size
			if len(m.batch) == 0 || !m.continues(m.batch[len(m.batch)-1], t) {
				off = (size + 7) &^ 7
			}
			if len(m.batch) > 0 && off+n > checkBatchBytes {
				break
			}
			m.batch = append(m.batch, t)
			m.offs = append(m.offs, off)
			size = off + n
		}
		if len(m.batch) == 0 {
			continue
		}
		if int64(cap(m.host)) < size {
			// At least 64 bytes, so that Go's allocator aligns it to 8
			// (it packs smaller ones more tightly).
			m.host = make([]byte, (size+63)&^63)
		}
		host := m.host[:size]
		if err := m.copyBatch(host); err != nil {
			return res, err
		}
		r := m.checkHost(m.batch, m.offs, host)
		res.Wrong += r.Wrong
		res.Unchecked += r.Unchecked
		if res.First == "" {
			res.First = r.First
		}
	}
	return res, nil
}

// continues reports whether tensor t's gradient follows tensor prev's in
// memory: both are views of the same bucket's wire buffer, t right after
// prev. A batch places such neighbours side by side in its host copy too,
// and copies them in one piece.
func (m *Model) continues(prev, t int) bool {
	a, b := &m.mem.Tensors[prev], &m.mem.Tensors[t]
	return a.InPlace && b.InPlace && m.plan.Tensors[prev].Bucket == m.plan.Tensors[t].Bucket &&
		a.Store.Off+a.Store.N == b.Store.Off
}

// copyBatch copies the batch's tensors into host at their offsets, one
// CopyToHost per run of neighbours (see continues) rather than per tensor:
// on the GPU each copy is a cudaMemcpy of its own.
func (m *Model) copyBatch(host []byte) error {
	e := m
	for i := 0; i < len(m.batch); {
		j := i + 1
		for j < len(m.batch) && m.continues(m.batch[j-1], m.batch[j]) {
			j++
		}
		first, last := &e.mem.Tensors[m.batch[i]], &e.mem.Tensors[m.batch[j-1]]
		span := first.Store
		span.N = last.Store.Off + last.Store.N - first.Store.Off
		if err := e.be.CopyToHost(host[m.offs[i]:m.offs[i]+span.Bytes()], span); err != nil {
			name := e.plan.Tensors[m.batch[i]].Name
			if j-i > 1 {
				return fmt.Errorf("reading %q and the %d tensors after it: %w", name, j-i-1, err)
			}
			return fmt.Errorf("reading %q: %w", name, err)
		}
		i = j
	}
	return nil
}

// piece is a run of elements of one tensor that a worker checks at once.
type piece struct {
	t    int   // the tensor
	i0   int64 // its first element
	n    int   // elements, at most the block length
	host int64 // the byte offset of element i0 in the host copy
}

// pieceCost is what a piece costs beyond its elements, in elements: the
// set-up of a tensor's simulation and the per-block passes over every
// rank's values. Jobs are cut at about a block's worth of cost, so that a
// job of one-element tensors holds a few hundred of them, not thousands.
const pieceCost = 32

// checkHost compares the elements of tensors ts with the Model; host holds
// them, tensor ts[k] from byte offs[k] on. The work is cut into pieces of
// at most a block of one tensor, and the pieces into jobs of about a
// block's worth of work, which the workers take in order: the cost is
// proportional to the elements, plus a small constant per tensor, and a
// batch of many small tensors is spread over the cores as well as one
// large tensor is.
func (m *Model) checkHost(ts []int, offs []int64, host []byte) Result {
	e := m
	block := checkBlockFor(e.size)
	m.pieces, m.jobs = m.pieces[:0], m.jobs[:0]
	cost := 0
	for k, t := range ts {
		size := e.plan.Tensors[t].DType.Size()
		elems := e.mem.Tensors[t].Elems
		for i0 := int64(0); i0 < elems; i0 += int64(block) {
			n := int(min(int64(block), elems-i0))
			if cost == 0 {
				m.jobs = append(m.jobs, len(m.pieces))
			}
			m.pieces = append(m.pieces, piece{t: t, i0: i0, n: n, host: offs[k] + i0*size})
			cost += n + pieceCost
			if cost >= block {
				cost = 0
			}
		}
	}
	m.jobs = append(m.jobs, len(m.pieces))
	jobs := len(m.jobs) - 1
	if jobs == 0 {
		return Result{} // only tensors without elements
	}
	workers := min(max(min(goruntime.GOMAXPROCS(0), 8), 1), jobs)
	for len(m.workers) < workers {
		m.workers = append(m.workers, &checkWorker{})
	}
	var next atomic.Int64
	if workers <= 1 {
		// One job, or one core: on this goroutine, without starting any.
		m.workers[0].run(m, host, &next)
	} else {
		var wg sync.WaitGroup
		for _, w := range m.workers[1:workers] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.run(m, host, &next)
			}()
		}
		m.workers[0].run(m, host, &next)
		wg.Wait()
	}
	// Every worker takes its jobs in order, so its first wrong element is
	// its earliest; the earliest of all is the batch's first.
	var res Result
	var first *checkWorker
	for _, w := range m.workers[:workers] {
		res.Wrong += w.wrong
		res.Unchecked += w.unchecked
		if w.bad >= 0 && (first == nil || w.bad < first.bad || w.bad == first.bad && w.badAt < first.badAt) {
			first = w
		}
	}
	if first != nil {
		p := &m.pieces[first.bad]
		res.First = fmt.Sprintf("tensor %q element %d: got %v, want %v",
			e.plan.Tensors[p.t].Name, p.i0+int64(first.badAt), first.badGot, first.badWant)
	}
	return res
}

// checkWorker is one goroutine's share of a check and what it keeps for
// the next: its buffers and its simulator.
type checkWorker struct {
	got, want []float64
	sim       sim
	// The counts of the current batch, and its first wrong element: piece
	// bad, element badAt of the piece (bad is -1 without one).
	wrong, unchecked int64
	bad, badAt       int
	badGot, badWant  float64
}

// run checks the jobs of m.pieces that it takes from next until none are
// left.
func (w *checkWorker) run(m *Model, host []byte, next *atomic.Int64) {
	e := m
	w.wrong, w.unchecked, w.bad = 0, 0, -1
	w.sim.t = -1 // the Model has changed since the last batch
	jobs := int64(len(m.jobs) - 1)
	for k := next.Add(1) - 1; k < jobs; k = next.Add(1) - 1 {
		for pi := m.jobs[k]; pi < m.jobs[k+1]; pi++ {
			p := &m.pieces[pi]
			if w.sim.t != p.t {
				w.sim.load(m, p.t)
			}
			dt := e.plan.Tensors[p.t].DType
			w.got, w.want = grow(w.got, p.n), grow(w.want, p.n)
			got, want := w.got[:p.n], w.want[:p.n]
			elem.LoadAll(got, host[p.host:p.host+int64(p.n)*dt.Size()], dt)
			w.sim.run(p.i0, want)
			for j, x := range want {
				switch {
				case math.IsInf(x, 1):
					// Undefined by the collective's semantics.
				case math.IsNaN(x):
					w.unchecked++
				case got[j] != x:
					w.wrong++
					if w.bad < 0 {
						w.bad, w.badAt, w.badGot, w.badWant = pi, j, got[j], x
					}
				}
			}
		}
	}
}

// grow returns b with a length of at least n, reallocated only when it is
// too short.
func grow(b []float64, n int) []float64 {
	if len(b) < n {
		return make([]float64, n)
	}
	return b
}

// checkBlock is the most elements the checker simulates at a time.
const checkBlock = 8192

// checkBlockFor is how many elements the checker simulates at a time in a
// world of size ranks: checkBlock, fewer from 9 ranks on, so that a
// worker's values of every rank (8 bytes each) stay within 512 KiB and
// the cache; a large world made tens of megabytes a worker otherwise.
func checkBlockFor(size int) int {
	return max(min(checkBlock, (512<<10)/8/max(size, 1)), 256)
}

// avgTable returns the average of the first collective for every base in
// [lo, hi] (see sim.avgTab), computed once per range and wire dtype.
func (m *Model) avgTable(lo, hi int32, wire elem.DType) []float64 {
	m.avgMu.Lock()
	defer m.avgMu.Unlock()
	key := avgKey{lo, hi, wire}
	if tab, ok := m.avgTabs[key]; ok {
		return tab
	}
	tab := make([]float64, int64(hi)-int64(lo)+1)
	for k := range tab {
		tab[k] = elem.AvgOf(float64(m.size)*float64(int64(lo)+int64(k)), wire, m.size)
	}
	if m.avgTabs == nil {
		m.avgTabs = map[avgKey][]float64{}
	}
	m.avgTabs[key] = tab
	return tab
}

// sim replays one tensor's history for blocks of elements. Its buffers are
// kept when it moves on to another tensor (load).
type sim struct {
	m      *Model
	t      int // the tensor loaded, -1 for none
	params []elem.FillParams
	// micro holds the fill parameters of micro-batches 1.. of an
	// accumulated fill, micro[m-1][r] rank r's (empty for a fill of one:
	// see accumulated).
	micro [][]elem.FillParams
	vals  [][]float64 // [rank][element of block]
	tdt   elem.DType
	wire  elem.DType
	off   int64 // the tensor's offset in its bucket
	slice int64 // elements per rank slice of the padded bucket
	chain []plan.Stmt
	limit float64
	// fillExact: every value of every rank's pattern is exact in the wire
	// dtype (see applyBlock). sumFirst: the first collective sums or
	// averages such values without leaving the exact range (sumFilled).
	// baseOnly: it is an allreduce or reducescatter of the avg pattern,
	// which needs only the pattern's base. first: the collective being
	// replayed is the first.
	fillExact, sumFirst, baseOnly, first bool
	// avgTab[a-Lo] is the average of the first collective for base a,
	// when baseOnly holds for an avg (shared, read only: Model.avgTable).
	avgTab []float64
	ints   []int32
	base   []int32 // the avg pattern's base and deviation (fill)
	dev    []int32
	red    []float64
	col    []float64 // one element's values over the ranks (reduceBlock)
	// mult is the loss scale that memory holds the values multiplied by
	// (1 after an unscale); maxWire the wire dtype's largest finite value;
	// pre: the bucket divides before the sum; inject: the rank whose
	// element 0 was injected (-1: none).
	mult    float64
	maxWire float64
	pre     bool
	inject  int
	// wts are the weights of the weighted average being replayed (nil: 1
	// each).
	wts []int
}

// newSim returns a simulator of tensor t.
func (m *Model) newSim(t int) *sim {
	s := &sim{}
	s.load(m, t)
	return s
}

// load points the simulator at tensor t as the Model has it now.
func (s *sim) load(m *Model, t int) {
	e := m
	pt := &e.plan.Tensors[t]
	s.m, s.t, s.tdt, s.wire, s.chain = m, t, pt.DType, pt.DType, m.chain[t]
	s.off, s.slice = 0, 0
	s.params = s.params[:0]
	for r := 0; r < e.size; r++ {
		s.params = append(s.params, e.shapes[t].Params(r, e.size, m.fill[t], t))
	}
	s.micro = s.micro[:0]
	if m.fill[t] != elem.InitStep {
		// A backward's fill: the sum of the step's micro-batches.
		for k := 1; k < m.plan.Micro(); k++ {
			ps := make([]elem.FillParams, e.size)
			for r := range ps {
				ps[r] = e.shapes[t].Params(r, e.size, elem.MicroStep(m.fill[t], k), t)
			}
			s.micro = append(s.micro, ps)
		}
	}
	if len(s.vals) != e.size {
		s.vals = make([][]float64, e.size) // each grown by run
	}
	if pt.Bucket >= 0 {
		s.wire = e.plan.Buckets[pt.Bucket].Wire
		s.off = pt.Offset
		s.slice = e.mem.Buckets[pt.Bucket].Elems / int64(e.size)
	}
	s.limit = float64(s.wire.ExactLimit())
	s.mult, s.inject, s.pre = m.fillScale[t], m.injected[t], false
	if pt.Bucket >= 0 {
		s.pre = e.plan.Buckets[pt.Bucket].PreDivide
	}
	s.maxWire = MaxFinite(s.wire)
	s.fillExact = true
	s.sumFirst, s.baseOnly, s.first, s.avgTab = false, false, false, nil
	allAvg := true
	var bound int64 // of any sum of one value per rank
	micros := int64(len(s.micro) + 1)
	for r := range s.params {
		lo, hi := s.params[r].ValueRange()
		lo, hi = micros*lo, micros*hi // a sum of micros values in [lo, hi]
		s.fillExact = s.fillExact && exactIn(lo, hi, s.wire) && exactIn(lo, hi, s.tdt)
		allAvg = allAvg && s.params[r].Kind == elem.FillAvg
		bound += max(-lo, hi)
	}
	if len(s.chain) > 0 {
		first := &s.chain[0]
		s.sumFirst = s.fillExact && first.Coll.Reduces() && (first.Op == plan.Sum || first.Op == plan.Avg) &&
			float64(bound) <= s.limit
		// A reduce's other ranks keep their values, so it needs them all.
		// Scaled, pre-divided or injected values take the general path,
		// which bounds every element's sum.
		s.sumFirst = s.sumFirst && s.mult == 1 && !s.pre && s.inject < 0
		// An accumulated fill sums several bases: it takes the general
		// path.
		s.baseOnly = s.sumFirst && allAvg && first.Coll != plan.CollReduce && len(s.micro) == 0
		p := &s.params[0]
		if s.baseOnly && first.Op == plan.Avg && int64(p.Hi)-int64(p.Lo) < 1<<16 {
			// The average is a function of the base: tabulate it.
			s.avgTab = m.avgTable(p.Lo, p.Hi, s.wire)
		}
	}
}

// exactIn reports whether every integer in [lo, hi] is exactly
// representable in dt, so that casting it to dt changes nothing.
func exactIn(lo, hi int64, dt elem.DType) bool {
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
	for r := range s.vals {
		s.vals[r] = grow(s.vals[r], n)
	}
	if s.baseOnly {
		elem.FillBase(s.base[:n], &s.params[0], i0) // all the first collective needs
	} else {
		s.fill(i0, n)
	}
	s.replay(i0, n)
	copy(out, s.vals[s.m.rank][:n])
	s.scaleOut(out)
}

// replay applies the chain to the block's values, from the fill on.
func (s *sim) replay(i0 int64, n int) {
	s.mult = s.m.fillScale[s.t]
	for k := range s.chain {
		s.first = k == 0
		s.applyBlock(&s.chain[k], i0, n, k)
	}
	s.first = false
}

// scaleOut turns values into what memory holds: multiplied by the loss
// scale not yet undone, NaN where that overflows the tensor's dtype.
func (s *sim) scaleOut(out []float64) {
	if s.mult == 1 {
		return
	}
	lim := MaxFinite(s.tdt)
	for j, x := range out {
		if known(x) {
			if y := x * s.mult; math.Abs(y) <= lim {
				out[j] = y
			} else {
				out[j] = math.NaN()
			}
		}
	}
}

// fill writes every rank's fill values of elements i0..i0+n into s.vals
// (exact in every dtype: see analyze.go). The avg pattern's base is the
// same on every rank and its deviation the same on both ranks of a pair,
// so each is hashed once, not once per rank: with 4 ranks that is 3 hashes
// an element instead of 8.
func (s *sim) fill(i0 int64, n int) {
	ints := s.ints[:n]
	if len(s.micro) > 0 {
		s.accumulated(i0, n)
		s.markInjected(i0, n)
		return
	}
	if len(s.params) > 1 && s.params[0].Kind == elem.FillAvg {
		base, dev := s.base[:n], s.dev[:n]
		elem.FillBase(base, &s.params[0], i0)
		for r := range s.vals {
			p := &s.params[r]
			if r == 0 || p.SeedB != s.params[r-1].SeedB {
				elem.FillDev(dev, p, i0)
			}
			v := s.vals[r][:n]
			for j := range v {
				v[j] = float64(base[j] + p.Sign*dev[j])
			}
		}
		s.markInjected(i0, n)
		return
	}
	for r := range s.vals {
		v := s.vals[r][:n]
		elem.FillInts(ints, &s.params[r], i0)
		for j := range v {
			v[j] = float64(ints[j])
		}
	}
	s.markInjected(i0, n)
}

// accumulated writes every rank's accumulated fill of elements
// i0..i0+n into s.vals: the sum of its micro-batches' values, each added
// in the tensor's dtype. Integers add exactly while every partial sum
// stays within the dtype's exact range (and, unsigned, above 0); a sum
// whose partial sums leave it is NaN (not predicted).
func (s *sim) accumulated(i0 int64, n int) {
	ints := s.ints[:n]
	hi := float64(s.tdt.ExactLimit())
	lo := -hi
	if s.tdt.Unsigned() {
		lo = 0
	}
	out := s.red[:n] // free until the replay: marks a sum that left [lo, hi]
	for r := range s.vals {
		v := s.vals[r][:n]
		elem.FillInts(ints, &s.params[r], i0)
		for j := range v {
			v[j] = float64(ints[j])
			out[j] = 0
		}
		for _, ps := range s.micro {
			elem.FillInts(ints, &ps[r], i0)
			for j := range v {
				v[j] += float64(ints[j])
				if v[j] < lo || v[j] > hi {
					out[j] = 1
				}
			}
		}
		for j := range v {
			if out[j] != 0 {
				v[j] = math.NaN()
			}
		}
	}
}

// markInjected makes the injected element unpredictable: an infinity or
// a NaN turns sums into what no exact model predicts.
func (s *sim) markInjected(i0 int64, n int) {
	if s.inject >= 0 && i0 == 0 && n > 0 {
		s.vals[s.inject][0] = math.NaN()
	}
}

// castAll rounds every known value of the block to dt. Integers within
// dt's exact range are what the pattern makes and stay as they are, which
// saves the rounding code for nearly every element. A value past dt's
// range becomes NaN (not predicted): its infinity would read as the
// undefined marker, and the element would be neither checked nor counted.
func (s *sim) castAll(dt elem.DType, n int) {
	switch dt {
	case elem.F64:
		return
	case elem.F32:
		// The conversion keeps NaN and the undefined marker.
		for r := range s.vals {
			v := s.vals[r][:n]
			for j, x := range v {
				y := float64(float32(x))
				if math.IsInf(y, 0) && !math.IsInf(x, 0) {
					y = math.NaN()
				}
				v[j] = y
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
				if y := elem.RoundTo(x, dt); !math.IsInf(y, 0) {
					v[j] = y
				} else {
					v[j] = math.NaN()
				}
			}
		}
	}
}

// applyBlock replays one collective on elements i0..i0+n of every rank.
// The cast to the wire dtype is skipped for the first collective after the
// fill when every value of the pattern is exact in the wire dtype (always,
// with the ranges choosePatterns picks): it would change nothing.
func (s *sim) applyBlock(op *plan.Stmt, i0 int64, n int, k int) {
	switch op.Kind {
	case plan.StmtUnscale:
		s.mult = 1
		return
	case plan.StmtUpdate:
		s.applyUpdate(i0, n, k)
		return
	}
	cast := s.tdt != s.wire
	if cast && !(s.fillExact && len(s.chain) > 0 && op == &s.chain[0]) {
		s.castAll(s.wire, n)
	}
	vals := s.vals
	s.wts = op.Weights
	if op.Op == plan.WAvg && op.Coll.Reduces() {
		s.weigh(op.Weights, n)
	}
	switch op.Coll {
	case plan.CollAllReduce:
		red := s.reduceBlock(op.Op, n)
		for r := range vals {
			copy(vals[r][:n], red)
		}
	case plan.CollReduce:
		red := s.reduceBlock(op.Op, n)
		if s.pre && op.Op == plan.Avg {
			s.keepDivided(op.Root, n)
		}
		copy(vals[op.Root][:n], red)
	case plan.CollBroadcast:
		for r := range vals {
			if r != op.Root {
				copy(vals[r][:n], vals[op.Root][:n])
			}
		}
	case plan.CollAllGather, plan.CollReduceScatter:
		var red []float64
		if op.Coll == plan.CollReduceScatter {
			red = s.reduceBlock(op.Op, n)
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

// reduceBlock reduces the block across ranks into s.red. A weighted
// average's inputs are already weighted (weigh): it is their sum, then
// that multiplied by 1/Σ weights.
func (s *sim) reduceBlock(op plan.RedOp, n int) []float64 {
	if op == plan.WAvg {
		red := s.sumBlock(plan.Sum, n)
		s.unweigh(red)
		return red
	}
	return s.sumBlock(op, n)
}

// sumBlock is reduceBlock for every operator but WAvg.
func (s *sim) sumBlock(op plan.RedOp, n int) []float64 {
	red := s.reduceValues(op, n)
	if s.mult == 1 && !(s.pre && op == plan.Avg) {
		return red
	}
	// Scaled or pre-divided values: an element whose every partial sum
	// cannot be shown to stay finite on the wire is not predicted.
	// Each rank's input must be finite in the tensor's and the wire's
	// dtype, and so must the sum (of the inputs divided by n, with pre).
	one := min(s.maxWire, MaxFinite(s.tdt)) / s.mult
	lim := s.maxWire / s.mult
	if s.pre && op == plan.Avg {
		lim *= float64(len(s.vals))
	}
	for j := range red {
		if math.IsInf(red[j], 0) {
			continue // an input the collectives left undefined: so is the result
		}
		var bound, largest float64
		for r := range s.vals {
			a := math.Abs(s.vals[r][j])
			bound += a
			largest = max(largest, a)
		}
		if op == plan.Min || op == plan.Max {
			bound = largest // the result is one of the inputs: there is no partial sum
		}
		if !(bound <= lim && largest <= one) || op == plan.Prod && s.mult != 1 {
			red[j] = math.NaN()
		}
	}
	return red
}

// keepDivided divides the values of every rank but root by the number of
// ranks, as the average's division does: an average divided before the
// sum divides every rank's input in place (backend.CollOp.PreDivide), and
// a reduce leaves the ranks other than its root with their input so
// divided.
func (s *sim) keepDivided(root, n int) {
	size := len(s.vals)
	for r, v := range s.vals {
		if r == root {
			continue
		}
		for j, x := range v[:n] {
			if known(x) {
				v[j] = elem.AvgOf(x, s.wire, size)
			}
		}
	}
}

// avgOf is the average of sum over the ranks as the bucket computes it:
// the backend's division after the sum, or, divided before the sum,
// exactly sum/n when n is a power of two (each rank's share and every
// partial sum is then exact), and unpredictable otherwise.
func (s *sim) avgOf(sum float64) float64 {
	n := len(s.vals)
	if !s.pre {
		return elem.AvgOf(sum, s.wire, n)
	}
	if n&(n-1) != 0 {
		return math.NaN()
	}
	return elem.RoundTo(sum/float64(n), s.wire)
}

// reduceValues reduces the block across ranks into s.red.
func (s *sim) reduceValues(op plan.RedOp, n int) []float64 {
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
		if op == plan.Avg {
			for j, x := range red {
				red[j] = elem.AvgOf(x, s.wire, len(s.vals))
			}
		}
		return red
	}
	if len(s.col) < len(s.vals) {
		s.col = make([]float64, len(s.vals))
	}
	col := s.col[:len(s.vals)]
	if (op == plan.Sum || op == plan.Avg) && len(s.vals) <= 16 {
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
			case !ok || bound > s.limit && s.pairwise():
				for r := range col {
					col[r] = s.vals[r][j]
				}
				red[j] = s.reduce(op, col)
			case bound > s.limit:
				red[j] = math.NaN()
			case op == plan.Avg:
				red[j] = s.avgOf(sum)
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
func (s *sim) reduce(op plan.RedOp, x []float64) float64 {
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
	if s.pairwise() && (op == plan.Sum || op == plan.Avg || op == plan.Prod) {
		return s.reducePair(op, x[0], x[1])
	}
	switch op {
	case plan.Sum, plan.Avg:
		var sum, bound float64
		for _, v := range x {
			if v != math.Trunc(v) {
				return math.NaN() // fractions could round differently per order
			}
			sum += v
			bound += math.Abs(v)
		}
		if bound > s.limit*s.commonPow2(x) || bound > s.maxWire {
			return math.NaN()
		}
		if op == plan.Avg {
			return s.avgOf(sum)
		}
		return sum
	case plan.Prod:
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
	case plan.Min:
		v := x[0]
		for _, y := range x[1:] {
			v = math.Min(v, y)
		}
		return v
	case plan.Max:
		v := x[0]
		for _, y := range x[1:] {
			v = math.Max(v, y)
		}
		return v
	}
	return math.NaN()
}

// commonPow2 returns the largest power of two that divides every one of
// the integers x on a float wire, 1 on an integer wire. Every partial sum
// of such values is a multiple of it, and stays exact while its multiple
// stays within the exact limit: an output's values that still carry the
// loss scale (a power of two) sum exactly as the unscaled ones would.
func (s *sim) commonPow2(x []float64) float64 {
	if !s.wire.IsFloat() {
		return 1 // the exact limit of an integer dtype is its largest value
	}
	low := math.MaxInt
	for _, v := range x {
		if v == 0 {
			continue
		}
		b := math.Float64bits(v)
		exp := int(b>>52) & 0x7ff
		mant := b&(1<<52-1) | 1<<52
		low = min(low, exp-1075+bits.TrailingZeros64(mant))
	}
	if low <= 0 || low == math.MaxInt {
		return 1
	}
	return math.Ldexp(1, low)
}

// pairwise reports whether the reductions being replayed combine two
// ranks' values on a float wire, which reducePair predicts whatever the
// values.
func (s *sim) pairwise() bool { return len(s.vals) == 2 && s.wire.IsFloat() }

// reducePair returns the sum, average or product of two ranks' values a
// and b in the wire dtype, or NaN where it cannot be predicted exactly.
//
// At two ranks every backend applies the operator once to each element
// (an MPI operator has no identity, and NCCL combines the two inputs
// once), and one IEEE addition or multiplication is correctly rounded and
// commutative: the result does not depend on the order, fractions or not.
// Nor does it depend on whether a 16-bit format adds natively (NCCL's
// __hadd) or in float32 and rounds once (the CPU backend's operators,
// NCCL on older GPUs): float32's 24 bits are at least twice a 16-bit
// format's 11 plus 2, so the second rounding gives the correctly rounded
// result, as the float64 sum rounded to the dtype here does. The average
// is that sum divided as avgOf says; NCCL's, which multiplies each input
// by 1/2 before the sum, gives the same while no value is subnormal and
// the sum is finite. So every value must be zero or at least twice the
// smallest normal (a half of it, and a float32 product of two bf16
// values, is then normal: nothing underflows), and the result finite.
func (s *sim) reducePair(op plan.RedOp, a, b float64) float64 {
	var r float64
	switch op {
	case plan.Sum, plan.Avg:
		r = elem.RoundTo(a+b, s.wire)
	case plan.Prod:
		r = elem.RoundTo(a*b, s.wire)
	default:
		return math.NaN()
	}
	tiny := 2 * minNormal(s.wire)
	for _, v := range [...]float64{a, b, r} {
		if math.IsInf(v, 0) || v != 0 && math.Abs(v) < tiny {
			return math.NaN()
		}
	}
	if op == plan.Avg {
		return s.avgOf(r)
	}
	return r
}

// minNormal is the smallest positive normal value of float dtype dt.
func minNormal(dt elem.DType) float64 {
	switch dt {
	case elem.F64:
		return 0x1p-1022
	case elem.F16:
		return 0x1p-14
	}
	return 0x1p-126 // f32 and bf16
}

// known reports whether v is a value rather than a marker.
func known(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// weigh multiplies every rank's values by its weight, as a weighted
// average's first part does in the wire dtype (optim.Scaled): one
// rounding, the same on every backend, so any finite product is
// predicted (the sum after it is exact only where reduce says so); NaN
// where it overflows. weights nil means 1 each.
func (s *sim) weigh(weights []int, n int) {
	for r, w := range weights {
		if w == 1 || r >= len(s.vals) {
			continue
		}
		v := s.vals[r][:n]
		for j, x := range v {
			if !known(x) {
				continue
			}
			if y := optim.Scaled(x, float64(w), s.wire); known(y) {
				v[j] = y
			} else {
				v[j] = math.NaN()
			}
		}
	}
}

// unweigh multiplies the weighted sums by 1/Σ weights in the wire dtype,
// as a weighted average's last part does (optim.Scaled's arithmetic: the
// product in float32, float64 for f64, rounded to the dtype).
func (s *sim) unweigh(red []float64) {
	total := len(s.vals)
	if s.wts != nil {
		total = 0
		for _, x := range s.wts {
			total += x
		}
	}
	f := 1 / float64(total)
	for j, x := range red {
		if known(x) {
			red[j] = optim.Scaled(x, f, s.wire)
		}
	}
}

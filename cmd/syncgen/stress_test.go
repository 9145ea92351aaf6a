package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
)

// TestRandomPlans generates a few random valid plans from fixed seeds
// (tensors of every dtype, declared, capped and implicit buckets, wire
// casts, several streams, every collective and operator the checker allows,
// `after ready`, `after STREAM`, waits, groups and init blocks; for a share
// of the seeds gradient accumulation, a backward in pieces, out-of-place
// collectives (`into`), and a training step: `update`, `unscale`, a loss
// scaler and `divide before`), checks that the front end accepts them, and
// runs each under mpirun on the CPU backend with checks: every element and
// every updated parameter must be exact. A few of the training plans are
// also resumed from a checkpoint, at the same or another number of ranks,
// and must end where a run that never stopped ends.
func TestRandomPlans(t *testing.T) {
	needToolchain(t)
	mpirun := needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	// SYNCGEN_TEST_RANDOM_PLANS=N runs N other seeds, for a longer
	// campaign: from 1000, or from SYNCGEN_TEST_RANDOM_FIRST.
	n, first := 12, uint64(1)
	if v, err := strconv.Atoi(os.Getenv("SYNCGEN_TEST_RANDOM_PLANS")); err == nil && v > 0 {
		n, first = v, 1000
		if f, err := strconv.ParseUint(os.Getenv("SYNCGEN_TEST_RANDOM_FIRST"), 10, 64); err == nil {
			first = f
		}
	}
	var seeds []uint64
	for i := range n {
		seeds = append(seeds, first+uint64(i))
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newPlanGen(seed)
			src := g.plan()
			t.Logf("-np %d:\n%s", g.ranks, src)
			path := writeFile(t, dir, fmt.Sprintf("random%d.sync", seed), src)
			if _, diags := dsl.Load(path); diags.HasErrors() {
				var b strings.Builder
				diags.Render(&b)
				t.Fatalf("the generated plan does not check:\n%s\n%s", src, b.String())
			}
			bin := filepath.Join(dir, fmt.Sprintf("random%d_sync", seed))
			if code, out, errOut := syncgen(t, "build", path, "-o", bin); code != 0 {
				t.Fatalf("syncgen build: exit %d\n%s%s\n%s", code, out, errOut, src)
			}
			if !g.train {
				runRandomPlan(t, mpirun, bin, g.ranks, src)
				return
			}
			runTrainPlan(t, mpirun, bin, g, src)
		})
	}
}

// runRandomPlan runs a built random plan and requires exit status 0, no
// wrong and no unchecked element, and some checks.
func runRandomPlan(t *testing.T, mpirun, bin string, np int, src string) {
	t.Helper()
	runPlanReport(t, mpirun, bin, np, src, "--steps", "2", "--warmup", "1", "--check", "1")
}

// planReport is what the random plans' tests read of --json.
type planReport struct {
	Buckets []struct {
		Bucket     string `json:"bucket"`
		Collective string `json:"collective"`
		Unchecked  int64  `json:"unchecked"`
	} `json:"buckets"`
	Summary struct {
		Wrong     int64 `json:"wrong"`
		Unchecked int64 `json:"unchecked"`
		Checks    int   `json:"checks"`
	} `json:"summary"`
	Training *struct {
		Rows []struct {
			Bucket string `json:"bucket"`
			Work   string `json:"work"`
		} `json:"rows"`
		WrongParams     int64 `json:"wrong_parameters"`
		UncheckedParams int64 `json:"unchecked_parameters"`
		Scaler          *struct {
			FirstStep int       `json:"first_step"`
			Scale     []float64 `json:"scale"`
			Skipped   []int     `json:"skipped_steps"`
		} `json:"scaler"`
	} `json:"training"`
	Checkpoints *struct {
		ResumedAt *int `json:"resumed_at_step"`
	} `json:"checkpoints"`
}

// runPlanReport runs a built random plan with the program's flags flags
// and requires exit status 0, no wrong and no unchecked element, and some
// checks; it returns the JSON report.
func runPlanReport(t *testing.T, mpirun, bin string, np int, src string, flags ...string) planReport {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	args := []string{"-np", fmt.Sprint(np), "--bind-to", "none"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	if np > runtime.NumCPU() {
		args = append(args, "--oversubscribe")
	}
	args = append(args, bin)
	args = append(args, flags...)
	args = append(args, "--backend", "cpu", "--quiet", "--timeout", "60s", "--json", report)
	out, err := exec.Command(mpirun, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun -np %d %s: %v\n%s\nplan:\n%s", np, strings.Join(flags, " "), err, out, src)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("-np %d: no JSON report: %v\n%s", np, err, out)
	}
	var r planReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("-np %d: JSON report does not parse: %v", np, err)
	}
	if r.Summary.Wrong != 0 || r.Summary.Unchecked != 0 || r.Summary.Checks == 0 {
		var unchecked []string
		for _, b := range r.Buckets {
			if b.Unchecked != 0 {
				unchecked = append(unchecked, fmt.Sprintf("%s %s: %d", b.Bucket, b.Collective, b.Unchecked))
			}
		}
		t.Fatalf("-np %d %s: %d wrong, %d unchecked (%s), %d checks; want 0, 0 and some\n%s\nplan:\n%s",
			np, strings.Join(flags, " "), r.Summary.Wrong, r.Summary.Unchecked, strings.Join(unchecked, ", "), r.Summary.Checks, out, src)
	}
	return r
}

// genTensor is a tensor of a generated plan.
type genTensor struct {
	name   string
	dtype  string
	elems  int
	bucket int // index into planGen.buckets, or -1
}

// genBucket is a concrete bucket (a piece, or a tensor's implicit bucket).
type genBucket struct {
	target string // how a collective names it
	wire   string
	first  int  // declaration index of its first tensor (a backward makes it ready after that one)
	pre    bool // divide before
	// An output buffer of `into` (out): the buffer it was first written
	// from, and how its length derives from that one's ("same", "shard",
	// "gather"), which every later `into` of it must share.
	out   bool
	src   int
	class string
}

// genOut is what the block being generated wrote into an output buffer.
type genOut struct {
	// written: by the block so far; an output is read only then, so that
	// what it holds is known (the previous step's contents are not
	// modelled).
	written bool
	// reduced: its values went through a reduction (a product of them is
	// not predicted); fractions: they may hold fractions, of an average
	// or of a `divide before` reduce (only a min or a max may reduce
	// them); mag bounds their
	// magnitude, which no pattern shrinks for the output's own sums.
	reduced, fractions bool
	mag                float64
}

// planGen generates one random plan that is valid by construction: it
// models the streams' order with vector clocks as the runtime runs them
// (a backward makes each bucket ready in turn; `after ready` waits for the
// collective's own buckets) and adds `after` options and waits so that no
// two streams race on a bucket.
type planGen struct {
	r       *rand.Rand
	ranks   int
	b       strings.Builder
	tensors []genTensor
	buckets []genBucket
	// declared counts the buckets that are pieces of declared buckets,
	// the first of buckets, in the program's bucket order.
	declared int
	streams  []string
	// inGroup is set while a group's members are generated.
	inGroup bool
	// pairs is set once a reduction relies on the checker's rule for
	// two ranks (sums of fractions, products of reduced values): a
	// resume then keeps the two ranks.
	pairs bool
	// The ordering model of the block being generated.
	vc     map[string][]int // each stream's clock
	host   []int
	access map[int]map[string][]int // bucket -> stream -> clock of its latest access
	ready  map[int][]int            // bucket -> clock of its ready event in the latest backward
	// reduced says which buckets a reduction touched since the latest
	// backward: a `prod` after another reduction multiplies values of the
	// other one's range and is mostly unchecked from 3 ranks on
	// (docs/runtime.md), so only a bucket's first reduction may be a prod,
	// and never one in init, whose fill the step's reductions choose.
	reduced map[int]bool
	// products says which buckets' first reduction since the latest
	// backward was a prod of accumulated gradients: the pattern sizes
	// their values for the product alone, so a sum of the products may
	// leave the exact range, and only a min or a max may follow.
	products map[int]bool
	// fractions says which buckets may hold fractions since the latest
	// backward: a `reduce op avg` divided before the sum (in place, so
	// the ranks but the root hold fractions), or an average that is not
	// the first reduction after the fill (only the first averages the
	// pattern's avg kind, whose averages are integers). The checker does
	// not predict their sums (their rounding may depend on the order);
	// only a min or a max may reduce them.
	fractions map[int]bool

	// The training step (stress_train_test.go). tr draws its choices, so
	// that the seeds without one generate the plans they always did.
	tr    *rand.Rand
	train bool
	// scaler is the loss scaler's first scale (0: no scaler).
	scaler float64
	// synced is the clock of each bucket's latest collective in the block
	// (what `after synced` waits for); since is what each bucket went
	// through since the latest backward.
	synced map[int][]int
	since  map[int]*genSince
	// updates counts the buckets updated, unscales those unscaled;
	// injectable lists the tensors an overflow may go into (see
	// genSince.inject).
	updates, unscales int
	injectable        []genInject

	// The features drawn from x (gradient accumulation, a backward in
	// pieces, `into`), so that the seeds without them generate the plans
	// they always did.
	x     *rand.Rand
	accum int // micro-batches of a step (0: a plain step)
	// pieces lists the tensors of each piece of the step's backward (nil:
	// one whole backward); pending counts, per bucket, the pieces still
	// to come in the step that fill it (a collective of the bucket waits
	// for them: the checker requires it with accumulation, and a bucket
	// partly refilled is not modelled); a bucket with a tensor that no
	// piece fills is never synchronised in the step.
	pieces    [][]int
	nextPiece int
	pending   map[int]int
	into      bool
	outs      map[int]*genOut
	// sums counts the sums and averages in place on each bucket since its
	// fill; maxRoot is the largest root, anyPre whether a bucket divides
	// before the sum (both bound the number of ranks a resume may take).
	sums map[int]int
	// collected marks the buckets with a collective in place in the
	// block (`after synced` needs one; an `into` only reads its source).
	collected map[int]bool
	maxRoot   int
	anyPre    bool
}

var (
	genDTypes = []string{"f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"}
	genFloats = []string{"f64", "f32", "f16", "bf16"}
	genSizes  = map[string]int{"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "u8": 1}
)

func newPlanGen(seed uint64) *planGen {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	g := &planGen{r: r, ranks: 1 + r.IntN(4), tr: rand.New(rand.NewPCG(seed, 0x7a1a)), x: rand.New(rand.NewPCG(seed, 0xfea7))}
	g.train = g.tr.IntN(2) == 0
	if g.x.IntN(3) == 0 {
		g.accum = 2 + g.x.IntN(3)
	}
	g.into = g.x.IntN(2) == 0
	return g
}

func (g *planGen) line(indent int, format string, args ...any) {
	g.b.WriteString(strings.Repeat("    ", indent))
	fmt.Fprintf(&g.b, format, args...)
	g.b.WriteByte('\n')
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// plan returns the text of a random plan.
func (g *planGen) plan() string {
	r := g.r
	family := pick(r, genDTypes)
	if g.train && g.tr.IntN(3) != 0 {
		family = pick(g.tr, genFloats) // an optimizer and a scaler need float gradients
	}
	for i := range 2 + r.IntN(10) {
		dt := family
		if r.IntN(3) == 0 {
			dt = pick(r, genDTypes)
		}
		elems := pick(r, []int{1, 3, 16, 100, 255, 1000, 2048, 3000})
		name := fmt.Sprintf("l%d.%s", i, pick(r, []string{"weight", "bias"}))
		if r.IntN(8) == 0 {
			g.line(0, "tensor %s %s[%d] frozen", name, dt, elems)
			continue
		}
		shape := fmt.Sprint(elems)
		if elems%4 == 0 && r.IntN(2) == 0 {
			shape = fmt.Sprintf("4, %d", elems/4)
		}
		g.line(0, "tensor %s %s[%s]", name, dt, shape)
		g.tensors = append(g.tensors, genTensor{name: name, dtype: dt, elems: elems, bucket: -1})
	}
	if len(g.tensors) == 0 {
		g.line(0, "tensor last.weight f32[10]")
		g.tensors = append(g.tensors, genTensor{name: "last.weight", dtype: "f32", elems: 10, bucket: -1})
	}
	g.streams = []string{"compute", "comm", "side", "aux"}[:2+r.IntN(3)]
	for _, s := range g.streams {
		g.line(0, "stream %s%s", s, pick(r, []string{"", " priority high", " priority low"}))
	}
	g.declareBuckets()
	if g.train {
		g.declareScaler()
	}
	if g.x.IntN(3) == 0 {
		g.cutPieces()
	}
	if r.IntN(3) == 0 {
		g.line(0, "init {")
		g.block(true)
		g.line(0, "}")
	}
	if g.accum >= 2 {
		g.line(0, "step accumulate %d {", g.accum)
	} else {
		g.line(0, "step {")
	}
	g.block(false)
	g.line(0, "}")
	return g.b.String()
}

// declareBuckets declares a few buckets, each of tensors of one dtype or of
// float dtypes on a float wire, some capped; the other tensors get implicit
// buckets of their own (when a collective names them).
func (g *planGen) declareBuckets() {
	r := g.r
	for bi := range r.IntN(4) {
		var members []int
		for i := range g.tensors {
			if g.tensors[i].bucket < 0 && r.IntN(3) == 0 {
				members = append(members, i)
			}
		}
		if len(members) == 0 {
			continue
		}
		dtypes := map[string]bool{}
		allFloat := true
		for _, i := range members {
			dtypes[g.tensors[i].dtype] = true
			allFloat = allFloat && slices.Contains(genFloats, g.tensors[i].dtype)
		}
		wire := g.tensors[members[0]].dtype
		opts := ""
		if len(dtypes) > 1 || (allFloat && r.IntN(4) == 0) {
			if !allFloat {
				continue
			}
			wire = pick(r, genFloats)
			opts = " wire " + wire
		}
		layout := slices.Clone(members)
		if r.IntN(3) == 0 {
			opts = " order declared" + opts
		} else {
			slices.Reverse(layout)
		}
		pieces := [][]int{layout}
		name := fmt.Sprintf("b%d", bi)
		if r.IntN(3) == 0 {
			capBytes := pick(r, []int{64, 1024, 4096})
			opts = fmt.Sprintf(" cap %dB", capBytes) + opts
			pieces = nil
			var cur []int
			bytes := 0
			for _, i := range layout {
				tb := g.tensors[i].elems * genSizes[wire]
				if len(cur) == 0 || bytes+tb <= capBytes {
					cur, bytes = append(cur, i), bytes+tb
				} else {
					pieces, cur, bytes = append(pieces, cur), []int{i}, tb
				}
			}
			pieces = append(pieces, cur)
		}
		var pats []string
		for _, i := range members {
			pats = append(pats, g.tensors[i].name)
		}
		// Divided before the sum, an average is predicted exactly only
		// when the number of ranks is a power of two.
		pre := g.train && slices.Contains(genFloats, wire) && g.ranks != 3 && g.tr.IntN(3) == 0
		if pre {
			opts += " divide before"
			g.anyPre = true
		}
		g.line(0, "bucket %s { %s }%s", name, strings.Join(pats, ", "), opts)
		for k, piece := range pieces {
			target := name
			if strings.Contains(opts, "cap") {
				target = fmt.Sprintf("%s[%d]", name, k)
			}
			for _, i := range piece {
				g.tensors[i].bucket = len(g.buckets)
			}
			g.buckets = append(g.buckets, genBucket{target: target, wire: wire, first: slices.Min(piece), pre: pre})
		}
	}
	g.declared = len(g.buckets)
	for i := range g.tensors {
		if g.tensors[i].bucket < 0 {
			g.tensors[i].bucket = len(g.buckets)
			g.buckets = append(g.buckets, genBucket{target: g.tensors[i].name, wire: g.tensors[i].dtype, first: i})
		}
	}
}

// join returns the elementwise maximum of clocks.
func join(clocks ...[]int) []int {
	out := make([]int, len(clocks[0]))
	for _, c := range clocks {
		for i, v := range c {
			out[i] = max(out[i], v)
		}
	}
	return out
}

func (g *planGen) streamIndex(s string) int { return slices.Index(g.streams, s) }

// racing returns the streams whose latest accesses to buckets are not
// ordered before an event of stream s with the given clock.
func (g *planGen) racing(s string, clock []int, buckets []int) []string {
	var out []string
	for _, b := range buckets {
		for t, c := range g.access[b] {
			i := g.streamIndex(t)
			if t != s && c[i] > clock[i] && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (g *planGen) touch(s string, clock []int, b int) {
	if g.access[b] == nil {
		g.access[b] = map[string][]int{}
	}
	g.access[b][s] = clock
}

// block generates the statements of init (no backward, no after ready) or
// step (starting with a backward, so that every step refills the gradients
// and every chain of reductions stays in the exact range).
func (g *planGen) block(init bool) {
	r := g.r
	n := len(g.streams)
	g.vc = map[string][]int{}
	for _, s := range g.streams {
		g.vc[s] = make([]int, n)
	}
	g.host = make([]int, n)
	g.access = map[int]map[string][]int{}
	g.ready = nil
	g.reduced = map[int]bool{}
	g.products = map[int]bool{}
	g.fractions = map[int]bool{}
	g.synced = map[int][]int{}
	g.since = map[int]*genSince{}
	g.sums = map[int]int{}
	g.collected = map[int]bool{}
	for _, o := range g.outs {
		o.written = false
	}
	if !init {
		g.startStep()
	}
	for range 1 + r.IntN(5) {
		switch k := r.IntN(10); {
		case k == 0 && !init && g.pieces != nil:
			if g.nextPiece < len(g.pieces) {
				g.piece()
			}
		case k == 0 && !init && g.accum < 2:
			// With accumulation a second whole backward would add the
			// micro-batch's gradients twice (the checker refuses it).
			g.backward()
		case k == 1:
			g.line(1, "compute %dms on %s", r.IntN(2), pick(r, g.streams))
		case k == 2:
			g.wait(pick(r, g.streams))
		case k == 3:
			g.group(init)
		default:
			g.collective(init, 1)
		}
	}
	for !init && g.pieces != nil && g.nextPiece < len(g.pieces) {
		g.piece()
	}
	g.collective(init, 1) // so that every block has something to check
	if g.train && !init {
		g.trainStep()
	}
}

func (g *planGen) wait(s string) {
	g.line(1, "wait %s", s)
	g.host = join(g.host, g.vc[s])
}

// backward waits for the streams that still use buckets, then makes every
// bucket ready in turn, as the runtime fills the gradients.
func (g *planGen) backward() {
	s := "compute"
	var all []int
	for b := range g.buckets {
		if !g.buckets[b].out {
			all = append(all, b)
		}
	}
	for _, t := range g.racing(s, join(g.vc[s], g.host), all) {
		g.wait(t)
	}
	clock := join(g.vc[s], g.host)
	order := slices.Clone(all)
	slices.SortStableFunc(order, func(a, b int) int { return g.buckets[b].first - g.buckets[a].first })
	g.ready = map[int][]int{}
	g.reduced = map[int]bool{}
	g.products = map[int]bool{}
	g.fractions = map[int]bool{}
	clear(g.since)
	clear(g.sums)
	for _, b := range order {
		clock = slices.Clone(clock)
		clock[g.streamIndex(s)]++
		g.ready[b] = clock
		g.touch(s, clock, b)
	}
	clock = slices.Clone(clock)
	clock[g.streamIndex(s)]++
	g.vc[s] = clock
	g.line(1, "backward %dms on %s", g.r.IntN(3), s)
}

// genColl is a collective statement being generated.
type genColl struct {
	text    string
	stream  string
	buckets []int
	kind    string
	op      string // "" for a collective that does not reduce
	out     int    // the output buffer of `into` (-1: in place)
}

// touched returns the buffers c reads or writes.
func (c *genColl) touched() []int {
	if c.out < 0 {
		return c.buckets
	}
	return append(slices.Clone(c.buckets), c.out)
}

// genRanks bounds the number of ranks a plan may run with, a resume at
// another number included.
const genRanks = 4

// exactLimit is the largest magnitude up to which every integer is exact
// in dtype dt (elem.DType.ExactLimit).
func exactLimit(dt string) float64 {
	switch dt {
	case "f64", "i64":
		return 1 << 53
	case "f32":
		return 1 << 24
	case "f16":
		return 1 << 11
	case "bf16":
		return 1 << 8
	case "i32":
		return math.MaxInt32
	case "i8":
		return math.MaxInt8
	}
	return math.MaxUint8
}

// limit returns the exact limit of bucket b's wire and tensors.
func (g *planGen) limit(b int) float64 {
	l := exactLimit(g.buckets[b].wire)
	for _, t := range g.tensors {
		if t.bucket == b && !g.buckets[b].out {
			l = min(l, exactLimit(t.dtype))
		}
	}
	return l
}

// mag bounds the magnitude of buffer b's values: the pattern's (at most
// 1000 a micro-batch, and within the exact limit) grown by the sums in
// place since the fill, or an output's.
func (g *planGen) mag(b int) float64 {
	if g.buckets[b].out {
		return g.outs[b].mag
	}
	return min(1000*float64(max(g.accum, 1))*math.Pow(genRanks, float64(g.sums[b])), g.limit(b))
}

// eligible reports whether a collective of the block may name buffer b: an
// output once the block wrote it; in a step with pieces, a bucket once
// every piece that fills it has run.
func (g *planGen) eligible(b int, init bool) bool {
	if g.buckets[b].out {
		return g.outs[b] != nil && g.outs[b].written
	}
	return init || g.pieces == nil || g.pending[b] == 0
}

// newCollective picks a collective, its targets and options (without after).
func (g *planGen) newCollective(init bool, exclude []int) *genColl {
	r := g.r
	var elig []int
	for b := range g.buckets {
		if g.eligible(b, init) {
			elig = append(elig, b)
		}
	}
	if len(elig) == 0 {
		return nil
	}
	var buckets []int
	var targets []string
	for range 1 + r.IntN(2) {
		b := elig[r.IntN(len(elig))]
		if !slices.Contains(buckets, b) && !slices.Contains(exclude, b) {
			buckets = append(buckets, b)
			targets = append(targets, g.buckets[b].target)
		}
	}
	if len(buckets) == 0 {
		return nil
	}
	slices.Sort(buckets)
	into := g.into && len(buckets) == 1 && g.x.IntN(3) == 0
	kind := pick(r, []string{"allreduce", "broadcast", "reduce", "allgather", "reducescatter"})
	opts, op := "", ""
	switch kind {
	case "broadcast":
		opts = fmt.Sprintf(" from %d", r.IntN(g.ranks))
	case "reduce":
		opts = fmt.Sprintf(" to %d", r.IntN(g.ranks))
	}
	if kind == "broadcast" || kind == "reduce" {
		var root int
		fmt.Sscanf(opts[strings.LastIndex(opts, " ")+1:], "%d", &root)
		g.maxRoot = max(g.maxRoot, root)
	}
	if kind == "allreduce" || kind == "reduce" || kind == "reducescatter" {
		ops := []string{"sum", "avg", "min", "max", "prod"}
		drop := func(f func(op string) bool) { ops = slices.DeleteFunc(ops, f) }
		for _, b := range buckets {
			if !slices.Contains(genFloats, g.buckets[b].wire) {
				drop(func(op string) bool { return op == "avg" })
			}
			// At two ranks the checker predicts a float sum, average
			// or product of any values (one correctly rounded
			// operation an element), but an f16 product past 65504.
			pair := g.ranks == 2 && slices.Contains(genFloats, g.buckets[b].wire) && !init
			// The checker does not predict a product of values
			// that carry the loss scale.
			if init || g.reduced[b] && !(pair && g.buckets[b].wire != "f16") || g.scaler != 0 && slices.Contains(genFloats, g.buckets[b].wire) {
				drop(func(op string) bool { return op == "prod" })
			}
			if g.reduced[b] && pair {
				g.pairs = true
			}
			// An accumulated value is a sum of micro-batches' ±1 at
			// least, whose product over the ranks must stay exact.
			if g.accum >= 2 && math.Pow(float64(g.accum), genRanks) > g.limit(b) {
				drop(func(op string) bool { return op == "prod" })
			}
			if (g.fractions[b] || g.products[b]) && !pair {
				drop(func(op string) bool { return op != "min" && op != "max" })
			}
			if (g.fractions[b] || g.products[b]) && pair {
				g.pairs = true
			}
			if into && g.buckets[b].pre {
				drop(func(op string) bool { return op == "avg" }) // the language refuses it
			}
			if o := g.outs[b]; g.buckets[b].out {
				// No pattern shrinks for an output's own sums.
				drop(func(op string) bool { return op == "prod" })
				if o.mag*genRanks > exactLimit(g.buckets[b].wire) {
					drop(func(op string) bool { return op == "sum" || op == "avg" })
				}
				if o.fractions {
					drop(func(op string) bool { return op != "min" && op != "max" })
				}
			}
		}
		op = pick(r, ops)
		opts += " op " + op
		for _, b := range buckets {
			if g.buckets[b].out {
				continue
			}
			// An average is an integer only where it is the first
			// reduction after the fill (the pattern's avg kind);
			// after another one, or in init, it may hold fractions.
			if op == "avg" && !into && (init || g.reduced[b]) {
				g.fractions[b] = true
			}
			g.products[b] = g.products[b] || op == "prod" && !into && g.accum >= 2
			g.reduced[b] = true
			g.fractions[b] = g.fractions[b] || kind == "reduce" && op == "avg" && g.buckets[b].pre && !into
			if !into && (op == "sum" || op == "avg") {
				g.sums[b]++
			}
		}
	}
	c := &genColl{stream: pick(r, g.streams[1:]), buckets: buckets, kind: kind, op: op, out: -1}
	if into {
		c.out = g.output(buckets[0], kind, exclude)
		opts += " into " + g.buckets[c.out].target
	}
	c.text = kind + " " + strings.Join(targets, ", ") + opts + " on " + c.stream
	return c
}

// output returns the output buffer of an `into` from buffer src: one that
// an earlier `into` from src of the same kind of length declared, or a
// new one.
func (g *planGen) output(src int, kind string, exclude []int) int {
	class := "same"
	switch kind {
	case "reducescatter":
		class = "shard"
	case "allgather":
		class = "gather"
	}
	var reuse []int
	for b, bk := range g.buckets {
		if bk.out && bk.src == src && bk.class == class && !slices.Contains(exclude, b) {
			reuse = append(reuse, b)
		}
	}
	if len(reuse) > 0 && g.x.IntN(2) == 0 {
		return pick(g.x, reuse)
	}
	n := 0
	for _, bk := range g.buckets {
		if bk.out {
			n++
		}
	}
	g.buckets = append(g.buckets, genBucket{target: fmt.Sprintf("out%d", n), wire: g.buckets[src].wire, out: true, src: src, class: class})
	return len(g.buckets) - 1
}

// order returns the clock of c with the dependency after ("" for none).
func (g *planGen) order(c *genColl, after string) []int {
	clock := join(g.vc[c.stream], g.host)
	switch after {
	case "":
	case "ready":
		for _, b := range c.buckets {
			clock = join(clock, g.ready[b])
		}
	default:
		clock = join(clock, g.vc[after])
	}
	clock = slices.Clone(clock)
	clock[g.streamIndex(c.stream)] += g.events(c)
	return clock
}

// events is the number of events collective c is on its stream: one a
// bucket for a collective of several buckets in place outside a group,
// which the runtime issues as one collective a bucket, in bucket order,
// each done at its own end; otherwise one.
func (g *planGen) events(c *genColl) int {
	if g.inGroup || c.out >= 0 {
		return 1
	}
	return len(c.buckets)
}

// bucketClocks returns the clock at which collective c, applied at clock,
// is done with bucket b (access) and what an `after synced` of b waits
// for (synced). Of several collectives in turn (events), bucket b's is
// at its place in the program's bucket order, known for the pieces of
// declared buckets; where it is not known (implicit buckets, outputs),
// the access is taken as late and the sync as early as can be, so the
// plans generated are race-free whatever the order.
func (g *planGen) bucketClocks(c *genColl, clock []int, b int) (access, synced []int) {
	n := g.events(c)
	if n == 1 {
		return clock, clock
	}
	i := g.streamIndex(c.stream)
	at := func(k int) []int {
		t := slices.Clone(clock)
		t[i] = clock[i] - n + 1 + k
		return t
	}
	if slices.ContainsFunc(c.buckets, func(x int) bool { return x >= g.declared }) {
		return clock, at(0)
	}
	pos := 0
	for _, x := range c.buckets {
		if x < b {
			pos++
		}
	}
	return at(pos), at(pos)
}

// orderRaceFree returns an `after` for c that orders it after every other
// stream's use of its buckets, and c's clock with it; ok is false if none
// does.
func (g *planGen) orderRaceFree(c *genColl, init bool) (after string, clock []int, ok bool) {
	cands := []string{""}
	if !init && g.ready != nil && !slices.ContainsFunc(c.buckets, func(b int) bool { return g.ready[b] == nil }) {
		cands = append(cands, "ready")
	}
	cands = append(cands, g.streams...)
	g.r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, a := range cands {
		if a == c.stream {
			continue
		}
		clock := g.order(c, a)
		if len(g.racing(c.stream, clock, c.touched())) == 0 {
			return a, clock, true
		}
	}
	return "", nil, false
}

func (g *planGen) apply(c *genColl, clock []int) {
	g.vc[c.stream] = clock
	for _, b := range c.buckets {
		access, synced := g.bucketClocks(c, clock, b)
		g.touch(c.stream, access, b)
		g.synced[b] = synced
		switch {
		case c.out >= 0:
			// Out of place: the source is only read.
		case g.buckets[b].out:
			o := g.outs[b]
			o.reduced = o.reduced || c.op != ""
			o.fractions = o.fractions || c.op == "avg"
			if c.op == "sum" || c.op == "avg" {
				o.mag *= genRanks
			}
		default:
			g.sinceOf(b).collective(c.kind, c.op)
			g.collected[b] = true
		}
	}
	if c.out < 0 {
		return
	}
	src := c.buckets[0]
	o := &genOut{written: true, mag: g.mag(src)}
	if s := g.outs[src]; g.buckets[src].out {
		o.reduced, o.fractions = s.reduced, s.fractions
	} else {
		o.reduced, o.fractions = g.reduced[src], g.fractions[src]
	}
	o.reduced = o.reduced || c.op != ""
	o.fractions = o.fractions || c.op == "avg"
	if c.op == "sum" || c.op == "avg" {
		o.mag *= genRanks
	}
	if g.outs == nil {
		g.outs = map[int]*genOut{}
	}
	g.outs[c.out] = o
	g.touch(c.stream, clock, c.out)
	g.synced[c.out] = clock
}

func withAfter(text, after string) string {
	if after == "" {
		return text
	}
	return text + " after " + after
}

// collective generates one collective, with the waits it needs.
func (g *planGen) collective(init bool, indent int) {
	c := g.newCollective(init, nil)
	if c == nil {
		return
	}
	g.issue(c, init, indent)
}

// issue writes collective c with an `after` or the waits that order it
// after every other use of its buckets.
func (g *planGen) issue(c *genColl, init bool, indent int) {
	after, clock, ok := g.orderRaceFree(c, init)
	if !ok {
		for _, t := range g.racing(c.stream, g.order(c, ""), c.touched()) {
			g.wait(t)
		}
		after, clock = "", g.order(c, "")
	}
	g.apply(c, clock)
	g.line(indent, "%s", withAfter(c.text, after))
}

// group generates a group of collectives on distinct buckets whose
// dependencies do not involve each other (the runtime issues a group's
// members together).
func (g *planGen) group(init bool) {
	type member struct {
		c     *genColl
		after string
		clock []int
	}
	var members []member
	var used []int
	g.inGroup = true
	defer func() { g.inGroup = false }()
	for range 1 + g.r.IntN(3) {
		c := g.newCollective(init, used)
		if c == nil {
			continue
		}
		after, clock, ok := g.orderRaceFree(c, init)
		dependsOnMember := slices.ContainsFunc(members, func(m member) bool { return m.c.stream == after })
		if !ok || dependsOnMember {
			continue
		}
		members = append(members, member{c, after, clock})
		used = append(used, c.touched()...)
	}
	if len(members) == 0 {
		g.inGroup = false
		g.collective(init, 1)
		return
	}
	g.line(1, "group {")
	for _, m := range members {
		g.apply(m.c, m.clock)
		g.line(2, "%s", withAfter(m.c.text, m.after))
	}
	g.line(1, "}")
}

// cutPieces cuts the tensors into the pieces of the step's backward, in
// random pieces of one to four, a few tensors in none.
func (g *planGen) cutPieces() {
	n := 1 + g.x.IntN(4)
	pieces := make([][]int, n)
	for i := range g.tensors {
		if g.x.IntN(8) == 0 {
			continue // never refilled, so never synchronised
		}
		k := g.x.IntN(n)
		pieces[k] = append(pieces[k], i)
	}
	for _, p := range pieces {
		if len(p) > 0 {
			g.pieces = append(g.pieces, p)
		}
	}
	if g.pieces == nil {
		g.pieces = [][]int{{0}}
	}
}

// startStep starts the step with its backward, or its first piece.
func (g *planGen) startStep() {
	if g.pieces == nil {
		g.backward()
		return
	}
	g.ready = map[int][]int{}
	g.nextPiece = 0
	g.pending = map[int]int{}
	for b := range g.buckets {
		if !g.buckets[b].out {
			g.pending[b] = len(g.pieces) + 1 // a tensor in no piece: never
		}
	}
	for b := range g.pending {
		n := 0
		for _, p := range g.pieces {
			if slices.ContainsFunc(p, func(i int) bool { return g.tensors[i].bucket == b }) {
				n++
			}
		}
		if !slices.ContainsFunc(g.tensors, func(t genTensor) bool { return t.bucket == b && !g.inPiece(t) }) {
			g.pending[b] = n
		}
	}
	g.piece()
}

// inPiece reports whether a piece fills tensor t.
func (g *planGen) inPiece(t genTensor) bool {
	for _, p := range g.pieces {
		for _, i := range p {
			if g.tensors[i].name == t.name {
				return true
			}
		}
	}
	return false
}

// piece writes the step's next backward piece: it waits for the streams
// that still use its buckets (with `after STREAM` or waits), then makes
// each of its buckets ready in turn, after the bucket's earlier pieces.
func (g *planGen) piece() {
	x := g.x
	p := g.pieces[g.nextPiece]
	g.nextPiece++
	s := "compute"
	if x.IntN(3) == 0 {
		s = pick(x, g.streams)
	}
	// The buckets in the order they become ready: the piece fills its
	// tensors in reverse declaration order.
	last := map[int]int{}
	for _, i := range p {
		b := g.tensors[i].bucket
		if v, ok := last[b]; !ok || i < v {
			last[b] = i
		}
	}
	var bs []int
	for b := range last {
		bs = append(bs, b)
	}
	slices.SortFunc(bs, func(a, b int) int { return last[b] - last[a] })
	after := ""
	clock := join(g.vc[s], g.host)
	if racing := g.racing(s, clock, bs); len(racing) == 1 && x.IntN(2) == 0 {
		after = racing[0]
		clock = join(clock, g.vc[after])
	} else {
		for _, t := range racing {
			g.wait(t)
		}
		clock = join(g.vc[s], g.host)
	}
	for _, b := range bs {
		clock = slices.Clone(clock)
		clock[g.streamIndex(s)]++
		// `after ready` waits for the bucket's earlier pieces too.
		if prev := g.ready[b]; prev != nil {
			g.ready[b] = join(clock, prev)
		} else {
			g.ready[b] = clock
		}
		g.touch(s, clock, b)
		g.pending[b]--
		delete(g.reduced, b)
		delete(g.products, b)
		delete(g.fractions, b)
		delete(g.since, b)
		delete(g.sums, b)
	}
	clock = slices.Clone(clock)
	clock[g.streamIndex(s)]++
	g.vc[s] = clock
	var pats []string
	for _, i := range p {
		name := g.tensors[i].name
		if strings.HasPrefix(name, "l") && x.IntN(3) == 0 {
			name = name[:strings.Index(name, ".")] + ".*"
		}
		pats = append(pats, name)
	}
	text := fmt.Sprintf("backward %dms on %s", x.IntN(2), s)
	g.line(1, "%s", withAfter(text, after)+" for "+strings.Join(pats, ", "))
}

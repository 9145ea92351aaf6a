package main

import (
	"encoding/json"
	"fmt"
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
// of the seeds a training step: `update`, `unscale`, a loss scaler and
// `divide before`), checks that the front end accepts them, and runs each
// under mpirun on the CPU backend with checks: every element and every
// updated parameter must be exact. A few of the training plans are also
// resumed from a checkpoint and must end where a run that never stopped
// ends.
func TestRandomPlans(t *testing.T) {
	needToolchain(t)
	mpirun := needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	// SYNCGEN_TEST_RANDOM_PLANS=N runs N other seeds, for a longer campaign.
	n, first := 12, uint64(1)
	if v, err := strconv.Atoi(os.Getenv("SYNCGEN_TEST_RANDOM_PLANS")); err == nil && v > 0 {
		n, first = v, 1000
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
	streams []string
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
	// fractions says which buckets a `reduce op avg` divided before the
	// sum since the latest backward: the division is in place, so the
	// ranks but the root hold fractions, whose sums the checker does not
	// predict (their rounding may depend on the order); only a min or a
	// max may reduce them.
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
}

var (
	genDTypes = []string{"f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"}
	genFloats = []string{"f64", "f32", "f16", "bf16"}
	genSizes  = map[string]int{"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "u8": 1}
)

func newPlanGen(seed uint64) *planGen {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	g := &planGen{r: r, ranks: 1 + r.IntN(4), tr: rand.New(rand.NewPCG(seed, 0x7a1a))}
	g.train = g.tr.IntN(2) == 0
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
	if r.IntN(3) == 0 {
		g.line(0, "init {")
		g.block(true)
		g.line(0, "}")
	}
	g.line(0, "step {")
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
	g.fractions = map[int]bool{}
	g.synced = map[int][]int{}
	g.since = map[int]*genSince{}
	if !init {
		g.backward()
	}
	for range 1 + r.IntN(5) {
		switch k := r.IntN(10); {
		case k == 0 && !init:
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
	all := make([]int, len(g.buckets))
	for b := range all {
		all[b] = b
	}
	for _, t := range g.racing(s, join(g.vc[s], g.host), all) {
		g.wait(t)
	}
	clock := join(g.vc[s], g.host)
	order := slices.Clone(all)
	slices.SortStableFunc(order, func(a, b int) int { return g.buckets[b].first - g.buckets[a].first })
	g.ready = map[int][]int{}
	g.reduced = map[int]bool{}
	g.fractions = map[int]bool{}
	clear(g.since)
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
}

// newCollective picks a collective, its targets and options (without after).
func (g *planGen) newCollective(init bool, exclude []int) *genColl {
	r := g.r
	var buckets []int
	var targets []string
	for range 1 + r.IntN(2) {
		b := r.IntN(len(g.buckets))
		if !slices.Contains(buckets, b) && !slices.Contains(exclude, b) {
			buckets = append(buckets, b)
			targets = append(targets, g.buckets[b].target)
		}
	}
	if len(buckets) == 0 {
		return nil
	}
	slices.Sort(buckets)
	kind := pick(r, []string{"allreduce", "broadcast", "reduce", "allgather", "reducescatter"})
	opts, op := "", ""
	switch kind {
	case "broadcast":
		opts = fmt.Sprintf(" from %d", r.IntN(g.ranks))
	case "reduce":
		opts = fmt.Sprintf(" to %d", r.IntN(g.ranks))
	}
	if kind == "allreduce" || kind == "reduce" || kind == "reducescatter" {
		ops := []string{"sum", "avg", "min", "max", "prod"}
		for _, b := range buckets {
			if !slices.Contains(genFloats, g.buckets[b].wire) {
				ops = slices.DeleteFunc(ops, func(op string) bool { return op == "avg" })
			}
			// The checker does not predict a product of values
			// that carry the loss scale.
			if init || g.reduced[b] || g.scaler != 0 && slices.Contains(genFloats, g.buckets[b].wire) {
				ops = slices.DeleteFunc(ops, func(op string) bool { return op == "prod" })
			}
			if g.fractions[b] {
				ops = slices.DeleteFunc(ops, func(op string) bool { return op != "min" && op != "max" })
			}
		}
		op = pick(r, ops)
		opts += " op " + op
		for _, b := range buckets {
			g.reduced[b] = true
			g.fractions[b] = g.fractions[b] || kind == "reduce" && op == "avg" && g.buckets[b].pre
		}
	}
	s := pick(r, g.streams[1:])
	return &genColl{text: kind + " " + strings.Join(targets, ", ") + opts + " on " + s, stream: s, buckets: buckets, kind: kind, op: op}
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
	clock[g.streamIndex(c.stream)]++
	return clock
}

// orderRaceFree returns an `after` for c that orders it after every other
// stream's use of its buckets, and c's clock with it; ok is false if none
// does.
func (g *planGen) orderRaceFree(c *genColl, init bool) (after string, clock []int, ok bool) {
	cands := []string{""}
	if !init && g.ready != nil {
		cands = append(cands, "ready")
	}
	cands = append(cands, g.streams...)
	g.r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, a := range cands {
		if a == c.stream {
			continue
		}
		clock := g.order(c, a)
		if len(g.racing(c.stream, clock, c.buckets)) == 0 {
			return a, clock, true
		}
	}
	return "", nil, false
}

func (g *planGen) apply(c *genColl, clock []int) {
	g.vc[c.stream] = clock
	for _, b := range c.buckets {
		g.touch(c.stream, clock, b)
		g.synced[b] = clock
		g.sinceOf(b).collective(c.kind, c.op)
	}
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
		for _, t := range g.racing(c.stream, g.order(c, ""), c.buckets) {
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
		used = append(used, c.buckets...)
	}
	if len(members) == 0 {
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

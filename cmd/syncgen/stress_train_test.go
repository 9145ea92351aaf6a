package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The training step of the random plans (TestRandomPlans): a loss scaler,
// then at the end of the step the unscales and updates of buckets that
// the rules of docs/language.md §13 allow, ordered as §7 requires, and
// ZeRO's allgather of updated shards.

// genTrainSteps is how many steps a training plan runs (a warm-up step and
// three measured ones): the loss scale may grow that many times less one.
const genTrainSteps = 4

// genFlag stands for the step's overflow flag where a bucket index goes:
// every unscale writes it, every update reads it.
const genFlag = -1

// A bucket's values since the latest backward, as a rank sees them.
const (
	genWhole     = iota // every element defined
	genSharded          // reduce-scattered: only the rank's slice defined
	genUndefined        // a collective of a sharded bucket mixed in undefined values
)

// genSince is what the training step needs of a bucket since the block's
// latest backward.
type genSince struct {
	synced bool // allreduced or reduce-scattered
	shape  int
	// inject: an overflow that the backward puts into one of the
	// bucket's gradients on one rank reaches every rank's unscale of the
	// bucket, so that the step is skipped. It holds while the bucket's
	// collectives are allreduces and at most one reducescatter, last,
	// that sum, average or take the max (after a max only +inf).
	inject, sawMax bool
}

// genInject is a tensor that an overflow may go into.
type genInject struct {
	tensor  string
	onlyInf bool
}

func (g *planGen) sinceOf(b int) *genSince {
	if g.since[b] == nil {
		g.since[b] = &genSince{inject: true}
	}
	return g.since[b]
}

// collective notes a collective of the bucket.
func (s *genSince) collective(kind, op string) {
	keeps := op == "sum" || op == "avg" || op == "max"
	if s.shape != genWhole || !keeps || kind != "allreduce" && kind != "reducescatter" {
		s.inject = false
	}
	s.sawMax = s.sawMax || op == "max"
	s.synced = s.synced || kind == "allreduce" || kind == "reducescatter"
	switch {
	case s.shape == genWhole && kind == "reducescatter":
		s.shape = genSharded
	case s.shape == genSharded && kind == "allgather":
		s.shape = genWhole
	case s.shape == genSharded:
		s.shape = genUndefined
	}
}

// hasF16 reports whether a gradient or a wire is f16, whose largest value,
// 65504, bounds the loss scale.
func (g *planGen) hasF16() bool {
	for _, t := range g.tensors {
		if t.dtype == "f16" {
			return true
		}
	}
	for _, b := range g.buckets {
		if b.wire == "f16" {
			return true
		}
	}
	return false
}

// num writes a power of two or a factor as a plan does.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// declareScaler declares a loss scaler (for two thirds of the training
// plans) of a random rule and options, and sets g.scaler to its first
// scale. The scale stays where no scaled value can overflow: the pattern's
// values and their sums stay within 4000 on 4 ranks (docs/runtime.md, the
// fill pattern), so with an f16 gradient or wire the scale is at most 16,
// past which the checker rightly counts them unchecked.
func (g *planGen) declareScaler() {
	r := g.tr
	if r.IntN(3) == 0 {
		return
	}
	limit := math.Ldexp(1, 40)
	if g.hasF16() {
		limit = 16
	}
	rule := pick(r, []string{"static", "dynamic", "torch", "megatron", "deepspeed"})
	init := 65536.0
	if rule == "megatron" {
		init = math.Ldexp(1, 32)
	}
	var opts []string
	if init > limit || r.IntN(3) != 0 {
		init = math.Ldexp(1, r.IntN(int(math.Log2(min(limit, 1<<20)))+1))
		opts = append(opts, "init "+num(init))
	}
	g.scaler = init
	if rule == "static" {
		switch {
		case len(opts) == 0:
			g.line(0, "scaler static")
		case r.IntN(2) == 0:
			g.line(0, "scaler static %s", num(init))
		default:
			g.line(0, "scaler static init %s", num(init))
		}
		return
	}
	growth := 2.0
	if r.IntN(3) == 0 {
		growth = 4
		opts = append(opts, "growth 4")
	}
	switch {
	case rule == "deepspeed":
		// DeepSpeed has one factor: its preset backoff, 0.5, is 1/growth
		// only for growth 2.
		if growth != 2 || r.IntN(2) == 0 {
			opts = append(opts, "backoff "+num(1/growth))
		}
	case r.IntN(3) == 0:
		opts = append(opts, "backoff "+pick(r, []string{"0.5", "0.25", "0.125"}))
	}
	interval := 1000
	if rule == "dynamic" || rule == "torch" {
		interval = 2000
	}
	if r.IntN(3) != 0 {
		interval = 1 + r.IntN(2)
		opts = append(opts, fmt.Sprintf("interval %d", interval))
	}
	switch {
	case rule == "dynamic" || rule == "torch":
		if r.IntN(4) == 0 {
			opts = append(opts, "hysteresis 1") // PyTorch has none
		}
	case r.IntN(2) == 0:
		opts = append(opts, fmt.Sprintf("hysteresis %d", 1+r.IntN(3)))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, "min "+num(pick(r, []float64{1, max(1, init/2), init})))
	}
	top := init * math.Pow(growth, float64((genTrainSteps-1)/interval))
	switch {
	case top > limit:
		opts = append(opts, "max "+num(limit))
	case r.IntN(4) == 0:
		opts = append(opts, "max "+num(pick(r, []float64{init, top})))
	}
	r.Shuffle(len(opts), func(i, j int) { opts[i], opts[j] = opts[j], opts[i] })
	line := "scaler " + rule
	for _, o := range opts {
		line += " " + o
	}
	g.line(0, "%s", line)
}

// paramDTypes returns the dtypes of bucket b's tensors.
func (g *planGen) paramDTypes(b int) []string {
	var out []string
	for _, t := range g.tensors {
		if t.bucket == b && !slices.Contains(out, t.dtype) {
			out = append(out, t.dtype)
		}
	}
	return out
}

// updatable reports whether bucket b may be updated at the end of the
// step: float gradients synchronised since the latest backward and
// defined where the update reads them (all of them, or the rank's slice
// right after a reducescatter), and parameters of one dtype, with `master
// f32` if need be.
func (g *planGen) updatable(b int) bool {
	if !g.trainable(b) {
		return false
	}
	s := g.sinceOf(b)
	if !slices.Contains(genFloats, g.buckets[b].wire) || !s.synced || s.shape == genUndefined {
		return false
	}
	dts := g.paramDTypes(b)
	return len(dts) == 1 || !slices.Contains(dts, "f64")
}

// trainable reports whether an update or unscale may name bucket b: not
// an output buffer, and refilled by the step's backward.
func (g *planGen) trainable(b int) bool {
	return !g.buckets[b].out && g.eligible(b, false)
}

// trainStep ends the step with unscales (with a scaler: of every bucket
// updated, and of a few others), updates and, for some sharded updates,
// the allgather of the new parameters.
func (g *planGen) trainStep() {
	r := g.tr
	var unsynced []int
	for b := range g.buckets {
		if s := g.sinceOf(b); g.trainable(b) && slices.Contains(genFloats, g.buckets[b].wire) && !s.synced && s.shape == genWhole {
			unsynced = append(unsynced, b)
		}
	}
	if len(unsynced) > 0 && r.IntN(2) == 0 {
		// A bucket more to update.
		b := pick(r, unsynced)
		ops := []string{"sum", "avg", "min", "max"}
		if g.fractions[b] {
			ops = ops[2:]
		}
		s, op := pick(r, g.streams[1:]), pick(r, ops)
		g.reduced[b] = true
		if op == "sum" || op == "avg" {
			g.sums[b]++
		}
		c := &genColl{text: fmt.Sprintf("allreduce %s op %s on %s", g.buckets[b].target, op, s), stream: s, buckets: []int{b}, kind: "allreduce", op: op, out: -1}
		g.issue(c, false, 1)
	}
	var upd, uns []int
	for b := range g.buckets {
		if g.updatable(b) && r.IntN(4) != 0 {
			upd = append(upd, b)
		}
	}
	if g.scaler != 0 {
		for b := range g.buckets {
			// Unscaling values that collectives left undefined could find
			// an overflow in them.
			other := g.trainable(b) && slices.Contains(genFloats, g.buckets[b].wire) && g.collected[b] &&
				g.sinceOf(b).shape != genUndefined && r.IntN(3) == 0
			if slices.Contains(upd, b) || other {
				uns = append(uns, b)
			}
		}
	}
	for _, part := range g.split(uns, 2) {
		g.trainStmt("unscale", part)
	}
	for _, part := range g.split(upd, 3) {
		g.trainStmt("update", part)
	}
	for _, b := range upd {
		if g.sinceOf(b).shape == genSharded && r.IntN(3) != 0 {
			s := pick(r, g.streams[1:])
			c := &genColl{text: "allgather " + g.buckets[b].target + " on " + s, stream: s, buckets: []int{b}, kind: "allgather", out: -1}
			g.issue(c, false, 1)
		}
	}
	g.updates, g.unscales = g.updates+len(upd), g.unscales+len(uns)
}

// split cuts xs into one to n parts, each in increasing order.
func (g *planGen) split(xs []int, n int) [][]int {
	if len(xs) == 0 {
		return nil
	}
	xs = slices.Clone(xs)
	g.tr.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	parts := make([][]int, min(len(xs), 1+g.tr.IntN(n)))
	for i, x := range xs {
		k := i
		if i >= len(parts) {
			k = g.tr.IntN(len(parts))
		}
		parts[k] = append(parts[k], x)
	}
	for _, p := range parts {
		slices.Sort(p)
	}
	return parts
}

// optimizer returns an update's optimizer and some of its settings.
func (g *planGen) optimizer() (string, []string) {
	r := g.tr
	values := map[string][]string{
		"lr": {"0.1", "0.01", "1e-3", "0.5"}, "momentum": {"0", "0.9", "0.5"}, "weight_decay": {"0", "1e-4", "0.01"},
		"beta1": {"0.9", "0.5", "0"}, "beta2": {"0.999", "0.99", "0.5"}, "eps": {"1e-8", "1e-6", "0.1"},
	}
	opt, keys := "sgd", []string{"lr", "momentum", "weight_decay"}
	if r.IntN(2) == 0 {
		opt, keys = "adamw", []string{"lr", "beta1", "beta2", "eps", "weight_decay"}
	}
	var out []string
	for _, k := range keys {
		if r.IntN(2) == 0 {
			out = append(out, k+" "+pick(r, values[k]))
		}
	}
	return opt, out
}

// trainClocks returns the clock of the unscale or update of each of
// buckets on stream s with the dependency after. `after synced` orders
// each bucket's work after that bucket's latest collective only, as the
// runtime waits for it.
func (g *planGen) trainClocks(s, after string, buckets []int) [][]int {
	base := join(g.vc[s], g.host)
	if after != "" && after != "synced" {
		base = join(base, g.vc[after])
	}
	var out [][]int
	for _, b := range buckets {
		c := slices.Clone(base)
		if after == "synced" {
			c = join(c, g.synced[b])
		}
		c[g.streamIndex(s)]++
		out = append(out, c)
	}
	return out
}

// trainRacing returns the streams whose use of the buckets or of the
// overflow flag the work at clocks is not ordered after.
func (g *planGen) trainRacing(s string, buckets []int, clocks [][]int) []string {
	var out []string
	for k, b := range buckets {
		for _, t := range g.racing(s, clocks[k], []int{b, genFlag}) {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// trainStmt writes an unscale or an update of buckets, with an `after`
// or the waits that order it after every other use of its buckets and,
// for an update, after every unscale.
func (g *planGen) trainStmt(kind string, buckets []int) {
	r := g.tr
	s := pick(r, g.streams)
	var targets []string
	for _, b := range buckets {
		targets = append(targets, g.buckets[b].target)
	}
	text := kind + " " + strings.Join(targets, ", ")
	var opts []string
	if kind == "update" {
		opt, settings := g.optimizer()
		text += " " + opt
		opts = settings
		master := false
		for _, b := range buckets {
			master = master || len(g.paramDTypes(b)) > 1
		}
		if master || r.IntN(4) == 0 {
			opts = append(opts, "master f32")
		}
	} else if r.IntN(3) == 0 {
		opts = append(opts, "agree")
	}
	if s != "compute" || r.IntN(2) == 0 {
		opts = append(opts, "on "+s)
	}
	r.Shuffle(len(opts), func(i, j int) { opts[i], opts[j] = opts[j], opts[i] })
	for _, o := range opts {
		text += " " + o
	}

	cands := []string{""}
	if !slices.ContainsFunc(buckets, func(b int) bool { return !g.collected[b] }) {
		cands = append(cands, "synced")
	}
	for _, t := range g.streams {
		if t != s {
			cands = append(cands, t)
		}
	}
	r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	after, clocks := "", [][]int(nil)
	for _, a := range cands {
		if c := g.trainClocks(s, a, buckets); len(g.trainRacing(s, buckets, c)) == 0 {
			after, clocks = a, c
			break
		}
	}
	if clocks == nil {
		for _, t := range g.trainRacing(s, buckets, g.trainClocks(s, "", buckets)) {
			g.wait(t)
		}
		clocks = g.trainClocks(s, "", buckets)
	}
	for k, b := range buckets {
		g.touch(s, clocks[k], b)
		if kind == "unscale" {
			g.touch(s, clocks[k], genFlag)
			if since := g.sinceOf(b); since.inject {
				for _, t := range g.tensors {
					if t.bucket == b {
						g.injectable = append(g.injectable, genInject{tensor: t.name, onlyInf: since.sawMax})
					}
				}
			}
		}
	}
	g.vc[s] = join(clocks...)
	g.line(1, "%s", withAfter(text, after))
}

// genTrainRun is how a training plan runs: its overflows, and whether it
// is also resumed from a checkpoint.
type genTrainRun struct {
	// overflows are --overflow values, each at a step that is not checked
	// (checks every 2 steps: 1 and 3), so that the elements it reaches
	// are not counted as unchecked; overflowSteps their steps.
	overflows     []string
	overflowSteps []int
	resume, async bool
	// world is the number of ranks the resumed run takes.
	world int
}

// trainRun chooses how the generated training plan runs.
func (g *planGen) trainRun() genTrainRun {
	r := g.tr
	var run genTrainRun
	if g.scaler != 0 && len(g.injectable) > 0 && r.IntN(2) == 0 {
		for range 1 + r.IntN(2) {
			in := pick(r, g.injectable)
			step := pick(r, []int{0, 2})
			value := pick(r, []string{"", "=inf", "=-inf", "=nan"})
			if in.onlyInf {
				value = pick(r, []string{"", "=inf"})
			}
			run.overflows = append(run.overflows, fmt.Sprintf("%d:%d:%s%s", step, r.IntN(g.ranks), in.tensor, value))
			if !slices.Contains(run.overflowSteps, step) {
				run.overflowSteps = append(run.overflowSteps, step)
			}
		}
		slices.Sort(run.overflowSteps)
	}
	run.resume = (g.updates > 0 || g.scaler != 0) && r.IntN(3) == 0
	run.async = r.IntN(2) == 0
	run.world = g.ranks
	if run.resume && !g.pairs && g.x.IntN(3) != 0 {
		// Another world: one that holds the plan's roots, and a power of
		// two where a bucket divides before the sum.
		var worlds []int
		for w := 1; w <= genRanks; w++ {
			if w != g.ranks && w > g.maxRoot && (!g.anyPre || w&(w-1) == 0) {
				worlds = append(worlds, w)
			}
		}
		if len(worlds) > 0 {
			run.world = pick(g.x, worlds)
		}
	}
	return run
}

// flags returns the program's flags for a run of world ranks that starts
// at step first (the steps of run's overflows before it are left out: a
// resumed run refuses them; their ranks are taken modulo world).
func (run genTrainRun) flags(first, world int) []string {
	check := "1"
	if len(run.overflows) > 0 {
		check = "2"
	}
	out := []string{"--steps", fmt.Sprint(genTrainSteps - 1), "--warmup", "1", "--check", check}
	for _, o := range run.overflows {
		var step, rank int
		var rest string
		fmt.Sscanf(o, "%d:%d:%s", &step, &rank, &rest)
		if step >= first {
			out = append(out, "--overflow", fmt.Sprintf("%d:%d:%s", step, rank%world, rest))
		}
	}
	return out
}

// runTrainPlan runs a built training plan: every element and parameter
// exact, the updates and unscales in the report, the scaler skipping the
// steps with overflows and no other. For a resumed plan the run writes
// checkpoints, a second run resumes from the one after 2 steps, and the
// two end with the same checkpoint; resumed at another number of ranks,
// with the same steps, updates and scaler (the averages and their
// parameters are the new world's, which the checks cover).
func runTrainPlan(t *testing.T, mpirun, bin string, g *planGen, src string) {
	t.Helper()
	run := g.trainRun()
	t.Logf("run: %+v", run)
	dir := t.TempDir()
	straight, resumed := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	ck := func(d string) []string {
		if !run.resume {
			return nil
		}
		out := []string{"--checkpoint-every", "2", "--checkpoint-dir", d}
		if run.async {
			out = append(out, "--checkpoint-async")
		}
		return out
	}
	a := runPlanReport(t, mpirun, bin, g.ranks, src, append(run.flags(0, g.ranks), ck(straight)...)...)
	g.checkTraining(t, a, run, 0, src)
	if !run.resume {
		return
	}
	const at = 2
	flags := append(run.flags(at, run.world), ck(resumed)...)
	flags = append(flags, "--resume", filepath.Join(straight, "step-00000002"))
	b := runPlanReport(t, mpirun, bin, run.world, src, flags...)
	g.checkTraining(t, b, run, at, src)
	if b.Checkpoints == nil || b.Checkpoints.ResumedAt == nil || *b.Checkpoints.ResumedAt != at {
		t.Fatalf("the resumed run's checkpoints: %+v, want resumed_at_step %d\nplan:\n%s", b.Checkpoints, at, src)
	}
	if a.Training != nil && a.Training.Scaler != nil && !slices.Equal(a.Training.Scaler.Scale[at:], b.Training.Scaler.Scale) {
		t.Fatalf("scales: %v straight, %v resumed at step %d\nplan:\n%s", a.Training.Scaler.Scale, b.Training.Scaler.Scale, at, src)
	}
	last := fmt.Sprintf("step-%08d", genTrainSteps)
	ma, mb := checkpointMetadata(t, filepath.Join(straight, last)), checkpointMetadata(t, filepath.Join(resumed, last))
	if run.world != g.ranks {
		if mb["world_size"] != float64(run.world) {
			t.Fatalf("the resumed run's checkpoint has world_size %v, want %d\nplan:\n%s", mb["world_size"], run.world, src)
		}
		for _, k := range []string{"world_size", "shards", "buckets"} {
			delete(ma, k)
			delete(mb, k)
		}
	}
	if !reflect.DeepEqual(ma, mb) {
		t.Fatalf("the checkpoints after %d steps differ:\nstraight %v\nresumed  %v\nplan:\n%s", genTrainSteps, ma, mb, src)
	}
}

// checkpointMetadata reads a committed checkpoint's metadata.json, less
// the time of its commit: the plan, the steps, the scaler's state, the
// updates applied and every shard's size and sha256.
func checkpointMetadata(t *testing.T, dir string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	if err := json.Unmarshal(data, &md); err != nil {
		t.Fatal(err)
	}
	delete(md, "committed")
	return md
}

// checkTraining checks the training part of the report of a run that
// started at step first.
func (g *planGen) checkTraining(t *testing.T, r planReport, run genTrainRun, first int, src string) {
	t.Helper()
	tr := r.Training
	if tr == nil {
		if g.updates > 0 || g.scaler != 0 {
			t.Fatalf("no training in the report\nplan:\n%s", src)
		}
		return
	}
	if tr.WrongParams != 0 || tr.UncheckedParams != 0 {
		t.Fatalf("%d wrong and %d unchecked parameters, want none\nplan:\n%s", tr.WrongParams, tr.UncheckedParams, src)
	}
	var updates, unscales int
	for _, row := range tr.Rows {
		if row.Work == "unscale" {
			unscales++
		} else {
			updates++
		}
	}
	if updates != g.updates || unscales != g.unscales {
		t.Fatalf("the report has %d updates and %d unscales, want %d and %d\nplan:\n%s", updates, unscales, g.updates, g.unscales, src)
	}
	if g.scaler == 0 {
		return
	}
	sc := tr.Scaler
	var skipped []int
	for _, s := range run.overflowSteps {
		if s >= first {
			skipped = append(skipped, s)
		}
	}
	switch {
	case sc == nil:
		t.Fatalf("no scaler in the report\nplan:\n%s", src)
	case sc.FirstStep != first || len(sc.Scale) != genTrainSteps-first:
		t.Fatalf("scaler: first step %d, %d scales; want %d and %d\nplan:\n%s", sc.FirstStep, len(sc.Scale), first, genTrainSteps-first, src)
	case first == 0 && sc.Scale[0] != g.scaler:
		t.Fatalf("scaler: first scale %v, want %v\nplan:\n%s", sc.Scale[0], g.scaler, src)
	case !slices.Equal(sc.Skipped, skipped) && !(len(sc.Skipped) == 0 && len(skipped) == 0):
		t.Fatalf("scaler skipped steps %v, want %v (overflows %v)\nplan:\n%s", sc.Skipped, skipped, run.overflows, src)
	}
}

package dsl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncgen/syncgen/ir"
)

// mustCheck checks src and fails the test on any error.
func mustCheck(t *testing.T, src string) *ir.Program {
	t.Helper()
	prog, diags := Check("plan.sync", []byte(src))
	if diags.HasErrors() || prog == nil {
		var b bytes.Buffer
		diags.Render(&b)
		t.Fatalf("errors:\n%s", b.String())
	}
	return prog
}

// checkErrors returns the messages of the errors of src.
func checkErrors(src string) []string {
	prog, diags := Check("plan.sync", []byte(src))
	var out []string
	for _, d := range diags {
		if d.Severity == Error {
			out = append(out, d.Message)
		}
	}
	if prog != nil && len(out) > 0 {
		out = append(out, "BUG: program returned with errors")
	}
	return out
}

// checkPositions fails when any position of the program is unset.
func checkPositions(t *testing.T, p *ir.Program) {
	t.Helper()
	bad := func(what string, pos ir.Pos) {
		if pos.Line < 1 || pos.Col < 1 || pos.File == "" {
			t.Errorf("%s has no position: %+v", what, pos)
		}
	}
	for _, x := range p.Tensors {
		bad("tensor "+x.Name, x.Pos)
	}
	for _, x := range p.Streams {
		bad("stream "+x.Name, x.Pos)
	}
	for _, x := range p.Buckets {
		bad("bucket "+x.Name, x.Pos)
	}
	var walk func([]ir.Stmt)
	walk = func(ss []ir.Stmt) {
		for _, s := range ss {
			bad("statement", s.Pos)
			walk(s.Body)
		}
	}
	walk(p.Init)
	walk(p.Step)
}

// TestCheckExamples checks every example, golden input and stdlib module:
// no errors, every position set, every bucket consistent.
func TestCheckExamples(t *testing.T) {
	var files []string
	for _, g := range []string{"../examples/*.sync", "../testdata/golden/*.sync"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skip("no examples found")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			prog, diags := Load(path)
			if diags.HasErrors() {
				var b bytes.Buffer
				diags.Render(&b)
				t.Fatalf("errors:\n%s", b.String())
			}
			checkPositions(t, prog)
			checkBuckets(t, prog)
		})
	}
}

// checkBuckets verifies the layout invariants: tensors of a bucket are
// contiguous from offset 0, and each tensor's Bucket points back.
func checkBuckets(t *testing.T, p *ir.Program) {
	t.Helper()
	for bi, b := range p.Buckets {
		if b.Output != nil {
			// An output buffer: no tensors, an earlier source, its wire.
			if len(b.Tensors) != 0 || b.Output.Of < 0 || b.Output.Of >= bi || p.Buckets[b.Output.Of].Wire != b.Wire {
				t.Errorf("bad output bucket %+v (of %+v)", b, b.Output)
			}
			continue
		}
		var off int64
		for _, ti := range b.Tensors {
			tn := p.Tensors[ti]
			if tn.Bucket != bi || tn.Offset != off {
				t.Errorf("bucket %s: tensor %s has bucket %d offset %d, want %d and %d", b.Name, tn.Name, tn.Bucket, tn.Offset, bi, off)
			}
			off += tn.Elems
		}
		if off != b.Elems {
			t.Errorf("bucket %s has %d elements, its tensors %d", b.Name, b.Elems, off)
		}
	}
}

func TestLayoutCapFirstReverse(t *testing.T) {
	// a 400 B, b 1200 B, c 200 B, d 4000 B. Reverse order: d c b a.
	// first 400B: d alone (larger than the cap: a piece of its own).
	// cap 1600B: c+b = 1400 fits, +a = 1800 does not.
	p := mustCheck(t, `
tensor a f32[100]
tensor b f32[300]
tensor c f32[50]
tensor d f32[1000]
bucket grads { * } cap 1600B first 400B
step { backward 1ms; allreduce grads after ready }
`)
	want := []struct {
		name    string
		tensors []int
		elems   int64
	}{{"grads[0]", []int{3}, 1000}, {"grads[1]", []int{2, 1}, 350}, {"grads[2]", []int{0}, 100}}
	if len(p.Buckets) != len(want) {
		t.Fatalf("%d buckets, want %d", len(p.Buckets), len(want))
	}
	for i, w := range want {
		b := p.Buckets[i]
		if b.Name != w.name || b.Decl != "grads" || b.Piece != i || !slices.Equal(b.Tensors, w.tensors) || b.Elems != w.elems || b.Wire != ir.F32 {
			t.Errorf("bucket %d = %+v, want %+v", i, b, w)
		}
	}
	if p.Tensors[1].Offset != 50 || p.Tensors[2].Offset != 0 {
		t.Errorf("offsets b=%d c=%d, want 50 and 0", p.Tensors[1].Offset, p.Tensors[2].Offset)
	}
	if got := p.Step[1].Buckets; !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("allreduce grads targets %v, want all pieces", got)
	}
	checkBuckets(t, p)
}

func TestLayoutDeclaredWire(t *testing.T) {
	// Wire bytes decide the split: 3 f32 tensors of 100 elements are 200 B
	// each on a bf16 wire, so a 400B cap holds two of them.
	p := mustCheck(t, `
tensor x.{0..2} f32[100]
tensor h f16[10]
bucket lp { x.*, h } cap 400B order declared wire bf16
step { backward 1ms; allreduce lp[1] after ready; allreduce lp after ready }
`)
	if len(p.Buckets) != 2 {
		t.Fatalf("%d buckets, want 2", len(p.Buckets))
	}
	if !slices.Equal(p.Buckets[0].Tensors, []int{0, 1}) || !slices.Equal(p.Buckets[1].Tensors, []int{2, 3}) {
		t.Errorf("pieces %v %v, want [0 1] [2 3]", p.Buckets[0].Tensors, p.Buckets[1].Tensors)
	}
	if p.Buckets[1].Wire != ir.BF16 || p.Buckets[1].Bytes() != 220 || p.Tensors[3].Offset != 100 {
		t.Errorf("piece 1: wire %s, %d bytes, h at %d; want bf16, 220, 100", p.Buckets[1].Wire, p.Buckets[1].Bytes(), p.Tensors[3].Offset)
	}
	if got := p.Step[1].Buckets; !slices.Equal(got, []int{1}) {
		t.Errorf("lp[1] resolved to %v, want [1]", got)
	}
}

func TestFirstMatchWinsAndFrozen(t *testing.T) {
	p := mustCheck(t, `
tensor emb f32[10]
tensor l.{0..1}.w f32[10]
tensor rope f32[4] frozen
bucket early { l.1.w }
bucket rest { * }
step { backward 1ms; allreduce early, rest after ready }
`)
	if !slices.Equal(p.Buckets[0].Tensors, []int{2}) || !slices.Equal(p.Buckets[1].Tensors, []int{1, 0}) {
		t.Errorf("buckets %v %v, want [2] and [1 0]", p.Buckets[0].Tensors, p.Buckets[1].Tensors)
	}
	if p.Tensors[3].Bucket != -1 || !p.Tensors[3].Frozen {
		t.Errorf("frozen tensor = %+v, want in no bucket", p.Tensors[3])
	}
}

func TestTargets(t *testing.T) {
	p := mustCheck(t, `
tensor a.{0..3} f32[256]
tensor solo.x f32[8]
tensor solo.y f32[8]
tensor "odd/name" f16[4]
bucket g { a.* } cap 1KiB
step {
    backward 1ms
    allreduce solo.*, a.2, g[3], "odd/name", a.1 after ready
    broadcast solo.y from 3 after ready
}
`)
	// g: reverse order a.3 a.2 a.1 a.0, 1 KiB each: g[0]=a.3 ... g[3]=a.0.
	// Implicit buckets come after the declared ones, once per tensor, in
	// the order they are first named.
	names := []string{}
	for _, b := range p.Buckets {
		names = append(names, b.Name)
	}
	if want := []string{"g[0]", "g[1]", "g[2]", "g[3]", "solo.x", "solo.y", "odd/name"}; !slices.Equal(names, want) {
		t.Fatalf("buckets %q, want %q", names, want)
	}
	ar := p.Step[1]
	if !slices.Equal(ar.Buckets, []int{1, 2, 3, 4, 5, 6}) {
		t.Errorf("allreduce buckets %v, want [1 2 3 4 5 6]", ar.Buckets)
	}
	bc := p.Step[2]
	if bc.Collective != ir.Broadcast || bc.Root != 3 || bc.Op != ir.NoOp || !slices.Equal(bc.Buckets, []int{5}) {
		t.Errorf("broadcast = %+v", bc)
	}
	if b := p.Buckets[6]; b.Wire != ir.F16 || b.Decl != "odd/name" || b.Elems != 4 || p.Tensors[6].Bucket != 6 {
		t.Errorf("implicit bucket = %+v", b)
	}
}

func TestStatementDefaults(t *testing.T) {
	p := mustCheck(t, `
tensor w f32[8]
tensor v f32[8]
bucket b { w }
bucket c { v }
init { broadcast b, c from 0; wait comm }
step {
    compute 1.5ms
    backward 60ms
    allreduce b after ready
    reduce b to 2 after compute
    reducescatter b
    allgather b
    group { allreduce b op prod; allreduce c op min }
    wait comm
}
`)
	if p.Name != "plan" || p.Source != "plan.sync" {
		t.Errorf("name %q source %q", p.Name, p.Source)
	}
	if len(p.Streams) != 2 || p.Streams[0].Name != "compute" || p.Streams[1].Name != "comm" || p.Streams[1].Priority != ir.PriorityHigh {
		t.Errorf("implicit streams = %+v", p.Streams)
	}
	if p.Run != (ir.Run{Steps: ir.DefaultSteps, Warmup: ir.DefaultWarmup, CheckEvery: ir.DefaultCheckEvery}) {
		t.Errorf("run = %+v", p.Run)
	}
	s := p.Step
	if s[0].Kind != ir.StmtCompute || s[0].Duration != 1500*time.Microsecond || s[0].Stream != 0 {
		t.Errorf("compute = %+v", s[0])
	}
	if s[1].Kind != ir.StmtBackward || s[1].Duration != 60*time.Millisecond || s[1].Stream != 0 {
		t.Errorf("backward = %+v", s[1])
	}
	if s[2].Op != ir.Sum || s[2].Stream != 1 || s[2].After.Kind != ir.AfterReady {
		t.Errorf("allreduce = %+v", s[2])
	}
	if s[3].Collective != ir.Reduce || s[3].Root != 2 || s[3].After != (ir.After{Kind: ir.AfterStream, Stream: 0}) {
		t.Errorf("reduce = %+v", s[3])
	}
	if s[4].Op != ir.Sum || s[5].Op != ir.NoOp {
		t.Errorf("reducescatter op %s, allgather op %s", s[4].Op, s[5].Op)
	}
	if s[6].Kind != ir.StmtGroup || len(s[6].Body) != 2 || s[6].Body[0].Op != ir.Prod || s[6].Body[1].Op != ir.Min {
		t.Errorf("group = %+v", s[6])
	}
	if s[7].Kind != ir.StmtWait || s[7].Stream != 1 {
		t.Errorf("wait = %+v", s[7])
	}
	if len(p.Init) != 2 || p.Init[0].Collective != ir.Broadcast {
		t.Errorf("init = %+v", p.Init)
	}
	checkPositions(t, p)
}

func TestRun(t *testing.T) {
	p := mustCheck(t, "tensor w f32[1] frozen\nrun check off warmup 0 steps 7\n")
	if p.Run != (ir.Run{Steps: 7, Warmup: 0, CheckEvery: 0}) {
		t.Errorf("run = %+v", p.Run)
	}
	p = mustCheck(t, "tensor w f32[1] frozen\nrun check every 5\n")
	if p.Run != (ir.Run{Steps: ir.DefaultSteps, Warmup: ir.DefaultWarmup, CheckEvery: 5}) {
		t.Errorf("run = %+v", p.Run)
	}
	p = mustCheck(t, "tensor w f32[1] frozen\nrun checkpoint every 50 to \"ckpt/\" keep 3 steps 7\n")
	if want := (ir.Run{Steps: 7, Warmup: ir.DefaultWarmup, CheckEvery: ir.DefaultCheckEvery, CheckpointEvery: 50, CheckpointDir: "ckpt/", CheckpointKeep: 3}); p.Run != want {
		t.Errorf("run = %+v", p.Run)
	}
	// A directory is a string or one word, taken as written
	// (docs/language.md §3, run).
	for dir, want := range map[string]string{`"ckpt/run 1"`: "ckpt/run 1", "ckpt": "ckpt", "ckpt.d": "ckpt.d", "run_{0..2}": "run_{0..2}"} {
		p = mustCheck(t, "tensor w f32[1] frozen\nrun checkpoint every 5 keep 2 to "+dir+"\n")
		if p.Run.CheckpointDir != want {
			t.Errorf("to %s: directory %q, want %q", dir, p.Run.CheckpointDir, want)
		}
	}
	for src, want := range map[string]string{
		"run checkpoint every 0":                        "checkpoint every 0: it must be at least 1",
		"run checkpoint every x":                        "checkpoint every",
		"run checkpoint every 5 keep 0":                 "keep 0: it must be at least 1",
		"run checkpoint every 5 checkpoint every 6":     "duplicate `checkpoint` in run",
		"run checkpoint every 5 to \"\" keep 2 steps 3": "invalid checkpoint directory",
	} {
		errs := strings.Join(checkErrors("tensor w f32[1] frozen\n"+src+"\n"), "\n")
		if !strings.Contains(errs, want) {
			t.Errorf("%s: errors %q, want %q", src, errs, want)
		}
	}
	out, diags := Format("t.sync", []byte("run checkpoint every 50 keep 3 to \"c\"   steps 7\n"))
	if diags.HasErrors() || string(out) != "run steps 7 checkpoint every 50 to \"c\" keep 3\n" {
		t.Errorf("format: %q %v", out, diags)
	}
}

// TestKeywordTensorNames: keywords inside dotted names, and whole names
// where a name is expected, are tensor names like any other.
func TestKeywordTensorNames(t *testing.T) {
	p := mustCheck(t, `
tensor step.weight f32[4]
tensor compute.bias f32[4]
tensor encoder.layer.0.output.dense.weight f32[4]
tensor wait.reduce.run.from.to f32[4]
tensor layer1.0.conv1.weight f32[4]
tensor 0.weight f32[4]
tensor step f32[4]
tensor output f32[4]
tensor steps i64[4]
bucket outs { *.output.*, output }
bucket counts { steps }
bucket rest { * }
step {
    backward 1ms
    allreduce outs, counts, rest after ready
    broadcast "step", step.weight, wait.reduce.run.from.to from 0 after ready
}
`)
	want := []string{"step.weight", "compute.bias", "encoder.layer.0.output.dense.weight", "wait.reduce.run.from.to",
		"layer1.0.conv1.weight", "0.weight", "step", "output", "steps"}
	for i, n := range want {
		if p.Tensors[i].Name != n {
			t.Errorf("tensor %d is %q, want %q", i, p.Tensors[i].Name, n)
		}
	}
	if !slices.Equal(p.Buckets[0].Tensors, []int{7, 2}) {
		t.Errorf("outs holds %v, want [7 2]", p.Buckets[0].Tensors)
	}
}

func TestBraceRanges(t *testing.T) {
	p := mustCheck(t, "tensor a.{0..1}.b{2..3} f32[1]\nbucket g { a.{1..1}.* }\nbucket r { * }\n")
	var names []string
	for _, tn := range p.Tensors {
		names = append(names, tn.Name)
	}
	if want := []string{"a.0.b2", "a.0.b3", "a.1.b2", "a.1.b3"}; !slices.Equal(names, want) {
		t.Errorf("expanded to %q, want %q", names, want)
	}
	if !slices.Equal(p.Buckets[0].Tensors, []int{3, 2}) {
		t.Errorf("g holds %v, want [3 2]", p.Buckets[0].Tensors)
	}
	// Zero padding as in bash: an endpoint written with a leading zero
	// pads every number to the width of the wider endpoint.
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"g.{01..03}", []string{"g.01", "g.02", "g.03"}},
		{"g.{08..11}", []string{"g.08", "g.09", "g.10", "g.11"}},
		{"g.{1..010}", []string{"g.001", "g.002", "g.003", "g.004", "g.005", "g.006", "g.007", "g.008", "g.009", "g.010"}},
		{"g.{00..2}", []string{"g.00", "g.01", "g.02"}},
		{"g.{0..2}", []string{"g.0", "g.1", "g.2"}},
		{"g.{8..10}", []string{"g.8", "g.9", "g.10"}},
		{"g{0..1}.{9..010}", []string{"g0.009", "g0.010", "g1.009", "g1.010"}},
	} {
		p := mustCheck(t, "tensor "+tc.name+" f32[1]\nbucket r { * }\n")
		var got []string
		for _, tn := range p.Tensors {
			got = append(got, tn.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s expanded to %q, want %q", tc.name, got, tc.want)
		}
	}
	// The QA case: the padded names are the ones declared, for a bucket
	// that lists them and for a pattern with the same range.
	mustCheck(t, "tensor g.{01..03} f32[1]\nbucket b { g.01, g.02, g.03 }\n")
	// `{4..12}` matches 10 to 12 among g.01 .. g.12, `{04..09}` 04 to 09.
	p = mustCheck(t, "tensor g.{01..12} f32[1]\nbucket b { g.{01..03} }\nbucket c { g.{4..12} }\nbucket d { g.{04..09} }\n")
	for i, want := range []int{3, 3, 6} {
		if got := len(p.Buckets[i].Tensors); got != want {
			t.Errorf("bucket %s holds %d tensors, want %d", p.Buckets[i].Name, got, want)
		}
	}
	if msgs := checkErrors("tensor g.{01..03} f32[1]\nbucket b { g.1 }\n"); len(msgs) != 1 || msgs[0] != "pattern `g.1` matches no tensor" {
		t.Errorf("g.1 among g.01 .. g.03: %q", msgs)
	}
	if msgs := checkErrors("tensor a.{03..1} f32[1]\n"); len(msgs) != 1 || msgs[0] != "range `{03..1}` is descending; write {1..03}" {
		t.Errorf("descending padded range: %q", msgs)
	}
	if msgs := checkErrors("tensor a.{0..99999999} f32[1]\n"); len(msgs) != 1 || !strings.Contains(msgs[0], "too large") {
		t.Errorf("huge range: %q", msgs)
	}
	if msgs := checkErrors("tensor a.{0..999}.{0..999}.{0..999} f32[1]\n"); len(msgs) != 1 || !strings.Contains(msgs[0], "more than") {
		t.Errorf("huge product of ranges: %q", msgs)
	}
}

func TestStdlibImport(t *testing.T) {
	p := mustCheck(t, `import "models/resnet50"
bucket grads { * } cap 25MiB first 1MiB
step { backward 60ms; allreduce grads op avg after ready; wait comm }
`)
	if len(p.Tensors) != 161 {
		t.Fatalf("%d tensors, want 161", len(p.Tensors))
	}
	var n int64
	for _, tn := range p.Tensors {
		n += tn.Elems
	}
	if n != 25_557_032 {
		t.Errorf("%d parameters, want 25,557,032", n)
	}
	if f := p.Tensors[0].Pos.File; f != "stdlib/models/resnet50.sync" {
		t.Errorf("stdlib tensor position in %q", f)
	}
}

func TestImportOrderFromMemory(t *testing.T) {
	// Check resolves relative imports from the directory of its filename.
	src := `tensor first f32[1]
import "./lib/inner.sync"
tensor last f32[1]
bucket all { * }
`
	p, diags := Check(filepath.Join("testdata", "errors", "main.sync"), []byte(src))
	if diags.HasErrors() {
		var b bytes.Buffer
		diags.Render(&b)
		t.Fatalf("errors:\n%s", b.String())
	}
	var names []string
	for _, tn := range p.Tensors {
		names = append(names, tn.Name)
	}
	if want := []string{"first", "inner.weight", "last"}; !slices.Equal(names, want) {
		t.Errorf("tensor order %q, want %q (imports at the point of the import)", names, want)
	}
	if len(p.Streams) != 1 || p.Streams[0].Name != "comm" {
		t.Errorf("streams %+v, want the imported comm only", p.Streams)
	}
}

// A bucket in two collectives of one group is one error that says so,
// not also a race that asks for an `after`, which cannot order them.
func TestGroupReusesBucket(t *testing.T) {
	src := "tensor a f32[8]\nstream compute\nstream comm\nstream side\nbucket ba { a }\n" +
		"step {\n  backward 1ms on compute\n  wait compute\n  group {\n    allreduce ba on comm\n    allreduce ba on side after comm\n  }\n}\n"
	msgs := checkErrors(src)
	want := "data race on bucket `ba`: it is in two collectives of one group (this one and line 10)"
	if len(msgs) != 1 || !strings.Contains(msgs[0], want) {
		t.Errorf("got %q, want one error %q", msgs, want)
	}
}

// A long name is cut in its middle, so that a "did you mean" shows where
// two long names differ: at their ends, as generated names mostly do.
func TestLongNameCutInTheMiddle(t *testing.T) {
	long := "layer." + strings.Repeat("x", 90)
	src := "tensor " + long + ".weight f32[4]\nstep {\n  backward 1ms\n  allreduce " + long + ".weighx after ready\n  wait comm\n}\n"
	_, diags := Check("plan.sync", []byte(src))
	var hint string
	for _, d := range diags {
		if d.Severity == Error {
			hint = d.Hint
		}
	}
	want := "did you mean `layer." + strings.Repeat("x", 43) + "..." + strings.Repeat("x", 21) + ".weight`?"
	if !strings.HasPrefix(hint, want) {
		t.Errorf("hint %q, want it to start with %q", hint, want)
	}
	if got := code(strings.Repeat("a", 80)); got != "`"+strings.Repeat("a", 80)+"`" {
		t.Errorf("an 80-character name is cut: %s", got)
	}
}

func TestRaces(t *testing.T) {
	head := "tensor a f32[8]\ntensor b f32[8]\nstream compute\nstream comm\nstream side\nbucket ba { a }\nbucket bb { b }\n"
	cases := []struct {
		step string
		race bool
	}{
		{"backward 1ms on compute; allreduce ba on comm", true},
		{"backward 1ms on compute; allreduce ba on comm after ready", false},
		{"backward 1ms on compute; allreduce ba on comm after compute", false},
		{"backward 1ms on compute; wait compute; allreduce ba on comm", false},
		{"backward 1ms on compute; allreduce ba on compute", false},
		{"allreduce ba on comm; backward 1ms on compute", true},
		{"allreduce ba on comm; wait comm; backward 1ms on compute", false},
		{"allreduce ba on comm; allreduce bb on side", false},
		{"allreduce ba on comm; allreduce ba on side", true},
		{"allreduce ba on comm; allreduce ba on side after comm", false},
		{"compute 1ms on compute; allreduce ba on comm; allreduce ba on side after compute", true},
		// after ready orders after the backward only, not after comm.
		{"backward 1ms on compute; allreduce ba on comm after ready; allreduce ba on side after ready", true},
		// Transitive: side waits for comm, which waited for the backward.
		{"backward 1ms on compute; allreduce ba on comm after ready; allreduce ba on side after comm", false},
		{"backward 1ms on compute; group { allreduce ba on comm after ready; allreduce bb on side } ", true},
		{"backward 1ms on compute; group { allreduce ba on comm after ready; allreduce bb on side after ready }", false},
		{"compute 1ms on side; allreduce ba on side", false},
		// after ready waits for its own buckets' gradients only: bb is ready
		// first (b is filled first), so what follows its allreduce on comm
		// may run while the backward still fills ba.
		{"backward 1ms on compute; allreduce bb on comm after ready; allreduce ba on comm", true},
		{"backward 1ms on compute; allreduce bb on comm after ready; allreduce ba on side after comm", true},
		{"backward 1ms on compute; group { allreduce bb on comm after ready }; allreduce ba on comm", true},
		// ba is ready last, so after it every bucket is ready.
		{"backward 1ms on compute; allreduce ba on comm after ready; allreduce bb on comm", false},
		{"backward 1ms on compute; allreduce bb, ba on comm after ready; allreduce ba on side after comm", false},
		{"backward 1ms on compute; allreduce bb on comm after ready; allreduce ba on comm after ready", false},
		// A second backward waits for what used its first one's buckets.
		{"backward 1ms on compute; allreduce bb on comm after ready; backward 1ms on compute", true},
		{"backward 1ms on compute; allreduce bb on comm after ready; wait comm; backward 1ms on compute; allreduce ba on comm after ready", false},
		// A group's collectives run together: one bucket in two of them is
		// a race on any streams, and an `after` in a member waits for what
		// the stream had before the group, not for another member.
		{"backward 1ms on compute; wait compute; group { allreduce ba on comm; broadcast ba on comm from 0 }", true},
		{"backward 1ms on compute; wait compute; group { allreduce ba on comm; allreduce ba on side after comm }", true},
		{"backward 1ms on compute; wait compute; group { allreduce ba on comm; allreduce bb on side after comm }; allreduce ba on compute after side", true},
		{"backward 1ms on compute; wait compute; group { allreduce ba on comm; allreduce bb on side }; allreduce ba on side after comm", false},
		{"backward 1ms on compute; wait compute; group { allreduce ba, bb on comm }; allreduce ba on side after comm", false},
		// backward and compute take `after STREAM` too: the stream waits
		// for what STREAM has queued, without the host.
		{"allreduce ba on comm; backward 1ms on compute after comm", false},
		{"allreduce ba on comm; backward 1ms on compute after side", true},
		{"backward 1ms on compute; allreduce ba on comm after ready; compute 1ms on compute after comm; allreduce ba on side after compute", false},
		{"backward 1ms on compute; allreduce ba on comm after ready; compute 1ms on compute; allreduce ba on side after compute", true},
		{"backward 1ms on compute; allreduce ba on comm after ready; compute 1ms on side after comm; backward 1ms on compute after side", false},
		// update reads its buckets: it waits for their collective by
		// `after synced`, `after STREAM`, a wait or its stream.
		{"backward 1ms on compute; allreduce ba on comm after ready; update ba sgd on compute", true},
		{"backward 1ms on compute; allreduce ba on comm after ready; update ba sgd on compute after synced", false},
		{"backward 1ms on compute; allreduce ba on comm after ready; update ba sgd on compute after comm", false},
		{"backward 1ms on compute; allreduce ba on comm after ready; wait comm; update ba sgd on compute", false},
		{"backward 1ms on compute; allreduce ba on compute after ready; update ba sgd on compute", false},
		// after synced waits for each bucket's own collective only.
		{"backward 1ms on compute; allreduce ba on comm after ready; allreduce bb on side after ready; update ba, bb sgd on compute after synced", false},
		{"backward 1ms on compute; allreduce ba on comm after ready; allreduce bb on side after ready; update ba, bb sgd on compute after comm", true},
		// An update only reads an allreduced bucket, but writes its slice
		// of a reduce-scattered one (for the allgather).
		{"backward 1ms on compute; allreduce ba on comm after ready; update ba sgd on compute after synced; allgather ba on comm", true},
		{"backward 1ms on compute; reducescatter ba on comm after ready; update ba sgd on compute after comm; allgather ba on comm after compute", false},
		{"backward 1ms on compute; reducescatter ba on comm after ready; update ba adamw on compute after comm; allgather ba on comm", true},
		// A backward must wait for the update that reads its buckets.
		{"backward 1ms on compute; allreduce ba on comm after ready; update ba sgd on side after synced; backward 1ms on compute after comm", true},
		{"backward 1ms on compute; allreduce ba on comm after ready; update ba sgd on side after synced; backward 1ms on compute after side", false},
	}
	// With a loss scaler, unscale writes its buckets.
	trainCases := []struct {
		step string
		race bool
	}{
		{"backward 1ms on compute; allreduce ba on comm after ready; unscale ba on compute; update ba sgd on compute", true},
		{"backward 1ms on compute; allreduce ba on comm after ready; unscale ba on compute after synced; update ba sgd on compute", false},
		{"backward 1ms on compute; allreduce ba on comm after ready; unscale ba on side after synced; update ba sgd on compute after synced", true},
		{"backward 1ms on compute; allreduce ba on comm after ready; unscale ba on side after synced; update ba sgd on compute after side", false},
		{"backward 1ms on compute; allreduce ba on comm after ready; unscale ba on side after synced; wait side; update ba sgd on compute", false},
		{"backward 1ms on compute; unscale ba on compute; allreduce ba on comm after ready", true},
		{"backward 1ms on compute; unscale ba on compute; allreduce ba on comm after compute; update ba sgd on compute after synced", false},
		{"backward 1ms on compute; allreduce ba, bb on comm after ready; unscale ba, bb on compute after synced; update ba, bb sgd on compute", false},
		// Every update reads the overflow flag that every unscale sets:
		// the update of bb must wait for the unscale of ba too.
		{"backward 1ms on compute; allreduce ba, bb on comm after ready; unscale ba on side after synced; unscale bb on compute after synced; update bb sgd on compute", true},
		// Two unscales on two streams set (and agree on) one flag: they
		// must be ordered too.
		{"backward 1ms on compute; allreduce ba, bb on comm after ready; unscale ba on side after synced; unscale bb on compute after synced; update bb sgd on compute after side", true},
		// (Each bucket's collective is its own, in turn: the unscale of ba
		// after synced is not ordered after bb's allreduce, which follows
		// ba's, so neither is what waits for it, after side.)
		{"backward 1ms on compute; allreduce ba, bb on comm after ready; unscale ba on side after synced; unscale bb on compute after side; update ba, bb sgd on compute", true},
		{"backward 1ms on compute; allreduce ba, bb on comm after ready; unscale bb on side after synced; unscale ba on compute after side; update ba, bb sgd on compute", false},
		// after synced works on the buckets in turn, each after its own
		// latest collective: the update of ba, first, waits for the
		// allreduce of ba and bb, not for the unscale after it; the update
		// of bb, second, also waits for the allreduce of ba after the
		// unscale.
		{"backward 1ms on compute; allreduce ba, bb on comm after ready; unscale ba, bb on comm; allreduce bb on comm; update ba, bb sgd on compute after synced", true},
		{"backward 1ms on compute; allreduce ba, bb on comm after ready; unscale ba, bb on comm; allreduce ba on comm; update ba, bb sgd on compute after synced", false},
		// A collective of several buckets is one collective a bucket, in
		// bucket order (ba, then bb): the unscale of ba after synced waits
		// for ba's reducescatter only, so what waits for it (after comm)
		// is not ordered after bb's, which comes later; the unscale of bb
		// after synced waits for bb's, which comes after ba's.
		{"backward 1ms on compute; reducescatter ba, bb on side after ready; unscale ba on comm after synced; unscale bb on compute after comm; update ba, bb sgd on side after compute", true},
		{"backward 1ms on compute; reducescatter bb, ba on side after ready; unscale ba on comm after synced; unscale bb on compute after comm; update ba, bb sgd on side after compute", true},
		{"backward 1ms on compute; reducescatter ba, bb on side after ready; unscale bb on comm after synced; unscale ba on compute after comm; update ba, bb sgd on side after compute", false},
		// In a group the collectives of a stream end together.
		{"backward 1ms on compute; group { reducescatter ba, bb on side after ready }; unscale ba on comm after synced; unscale bb on compute after comm; update ba, bb sgd on side after compute", false},
	}
	race := func(src, step string, want bool) {
		t.Helper()
		msgs := checkErrors(src)
		got := false
		for _, m := range msgs {
			if strings.Contains(m, "data race") {
				got = true
			} else {
				t.Errorf("%s: unexpected error %s", step, m)
			}
		}
		if got != want {
			t.Errorf("%s: race reported %v, want %v (%q)", step, got, want, msgs)
		}
	}
	for _, c := range cases {
		race(head+"step { "+c.step+" }\n", c.step, c.race)
	}
	for _, c := range trainCases {
		race(head+"scaler dynamic\nstep { "+c.step+" }\n", c.step, c.race)
	}
}

func TestSizesAndDurations(t *testing.T) {
	sizes := map[string]int64{
		"25MiB": 25 << 20, "1MiB": 1 << 20, "512KiB": 512 << 10, "4GiB": 4 << 30, "100B": 100,
		"10KB": 10_000, "10MB": 10_000_000, "1GB": 1_000_000_000, "1.5MiB": 1_572_864, "0.5KB": 500,
	}
	for text, want := range sizes {
		if got, msg, _ := parseSize(text); got != want || msg != "" {
			t.Errorf("parseSize(%q) = %d %q, want %d", text, got, msg, want)
		}
	}
	for _, bad := range []string{"25", "25Mib", "-1MiB", "1.5B", "MiB", "1..5MiB", "99999999999GB", "1e3B"} {
		if _, msg, _ := parseSize(bad); msg == "" {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
	durations := map[string]time.Duration{
		"500us": 500 * time.Microsecond, "60ms": 60 * time.Millisecond, "1.5s": 1500 * time.Millisecond, "0s": 0,
	}
	for text, want := range durations {
		if got, msg, _ := parseDuration(text); got != want || msg != "" {
			t.Errorf("parseDuration(%q) = %v %q, want %v", text, got, msg, want)
		}
	}
	for _, bad := range []string{"60", "1h", "-1ms", "1ns", "99999999999999s"} {
		if _, msg, _ := parseDuration(bad); msg == "" {
			t.Errorf("parseDuration(%q) accepted", bad)
		}
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pat, name string
		want      bool
	}{
		{"*", "a.b.c", true}, {"h.*", "h.0.attn", true}, {"h.*", "h", false}, {"*.weight", "a.b.weight", true},
		{"a.?.w", "a.1.w", true}, {"a.?.w", "a.10.w", false}, {"*a*b*", "xxaxxbxx", true}, {"*a*b", "ab", true},
		{"a*", "b", false}, {"", "", true}, {"?", "é", true}, {"**", "", true},
		{"h.{0..9}.*", "h.5.x", true}, {"h.{0..9}.*", "h.05.x", false}, {"h.{0..9}.*", "h.10.x", false},
		{"a{1..12}", "a1", true}, {"a{1..12}", "a12", true}, {"a{1..12}", "a13", false}, {"a{0..3}", "a0", true},
		{"*{2..3}", "x23", true}, {"*{20..30}*", "a255b", true}, {"{0..99999}.*", "7.w", true},
		{"a.{0..1}", "a.{0..1}", false},
		// A zero-padded range matches its numbers as it writes them.
		{"g.{01..03}", "g.02", true}, {"g.{01..03}", "g.2", false}, {"g.{01..03}", "g.002", false},
		{"g.{1..010}", "g.005", true}, {"g.{1..010}", "g.010", true}, {"g.{1..010}", "g.5", false}, {"g.{1..010}", "g.011", false},
		{"g.{08..11}", "g.09", true}, {"g.{08..11}", "g.10", true}, {"g.{08..11}", "g.9", false}, {"g.{08..11}", "g.07", false},
		{"g.{00..1}x", "g.00x", true}, {"g.{00..1}x", "g.0x", false}, {"{01..02}{3..4}", "024", true}, {"{01..02}{3..4}", "0204", false},
		{"*{01..03}*", "a02b", true}, {"*{01..03}*", "a2b", false},
		// Numbers beyond int64 do not overflow into the range.
		{"{9223372036854775800..9223372036854775807}", "99999999999999999999", false},
		{"{9223372036854775800..9223372036854775807}", "9223372036854775801", true},
		{"{09223372036854775800..9223372036854775807}", "99999999999999999999", false},
	}
	for _, c := range cases {
		p := compilePattern(c.pat, true)
		if got := p.match(c.name); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pat, c.name, got)
		}
		// The general matcher agrees with the fast paths.
		q := p
		q.literal, q.simple = false, false
		if got := q.match(c.name); got != c.want {
			t.Errorf("general match(%q, %q) = %v", c.pat, c.name, got)
		}
	}
	if p := compilePattern("a.{0..1}", false); !p.literal || !p.match("a.{0..1}") {
		t.Errorf("a quoted pattern's braces are literal")
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"compute", "comm", "side"}
	for in, want := range map[string]string{"com": "comm", "comms": "comm", "compte": "compute", "xyz": "", "Comm": "comm", "sied": "side"} {
		if got := suggest(in, cands); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJSON(t *testing.T) {
	_, diags := Check("plan.sync", []byte("tensor a f32[0]\nbucket b { a }\n"))
	out, err := diags.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got) != 1 {
		t.Fatalf("%d diagnostics, want 1: %s", len(got), out)
	}
	want := map[string]any{"file": "plan.sync", "line": 1.0, "column": 14.0, "end_line": 1.0, "end_column": 15.0,
		"severity": "error", "message": "dimension 0 is not positive", "hint": "every dimension is at least 1"}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("%s = %v, want %v", k, got[0][k], v)
		}
	}
	// Written as is, not HTML-escaped (`\u003c`): a file named <stdin> and
	// an import cycle's arrows.
	_, diags = Check("<stdin>", []byte("import \"./<stdin>\"\n"))
	out, _ = diags.JSON()
	if !bytes.Contains(out, []byte(`"file": "<stdin>"`)) || !bytes.Contains(out, []byte("<stdin> -> <stdin>")) {
		t.Errorf("JSON is HTML-escaped:\n%s", out)
	}
	empty, _ := Diagnostics(nil).JSON()
	if string(empty) != "[]" {
		t.Errorf("no diagnostics as JSON: %s, want []", empty)
	}
}

func TestLoadMissingFile(t *testing.T) {
	prog, diags := Load(filepath.Join(t.TempDir(), "nope.sync"))
	if prog != nil || !diags.HasErrors() || !strings.Contains(diags[0].Message, "cannot read") {
		t.Errorf("Load of a missing file: %v", diags)
	}
	var b bytes.Buffer
	diags.Render(&b)
	if !strings.Contains(b.String(), "nope.sync: error: cannot read") {
		t.Errorf("rendered %q", b.String())
	}
}

func TestLoadFromDisk(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.sync"), []byte("tensor w f32[2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "plan.sync")
	if err := os.WriteFile(main, []byte("import \"m.sync\"\nbucket b { w }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, diags := Load(main)
	if diags.HasErrors() || p.Name != "plan" || len(p.Tensors) != 1 || p.Tensors[0].Pos.File != filepath.Join(dir, "m.sync") {
		t.Errorf("Load = %+v, %v", p, diags)
	}
}

// TestImportThroughSymlink checks that a module reached through a
// symbolic link is the file it links to: a diamond through a linked
// directory includes it once, and a plan that imports itself through a
// link is a cycle.
func TestImportThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("shared/x.sync", "tensor s.w f32[2]\n")
	write("proj/a.sync", "import \"./common/x.sync\"\ntensor p f32[1]\n")
	write("plan.sync", "import \"./proj/a.sync\"\nimport \"./shared/x.sync\"\nbucket g { * }\nstep { backward 1ms; allreduce g after ready }\n")
	write("self.sync", "import \"./link.sync\"\ntensor a f32[1]\n")
	if err := os.Symlink("../shared", filepath.Join(dir, "proj", "common")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if err := os.Symlink("self.sync", filepath.Join(dir, "link.sync")); err != nil {
		t.Fatal(err)
	}
	prog, diags := Load(filepath.Join(dir, "plan.sync"))
	if prog == nil || len(diags) != 0 || len(prog.Tensors) != 2 {
		t.Errorf("diamond through a linked directory: program %v, diagnostics %v; want 2 tensors and no diagnostics", prog != nil, diags)
	}
	_, diags = Load(filepath.Join(dir, "self.sync"))
	if !diags.HasErrors() || !strings.HasPrefix(diags[0].Message, "import cycle: ") || diags[0].Pos.Line != 1 {
		t.Errorf("a plan that imports itself through a link: %v, want an import cycle on line 1", diags)
	}
	for _, d := range diags {
		if strings.Contains(d.Message, "duplicate") {
			t.Errorf("unexpected %s", d.Error())
		}
	}
}

// TestImportHints checks the hints of imports that cannot be read: a
// directory names a file in it, a path without `.sync` the file with it,
// a standard library module's file or base name the module.
func TestImportHints(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "layers", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "layers", "attn.sync"), []byte("tensor w f32[2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ imp, msg, hint string }{
		{"./layers", "cannot import `./layers`: is a directory", "an import names one .sync file, not a directory; import each file you need, e.g. `import \"./layers/attn.sync\"`"},
		{"./layers/empty/", "cannot import `./layers/empty/`: is a directory", "an import names one .sync file, not a directory"},
		{"./layers/attn", "cannot import `./layers/attn`: no such file or directory", "did you mean `./layers/attn.sync`? a file is imported by its whole name"},
		{"./layers/mlp", "cannot import `./layers/mlp`: no such file or directory", "relative to the importing file's directory"},
		// A standard library module written as the file that diagnostics
		// name, or without its directory.
		{"stdlib/models/resnet50.sync", "cannot import `stdlib/models/resnet50.sync`: no such file or directory",
			"did you mean `import \"models/resnet50\"`? a module of the standard library is imported by its name, without .sync"},
		{"models/tiny_mlp.sync", "cannot import `models/tiny_mlp.sync`: no such file or directory", "did you mean `import \"models/tiny_mlp\"`?"},
		{"tiny_mlp", "no module `tiny_mlp` in the standard library", "did you mean `models/tiny_mlp`? the standard library has"},
	} {
		_, diags := Check(filepath.Join(dir, "plan.sync"), []byte("import \""+tc.imp+"\"\n"))
		if len(diags) != 1 || diags[0].Message != tc.msg || !strings.Contains(diags[0].Hint, tc.hint) {
			t.Errorf("import %q: got %v, want %q with hint %q", tc.imp, diags, tc.msg, tc.hint)
		}
	}
}

func TestUncoveredWarningHints(t *testing.T) {
	_, diags := Check("plan.sync", []byte("tensor one f32[4]\ntensor many.{0..2} f32[4]\nstep { backward 1ms }\n"))
	var hints []string
	for _, d := range diags {
		hints = append(hints, d.Hint)
	}
	want := []string{
		"add it to a bucket, name it in a collective, or mark it `frozen`",
		"add them to a bucket, name them in a collective, or mark them `frozen`",
	}
	if !slices.Equal(hints, want) {
		t.Errorf("hints = %q, want %q", hints, want)
	}
	// A tensor named like a bucket cannot be named in a collective: the
	// name is the bucket's.
	_, diags = Check("plan.sync", []byte("tensor a f32[4]\ntensor g f32[4]\nbucket g { a }\nstep { backward 1ms; allreduce g after ready; wait comm }\n"))
	if len(diags) != 1 || diags[0].Message != "tensor `g` is in no bucket and no collective synchronises it" ||
		diags[0].Hint != "a collective that names `g` takes the bucket of that name: add the tensor to a bucket, rename the tensor or the bucket, or mark the tensor `frozen`" {
		t.Errorf("tensor shadowed by a bucket: got %v", diags)
	}
}

// A bucket that no collective names is warned about, with the collective
// to add; one named by a piece or by a tensor of it is used, but a piece
// of it that no collective names is warned about too: its tensors are
// never synchronised.
func TestUnsyncedBucketWarning(t *testing.T) {
	src := "tensor a f32[4]\ntensor b f32[4]\ntensor c f32[4]\ntensor d f32[4]\nbucket ga { a }\nbucket gb { b, d } cap 16B\nbucket gc { c }\n" +
		"step { backward 1ms; allreduce gb[1], c after ready; wait comm }\n"
	prog, diags := Check("plan.sync", []byte(src))
	if prog == nil || len(diags) != 2 {
		t.Fatalf("program %v, diagnostics %v; want two warnings", prog != nil, diags)
	}
	for i, want := range []struct {
		line      int
		msg, hint string
	}{
		{5, "bucket `ga` is used by no collective: its gradients are never synchronised", "name it in a collective, e.g. `allreduce ga`, or remove it"},
		{6, "piece `gb[0]` of bucket `gb` is used by no collective (its other piece is): its gradients are never synchronised",
			"name it in a collective too, e.g. `allreduce gb[0]`, or the whole bucket, `allreduce gb`"},
	} {
		d := diags[i]
		if d.Severity != Warning || d.Pos.Line != want.line || d.Message != want.msg || d.Hint != want.hint {
			t.Errorf("got %s (hint %q), want line %d: %s (hint %q)", d.Error(), d.Hint, want.line, want.msg, want.hint)
		}
	}
	// Every piece named, one by one or through its tensors: no warning.
	src = "tensor a.{0..5} f32[4]\nbucket g { * } cap 16B\nstep { backward 1ms; allreduce g[0], g[1] after ready; allreduce a.{0..3} after ready; wait comm }\n"
	if _, diags := Check("plan.sync", []byte(src)); len(diags) != 0 {
		t.Errorf("every piece synchronised: got %v", diags)
	}
	// Many pieces: one warning that counts them and shows the first.
	src = "tensor a.{0..9} f32[4]\nbucket g { * } cap 16B\nstep { backward 1ms; allreduce g[3] after ready; wait comm }\n"
	_, diags = Check("plan.sync", []byte(src))
	if len(diags) != 1 || diags[0].Message != "9 of the 10 pieces of bucket `g` (`g[0]`, `g[1]`, `g[2]`, `g[4]`, ...) are used by no collective: their gradients are never synchronised" {
		t.Errorf("got %v", diags)
	}
}

// A main file with no step (or init) block and no errors gets one warning
// about the whole file: a program built from it would do nothing.
func TestNoStepWarning(t *testing.T) {
	const noStep = "the program has no step block: a program built from it synchronises nothing"
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"", true},
		{"// a plan being written\n", true},
		{"tensor a f32[4]\nbucket g { a }\n", true},
		{"tensor a f32[4]\nbucket g { a }\nstep { allreduce g }\n", false},
		{"tensor a f32[4]\nbucket g { a }\ninit { broadcast g from 0 }\n", false},
		{"tensor a f33[4]\n", false}, // errors: nothing is built anyway
	} {
		_, diags := Check("plan.sync", []byte(tc.src))
		got := 0
		for _, d := range diags {
			if d.Message == noStep {
				got++
				if d.Severity != Warning || d.Pos.Line != 0 || d.Pos.File != "plan.sync" {
					t.Errorf("%q: %+v, want a warning about the whole file", tc.src, d)
				}
			}
		}
		if (got == 1) != tc.want || got > 1 {
			t.Errorf("%q: %d no-step warnings, want one: %v (diagnostics %v)", tc.src, got, tc.want, diags)
		}
	}
}

// A tensor whose declaration has an error gets that error and no "in no
// bucket" warning on top; valid declarations still get theirs.
func TestNoUncoveredWarningForInvalidTensor(t *testing.T) {
	src := "tensor a f33[3]\ntensor b f32[0]\ntensor c f32[9223372036854775807, 4]\n" +
		"tensor d f64[1152921504606846976]\ntensor e f32[2]\n"
	_, diags := Check("plan.sync", []byte(src))
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d:%s", d.Pos.Line, d.Severity))
	}
	want := []string{"1:error", "2:error", "3:error", "4:error", "5:warning"}
	if !slices.Equal(got, want) {
		t.Errorf("diagnostics = %q, want %q", got, want)
	}
}

// A misspelt `after ready` is suggested as `ready`, not as a stream to
// declare; a stream close to the word still wins.
func TestAfterReadyMisspelt(t *testing.T) {
	for _, tc := range []struct{ src, hint string }{
		{"tensor a f32[4]\nstep { backward 1ms; allreduce a after redy }\n", "did you mean `ready`?"},
		{"tensor a f32[4]\nstream compute\nstream comm\nstream reads\nstep { backward 1ms; allreduce a after read }\n", "did you mean `reads`?"},
	} {
		_, diags := Check("plan.sync", []byte(tc.src))
		if len(diags) != 1 || !strings.HasPrefix(diags[0].Hint, tc.hint) {
			t.Errorf("%q: diagnostics %v, want one whose hint starts with %q", tc.src, diags, tc.hint)
		}
	}
}

// TestNumberHints checks the hints for dimensions, sizes and durations
// that are not whole numbers or too large.
func TestNumberHints(t *testing.T) {
	checkHints(t, []hintCase{
		{"tensor a f32[1.5]\n", "dimension must be an integer, not `1.5`", "a dimension counts elements, so it is a whole number"},
		{"tensor a f32[4x4]\n", "dimension must be an integer, not `4x4`", "dimensions are separated by commas, e.g. `f32[4, 4]`"},
		{"tensor a f32[99999999999999999999]\n", "dimension `99999999999999999999` is too large", "a dimension is at most 2^63-1"},
		{"tensor a f32[4294967296, 4294967296]\n", "element count of shape overflows int64", "the product of the dimensions is at most 2^63-1"},
		{"tensor a f32[4]\nbucket g { a } cap 1.3B\n", "size `1.3B` is not a whole number of bytes", "round it, e.g. `1B`; `B` means bytes, so for 1.3 billion bytes write `1.3GB`"},
		{"tensor a f32[4]\nbucket g { a } cap 0.3B\n", "size `0.3B` is not a whole number of bytes", "round it, e.g. `1B`"},
		{"tensor a f32[4]\nbucket g { a } cap 1.0000001KiB\n", "size `1.0000001KiB` is not a whole number of bytes", "round it, e.g. `1024B`"},
		{"tensor a f32[4]\nbucket g { a } cap 99999999999GB\n", "size `99999999999GB` is too large", "the largest size is about 8589934591GiB"},
		{"step { compute 0.0000000001s }\n", "duration `0.0000000001s` is not a whole number of nanoseconds", "at most 3 decimals with us"},
		// An unknown unit is only ever suggested as the same quantity: a
		// nearest spelling (`1GiB` for `1TiB`, `5ms` for `5ns`) would
		// change the value a thousandfold.
		{"tensor a f32[4]\nbucket g { a } cap 1TiB\n", "unknown unit `TiB` in size `1TiB`", "did you mean `1024GiB`?"},
		{"tensor a f32[4]\nbucket g { a } cap 2TB\n", "unknown unit `TB` in size `2TB`", "did you mean `2000GB`?"},
		{"tensor a f32[4]\nbucket g { a } cap 25M\n", "unknown unit `M` in size `25M`", "did you mean `25MiB` (powers of 1024) or `25MB` (powers of 1000)?"},
		{"tensor a f32[4]\nbucket g { a } cap 10bytes\n", "unknown unit `bytes` in size `10bytes`", "did you mean `10B`?"},
		{"tensor a f32[4]\nbucket g { a } cap 25mib\n", "unknown unit `mib` in size `25mib`", "did you mean `25MiB`?"},
		{"tensor a f32[4]\nbucket g { a } cap 10ms\n", "unknown unit `ms` in size `10ms`", "`ms` is a unit of time, not of size"},
		{"step { compute 5ns }\n", "unknown unit `ns` in duration `5ns`", "did you mean `0.005us`?"},
		{"step { compute 1.5h }\n", "unknown unit `h` in duration `1.5h`", "did you mean `5400s`?"},
		{"step { compute 60msec }\n", "unknown unit `msec` in duration `60msec`", "did you mean `60ms`?"},
		{"step { compute 2MB }\n", "unknown unit `MB` in duration `2MB`", "`MB` is a unit of size, not of time"},
		// Exponents, hexadecimal, negative numbers.
		{"tensor a f32[4]\nbucket g { a } cap 1e6B\n", "invalid size `1e6B`", "numbers are written without an exponent: write `1000000B`"},
		{"tensor a f32[4]\nbucket g { a } cap 1e6\n", "invalid size `1e6`", "write `1000000` and a unit (B, KiB"},
		{"step { compute 1e400s }\n", "invalid duration `1e400s`", "numbers are written without an exponent; write a number and a unit"},
		{"tensor a f32[1e3]\n", "dimension must be an integer, not `1e3`", "write `1000`"},
		{"tensor a f32[0x10]\n", "dimension must be an integer, not `0x10`", "dimensions are decimal numbers: write `16`"},
		{"tensor a f32[4]\nbucket g { a } cap -1MiB\n", "negative size `-1MiB`", "a size is not negative, e.g. `25MiB`"},
		{"step { compute -1ms }\n", "negative duration `-1ms`", "a duration is not negative"},
		{"tensor a f32[9223372036854775807]\n", "tensor of 9223372036854775807 f32 elements is 2^63 bytes or more", "check the shape"},
		// Exactly 2^63 bytes is one too many.
		{"tensor a f32[2305843009213693952]\n", "tensor of 2305843009213693952 f32 elements is 2^63 bytes or more", "check the shape"},
		// The program's totals fit in an int64 too, not only each tensor
		// and each bucket piece: the summary said -8,446,744,073,709,551,616
		// parameters, and 0 B for 2^64 bytes.
		{"tensor a.{0..9} f32[1000000000000000000]\nbucket g { * } cap 1MiB\nstep { backward 1ms; allreduce g after ready }\n",
			"the program's tensors add up to 2^63 bytes or more, from tensor `a.2` on", "added up, have at most 2^63-1 bytes"},
		{"tensor a.{0..3} f32[1152921504606846976]\n", "the program's tensors add up to 2^63 bytes or more, from tensor `a.1` on", "check the shapes"},
		{"tensor a i8[4611686018427387904] frozen\ntensor b i8[4611686018427387904]\n", "the program's tensors add up to 2^63 bytes or more, from tensor `b` on", "a program's tensors, added up"},
		{"for i in 0..1 {\n    tensor h.{i}.w f64[1152921504606846975]\n}\n", "the program's tensors add up to 2^63 bytes or more, from tensor `h.1.w` on", "a program's tensors, added up"},
		// A wire wider than the tensors' dtype multiplies their bytes.
		{"tensor a.{0..1} f16[576460752303423488]\nbucket g { a.0 } wire f64\nbucket h { a.1 } wire f64\n",
			"the buckets total 2^63 bytes or more on the wire, from bucket `h` on", "the buckets' wire buffers, added up"},
		// Integers: ranks, piece indexes and run counts.
		{"run steps 99999999999999999999\n", "steps `99999999999999999999` is too large", "the largest is 2147483647"},
		{"run steps 1.5\n", "steps must be an integer, not `1.5`", "write a whole number, e.g. `steps 10`"},
		{"run warmup -1\n", "warmup must not be negative", "write `warmup 0` for none"},
		{"run check every 1e2\n", "check every must be an integer, not `1e2`", "write `100`"},
		{"run steps 1 steps 2\n", "duplicate `steps` in run", "remove one of them"},
		{"tensor a f32[4]\nbucket g { a }\nstep { reduce g to root }\n", "root rank must be an integer, not `root`", "write a whole number, e.g. `to 0`; ranks count from 0"},
		{"tensor a f32[4]\nbucket g { a }\nstep { broadcast g from 99999999999 }\n", "root rank `99999999999` is too large", "the largest is 2147483647"},
		{"tensor a f32[4]\nbucket g { a } cap 1KiB\nstep { allreduce g[x] }\n", "piece index must be an integer, not `x`", "e.g. `g[0]`; pieces count from 0"},
		// A hint never suggests a value that is rejected in turn: too
		// large, or not a whole number of nanoseconds or bytes.
		{"step { compute 999999999h }\n", "unknown unit `h` in duration `999999999h`", "`999999999h` is too large: the largest duration is about 9223372036s (2^63-1 nanoseconds); units are us, ms, s"},
		{"step { compute 999999999 h }\n", "unexpected `h`: a number and its unit are written without a space between them", "`999999999h` is too large: the largest duration"},
		{"step { compute 0.5ns }\n", "unknown unit `ns` in duration `0.5ns`", "`0.5ns` is not a whole number of nanoseconds; units are"},
		{"step { compute 1.0000000000001ns }\n", "unknown unit `ns` in duration `1.0000000000001ns`", "`1.0000000000001ns` is not a whole number of nanoseconds"},
		{"tensor a f32[4]\nbucket g { a } cap 99999999999gib\n", "unknown unit `gib` in size `99999999999gib`", "`99999999999gib` is too large: the largest size is about 8589934591GiB"},
		{"tensor a f32[4]\nbucket g { a } cap 99999999999TiB\n", "unknown unit `TiB` in size `99999999999TiB`", "`99999999999TiB` is too large"},
		{"tensor a f32[4]\nbucket g { a } cap 99999999999999M\n", "unknown unit `M` in size `99999999999999M`", "`99999999999999M` is too large"},
		{"tensor a f32[4]\nbucket g { a } cap 0.001M\n", "unknown unit `M` in size `0.001M`", "did you mean `0.001MB` (powers of 1000; `0.001MiB` is not a whole number of bytes)?"},
		{"tensor a f32[4]\nbucket g { a } cap 99999999999999999999.5B\n", "size `99999999999999999999.5B` is too large", "the largest size is about 8589934591GiB"},
		{"step { compute 1e18s }\n", "invalid duration `1e18s`", "numbers are written without an exponent, and `1e18s` is too large: the largest duration"},
		{"step { compute 1e18 }\n", "invalid duration `1e18`", "numbers are written without an exponent, and `1e18` is too large"},
		{"tensor a f32[4]\nbucket g { a } cap 1e-1KiB\n", "invalid size `1e-1KiB`", "numbers are written without an exponent, and `1e-1KiB` is not a whole number of bytes"},
		{"run steps 1e10\n", "steps must be an integer, not `1e10`", "numbers are written without an exponent, and `1e10` is too large: the largest is 2147483647"},
		{"run steps 1e-1\n", "steps must be an integer, not `1e-1`", "numbers are written without an exponent; write a whole number, e.g. `steps 10`"},
		{"tensor a f32[9.3e18]\n", "dimension must be an integer, not `9.3e18`", "numbers are written without an exponent, and `9.3e18` is too large"},
		{"tensor a f32[1e-1]\n", "dimension must be an integer, not `1e-1`", "numbers are written without an exponent; a dimension counts elements"},
		{"tensor a f32[0e3]\n", "dimension must be an integer, not `0e3`", "numbers are written without an exponent; a dimension counts elements"},
	})
}

// TestUnitHintsAreValid checks docs/language.md's promise that a hint only
// ever gives the same value, which is then accepted: every quantity that a
// hint about an unknown unit or an exponent suggests parses, and one in
// place of a unit that is a multiple of the language's (`h`, `TiB`) stands
// for the value written.
func TestUnitHintsAreValid(t *testing.T) {
	nums := []string{"0", "1", "5", "0.5", "1.5", "60", "999999999", "99999999999", "9999999999999",
		"8796093022207", "1.0000000000001", "0.0000001", "9223372036", "9223372037", "8589934591", "8589934592"}
	suffixes := []string{"h", "hr", "min", "ns", "nsec", "sec", "msec", "usec", "S", "MS", "US", "TiB", "TB", "M", "K", "G", "m", "k",
		"gib", "MIB", "kb", "b", "bytes", "byte", "e3", "e18", "e-9", "e10", "e18s", "e-1KiB", "e18GiB", "e9ms", "e-9s"}
	// The quantities a hint suggests (not those it explains).
	suggestionRE := regexp.MustCompile("(?:did you mean |write | or )`([^`]*)`")
	for _, q := range []struct {
		what  string
		units map[string]int64
		list  string
	}{{"size", sizeUnits, sizeUnitList}, {"duration", durationUnits, durationUnitList}} {
		for _, num := range nums {
			for _, suffix := range suffixes {
				text := num + suffix
				_, msg, hint := parseQuantity(text, q.what, q.units, q.list)
				if msg == "" {
					continue
				}
				for _, m := range suggestionRE.FindAllStringSubmatch(hint, -1) {
					suggested := m[1]
					parts := numberUnit.FindStringSubmatch(suggested)
					if parts == nil || suggested == text {
						continue // not a quantity, or the text itself
					}
					if _, known := q.units[parts[2]]; !known {
						continue // a unit named in passing (`ms` is a unit of time)
					}
					got, smsg, _ := parseQuantity(suggested, q.what, q.units, q.list)
					if smsg != "" {
						t.Errorf("%s %q: hint %q suggests %q, which is rejected: %s", q.what, text, hint, suggested, smsg)
						continue
					}
					if a, ok := unitAliases[q.what][suffix]; ok {
						want, _ := new(big.Rat).SetString(num)
						want.Mul(want, a.factor)
						want.Mul(want, new(big.Rat).SetInt64(q.units[a.unit]))
						if new(big.Rat).SetInt64(got).Cmp(want) != 0 {
							t.Errorf("%s %q: hint %q suggests %q, which is %d, not %v", q.what, text, hint, suggested, got, want)
						}
					}
				}
			}
		}
	}
}

// TestCheckHints checks the hints of errors that once had none: each says
// what to do.
func TestCheckHints(t *testing.T) {
	checkHints(t, []hintCase{
		{"tensor a f32[1]\nstep { allreduce a[0] }\n", "no bucket `a`", "`a` is a tensor: name it without an index"},
		{"tensor a f32[1]\nbucket grads { a }\nstep { allreduce zzzz[0] }\n", "no bucket `zzzz`", "declared buckets: grads"},
		{"tensor a f32[1]\nstep { allreduce zzzz[0] }\n", "no bucket `zzzz`", "no bucket is declared"},
		{"bucket g { layer.* }\n", "pattern `layer.*` matches no tensor", "the program declares no tensors"},
		{"tensor a f32[1]\nbucket g { a, qqqqqq.* }\n", "pattern `qqqqqq.*` matches no tensor", "fix the pattern or remove it"},
		// An absolute path is a file, not a standard library module.
		{"import \"/nonexistent/x\"\n", "cannot import `/nonexistent/x`: no such file or directory", "one that starts with / is absolute"},
		// The suggestion is a tensor that a bucket can still take.
		{"tensor a f32[1]\ntensor c f32[1]\nbucket g1 { a }\nbucket g2 { b }\n", "pattern `b` matches no tensor", "did you mean `c`?"},
		{"tensor a f32[1]\nbucket g { a } cap 1MiB cap 2MiB\n", "duplicate option `cap` (first on line 2)", "remove one of them"},
		{"stream s\nstream s\n", "duplicate stream `s` (first declared at plan.sync:1:8)", "unique"},
		{"tensor \"\" f32[1]\n", "empty tensor name", "at least one character"},
		{"tensor a.{3..1} f32[1]\n", "range `{3..1}` is descending; write {1..3}", "from N up to M"},
		// A target that is nothing says what there is.
		{"tensor a f32[1]\nbucket g { a }\nstep { allreduce grads }\n", "no bucket or tensor `grads`", "declared buckets: g; a target is a bucket"},
		{"tensor a f32[1]\nstep { allreduce zz }\n", "no bucket or tensor `zz`", "no bucket is declared; a target is"},
		{"step { allreduce zz }\n", "no bucket or tensor `zz`", "the program declares no tensors"},
		{"tensor a f32[1]\nbucket g { a }\nstep { allreduce b.* }\n", "no bucket or tensor `b.*`", "no tensor matches it"},
		// When every stream declaration was rejected, no empty list.
		{"stream 1s\nstep { compute 1ms }\n", "no stream `compute` for this compute", "add `on STREAM` or declare `stream compute`"},
		{"stream 1s\nstep { wait comm }\n", "no stream `comm`", "declare it with `stream comm`"},
		// The wrong root keyword next to the right one: remove it.
		{"tensor a f32[1]\nstep { broadcast a to 0 from 0 }\n", "broadcast takes no `to`", "remove it: broadcast's root is given by `from`"},
		{"tensor a f32[1]\nstep { reduce a from 1 to 0 }\n", "reduce takes no `from`", "remove it: reduce's root is given by `to`"},
		{"tensor a f32[1]\nstep { broadcast a to 0 }\n", "broadcast takes no `to`", "write `from RANK`"},
		// backward and compute wait for streams, not for gradients.
		{"stream compute\nstep { compute 1ms after ready }\n", "compute takes no `after ready`", "belongs to a collective; compute takes `after STREAM`"},
		{"stream compute\nstep { backward 1ms after comm }\n", "no stream `comm`", "declared streams: compute"},
		// compute and comm, used where a declaration took them away, say
		// which declaration (it may stand in an imported module).
		{"stream side\nstep { backward 1ms }\n", "no stream `compute` for this backward",
			"declare `stream compute`; the implicit streams compute and comm exist only in a program that declares no stream, and plan.sync:1:8 declares `side`"},
		{"stream side\nstep { wait comm }\n", "no stream `comm`", "declared streams: side; the implicit streams compute and comm exist only in a program that declares no stream, and plan.sync:1:8"},
		{"stream side\nstep { wait other }\n", "no stream `other`", "declared streams: side"},
		{"stream compute\nstep { compute 1ms after compute after compute }\n", "duplicate option `after` (first on line 2)", "remove one of them"},
		{"stream compute\nstep { compute 1ms from 0 }\n", "compute takes no `from`", "takes only `on STREAM` and `after STREAM`"},
		{"tensor a f32[1]\nstream compute\nstream comm\nstep { allreduce a on comm; backward 1ms on compute }\n", "data race on bucket `a`: this backward on stream `compute` is not ordered after the allreduce on stream `comm` (line 4)", "add `after comm` to the backward (or `wait comm` before it)"},
		// A dimension that is not a number says what one is.
		{"tensor a f32[-]\n", "dimension must be an integer, not `-`", "a whole number of at least 1"},
		{"tensor a f32[--4]\n", "dimension must be an integer, not `--4`", "a whole number of at least 1"},
		{"tensor a f32[1_024]\n", "dimension must be an integer, not `1_024`", "without digit separators: write `1024`"},
		// A leading zero: `1,024` is two dimensions, 1 and 24, not 1024.
		{"tensor a f32[1,024]\n", "dimension `024` is written with a leading zero", "`1,024` is two dimensions, 1 and 24; for one, write it without the comma, `1024`"},
		{"tensor a f32[4, 096]\n", "dimension `096` is written with a leading zero", "write `96`"},
		{"tensor a f32[07]\n", "dimension `07` is written with a leading zero", "write `7`"},
		// Other tools' names of dtypes and ops.
		{"tensor a float32[4]\n", "unknown tensor dtype `float32`", "did you mean `f32`?"},
		{"tensor a fp16[4]\n", "unknown tensor dtype `fp16`", "did you mean `f16`?"},
		{"tensor a bfloat16[4]\n", "unknown tensor dtype `bfloat16`", "did you mean `bf16`?"},
		{"tensor a f32[4]\nbucket g { a } wire int8\n", "unknown wire dtype `int8`", "did you mean `i8`?"},
		// PyTorch's and NumPy's spellings, with their module.
		{"tensor a torch.float16[4]\n", "unknown tensor dtype `torch.float16`", "did you mean `f16`?"},
		{"tensor a torch.bfloat16[4]\n", "unknown tensor dtype `torch.bfloat16`", "did you mean `bf16`?"},
		{"tensor a torch.half[4]\n", "unknown tensor dtype `torch.half`", "did you mean `f16`?"},
		{"tensor a np.float32[4]\n", "unknown tensor dtype `np.float32`", "did you mean `f32`?"},
		{"tensor a double[4]\n", "unknown tensor dtype `double`", "did you mean `f64`?"},
		{"tensor a torch.int64[4]\n", "unknown tensor dtype `torch.int64`", "did you mean `i64`?"},
		{"tensor a torch.bool[4]\n", "unknown tensor dtype `torch.bool`", "syncgen has no dtype of that kind"},
		{"tensor a f32[4]\nbucket g { a } wire torch.float16\n", "unknown wire dtype `torch.float16`", "did you mean `f16`?"},
		// A dtype syncgen lacks gets no suggestion of another kind.
		{"tensor a f8[4]\n", "unknown tensor dtype `f8`", "syncgen has no dtype of that kind; dtypes are"},
		{"tensor a i16[4]\n", "unknown tensor dtype `i16`", "syncgen has no dtype of that kind; dtypes are"},
		{"tensor a f32[4]\nbucket g { a }\nstep { allreduce g op mean }\n", "unknown op `mean`", "did you mean `avg`?"},
		{"tensor a f32[4]\nbucket g { a }\nstep { allreduce g op product }\n", "unknown op `product`", "did you mean `prod`?"},
	})
}

// hintCase is a plan, the message of one of its diagnostics and a part
// of that diagnostic's hint.
type hintCase struct{ src, msg, hint string }

// checkHints checks that each case's plan has a diagnostic with the
// message, and that its hint contains the expected part.
func checkHints(t *testing.T, cases []hintCase) {
	t.Helper()
	for _, tc := range cases {
		_, diags := Check("plan.sync", []byte(tc.src))
		found := false
		for _, d := range diags {
			if d.Message == tc.msg {
				found = true
				if !strings.Contains(d.Hint, tc.hint) {
					t.Errorf("%q: %q has hint %q, want one with %q", tc.src, d.Message, d.Hint, tc.hint)
				}
			}
		}
		if !found {
			t.Errorf("%q: diagnostics %v, want %q", tc.src, diags, tc.msg)
		}
	}
}

// TestUnknownNameReportedOnce checks that a misspelt name used several
// times is one error, at its first use in the file, that says how often
// it is used, and that each distinct misspelling keeps its own error.
func TestUnknownNameReportedOnce(t *testing.T) {
	const decls = "tensor a f32[4]\ntensor b f32[4]\nstream compute\nstream comm\nbucket g { a }\nbucket h { b }\n"
	for _, tc := range []struct {
		src  string
		want []string // the errors, as line:col message
	}{
		{decls + "step {\n  backward 1ms\n  allreduce g on comms after ready\n  allreduce h on comms after ready\n  wait comms\n  allreduce g on comn after comms\n}\n",
			[]string{"9:18 no stream `comms` (used 4 times; first here)", "12:18 no stream `comn`"}},
		// Used once: no count.
		{decls + "step {\n  wait comms\n}\n", []string{"8:8 no stream `comms`"}},
		// init is resolved before step, but the error stays at the first
		// use in the file.
		{decls + "step {\n  wait comms\n}\ninit {\n  wait comms\n}\n", []string{"8:8 no stream `comms` (used 2 times; first here)"}},
		// A misspelt `ready` and the same word as a stream.
		{decls + "step {\n  backward 1ms\n  allreduce g after redy\n  wait redy\n}\n", []string{"9:21 no stream `redy` (used 2 times; first here)"}},
		// Targets: a bucket name, the same name with a piece index, a
		// quoted name and a pattern.
		{decls + "step {\n  allreduce grad\n  broadcast grad from 0\n  allreduce grad[0]\n  allreduce \"grad\"\n  allreduce x.*\n  allreduce x.*\n  wait comm\n}\n",
			[]string{"8:13 no bucket or tensor `grad` (used 4 times; first here)", "12:13 no bucket or tensor `x.*` (used 2 times; first here)"}},
		{decls + "step {\n  allreduce grad[0]\n  allreduce grad[1]\n}\n", []string{"8:13 no bucket `grad` (used 2 times; first here)"}},
		// The default stream of statements without `on`.
		{"tensor a f32[4]\nstream s\nbucket g { a }\nstep {\n  allreduce g on s\n  allreduce g\n  broadcast g from 0\n  allgather g on s\n}\n",
			[]string{"6:3 no stream `comm` for this allreduce (2 statements without `on` need it; first here)"}},
		// Unknown dtypes and ops.
		{"tensor a float32[4]\ntensor b float32[4]\ntensor c fp16[4]\n", []string{"1:10 unknown tensor dtype `float32` (used 2 times; first here)", "3:10 unknown tensor dtype `fp16`"}},
		{decls + "step {\n  allreduce g op mean\n  allreduce h op mean\n}\n", []string{"8:18 unknown op `mean` (used 2 times; first here)"}},
	} {
		_, diags := Check("plan.sync", []byte(tc.src))
		var got []string
		for _, d := range diags {
			if d.Severity == Error {
				got = append(got, fmt.Sprintf("%d:%d %s", d.Pos.Line, d.Pos.Col, d.Message))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q:\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
}

// TestPrefixHints checks that a name that is no tensor but begins tensor
// names (a module's name, as frameworks print it) suggests the glob.
func TestPrefixHints(t *testing.T) {
	const decls = "tensor wte f32[4]\ntensor ln_f.weight f32[4]\ntensor ln_f.bias f32[4]\ntensor head.w f32[4]\n"
	checkHints(t, []hintCase{
		{decls + "bucket g { wte, ln_f }\n", "pattern `ln_f` matches no tensor",
			"no tensor is named `ln_f`, but 2 tensors start with `ln_f.` (`ln_f.weight`, ...): write `ln_f.*` to take them all"},
		{decls + "step { allreduce ln_f }\n", "no bucket or tensor `ln_f`", "write `ln_f.*` to take them all"},
		{decls + "bucket g { head }\n", "pattern `head` matches no tensor",
			"no tensor is named `head`, but `head.w` is: name it, or write `head.*` for every tensor under `head.`"},
		// Not a prefix up to a dot: no glob suggested.
		{decls + "bucket g { ln }\n", "pattern `ln` matches no tensor", "fix the pattern or remove it"},
	})
}

// TestDecimalText checks that decimalText writes a number exactly, with
// as many decimals as it has, and refuses one without a finite decimal
// expansion.
func TestDecimalText(t *testing.T) {
	for _, tc := range []struct {
		num, den int64
		want     string
	}{
		{1024, 1, "1024"}, {5, 1000, "0.005"}, {0, 1, "0"}, {10000000000001, 10000000000000000, "0.0010000000000001"},
		{1, 1 << 40, "0.0000000000009094947017729282379150390625"}, {-3, 2, "-1.5"},
	} {
		got, ok := decimalText(big.NewRat(tc.num, tc.den))
		if !ok || got != tc.want {
			t.Errorf("decimalText(%d/%d) = %q, %v; want %q", tc.num, tc.den, got, ok, tc.want)
		}
	}
	if got, ok := decimalText(big.NewRat(1, 3)); ok {
		t.Errorf("decimalText(1/3) = %q, want none", got)
	}
}

// Brace ranges over long names are bounded in bytes as well as in count:
// 100000 names of 3000 bytes would be 300 MB.
func TestExpandedNameBytesBounded(t *testing.T) {
	src := "tensor " + strings.Repeat("a", 3000) + ".{0..99999} f32[1]\n"
	_, diags := Check("big.sync", []byte(src))
	if len(diags) != 1 || !strings.Contains(diags[0].Message, "would take more than 256 MiB") {
		t.Fatalf("diagnostics %v, want the names-too-large error", diags)
	}
	src = "tensor " + strings.Repeat("a", 100) + ".{0..99999} f32[1]\n"
	if _, diags := Check("ok.sync", []byte(src)); diags.HasErrors() {
		t.Fatalf("100000 names of 100 bytes: %v", diags)
	}
}

// A brace range in a pattern that matches nothing, but would with its
// numbers written with another number of digits, gets that as a hint.
func TestPaddingHint(t *testing.T) {
	for _, c := range []struct{ src, hint string }{
		{"tensor h.{000..012}.w f32[4]\nbucket b { h.{5..10}.w }\n", "did you mean `h.{005..010}.w`?"},
		{"tensor g.{1..3} f32[4]\nbucket b { g.{01..03} }\n", "did you mean `g.{1..3}`?"},
		{"tensor g.{1..3} f32[4]\nbucket b { x.{1..3} }\n", "fix the pattern or remove it"},
	} {
		_, diags := Check("p.sync", []byte(c.src+"step { backward 1ms; allreduce b }\n"))
		found := false
		for _, d := range diags {
			if d.Severity == Error && strings.Contains(d.Message, "matches no tensor") {
				found = true
				if !strings.Contains(d.Hint, c.hint) {
					t.Errorf("%q: hint %q, want it to contain %q", c.src, d.Hint, c.hint)
				}
			}
		}
		if !found {
			t.Errorf("%q: no \"matches no tensor\" error in %v", c.src, diags)
		}
	}
}

func TestCheckAccumulate(t *testing.T) {
	src := "tensor a f32[4]\nbucket g { a }\nstep accumulate %s { compute 1ms; backward 1ms; allreduce g op avg on comm after ready; wait comm }\n"
	for n, want := range map[string]int{"4": 4, "2": 2, "1": 0} {
		p := mustCheck(t, fmt.Sprintf(src, n))
		if p.Accumulate != want {
			t.Errorf("accumulate %s: Accumulate %d, want %d", n, p.Accumulate, want)
		}
	}
	if p := mustCheck(t, "tensor a f32[4]\nbucket g { a }\nstep { backward 1ms; allreduce g after ready }\n"); p.Accumulate != 0 {
		t.Errorf("a plain step: Accumulate %d, want 0", p.Accumulate)
	}
}

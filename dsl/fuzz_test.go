package dsl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/syncgen/syncgen/ir"
)

// inlineSeeds are small inputs that reach every construct and many errors.
var inlineSeeds = []string{
	"",
	"tensor a f32[1]\nbucket b { a }\nstep { backward 1ms; allreduce b after ready; wait comm }\nrun steps 1 warmup 0 check off\n",
	"import \"models/tiny_mixed\"\nbucket g { * } cap 1KiB first 100B order declared wire f32\n",
	"tensor h.{0..3}.w f16[2, 3] frozen\ntensor \"q x\" bf16[4]\nstream s priority low\n",
	"step { group { reduce a, b[2], \"c*\" to 0 op prod on s after t } }\n",
	"init { broadcast x from -1 }\n/* c */ // d\n",
	"tensor a f32[0, -1, 99999999999999999999]\nbucket b { a, } cap 0B first 1.5GB\n",
	"tensor a i32[4]\nbucket b { a } wire f16\nstep { backward 1ms; allreduce b op avg after ready }\n",
	"step {\n  backward 1ms on compute\n  allreduce x on comm\n  backward 2ms\n}\n",
	"import \"./x.sync\"\nimport \"models/none\"\n",
	"tensor a.{5..1} f32[1]\ntensor \"\" f32[1]\n\"unterminated\n/* open",
	// Shapes that do not parse, and brackets where nothing opened them.
	"[4]\n", "][4]\n", "tensor a f32[- 4][4]\ntensor b f32[4 * 4,]\ntensor c f32[4][4]\n",
	// Zero-padded brace ranges, braces that are not a range, hints whose
	// value would be rejected, and a collective naming a tensor whose
	// implicit bucket would clash.
	"tensor g.{01..03} f32[1]\ntensor h.{1..010} f32[1]\nbucket b { g.01, g.{02..03}, h.{005..9} }\nstep { allreduce b, h.{1..4}, g.{1..3} }\n",
	"tensor c.{a..b}.{0..}{-1..3} f32[1]\ntensor {x..y} f32[1]\nbucket b { c{1...2} }\n",
	"step { compute 999999999h; compute 1e18s; compute 0.5ns; compute 5 h }\nrun steps 1e10\nbucket b { a } cap 0.001M first 99999999999gib\n",
	"tensor foo f32[4]\nbucket foo { bar }\nstep { backward 1ms; allreduce fo?, foo[0] after ready; wait comm }\n",
	// Names with emoji, combining and zero-width characters, bidi
	// controls, a tab; a long name of wide characters; bad ranges.
	"tensor \"😀😀\" f32[1]\nbucket b { \"😀\u200b\", \"e\u0301\", nosuch }\ntensor \"bidi\u202eevil\" f32[1]\nbucket \"b\u2066idi\" { x }\ntensor \"tab\tx\" f32[1]\n",
	"bucket 非常に長い名前のバケットです非常に長い名前 { * }\ntensor c.{0..1}.d{5..2} f32[1]\ntensor c.{0..100000} f32[1]\n",
	// The training step: a scaler, divide, unscale and update, valid and
	// not (unknown rule and optimizer, values that are no power of two or
	// out of range, a misplaced `after synced`, an update before its sync).
	"tensor a f16[4]\ntensor b f32[4]\nscaler dynamic init 1024 growth 2 backoff 0.5 interval 2000 hysteresis 1 min 1 max 16777216\nbucket g { a } wire f16 divide before\nbucket e { b } divide after\nstep { backward 1ms; allreduce g, e op avg after ready; unscale g, e after synced agree; update g sgd lr 0.01 momentum 0.9 weight_decay 1e-4 after synced; update e adamw lr 1e-3 beta1 0.9 beta2 0.999 eps 1e-8 master f32 on compute after comm }\n",
	"scaler dynamc init 1000 growth 1.5 backoff 1 interval 0 hysteresis x min 0.5 max 1e40 init 4\nscaler static\nbucket g { a } divide sideways\nstep { update g adam lr 0 wd 1 after ready; unscale g after syncd; allreduce g after synced; update sgd; update g lr }\n",
	"tensor a f32[4]\nbucket g { a }\nstep { backward 1ms; reducescatter g op avg after ready; update g adamw on compute after comm; allgather g on comm after compute; unscale g; update g sgd }\n",
	// Layer templates: nested, with brace ranges and quoted names inside,
	// and the errors of their ranges, variables and bodies.
	"for i in 0..2 {\n    tensor h.{i}.ln.weight f32[4]\n    tensor \"h.{i} q\" f16[2] frozen\n}\nfor l in 1..2 { for b in 0..1 { tensor layer{l}.{b}.conv{1..2} f32[4, 4]; tensor {l}.{b} f32[1] } }\nbucket g { h.*, layer{1..2}.* }\nstep { backward 1ms; allreduce g, 1.0 after ready }\n",
	"for i in 3..1 { tensor a{i} f32[1] }\nfor i 0..1 { tensor b f32[1] }\nfor in 00..-1 { }\nfor i in 0..1 { for i in {0..2} { tensor c{j} f32[1]; stream s } }\ntensor d{k} f32[1]\n",
	"for i in 0..99999 { for j in 0..99999 { tensor a{i}.{j} f32[1] } }\nfor i in 0..1 {\n  tensor x{i} f32[1]\n",
	// Lone CR and mixed line endings, with comments that must end at them.
	"// a\rtensor a f32[1]\rbucket b { a } // c\rstep {\r  backward 1ms\r  allreduce b after ready\r}\r",
	"tensor a f32[1]\r\n/* x\r*/ tensor b f32[2 2]\rstream \"s\r\"\n",
	// A backward in pieces, its options before and after `for`, and the
	// errors of its patterns and coverage.
	"tensor a.{0..1} f32[2]\ntensor b f32[2] frozen\nbucket g { a.* }\nstep { backward 1ms for a.1 on compute; allreduce g after ready; backward 1ms on compute for a.0, b, nope after comm; compute 1ms for a.*; allreduce g after ready }\n",
	"tensor for f32[1]\ntensor in f32[1]\nstream in\nscaler dynamic\nfor i in 0..1 { tensor f.{i} f16[2] }\nbucket b { for, in, f.* }\nstep { backward 1ms on in; allreduce b on in after ready }\n",
	// Gradient accumulation: valid, with pieces, and its errors (on init,
	// twice, without or with a bad count, a collective before the
	// backward, a second backward).
	"tensor a f32[4]\ntensor accumulate f16[2]\nbucket g { a, accumulate } wire f32\nstep accumulate 4 { compute 1ms; backward 1ms; allreduce g op avg on comm after ready; wait comm; update g sgd on compute after synced }\n",
	"tensor l.{0..1} f32[2]\nbucket g0 { l.0 }\nbucket g1 { l.1 }\nstep accumulate 2 { backward 1ms for l.1; allreduce g1 after ready; backward 1ms for l.0; allreduce g0 after ready }\n",
	"init accumulate 2 { }\nstep accumulate accumulate 0 accumulate 1.5 accumulate -3 { allreduce g; backward 1ms; backward 1ms }\nstep accumulate { }\n",
	// Out-of-place collectives: outputs declared, reused, chained, used
	// in place; and their errors (several targets, clashes, use before
	// write, another length).
	"tensor a f32[5]\nbucket g { a }\nstep { backward 1ms; reducescatter g op avg into s after ready; allgather s into f; allreduce f into f2; allreduce f2; reduce g to 0 into f2 }\n",
	"tensor a f32[5]\nbucket g { a } cap 4B\nstep { allreduce x; allreduce g, a into x; allreduce g into a; allgather g[0] into x; reducescatter g[0] into x; allreduce g[0] into; update x sgd }\n",
	// The ranks: valid, with every option; and its errors (overlaps,
	// backward ranges, bad speeds, unknown and repeated options), and
	// names that are `ranks` without being the declaration.
	"tensor a f32[4]\nbucket b { a }\nscaler dynamic\nranks batch 256 balance dynamic every 5 {\n    0..3 speed 1.0\n    4 speed 0.6; 5..7 speed 2\n}\nstep { backward 1ms; allreduce b op wavg after ready }\n",
	"ranks bach 1 batch 0 balance dynamc every -1 every 2 { 0..3 speed 0; 2 speed x; 5..4 speed 1; -1 speed 1e400 }\nranks { }\nranks balance static\n",
	"tensor ranks f32[1]\nstream ranks\nbucket r { ranks }\nfor i in 0..1 { ranks { 0 speed 1 } }\nstep { backward 1ms on ranks; allreduce ranks, r on ranks }\n",
}

// addSeeds adds the inline seeds, every example and stdlib module, and the
// test inputs (testdata/format reaches every construct and comment
// position).
func addSeeds(f *testing.F) {
	for _, s := range inlineSeeds {
		f.Add(s)
	}
	for _, g := range []string{"../examples/*.sync", "../stdlib/models/*.sync", "../testdata/golden/*.sync", "testdata/errors/*.sync", "testdata/format/*.sync", "testdata/render/*.sync"} {
		files, _ := filepath.Glob(g)
		for _, path := range files {
			if b, err := os.ReadFile(path); err == nil {
				f.Add(string(b))
			}
		}
	}
}

// checkDiagPositions fails when a diagnostic about the fuzzed file points
// outside it, or any diagnostic has no line, or the rendered diagnostics
// hold a character that does not print (a control or format character
// of the source, a byte that is not UTF-8).
func checkDiagPositions(t *testing.T, name, src string, diags Diagnostics) {
	t.Helper()
	var b strings.Builder
	diags.Render(&b)
	if !utf8.ValidString(b.String()) {
		t.Fatalf("rendered diagnostics are not UTF-8:\n%q", b.String())
	}
	for _, r := range b.String() {
		if r != '\n' && !unicode.IsGraphic(r) {
			t.Fatalf("rendered diagnostics hold %q:\n%s", r, b.String())
		}
	}
	for _, d := range diags {
		if d.Pos.Line == 0 && d.Pos == d.End && d.Message != "" {
			continue // about the whole file (no step block)
		}
		if d.Pos.Line < 1 || d.Pos.Col < 1 || d.Pos.Offset < 0 || d.End.Offset < d.Pos.Offset || d.Message == "" {
			t.Fatalf("bad diagnostic %+v", d)
		}
		if d.Pos.File == name && (d.Pos.Offset > len(src) || d.End.Offset > len(src)) {
			t.Fatalf("diagnostic outside the file (%d bytes): %+v", len(src), d)
		}
	}
}

func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		ast, diags := parseFile(newSourceFile("fuzz.sync", []byte(src)))
		if (ast == nil) == (len(diags) == 0) {
			t.Fatalf("ast %v with %d diagnostics", ast != nil, len(diags))
		}
		checkDiagPositions(t, "fuzz.sync", src, diags)
	})
}

func FuzzCheck(f *testing.F) {
	addSeeds(f)
	dir := f.TempDir()
	name := filepath.Join(dir, "fuzz.sync")
	f.Fuzz(func(t *testing.T, src string) {
		prog, diags := Check(name, []byte(src))
		checkDiagPositions(t, name, src, diags)
		if diags.HasErrors() != (prog == nil) {
			t.Fatalf("program %v with errors %v", prog != nil, diags.HasErrors())
		}
		if prog != nil {
			checkProgram(t, prog)
		}
	})
}

// checkProgram checks the invariants of a checked program: indices in
// range, layouts consistent, positions set.
func checkProgram(t *testing.T, p *ir.Program) {
	t.Helper()
	checkBuckets(t, p)
	checkPositions(t, p)
	for _, tn := range p.Tensors {
		if tn.DType == ir.InvalidDType || tn.Elems < 1 || tn.Bucket >= len(p.Buckets) {
			t.Fatalf("bad tensor %+v", tn)
		}
	}
	for _, b := range p.Buckets {
		if b.Wire == ir.InvalidDType || (len(b.Tensors) == 0) != (b.Output != nil) {
			t.Fatalf("bad bucket %+v", b)
		}
	}
	var walk func([]ir.Stmt, bool)
	walk = func(ss []ir.Stmt, inGroup bool) {
		for _, s := range ss {
			if s.Kind < ir.StmtBackward || s.Kind > ir.StmtBarrier || s.Stream < 0 || s.Stream >= len(p.Streams) {
				t.Fatalf("bad statement %+v", s)
			}
			if train := s.Kind == ir.StmtUpdate || s.Kind == ir.StmtUnscale; train && (inGroup || len(s.Buckets) == 0) ||
				(s.Kind == ir.StmtUpdate) != (s.Update.Optimizer != 0) || (s.After.Kind == ir.AfterSynced) && !train {
				t.Fatalf("bad update or unscale %+v", s)
			}
			if s.Kind == ir.StmtUnscale && p.Scaler == nil {
				t.Fatalf("unscale without a scaler %+v", s)
			}
			if s.Kind == ir.StmtBarrier && (inGroup || len(s.Buckets) != 0 || s.After.Kind == ir.AfterReady || s.After.Kind == ir.AfterSynced) {
				t.Fatalf("bad barrier %+v", s)
			}
			if s.Kind == ir.StmtGroup && (inGroup || len(s.Body) == 0) {
				t.Fatalf("bad group %+v", s)
			}
			if s.Into != nil && (s.Kind != ir.StmtCollective || len(s.Into) != 1 || len(s.Buckets) != 1 || s.Into[0] == s.Buckets[0] || p.Buckets[s.Into[0]].Output == nil) {
				t.Fatalf("bad out-of-place collective %+v", s)
			}
			for _, b := range slices.Concat(s.Buckets, s.Into) {
				if b < 0 || b >= len(p.Buckets) {
					t.Fatalf("statement refers to bucket %d of %d", b, len(p.Buckets))
				}
			}
			if s.After.Kind == ir.AfterStream && (s.After.Stream < 0 || s.After.Stream >= len(p.Streams)) {
				t.Fatalf("bad after %+v", s)
			}
			walk(s.Body, true)
		}
	}
	walk(p.Init, false)
	walk(p.Step, false)
}

func FuzzFormat(f *testing.F) {
	addSeeds(f)
	dir := f.TempDir()
	name := filepath.Join(dir, "fuzz.sync")
	f.Fuzz(func(t *testing.T, src string) {
		out, diags := Format(name, []byte(src))
		checkDiagPositions(t, name, src, diags)
		if diags.HasErrors() {
			return
		}
		if err := formatKeeps(name, []byte(src), out); err != nil {
			t.Fatalf("%v\n%q\nformatted:\n%q", err, src, out)
		}
	})
}

package dsl

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, src string) *File {
	t.Helper()
	f, diags := parseFile(newSourceFile("t.sync", []byte(src)))
	if len(diags) > 0 {
		var b strings.Builder
		diags.Render(&b)
		t.Fatalf("parse errors:\n%s", b.String())
	}
	return f
}

func TestParseAllConstructs(t *testing.T) {
	src := `import "models/resnet50"
tensor conv1.weight f32[64, 3, 7, 7]
tensor "odd name" f16[10] frozen
stream comm priority high
bucket grads { *, "emb.*", } cap 25MiB first 1MiB order reverse wire bf16
init { broadcast grads from 0 on comm; wait comm }
step {
    compute 20ms on compute
    backward 60ms
    allreduce grads op avg on comm after ready
    reduce grads[1], x.* to 0 op sum
    group { allgather a on comm after compute }
    wait comm
}
run steps 100 warmup 10 check every 10
run check off
`
	f := mustParse(t, src)
	if len(f.Decls) != 9 {
		t.Fatalf("%d declarations, want 9", len(f.Decls))
	}
	tn := f.Decls[1].Tensor
	if tn.Name.Bare != "conv1.weight" || tn.DType.Text != "f32" || len(tn.Dims) != 4 || tn.Frozen {
		t.Errorf("tensor parsed as %+v", tn)
	}
	if q := f.Decls[2].Tensor; q.Name.Quoted != `"odd name"` || !q.Frozen {
		t.Errorf("quoted tensor parsed as %+v", q)
	}
	b := f.Decls[4].Bucket
	if len(b.Patterns) != 2 || len(b.Options) != 4 || b.Options[3].Key != "wire" {
		t.Errorf("bucket parsed as %+v", b)
	}
	init := f.Decls[5].Block
	if init.Kind != "init" || len(stmts(init.Body)) != 2 {
		t.Errorf("init parsed as %+v", init)
	}
	step := f.Decls[6].Block
	body := stmts(step.Body)
	if len(body) != 6 {
		t.Fatalf("step has %d statements, want 6", len(body))
	}
	red := body[3].Collective
	if red.Kind != "reduce" || len(red.Targets) != 2 || red.Targets[0].Index.Text != "1" || len(red.Options) != 2 {
		t.Errorf("reduce parsed as %+v", red)
	}
	if g := body[4].Group; g == nil || len(g.Body) != 1 {
		t.Errorf("group parsed as %+v", body[4])
	}
	run := f.Decls[7].Run
	if len(run.Options) != 3 || run.Options[2].Check.Every.Text != "10" {
		t.Errorf("run parsed as %+v", run)
	}
	if !f.Decls[8].Run.Options[0].Check.Off {
		t.Errorf("check off not parsed")
	}
}

func TestParsePositions(t *testing.T) {
	f := mustParse(t, "step {\n    allreduce grads op avg on comm\n}\n")
	cs := stmts(f.Decls[0].Block.Body)[0].Collective
	if cs.Pos.Line != 2 || cs.Pos.Column != 5 {
		t.Errorf("collective at %d:%d, want 2:5", cs.Pos.Line, cs.Pos.Column)
	}
	tg := cs.Targets[0]
	if tg.Pos.Column != 15 || tg.EndPos.Column != 20 {
		t.Errorf("target spans columns %d..%d, want 15..20", tg.Pos.Column, tg.EndPos.Column)
	}
	on := cs.Options[1]
	if on.Key != "on" || on.Value.Pos.Column != 31 || on.Value.EndPos.Column != 35 {
		t.Errorf("on value spans %d..%d, want 31..35", on.Value.Pos.Column, on.Value.EndPos.Column)
	}
}

// Keywords are ordinary parts of dotted names, and whole names where the
// grammar expects a name.
func TestParseKeywordNames(t *testing.T) {
	src := `tensor step.weight f32[1]
tensor compute.bias f32[1]
tensor encoder.layer.0.output.dense.weight f32[1]
tensor wait.reduce.run.tensor f32[1]
tensor step f32[1]
tensor output f32[1]
bucket b { step.*, compute.bias, output, step }
step { allreduce b, "step", wait.reduce.run.tensor, output.x on comm }
`
	f := mustParse(t, src)
	if n := f.Decls[4].Tensor.Name.Bare; n != "step" {
		t.Errorf("tensor named step parsed as %q", n)
	}
	if got := len(f.Decls[6].Bucket.Patterns); got != 4 {
		t.Errorf("bucket has %d patterns, want 4", got)
	}
}

func TestParseAccumulate(t *testing.T) {
	f := mustParse(t, "tensor accumulate f32[1]\nstep accumulate 4 { backward 1ms }\ninit { }\n")
	b := f.Decls[1].Block
	if b == nil || len(b.Accumulate) != 1 || b.Accumulate[0].Count == nil || b.Accumulate[0].Count.Text != "4" {
		t.Fatalf("step accumulate 4 parsed as %+v", b)
	}
	if got := b.Accumulate[0].Pos; got.Line != 2 || got.Column != 6 {
		t.Errorf("accumulate at %d:%d, want 2:6", got.Line, got.Column)
	}
	if len(b.Body) != 1 || b.Body[0].Timed == nil {
		t.Errorf("body parsed as %+v", b.Body)
	}
	if n := f.Decls[0].Tensor.Name.Bare; n != "accumulate" {
		t.Errorf("tensor named accumulate parsed as %q", n)
	}
	if a := f.Decls[2].Block.Accumulate; len(a) != 0 {
		t.Errorf("init without accumulate parsed with %d", len(a))
	}
	// Repeated, and without a count: kept for the checker.
	f = mustParse(t, "step accumulate accumulate 2 { }\n")
	a := f.Decls[0].Block.Accumulate
	if len(a) != 2 || a[0].Count != nil || a[1].Count == nil || a[1].Count.Text != "2" {
		t.Errorf("step accumulate accumulate 2 parsed as %+v", a)
	}
}

func TestParseRecovery(t *testing.T) {
	src := "tensor a f32[1\ntensor b f32[1]\nstream\nbucket g { a b }\nstep {\n  wiat comm\n}\nrun steps 1\n"
	_, diags := parseFile(newSourceFile("t.sync", []byte(src)))
	var lines []int
	for _, d := range diags {
		lines = append(lines, d.Pos.Line)
	}
	want := []int{2, 4, 4, 6}
	if len(lines) != len(want) {
		t.Fatalf("errors on lines %v, want %v", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("errors on lines %v, want %v", lines, want)
		}
	}
}

// A collective with no target inside a group is reported as such, at the
// collective, not as an incomplete statement before the group.
func TestParseGroupCollectiveWithoutTarget(t *testing.T) {
	for _, tc := range []struct{ body, msg string }{
		{"group { allreduce }", "allreduce needs a target before `}`"},
		{"backward 1ms\n  group { allreduce }", "allreduce needs a target before `}`"},
		{"compute 1ms on compute\n  group { reduce; }", "reduce needs a target before `;`"},
		{"allreduce g\n  group { allreduce g; broadcast }", "broadcast needs a target before `}`"},
		{"allreduce g\n  group { allgather\n wait comm }", "allgather needs a target before `wait`"},
		{"allreduce\n}", "allreduce needs a target before `}`"},
	} {
		src := "tensor d f32[4]\nbucket g { d }\nstep {\n  " + tc.body + "\n}\n"
		_, diags := parseFile(newSourceFile("t.sync", []byte(src)))
		if len(diags) != 1 || diags[0].Message != tc.msg {
			t.Errorf("%q: got %v, want one error %q", tc.body, diags, tc.msg)
		}
	}
	// In a bucket's pattern list `allreduce` is a tensor name, not a
	// collective missing its target.
	_, diags := parseFile(newSourceFile("t.sync", []byte("tensor allreduce f32[1]\nbucket b { allreduce allreduce }\n")))
	if want := "patterns are separated by commas: `bucket b { allreduce, allreduce }`"; len(diags) != 1 || diags[0].Message != want {
		t.Errorf("bucket with a missing comma: got %v, want one error %q", diags, want)
	}
}

// TestParseBinaryFile checks that a file holding a NUL byte (a compiled
// program given instead of its plan) gets one error, not one per byte.
func TestParseBinaryFile(t *testing.T) {
	src := []byte("\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe @@ \"x\n\x00\x01 tensor")
	ast, diags := parseFile(newSourceFile("prog", src))
	if ast != nil || len(diags) != 1 {
		t.Fatalf("got ast %v and %d diagnostics, want one error: %v", ast != nil, len(diags), diags)
	}
	if d := diags[0]; !strings.Contains(d.Message, "not a text file") || d.Pos.Line != 1 || d.Pos.Col != 8 {
		t.Errorf("got %v, want 1:8: not a text file", d)
	}
	// UTF-16 text (what Windows PowerShell 5's `>` writes) is text in
	// another encoding, not a program: little and big endian, by its
	// byte order mark.
	for _, src := range [][]byte{
		{0xff, 0xfe, 't', 0, 'e', 0, 'n', 0},
		{0xfe, 0xff, 0, 't', 0, 'e', 0, 'n'},
	} {
		_, diags := parseFile(newSourceFile("plan.sync", src))
		if len(diags) != 1 || diags[0].Message != "not a UTF-8 file: it is UTF-16 text (it starts with UTF-16's byte order mark)" ||
			!strings.HasPrefix(diags[0].Hint, "save it as UTF-8 without a byte order mark") || diags[0].Pos.Col != 1 {
			t.Errorf("%q: got %v, want one error at 1:1: UTF-16", src, diags)
		}
	}
}

// TestLexErrorsCapped checks that a file full of invalid characters gets
// at most maxSyntaxErrors lexical errors, and then one that says how many
// more there are and where they start.
func TestLexErrorsCapped(t *testing.T) {
	src := strings.Repeat("tensor a@ f32[1]\n", 3*maxSyntaxErrors)
	_, diags := parseFile(newSourceFile("t.sync", []byte(src)))
	if len(diags) != maxSyntaxErrors+1 {
		t.Fatalf("got %d lexical errors, want %d and a count of the others", len(diags), maxSyntaxErrors)
	}
	last := diags[maxSyntaxErrors]
	want := fmt.Sprintf("... and %d more lexical errors from here on (a file reports at most %d; fix the ones above first)", 2*maxSyntaxErrors, maxSyntaxErrors)
	if last.Message != want || last.Pos.Line != maxSyntaxErrors+1 || last.Pos.Col != 9 || last.Severity != Error {
		t.Errorf("last diagnostic %v, want %d:9: %s", last, maxSyntaxErrors+1, want)
	}
	var b bytes.Buffer
	diags[maxSyntaxErrors:].Render(&b)
	if got := b.String(); got != fmt.Sprintf("t.sync:%d:9: error: %s\n", maxSyntaxErrors+1, want) {
		t.Errorf("rendered as %q", got)
	}
	// Exactly maxSyntaxErrors errors: nothing more to say.
	src = strings.Repeat("tensor a@ f32[1]\n", maxSyntaxErrors)
	if _, diags := parseFile(newSourceFile("t.sync", []byte(src))); len(diags) != maxSyntaxErrors {
		t.Errorf("got %d diagnostics for %d lexical errors", len(diags), maxSyntaxErrors)
	}
	// The count is of the errors as they would be reported: the invalid
	// characters of one name (`a$b$c`, after `tensor`) are one error.
	src = strings.Repeat("x @\n", maxSyntaxErrors) + "tensor a$b$c f32[1]\n\"open\n/* open"
	if _, diags := parseFile(newSourceFile("t.sync", []byte(src))); len(diags) != maxSyntaxErrors+1 ||
		!strings.HasPrefix(diags[maxSyntaxErrors].Message, "... and 3 more lexical errors") {
		t.Errorf("got %v, want 3 more lexical errors", diags[len(diags)-1])
	}
}

// TestLexErrorsLinear checks that counting the lexical errors of a long
// line full of them (a pasted base64 blob, a shape of 50000 signed
// dimensions) takes linear time: the hints of those past the limit must
// not each scan the line.
func TestLexErrorsLinear(t *testing.T) {
	for _, line := range []string{
		"x " + strings.Repeat("ab+/", 50000),
		"tensor a f32[" + strings.Repeat("+4, ", 50000) + "4]",
		"x " + strings.Repeat("(a", 50000),
		"bucket " + strings.Repeat("éa$a", 50000),
		"tensor a*" + strings.Repeat("$a", 50000),
	} {
		f := newSourceFile("t.sync", []byte(line))
		start := time.Now()
		diags := lexErrors(f, lex(f.name, f.src))
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%.20q...: %v to find the lexical errors", line, d)
		}
		if len(diags) != maxSyntaxErrors+1 {
			t.Errorf("%.20q...: %d diagnostics", line, len(diags))
		}
	}
}

// TestSyntaxErrorExplanations checks the precise explanations of common
// syntax errors: where the caret is, the message, part of the hint, and
// that the source line is shown.
func TestSyntaxErrorExplanations(t *testing.T) {
	const decls = "tensor a f32[4]\nbucket g { a }\nbucket top { a }\n"
	for _, tc := range []struct{ src, at, msg, hint string }{
		// A tensor without its name or dtype.
		{"tensor f32[4]\n", "1:8", "tensor declaration: missing the tensor's name before its dtype `f32`", "e.g. `tensor NAME f32[4]`"},
		{"tensor a [4]\n", "1:10", "tensor `a`: missing the element type (f32, bf16, ...) before the shape", "e.g. `tensor a f32[4]`"},
		{"tensor \"x y\" [2, 3] frozen\n", "1:14", "tensor `\"x y\"`: missing the element type (f32, bf16, ...) before the shape", "`tensor \"x y\" f32[2, 3]`"},
		{"tensor [4]\n", "1:8", "tensor declaration: missing the tensor's name and element type before the shape", "`tensor NAME DTYPE[DIMS]`"},
		// Braces that are not a brace range, where a name starts (inside
		// a name, the checker reports them).
		{"tensor {a..b} f32[1]\n", "1:8", "invalid brace range `{a..b}`", "a brace range is {FIRST..LAST} with non-negative integers"},
		{"tensor a f32[1]\nstep { allreduce {-1..0} }\n", "2:18", "invalid brace range `{-1..0}`", "{FIRST..LAST}"},
		// A shape that does not parse: dimensions are positive integers
		// separated by commas.
		{"tensor a f32[- 4]\n", "1:14", "dimension `- 4` is not a positive integer", "a whole number of at least 1, with no sign"},
		{"tensor a f32[4, - 4]\n", "1:17", "dimension `- 4` is not a positive integer", "e.g. `f32[64, 3, 7, 7]`"},
		{"tensor a f32[4 4]\n", "1:16", "dimensions are separated by commas: `f32[4, 4]`", "positive integers separated by commas"},
		{"tensor a f16[4, 4 5]\n", "1:19", "dimensions are separated by commas: `f16[4, 4, 5]`", "e.g. `f16[64, 3, 7, 7]`"},
		{"tensor a f32[1 024]\n", "1:16", "dimensions are separated by commas: `f32[1, 024]`", "for one dimension, write the number without a space: `1024`"},
		{"tensor a f32[3 x 224 x 224]\n", "1:16", "tensor shape: unexpected `x`: a dimension is one integer, not an expression", "write the product, `150528`, or separate the dimensions with commas: `f32[3, 224, 224]`"},
		{"tensor a f32[4 * 4]\n", "1:16", "tensor shape: unexpected `*`: a dimension is one integer, not an expression", "write the product, `16`"},
		{"tensor a f32[4 - 1]\n", "1:16", "tensor shape: unexpected `-`: a dimension is one integer, not an expression", "write its value as one number"},
		{"tensor a f32[4,]\n", "1:15", "tensor shape: a trailing `,` before `]`", "remove the `,`"},
		{"tensor a f32[4,, 4]\n", "1:15", "tensor shape: an empty dimension between two commas", "separated by commas"},
		{"tensor a f32[, 4]\n", "1:14", "tensor shape: missing the first dimension before `,`", "separated by commas"},
		{"tensor a f32[4 a]\n", "1:16", "tensor shape: unexpected `a`", "positive integers separated by commas"},
		{"tensor a f32[4][3][2, 2]\n", "1:16", "tensor shape: one pair of brackets holds all the dimensions", "write `f32[4, 3, 2, 2]`"},
		// A missing comma between targets, unless the word is a keyword.
		{decls + "step {\n  allreduce g a\n}\n", "5:15", "targets are separated by commas: `allreduce g, a`", "allreduce TARGET, ..."},
		{decls + "step {\n  reduce g[0], a top to 0\n}\n", "5:18", "targets are separated by commas: `reduce g[0], a, top`", "reduce TARGET, ..."},
		{decls + "step {\n  group { allgather g \"x\" }\n}\n", "5:23", "targets are separated by commas: `allgather g, \"x\"`", "allgather TARGET, ..."},
		{decls + "step {\n  allreduce g aftr ready\n}\n", "5:15", "unexpected `aftr`", "did you mean `after`?"},
		{decls + "step {\n  allreduce g 1ms\n}\n", "5:15", "unexpected `1ms` after the complete allreduce statement", "remove `1ms`; a collective is written"},
		// A missing comma between a bucket's patterns, or a missing `}`.
		{"bucket g { a b }\n", "1:14", "patterns are separated by commas: `bucket g { a, b }`", "a bucket is declared as `bucket NAME { PATTERN, ... }`"},
		{"bucket g { a, \"x y\" c.* d }\n", "1:21", "patterns are separated by commas: `bucket g { a, \"x y\", c.*, ... }`", "PATTERN, ..."},
		{"bucket g {\n  a\n  b\n}\n", "3:3", "patterns are separated by commas: `bucket g { a, b }`", "PATTERN, ..."},
		{"bucket g { a cap 1MiB\n", "1:14", "the pattern list of bucket `g` opened on line 1 is not closed before `cap`", "add `}` after the last pattern"},
		{"tensor a f32[1]\nbucket g { a,\nstream comm\n", "3:1", "the pattern list of bucket `g` opened on line 2 is not closed before `stream`", "add `}` after the last pattern"},
		{"tensor a f32[1]\nbucket g { a\nstream comm\n", "3:1", "the pattern list of bucket `g` opened on line 2 is not closed before `stream`", "add `}` after the last pattern"},
		{"tensor a f32[1]\nbucket g { a\n\nstep {\n}\n", "4:1", "the pattern list of bucket `g` opened on line 2 is not closed before `step`", "add `}` after the last pattern"},
		// A keyword on the pattern's own line is a pattern (a tensor may
		// be called so), and a declared one on a line of its own too.
		{"tensor a f32[1]\nbucket g { a step }\n", "2:14", "patterns are separated by commas: `bucket g { a, step }`", "PATTERN, ..."},
		{"tensor a f32[1]\ntensor step f32[1]\nbucket g {\n  a\n  step\n}\n", "5:3", "patterns are separated by commas: `bucket g { a, step }`", "PATTERN, ..."},
		// A block left open before the next declaration, or a declaration
		// inside a block that is closed later.
		{decls + "step {\n  allreduce g\n\nrun steps 1\n", "7:1", "unexpected `run`: the `step` block opened on line 4 is not closed", "add `}` before line 7"},
		{decls + "step accumulate 4 {\n  allreduce g\n\nrun steps 1\n", "7:1", "unexpected `run`: the `step` block opened on line 4 is not closed", "add `}` before line 7"},
		{decls + "step accumulate 4 {\n  allreduce g 1ms\n}\n", "5:15", "unexpected `1ms` after the complete allreduce statement", "remove `1ms`; a collective is written"},
		{decls + "step accumulat 4 {\n}\n", "4:6", "unexpected `accumulat`", "or `step accumulate N { STATEMENTS }`"},
		{decls + "step {\n  allreduce g\n  tensor b f32[1]\n}\n", "6:3", "unexpected `tensor` inside the `step` block opened on line 4: a declaration starts outside any block", "move it before or after the block"},
		// A word and a value after a complete statement: an unknown
		// option, named with the one meant.
		{decls + "step {\n  broadcast g root 0\n}\n", "5:15", "unknown option `root` of broadcast", "did you mean `from 0`? broadcast takes: from RANK, into NAME, on STREAM, after ready|STREAM"},
		{decls + "step {\n  allreduce g dtype f16\n}\n", "5:15", "unknown option `dtype` of allreduce", "write `wire f16` on bucket `g`; allreduce takes: op sum|avg|min|max|prod|wavg, algo flat|hierarchical, into NAME, on STREAM, after ready|STREAM"},
		{decls + "step {\n  allreduce g onto x\n}\n", "5:15", "unexpected `onto`", "did you mean `into`?"},
		// `into` without its name is the option missing its value, not
		// a missing comma before a target called `into`.
		{decls + "step {\n  allreduce g into\n}\n", "5:15", "`into` needs a value after it", "write `into NAME`"},
		// torch.optim's options that syncgen keeps at their default.
		{decls + "step { backward 1ms\n  allreduce g\n  update g sgd lr 0.1 nesterov 1\n}\n", "6:23", "unknown option `nesterov` of update", "syncgen's sgd is torch.optim.SGD without Nesterov momentum, its default; update takes: lr NUMBER"},
		{decls + "step { backward 1ms\n  allreduce g\n  update g adamw amsgrad 1\n}\n", "6:18", "unknown option `amsgrad` of update", "syncgen's adamw is torch.optim.AdamW without AMSGrad, its default; update takes:"},
		{decls + "step {\n  compute 20ms reads g\n}\n", "5:16", "unknown option `reads` of compute", "compute takes: on STREAM, after"},
		{"bucket g { a } dtype f16\n", "1:16", "unknown option `dtype` of bucket", "did you mean `wire f16`? bucket takes: cap SIZE"},
		{"tensor cap f32[1]\nbucket g { a cap }\n", "2:14", "patterns are separated by commas: `bucket g { a, cap }`", "PATTERN, ..."},
		// A stray word after a complete declaration or statement: it is
		// the word that is wrong, nothing is missing.
		{decls + "step {\n  wait comm extra\n}\n", "5:13", "unexpected `extra` after the complete wait statement", "remove `extra`; wait is written `wait STREAM`"},
		{decls + "step {\n  wait comm\n  extra\n}\n", "6:3", "unexpected `extra` after the complete wait statement on line 5", "remove `extra`; a statement starts with one of"},
		{"tensor a f32[4] extra\n", "1:17", "unexpected `extra` after the complete tensor declaration", "remove `extra`; a tensor is declared as"},
		{"tensor a f32[4] frozen\n  extra\ntensor b f32[1]\n", "2:3", "unexpected `extra` after the complete tensor declaration on line 1", "a declaration starts with one of"},
		{"tensor step f32[4] [2]\n", "1:20", "unexpected `[` after the complete tensor declaration", "remove `[`"},
		{"bucket g { a } order reverse extra\n", "1:30", "unexpected `extra` after the complete bucket declaration", "remove `extra`"},
		{"import \"models/tiny_mlp\" x\n", "1:26", "unexpected `x` after the complete import declaration", "remove `x`"},
		{"run steps 5 5\n", "1:13", "unexpected `5` after the complete run declaration", "remove `5`"},
		{decls + "step {\n  reduce g to 0 op sum 1\n}\n", "5:24", "unexpected `1` after the complete reduce statement", "remove `1`"},
		// A simulated compute without its duration.
		{decls + "step {\n  backward on comm\n}\n", "5:12", "`backward` needs a duration before `on`", "backward is written `backward DURATION on STREAM`"},
		{decls + "step {\n  compute on comm\n}\n", "5:11", "`compute` needs a duration before `on`", "compute is written"},
		// A backward piece whose pattern is missing: the next statement's
		// keyword is no pattern, and the hint is the backward's, not a
		// template's.
		{decls + "step {\n  backward 1ms for\n  allreduce g after ready\n}\n", "5:16", "`for` needs a value after it", "write `for PATTERN, ...`; backward is written"},
		{decls + "step {\n  backward 1ms for a b\n}\n", "5:22", "unexpected `b` after the complete backward statement", "backward is written"},
		// An option without its value.
		{decls + "step {\n  allreduce g op\n}\n", "5:15", "`op` needs a value after it", "write `op sum|avg|min|max|prod|wavg`"},
		{decls + "step {\n  broadcast g from\n  wait comm\n}\n", "5:15", "`from` needs a value after it", "write `from RANK`"},
		{decls + "step {\n  allreduce g on \"comm\"\n}\n", "5:15", "`on` takes a value without quotes", "write `on comm`"},
		{"bucket g { a } cap }\n", "1:20", "unexpected `}`: `cap` needs a value after it", "write `cap SIZE`"},
		{"run steps\nrun warmup 1\n", "2:1", "unexpected `run`: `steps` on line 1 needs a value after it", "write `steps N`"},
		{"stream s priority\n", "1:18", "unexpected end of file: `priority` needs a value after it", "`priority high|low`"},
		// A keyword where a value goes: the error is at the keyword, not
		// at the statement it is in.
		{decls + "step {\n  allreduce g\n  wait step\n}\n", "6:8", "unexpected `step`: `wait` needs a value, and `step` is a keyword", "wait is written `wait STREAM`"},
		{decls + "step {\n  allreduce g on group\n}\n", "5:15", "`on` needs a value, and `group` is a keyword", "write `on STREAM`"},
		{decls + "step {\n  backward 1ms\n  wait\n}\n", "7:1", "unexpected `}`: `wait` on line 6 needs a value after it", "wait is written `wait STREAM`"},
		{decls + "step {\n  backward 1ms\n  compute wait\n}\n", "6:11", "unexpected `wait`", "compute is written"},
		{"bucket g { a } order run\n", "1:22", "unexpected `run`: `order` needs a value, and `run` is a keyword", "order reverse|declared"},
		{decls + "step {\n  allreduce g[step]\n}\n", "5:14", "unexpected `step` in the index of `g`: a piece index is a number", "write e.g. `g[0]`"},
		// A unit apart from its number.
		{"step {\n  backward 60 ms\n}\n", "2:15", "unexpected `ms`: a number and its unit are written without a space between them", "write `60ms`"},
		{"bucket g { a } cap 25 MiB\n", "1:23", "unexpected `MiB`: a number and its unit are written without a space between them", "write `25MiB`"},
		// ... and a unit the language spells otherwise, where the number
		// is a size or a duration (it used to be called a stray word).
		{"step {\n  backward 60 msec on compute\n}\n", "2:15", "unexpected `msec`: a number and its unit are written without a space between them", "did you mean `60ms`? write the unit right after the number; durations take us, ms, s"},
		{"bucket g { a } cap 25 megabytes\n", "1:23", "unexpected `megabytes`: a number and its unit are written without a space between them", "sizes take B, KiB"},
		{decls + "step {\n  allreduce g\n  wiat comm\n}\n", "6:3", "unexpected `wiat`", "did you mean `wait`?"},
		// An unexpected end of file, at the end of the last line with content.
		{"step {\n", "1:7", "unexpected end of file: the `step` block opened on line 1 is never closed", "add `}` to close the `{` on line 1"},
		{decls + "step {\n  backward 1ms\n  group {\n    allreduce g\n\n// end\n\n", "7:16", "unexpected end of file: the group opened on line 6 is never closed", "still open before it (line 4)"},
		{"bucket g { a,\n  b\n", "2:4", "unexpected end of file: the pattern list of bucket `g` opened on line 1 is never closed", "add `}`"},
		{"tensor a f32[4\n", "1:15", "unexpected end of file: the `[` on line 1 is never closed", "add `]`"},
		{"step {" + strings.Repeat("group {", 1000), "1:7007", "unexpected end of file: the group opened on line 1 is never closed", "(1000 of them, on line 1)"},
		{"stream\n\n", "1:7", "unexpected end of file: the stream on line 1 is incomplete", "a stream is declared as"},
		// Misspelt and abbreviated keywords where one is expected.
		{"stream comm prio high\n", "1:13", "unexpected `prio`", "did you mean `priority`? a stream is declared as"},
		{"run steps 10 warm 2\n", "1:14", "unexpected `warm`", "did you mean `warmup`?"},
		{"run check evr 5\n", "1:11", "unexpected `evr`", "did you mean `every`?"},
		{"bucket g { a } cap 1MiB\n  ordr reverse\n", "2:3", "unexpected `ordr`", "did you mean `order`? a bucket is declared as"},
		{"tensor a f32[4] frozn\n", "1:17", "unexpected `frozn`", "did you mean `frozen`?"},
		{"tens a f32[4]\n", "1:1", "unexpected `tens`", "did you mean `tensor`?"},
		// A `;` ends a statement or declaration as a new line does: the
		// word after it starts the next one, and is no option of the
		// one before.
		{decls + "step { backward 1ms; all_reduce g after ready }\n", "4:22", "unexpected `all_reduce`", "did you mean `allreduce`? a statement starts with one of"},
		{decls + "step { backward 1ms\nall_reduce g after ready }\n", "5:1", "unexpected `all_reduce`", "did you mean `allreduce`? a statement starts with one of"},
		{"tensor a f32[4]; bukcet g { * }\n", "1:18", "unexpected `bukcet`", "did you mean `bucket`? a declaration starts with one of"},
		{decls + "step { backward 1ms wut 1; allreduce g }\n", "4:21", "unknown option `wut` of backward", "backward takes: on STREAM, after STREAM, for PATTERN, ..."},
		// Every keyword is suggested: barrier, algo, checkpoint, keep.
		{decls + "step { backward 1ms\n  barier on comm\n}\n", "5:3", "unexpected `barier`", "did you mean `barrier`?"},
		{decls + "step { backward 1ms; barier on comm }\n", "4:22", "unexpected `barier`", "did you mean `barrier`?"},
		{decls + "step { backward 1ms\n  allreduce g after ready aglo flat\n}\n", "5:27", "unexpected `aglo`", "did you mean `algo`?"},
		{"run steps 3 checkpont every 4\n", "1:13", "unexpected `checkpont`", "did you mean `checkpoint`? run settings are written"},
		{"run steps 3 checkpoint every 4 kep 3\n", "1:32", "unexpected `kep`", "did you mean `keep`?"},
		{"run checkpoint every 4 keep\n", "1:28", "unexpected end of file: `keep` needs a value after it", "write `keep K`"},
		{"run checkpoint every 4 to\n", "1:26", "unexpected end of file: `to` needs a value after it", "write `to DIR`"},
		{decls + "step { backward 1ms after\n}\n", "4:21", "`after` needs a value after it", "write `after STREAM`"},
		{decls + "step { backward 1ms\n  update g sgd after\n}\n", "5:16", "`after` needs a value after it", "write `after synced|STREAM`"},
	} {
		_, diags := parseFile(newSourceFile("t.sync", []byte(tc.src)))
		if len(diags) != 1 {
			t.Errorf("%q: got %d diagnostics %v, want one", tc.src, len(diags), diags)
			continue
		}
		d := diags[0]
		if at := fmt.Sprintf("%d:%d", d.Pos.Line, d.Pos.Col); at != tc.at || d.Message != tc.msg || !strings.Contains(d.Hint, tc.hint) {
			t.Errorf("%q: got %s %q (hint %q), want %s %q (hint with %q)", tc.src, at, d.Message, d.Hint, tc.at, tc.msg, tc.hint)
		}
		if d.snippet == "" {
			t.Errorf("%q: no source line shown", tc.src)
		}
	}
}

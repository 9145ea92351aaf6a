package dsl

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/codegen"
	"github.com/syncgen/syncgen/ir"
)

// tensorNames returns the names of a program's tensors, in order.
func tensorNames(p *ir.Program) []string {
	var out []string
	for _, t := range p.Tensors {
		out = append(out, t.Name)
	}
	return out
}

// TestTemplateOrder checks the order in which templates declare their
// tensors: block by block, nested loops the outer one varying slowest,
// brace ranges inside expanded after the substitution, among the other
// declarations at the template's place.
func TestTemplateOrder(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"block by block", `
for i in 0..2 {
    tensor h.{i}.ln_1.weight f32[4]
    tensor h.{i}.attn.weight f32[4, 4]
}`, []string{"h.0.ln_1.weight", "h.0.attn.weight", "h.1.ln_1.weight", "h.1.attn.weight", "h.2.ln_1.weight", "h.2.attn.weight"}},
		{"inclusive, from A", "for i in 7..9 { tensor b{i} f32[1] }", []string{"b7", "b8", "b9"}},
		{"one value", "for i in 5..5 { tensor b{i} f32[1] }", []string{"b5"}},
		{"no padding", "for i in 8..10 { tensor g.{i} f32[1] }", []string{"g.8", "g.9", "g.10"}},
		{"nested", `
for l in 1..2 {
    for b in 0..1 {
        tensor layer{l}.{b}.conv1.weight f32[4, 4, 1, 1]
        tensor layer{l}.{b}.bn1.weight f32[4] frozen
    }
    tensor layer{l}.downsample f32[4]
}`, []string{
			"layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.1.conv1.weight", "layer1.1.bn1.weight", "layer1.downsample",
			"layer2.0.conv1.weight", "layer2.0.bn1.weight", "layer2.1.conv1.weight", "layer2.1.bn1.weight", "layer2.downsample",
		}},
		{"a variable used twice, and at the start of a name", "for i in 0..1 { tensor {i}.w{i} f32[1] }", []string{"0.w0", "1.w1"}},
		{"an outer variable in an inner loop's name", `
for i in 0..1 {
    for j in 0..1 {
        tensor a.{j}.{i} f32[1]
    }
}`, []string{"a.0.0", "a.1.0", "a.0.1", "a.1.1"}},
		{"brace ranges after the substitution", `
for i in 0..1 {
    tensor h.{i}.w{0..1} f32[1]
    tensor h.{i}.pad.{08..09} f32[1]
}`, []string{"h.0.w0", "h.0.w1", "h.0.pad.08", "h.0.pad.09", "h.1.w0", "h.1.w1", "h.1.pad.08", "h.1.pad.09"}},
		{"quoted names", `
for i in 0..1 {
    tensor "blk {i}/attn" f32[1]
    tensor "q.{i}.{0..1}" f32[1]
}`, []string{"blk 0/attn", "q.0.{0..1}", "blk 1/attn", "q.1.{0..1}"}},
		{"among other declarations", `
tensor wte f32[4]
for i in 0..1 { tensor h.{i} f32[4] }
tensor ln_f f32[4]
for i in 0..1 { tensor head.{i} f32[4] }`, []string{"wte", "h.0", "h.1", "ln_f", "head.0", "head.1"}},
		{"semicolons and one line", "for i in 0..1 { tensor a{i} f32[1]; tensor b{i} f32[1]; }", []string{"a0", "b0", "a1", "b1"}},
		{"keywords as variables and in names", "for step in 0..1 { tensor step.{step} f32[1] }", []string{"step.0", "step.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCheck(t, tc.src+"\nbucket rest { * }\n")
			if got := tensorNames(p); !slices.Equal(got, tc.want) {
				t.Errorf("tensors %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTemplateSameAsWrittenOut checks that a template gives the same
// program as its tensors written out: the same tensors (all but their
// positions), buckets and plan.
func TestTemplateSameAsWrittenOut(t *testing.T) {
	const plan = `
bucket blocks { h.* } cap 1KiB
bucket rest { * } wire bf16
step {
    backward 1ms
    allreduce blocks, rest op avg after ready
    wait comm
}
`
	for _, tc := range []struct{ template, written string }{
		{`
tensor wte.weight f32[16, 4]
for i in 0..2 {
    tensor h.{i}.ln_1.weight f32[4]
    tensor h.{i}.attn.c_attn.weight f32[4, 12]
    tensor h.{i}.attn.c_attn.bias f32[12]
    tensor h.{i}.mask u8[4] frozen
}
tensor ln_f.weight f16[4]
`, `
tensor wte.weight f32[16, 4]
tensor h.0.ln_1.weight f32[4]
tensor h.0.attn.c_attn.weight f32[4, 12]
tensor h.0.attn.c_attn.bias f32[12]
tensor h.0.mask u8[4] frozen
tensor h.1.ln_1.weight f32[4]
tensor h.1.attn.c_attn.weight f32[4, 12]
tensor h.1.attn.c_attn.bias f32[12]
tensor h.1.mask u8[4] frozen
tensor h.2.ln_1.weight f32[4]
tensor h.2.attn.c_attn.weight f32[4, 12]
tensor h.2.attn.c_attn.bias f32[12]
tensor h.2.mask u8[4] frozen
tensor ln_f.weight f16[4]
`},
		{`
for l in 1..2 {
    for b in 0..1 {
        tensor h.{l}.{b}.conv{1..2}.weight f32[4, 4, 1, 1]
        tensor "h.{l}.{b} bn" f32[4] frozen
    }
}
tensor other f32[4]
`, `
tensor h.1.0.conv{1..2}.weight f32[4, 4, 1, 1]
tensor "h.1.0 bn" f32[4] frozen
tensor h.1.1.conv1.weight f32[4, 4, 1, 1]
tensor h.1.1.conv2.weight f32[4, 4, 1, 1]
tensor "h.1.1 bn" f32[4] frozen
tensor h.2.{0..0}.conv{1..2}.weight f32[4, 4, 1, 1]
tensor "h.2.0 bn" f32[4] frozen
tensor h.2.1.conv1.weight f32[4, 4, 1, 1]
tensor h.2.1.conv2.weight f32[4, 4, 1, 1]
tensor "h.2.1 bn" f32[4] frozen
tensor other f32[4]
`},
	} {
		p1, p2 := mustCheck(t, tc.template+plan), mustCheck(t, tc.written+plan)
		if len(p1.Tensors) != len(p2.Tensors) {
			t.Fatalf("%d tensors from the template, %d written out", len(p1.Tensors), len(p2.Tensors))
		}
		for i := range p1.Tensors {
			a, b := p1.Tensors[i], p2.Tensors[i]
			a.Pos, b.Pos = ir.Pos{}, ir.Pos{}
			if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
				t.Errorf("tensor %d: %+v from the template, %+v written out", i, a, b)
			}
		}
		if len(p1.Buckets) != len(p2.Buckets) {
			t.Fatalf("%d buckets from the template, %d written out", len(p1.Buckets), len(p2.Buckets))
		}
		for i := range p1.Buckets {
			p1.Buckets[i].Pos, p2.Buckets[i].Pos = ir.Pos{}, ir.Pos{}
		}
		if fmt.Sprintf("%+v", p1.Buckets) != fmt.Sprintf("%+v", p2.Buckets) {
			t.Errorf("buckets differ:\n%+v\n%+v", p1.Buckets, p2.Buckets)
		}
		h1, err1 := codegen.PlanHash(p1)
		h2, err2 := codegen.PlanHash(p2)
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Errorf("plan hashes %s, %s (%v, %v)", h1, h2, err1, err2)
		}
	}
}

// TestTemplateTensorPositions checks that the tensors of a template point
// at their declaration in the template.
func TestTemplateTensorPositions(t *testing.T) {
	p := mustCheck(t, "for i in 0..1 {\n    tensor a{i} f32[1]\n    tensor b{i} f32[1]\n}\nbucket r { * }\n")
	for i, want := range []int{2, 3, 2, 3} {
		if got := p.Tensors[i].Pos; got.Line != want || got.Col != 12 {
			t.Errorf("tensor %s at %v, want line %d column 12", p.Tensors[i].Name, got, want)
		}
	}
}

// TestTemplateWordsStayNames checks that `for` and `in` are no reserved
// words: tensors, streams and patterns may still be called so.
func TestTemplateWordsStayNames(t *testing.T) {
	p := mustCheck(t, `
tensor for f32[1]
tensor in f32[1]
tensor in.weight f32[1]
tensor for_x f32[1]
tensor for.in f32[1]
for in_ in 0..1 {
    tensor for.{in_}.in f32[1]
}
stream in
stream comm
bucket for { for, for_x }
bucket rest { in.*, in, for.* }
step {
    backward 1ms on in
    allreduce for after ready on comm
    allreduce in, in.weight on comm after in
    wait comm
}
`)
	want := []string{"for", "in", "in.weight", "for_x", "for.in", "for.0.in", "for.1.in"}
	if got := tensorNames(p); !slices.Equal(got, want) {
		t.Errorf("tensors %q, want %q", got, want)
	}
	if p.Streams[0].Name != "in" || p.Buckets[0].Name != "for" {
		t.Errorf("streams %+v, buckets %+v", p.Streams, p.Buckets)
	}
	// A scaler's options end before a template on the next line.
	mustCheck(t, "scaler dynamic init 64\nfor i in 0..1 { tensor a{i} f16[4] }\nbucket g { * }\n")
}

// TestTemplateLimits checks the bounds on what a template declares: its
// range, its tensors, and the bytes of their names.
func TestTemplateLimits(t *testing.T) {
	// 100000 values are fine.
	if p := mustCheck(t, "for i in 0..99999 { tensor a{i} f32[1] }\nbucket r { * }\n"); len(p.Tensors) != 100000 {
		t.Errorf("%d tensors, want 100000", len(p.Tensors))
	}
	for _, tc := range []struct{ src, msg string }{
		{"for i in 0..100000 { tensor a{i} f32[1] }\n", "range `0..100000` is too large (at most 100000 values)"},
		{"for i in 0..9 { for j in 0..9999 { tensor a{i}.{j}.{0..1} f32[1] } }\n", "this `for` declares 200000 tensors (at most 100000)"},
		{"for i in 0..99999 { for j in 0..99999 { for k in 0..99999 { for l in 0..99999 { tensor a{i}.{j}.{k}.{l} f32[1] } } } }\n",
			"this `for` declares more than 100000 tensors (at most 100000)"},
		{"for i in 0..99999 { tensor " + strings.Repeat("a", 3000) + ".{i} f32[1] }\n", "the tensor names of this program would take more than 256 MiB"},
	} {
		if msgs := checkErrors(tc.src); len(msgs) != 1 || msgs[0] != tc.msg {
			t.Errorf("%.60q: errors %q, want %q", tc.src, msgs, tc.msg)
		}
	}
}

// TestTemplateErrors checks the messages, positions and hints of
// template errors (testdata/errors/templates*.sync has them all, by
// message).
func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct{ src, at, msg, hint string }{
		{"for i in 0..1 {\n    tensor a{j} f32[1]\n}\n", "2:13", "`{j}` refers to no loop variable: no enclosing `for` binds `j`",
			"did you mean `{i}`? the enclosing loop's variable is `{i}`"},
		{"for layer in 0..1 {\n  for b in 0..1 {\n    tensor a{layr}.{b} f32[1]\n  }\n}\n", "3:13", "`{layr}` refers to no loop variable: no enclosing `for` binds `layr`",
			"did you mean `{layer}`? the enclosing loops' variables are `{layer}`, `{b}`"},
		{"for i in 0..1 {\n    tensor \"a {k}\" f32[1]\n}\n", "2:15", "`{k}` refers to no loop variable: no enclosing `for` binds `k`", "the enclosing loop's variable is `{i}`"},
		{"tensor h.{i}.w f32[1]\n", "1:10", "`{i}` refers to no loop variable: the declaration is in no `for`", "a quoted name takes braces literally: \"h.{i}.w\""},
		{"for i in 0..3 {\n    tensor a f32[1]\n}\n", "1:5", "loop variable `i` is not used: its body would declare the same names 4 times", "write `{i}` in the names"},
		{"for i in 7..7 {\n    tensor a f32[1]\n}\n", "1:5", "loop variable `i` is not used: no name of its body says which iteration it belongs to", "write `{i}` in the names"},
		{"for i in 0..1 {\n  for j in 0..2 {\n    for i in 0..1 { tensor a{i}{j} f32[1] }\n  }\n}\n", "3:9", "loop variable `i` is already the variable of the `for` on line 1", "name it differently, e.g. `k`"},
		{"for i in 0..1 {\n    tensor a.{i} f32[1]\n    tensor b f32[1]\n}\n", "3:12", "duplicate tensor `b` in iteration i = 1 (first declared at plan.sync:3:12)",
			"its name does not use `{i}`, so each iteration declares it again"},
		{"tensor a.1 f32[1]\nfor i in 0..1 {\n    tensor a.{i} f32[1]\n}\n", "3:12", "duplicate tensor `a.1` in iteration i = 1 (first declared at plan.sync:1:8)", "tensor names are unique"},
		{"for i in 5..2 { tensor a{i} f32[1] }\n", "1:10", "range `5..2` is empty: its first bound is larger than its last", "write `2..5`"},
		{"for i in 0..-3 { tensor a{i} f32[1] }\n", "1:13", "bound `-3` of the range is negative", "non-negative integers"},
		{"for i in 0..1.5 { tensor a{i} f32[1] }\n", "1:13", "bound `1.5` of the range is not an integer", "FIRST..LAST"},
		{"for i in 12 { tensor a{i} f32[1] }\n", "1:10", "`12` is not a range: a `for` runs over FIRST..LAST", "for 12 values from 0, write `0..11`"},
		{"for i in 0 ..3 { tensor a{i} f32[1] }\n", "", "", ""}, // a lexical error: `.` starts no token
		{"for i in 0..010 { tensor a{i} f32[1] }\n", "1:13", "bound `010` of the range has a leading zero", "write `10`"},
		{"for i 0..1 { tensor a{i} f32[1] }\n", "1:7", "missing `in` between the loop variable `i` and the range", "write `for i in 0..1 {`"},
		{"for in 0..1 { tensor a f32[1] }\n", "1:5", "`for` without a loop variable", "write e.g. `for i in 0..1 {`"},
		{"for i_ in 0..1 { tensor a{i_} f32[1] }\nfor _i in 0..1 { tensor a f32[1] }\n", "2:5", "invalid loop variable name `_i`", "starting with a letter"},
		{"for i in 0..1 { }\n", "1:15", "empty `for`: its body declares no tensor", "a `for` repeats the `tensor` declarations"},
		{"for i in 0..1 { tensor a{i} f32[1]; stream s }\n", "1:37", "a template only repeats tensors: `stream` cannot be inside a `for`", "declare it outside the `for`"},
		// A body of other declarations only is not empty: their errors say
		// what is wrong.
		{"for i in 0..3 { stream s }\n", "1:17", "a template only repeats tensors: `stream` cannot be inside a `for`", "declare it outside the `for`"},
		{"for i in 0..3 { ; }\n", "1:15", "empty `for`: its body declares no tensor", "a `for` repeats the `tensor` declarations"},
	} {
		_, diags := Check("plan.sync", []byte(tc.src))
		var errs Diagnostics
		for _, d := range diags {
			if d.Severity == Error {
				errs = append(errs, d)
			}
		}
		if tc.msg == "" {
			if len(errs) == 0 {
				t.Errorf("%q: no error", tc.src)
			}
			continue
		}
		if len(errs) != 1 {
			t.Errorf("%q: %d errors %v, want one", tc.src, len(errs), errs)
			continue
		}
		d := errs[0]
		if at := fmt.Sprintf("%d:%d", d.Pos.Line, d.Pos.Col); at != tc.at || d.Message != tc.msg || !strings.Contains(d.Hint, tc.hint) {
			t.Errorf("%q: got %s %q (hint %q), want %s %q (hint with %q)", tc.src, at, d.Message, d.Hint, tc.at, tc.msg, tc.hint)
		}
	}
}

// TestTemplateSyntaxErrors checks the syntax errors of templates: where
// they are and what their hints say.
func TestTemplateSyntaxErrors(t *testing.T) {
	for _, tc := range []struct{ src, at, msg, hint string }{
		{"for i in 0..1\n  tensor a{i} f32[1]\n", "2:3", "unexpected `tensor`: the for on line 1 is incomplete", "`for NAME in FIRST..LAST { TENSORS }`"},
		{"for i in 0..1 {\n  tensor a{i} f32[1]\n", "2:21", "unexpected end of file: the body of the `for` opened on line 1 is never closed", "add `}` to close the `{` on line 1"},
		{"for i in 0..1 {\n  tensr a{i} f32[1]\n}\n", "2:3", "unexpected `tensr`", "did you mean `tensor`? the body of a `for` holds `tensor` declarations"},
		{"for i in 0..1 {\n  5\n}\n", "2:3", "unexpected `5`", "the body of a `for` holds `tensor` declarations"},
		{"for i in 0..1 {\n  tensor a{i} f32[1]\n  wait comm\n}\n", "3:3", "unexpected `wait` after the complete tensor declaration on line 2", "the body of a `for` holds"},
		{"for i in {\n  tensor a f32[1]\n}\n", "1:10", "unexpected `{`", "`for NAME in FIRST..LAST { TENSORS }`"},
		{"step {\n  for i in 0..1 { tensor a{i} f32[1] }\n}\n", "2:3", "unexpected `for` inside the `step` block opened on line 1: a declaration starts outside any block", "a statement starts with one of"},
		{"fr i in 0..1 { tensor a{i} f32[1] }\n", "1:1", "unexpected `fr`", "did you mean `for`?"},
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
	}
	// Recovery: each broken template is one error, and the declarations
	// after it are parsed.
	_, diags := parseFile(newSourceFile("t.sync", []byte("for i in 0..1 {\n  tensr a{i} f32[1]\n}\ntensor b f32[\nfor j in 0..1\n  tensor c{j} f32[1]\n")))
	var at []string
	for _, d := range diags {
		at = append(at, fmt.Sprintf("%d:%d", d.Pos.Line, d.Pos.Col))
	}
	if want := []string{"2:3", "5:1", "6:3"}; !slices.Equal(at, want) {
		t.Errorf("errors at %q, want %q: %v", at, want, diags)
	}
}

// TestFormatTemplates checks the canonical form of templates.
func TestFormatTemplates(t *testing.T) {
	cases := map[string]string{
		"for i in 0..1 { tensor a{i} f32[1] }":                                           "for i in 0..1 {\n    tensor a{i} f32[1]\n}\n",
		"for   i   in   0..1{tensor a{i} f32[1];tensor b{i} f32[2]}":                     "for i in 0..1 {\n    tensor a{i} f32[1]\n    tensor b{i} f32[2]\n}\n",
		"for l in 1..4 {\nfor b in 0..2 {\ntensor layer{l}.{b}.w f32[64,64,1,1]\n}\n}\n": "for l in 1..4 {\n    for b in 0..2 {\n        tensor layer{l}.{b}.w f32[64, 64, 1, 1]\n    }\n}\n",
		"for i in 0..1 { // blocks\n  tensor a{i} f32[1] // a\n} // end\n":               "for i in 0..1 {        // blocks\n    tensor a{i} f32[1] // a\n}                      // end\n",
		"for i in 0..1 { /* nothing yet */ }":                                            "for i in 0..1 {\n    /* nothing yet */\n}\n",
		"for i in 0..1 {\n\n  tensor a{i} f32[1]\n\n  tensor b{i} f32[1]\n\n}\n":         "for i in 0..1 {\n    tensor a{i} f32[1]\n\n    tensor b{i} f32[1]\n}\n",
		"for i 0..1 { tensor a{i} f32[1] }":                                              "for i 0..1 {\n    tensor a{i} f32[1]\n}\n", // kept as written: the checker says what is missing
		"for i in 0..1 { tensor \"q {i}\" f32[1]\nstream s }":                            "for i in 0..1 {\n    tensor \"q {i}\" f32[1]\n    stream s\n}\n",
		"tensor for f32[1]\ntensor in f32[1]":                                            "tensor for f32[1]\ntensor in f32[1]\n",
	}
	for src, want := range cases {
		if got := mustFormat(t, src); got != want {
			t.Errorf("Format(%q) =\n%s\nwant\n%s", src, got, want)
		}
		if err := formatKeeps("t.sync", []byte(src), []byte(want)); err != nil {
			t.Errorf("Format(%q): %v", src, err)
		}
	}
}

// TestTemplateDocsExample checks the template example of
// docs/language.md (§3, "for"): the module and the plan that imports it
// check without diagnostics, and the buckets take the templated tensors.
func TestTemplateDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/language.md")
	if err != nil {
		t.Fatal(err)
	}
	// The code blocks that start with a comment naming their file.
	blocks := regexp.MustCompile("(?s)```\n(// ([a-z_]+\\.sync):[^\n]*\n.*?)```").FindAllStringSubmatch(string(doc), -1)
	dir := t.TempDir()
	files := map[string]bool{}
	for _, b := range blocks {
		if err := os.WriteFile(filepath.Join(dir, b[2]), []byte(b[1]), 0o644); err != nil {
			t.Fatal(err)
		}
		files[b[2]] = true
	}
	if !files["blocks.sync"] || !files["gpt_tiny.sync"] {
		t.Fatalf("docs/language.md has no example blocks.sync and gpt_tiny.sync (found %v)", files)
	}
	prog, diags := Load(filepath.Join(dir, "gpt_tiny.sync"))
	if len(diags) > 0 {
		var b strings.Builder
		diags.Render(&b)
		t.Fatalf("the example has diagnostics:\n%s", b.String())
	}
	names := tensorNames(prog)
	// Block by block: all of h.0 before h.1.
	if i := slices.Index(names, "h.1.ln_1.weight"); i < 1 || !strings.HasPrefix(names[i-1], "h.0.") || slices.Index(names, "h.0.ln_1.weight") != 2 {
		t.Errorf("tensors %q: not block by block", names)
	}
	for _, b := range prog.Buckets {
		if len(b.Tensors) == 0 {
			t.Errorf("bucket %s is empty", b.Name)
		}
	}
	for _, f := range []string{"blocks.sync", "gpt_tiny.sync"} {
		src, _ := os.ReadFile(filepath.Join(dir, f))
		if out, diags := Format(f, src); diags.HasErrors() || string(out) != string(src) {
			t.Errorf("%s is not formatted:\n%s", f, out)
		}
	}
}

package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/codegen"
)

func mustFormat(t *testing.T, src string) string {
	t.Helper()
	out, diags := Format("t.sync", []byte(src))
	if diags.HasErrors() {
		var b strings.Builder
		diags.Render(&b)
		t.Fatalf("format errors:\n%s", b.String())
	}
	return string(out)
}

func TestFormatCanonical(t *testing.T) {
	src := `// header comment


import   "models/tiny_mlp"
tensor   h.{0..3}.w   f32 [ 64,64 ]   frozen ; tensor x f16[1]
stream comm    priority   high
/* block
   comment */
bucket g {a.*,
   "b c", // inside the bucket
   d} wire bf16 order declared first 1MiB cap 25MiB   // trailing
init{broadcast g from 0 on comm;wait comm}
step {


  // leading
  backward 60ms on compute   /* after */
  allreduce g[1], x.* after ready on comm op avg
  reduce g to 0 on comm op sum
  group {
  allgather g on comm
  }

  wait comm


}
run check off steps 3 warmup 1
`
	want := `// header comment

import "models/tiny_mlp"
tensor h.{0..3}.w f32[64, 64] frozen
tensor x f16[1]
stream comm priority high
/* block
   comment */
// inside the bucket
bucket g { a.*, "b c", d } cap 25MiB first 1MiB order declared wire bf16 // trailing
init {
    broadcast g from 0 on comm
    wait comm
}
step {
    // leading
    backward 60ms on compute /* after */
    allreduce g[1], x.* op avg on comm after ready
    reduce g to 0 op sum on comm
    group {
        allgather g on comm
    }

    wait comm
}
run steps 3 warmup 1 check off
`
	got := mustFormat(t, src)
	if got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
	if again := mustFormat(t, got); again != got {
		t.Errorf("Format is not idempotent:\n%s\nthen:\n%s", got, again)
	}
}

func TestFormatAlignsTrailingComments(t *testing.T) {
	src := "step {\n    backward 5ms on compute // a\n    allreduce grads op avg on comm after ready // b\n\n    wait comm // c\n}\n"
	want := "step {\n    backward 5ms on compute                    // a\n    allreduce grads op avg on comm after ready // b\n\n    wait comm // c\n}\n"
	if got := mustFormat(t, src); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}

// TestFormatAlignsUnicode aligns trailing comments by terminal columns:
// "日本" is six bytes but four columns, "ü" two bytes but one.
func TestFormatAlignsUnicode(t *testing.T) {
	src := "tensor \"日本\" f32[1] // a\ntensor \"ü\" f32[1] // b\ntensor abcd f32[1] // c\n"
	want := "tensor \"日本\" f32[1] // a\ntensor \"ü\" f32[1]    // b\ntensor abcd f32[1]   // c\n"
	if got := mustFormat(t, src); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}

func TestFormatEdgeCases(t *testing.T) {
	cases := map[string]string{
		"":                         "",
		"// only a comment":        "// only a comment\n",
		"step{}":                   "step {\n}\n",
		"step accumulate  4{}":     "step accumulate 4 {\n}\n",
		"step accumulate{}":        "step accumulate {\n}\n",
		"step { // c\n}\n// end\n": "step { // c\n}\n// end\n",
		"step {\n  // last\n}":     "step {\n    // last\n}\n",
		"bucket b {}":              "bucket b { }\n",
		"tensor a f32[1] /* x */ tensor b f32[1]": "tensor a f32[1] /* x */\ntensor b f32[1]\n",
		"/* before */ tensor a f32[1]":            "/* before */\ntensor a f32[1]\n",
		"run":                                     "run\n",
		// A comment that is all of a block on one line is its body: as
		// the `{` line's trailing comment it would leave the block.
		"step { /* x */ }":              "step {\n    /* x */\n}\n",
		"step { /* x */ } // after":     "step {\n    /* x */\n} // after\n",
		"step { group { /* g */ } }":    "step {\n    group {\n        /* g */\n    }\n}\n",
		"step { /* a */ /* b */ }":      "step {\n    /* a */\n    /* b */\n}\n",
		"step { /* x */\n}":             "step { /* x */\n}\n",
		"step { backward 1ms /* x */ }": "step {\n    backward 1ms /* x */\n}\n",
		// A CRLF block comment's \r bytes are dropped from its text, not
		// from its extent: no blank line appears after it.
		"/* a\r\n\r\n\r\n*/\r\ntensor b f32[1]\r\n": "/* a\n\n\n*/\ntensor b f32[1]\n",
		// CRLF line endings become LF, in comments too.
		"tensor a f32[1] // x\r\n// y\r\n/* a\r\nb */\r\n": "tensor a f32[1] // x\n// y\n/* a\nb */\n",
		// A lone CR ends a line too: the comment ends there.
		"tensor a f32[1] // x\r// y\rtensor b f32[1]\r\rstream s\r": "tensor a f32[1] // x\n// y\ntensor b f32[1]\n\nstream s\n",
	}
	for src, want := range cases {
		if got := mustFormat(t, src); got != want {
			t.Errorf("Format(%q) = %q, want %q", src, got, want)
		}
	}
}

func TestFormatSyntaxError(t *testing.T) {
	out, diags := Format("t.sync", []byte("tensor a f32[1\n"))
	if out != nil || !diags.HasErrors() {
		t.Errorf("Format of a broken file = %q, %v", out, diags)
	}
}

// commentTexts returns the comments of src in order, with CRLF line
// endings as the formatter writes them (LF).
func commentTexts(src []byte) []string {
	var out []string
	for _, t := range lex("t.sync", unifyLineEnds(src)) {
		if t.Type == tokComment {
			out = append(out, commentText(t.Value))
		}
	}
	return out
}

// TestFormatCorpus formats every example, stdlib module and test input
// that parses (testdata/format holds programs written to reach every
// construct and comment position): the result parses, keeps every comment
// exactly once and in order, checks with the same diagnostics, gives the
// same plan and formats to itself.
func TestFormatCorpus(t *testing.T) {
	var files []string
	for _, g := range []string{"../examples/*.sync", "../stdlib/models/*.sync", "../testdata/golden/*.sync", "testdata/*/*.sync", "testdata/*/lib/*.sync"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	formatted := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out, diags := Format(path, src)
		if diags.HasErrors() {
			continue // the syntax error test files
		}
		formatted++
		if err := formatKeeps(path, src, out); err != nil {
			t.Errorf("%s: %v\nformatted:\n%s", path, err, out)
		}
	}
	if formatted < 40 {
		t.Errorf("only %d files formatted: is testdata/format missing?", formatted)
	}
}

// formatKeeps returns what formatting src into out changed that it must
// not: out does not format to itself, a comment is lost, repeated or
// moved out of order, the check reports other diagnostics, or the plan
// (its hash, which leaves positions out) differs. Both are checked as the
// file path, so that relative imports resolve.
func formatKeeps(path string, src, out []byte) error {
	if again, diags := Format(path, out); diags.HasErrors() {
		return fmt.Errorf("the formatted output does not parse: %v", diags)
	} else if !bytes.Equal(again, out) {
		return fmt.Errorf("Format is not idempotent; formatted again:\n%s", again)
	}
	if got, want := commentTexts(out), commentTexts(src); !slices.Equal(got, want) {
		return fmt.Errorf("comments changed:\n%q\nwant\n%q", got, want)
	}
	p1, d1 := Check(path, src)
	p2, d2 := Check(path, out)
	if got, want := diagnosticKeys(d2), diagnosticKeys(d1); !slices.Equal(got, want) {
		return fmt.Errorf("formatting changed the check:\n%q\nwant\n%q", got, want)
	}
	if (p1 == nil) != (p2 == nil) {
		return fmt.Errorf("formatting changed whether the file checks")
	}
	if p1 == nil {
		return nil
	}
	h1, err1 := codegen.PlanHash(p1)
	h2, err2 := codegen.PlanHash(p2)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if h1 != h2 {
		return fmt.Errorf("formatting changed the plan: hash %s, was %s", h2, h1)
	}
	return nil
}

// filePos matches a position inside a message or hint ("first declared
// at t.sync:2:8", "first on line 3", "lines 4 to 9"), which formatting may
// move.
var filePos = regexp.MustCompile(`:\d+:\d+|lines? \d+( to \d+)?`)

// diagnosticKeys returns the diagnostics without their positions, sorted
// (formatting puts options in canonical order, and so their errors).
func diagnosticKeys(diags Diagnostics) []string {
	var keys []string
	for _, d := range diags {
		keys = append(keys, d.Severity.String()+": "+filePos.ReplaceAllString(d.Message, "POS")+" / "+filePos.ReplaceAllString(d.Hint, "POS"))
	}
	slices.Sort(keys)
	return keys
}

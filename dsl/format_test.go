package dsl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestFormatEdgeCases(t *testing.T) {
	cases := map[string]string{
		"":                         "",
		"// only a comment":        "// only a comment\n",
		"step{}":                   "step {\n}\n",
		"step { // c\n}\n// end\n": "step { // c\n}\n// end\n",
		"step {\n  // last\n}":     "step {\n    // last\n}\n",
		"bucket b {}":              "bucket b { }\n",
		"tensor a f32[1] /* x */ tensor b f32[1]": "tensor a f32[1] /* x */\ntensor b f32[1]\n",
		"/* before */ tensor a f32[1]":            "/* before */\ntensor a f32[1]\n",
		"run":                                     "run\n",
		// CRLF line endings become LF, in comments too.
		"tensor a f32[1] // x\r\n// y\r\n/* a\r\nb */\r\n": "tensor a f32[1] // x\n// y\n/* a\nb */\n",
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
	for _, t := range lex("t.sync", src) {
		if t.Type == tokComment {
			out = append(out, commentText(t.Value))
		}
	}
	return out
}

// TestFormatCorpus formats every example, stdlib module and test input
// that parses: the result parses, keeps every comment in order, checks to
// the same program and formats to itself.
func TestFormatCorpus(t *testing.T) {
	var files []string
	for _, g := range []string{"../examples/*.sync", "../stdlib/models/*.sync", "../testdata/golden/*.sync", "testdata/*/*.sync"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out, diags := Format(path, src)
		if diags.HasErrors() {
			continue // the syntax error test files
		}
		if got, want := commentTexts(out), commentTexts(src); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("%s: comments changed:\n%q\nwant\n%q", path, got, want)
		}
		again, _ := Format(path, out)
		if string(again) != string(out) {
			t.Errorf("%s: Format is not idempotent:\n%s\nthen:\n%s", path, out, again)
		}
		p1, d1 := Check(path, src)
		p2, d2 := Check(path, out)
		if (p1 == nil) != (p2 == nil) || len(d1) != len(d2) {
			t.Errorf("%s: formatting changed the check: %d diagnostics before, %d after", path, len(d1), len(d2))
		}
		if p1 != nil && p2 != nil && (len(p1.Tensors) != len(p2.Tensors) || len(p1.Buckets) != len(p2.Buckets) || len(p1.Step) != len(p2.Step)) {
			t.Errorf("%s: formatting changed the program", path)
		}
	}
}

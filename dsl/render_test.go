package dsl

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestRender in testdata/render")

// TestRender compares the rendered diagnostics (message, snippet, caret
// and hint) of each testdata/render/*.sync with its .golden file. Run
// `go test ./dsl -run TestRender -update` to rewrite them.
func TestRender(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "render", "*.sync"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs in testdata/render (%v)", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, diags := Load(path)
			if len(diags) == 0 {
				t.Fatalf("%s has no diagnostics", path)
			}
			var b bytes.Buffer
			diags.Render(&b)
			golden := strings.TrimSuffix(path, ".sync") + ".golden"
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run `go test ./dsl -run TestRender -update` to create it)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("rendered diagnostics of %s differ from %s\n--- got:\n%s--- want:\n%s", path, golden, got, want)
			}
		})
	}
}

// TestRenderControlCharacters checks that control characters of a source
// line are not written to the terminal as they are, and that the caret
// stays under the subject.
func TestRenderControlCharacters(t *testing.T) {
	_, diags := Check("t.sync", []byte("tensor a f32[4] \x1b[31m\n"))
	var b bytes.Buffer
	diags.Render(&b)
	got := b.String()
	if strings.ContainsAny(got, "\x1b") {
		t.Fatalf("rendered diagnostics hold a control character:\n%q", got)
	}
	want := "t.sync:1:17: error: unexpected character \"\\x1b\"\n    tensor a f32[4] \ufffd[31m\n                    ^\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("rendered\n%s\nwant it to start with\n%s", got, want)
	}
}

// Render shows the first maxRendered diagnostics and counts the rest: the
// first errors usually explain the others, and must not scroll away.
func TestRenderCapsTheList(t *testing.T) {
	var ds Diagnostics
	for i := range maxRendered + 7 {
		ds = append(ds, Diagnostic{Severity: Error, Message: fmt.Sprintf("problem %d", i)})
	}
	var b strings.Builder
	ds.Render(&b)
	out := b.String()
	if !strings.Contains(out, fmt.Sprintf("problem %d\n", maxRendered-1)) || strings.Contains(out, fmt.Sprintf("problem %d\n", maxRendered)) {
		t.Fatalf("want the first %d shown, no more:\n%s", maxRendered, out)
	}
	if !strings.HasSuffix(out, "... and 7 more (fix the ones above first; check --format json lists them all)\n") {
		t.Fatalf("no count of the rest:\n%s", out)
	}
}

// The caret stands under its subject when wide characters (two terminal
// columns each) come before it or are in it.
func TestCaretUnderWideCharacters(t *testing.T) {
	_, ds := Check("plan.sync", []byte("tensor \"名前\" f32[4] extra\n"))
	var b strings.Builder
	ds.Render(&b)
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 || lines[2] != "    "+strings.Repeat(" ", len("tensor \"\" f32[4] ")+4)+"^^^^^" {
		t.Fatalf("caret not under `extra`:\n%s", b.String())
	}
}

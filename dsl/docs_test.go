package dsl

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docBlock is a fenced code block of a Markdown file.
type docBlock struct {
	line int // the line of its first line of code, from 1
	text string
}

// docBlocks returns the fenced code blocks of a Markdown file.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		start := i + 1
		for i = start; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		}
		blocks = append(blocks, docBlock{line: start + 1, text: strings.Join(lines[start:i], "\n") + "\n"})
	}
	return blocks
}

// docPlanName matches the first line of a complete plan in the docs: a
// comment that names its file (`// examples/resnet50.sync`, `// blocks.sync:
// ...`) or the command that runs it (`// ...: syncgen run train.sync -np 2`).
var docPlanName = regexp.MustCompile(`^// (?:(?:[a-z_]+/)?([a-z_0-9]+\.sync)(?::|$)|.*syncgen run ([a-z_0-9]+\.sync))`)

// TestLanguageDocSnippets checks the code of docs/language.md as a reader
// would use it. A block whose first line names its file is a complete plan
// (or a module another one imports): written under that name, it loads
// without errors, and a plan with a step without diagnostics at all; one
// named after a file of examples/ is that file's code. A
// block with an `// error: MESSAGE` comment is a step shown for its error:
// after a tensor and a bucket `grads` it has exactly one error, on that
// line, whose message starts with MESSAGE and whose hint starts with the
// text of the `// hint:` comment. Every other block of plan code parses,
// as declarations or as the statements of a step, but the grammar, the
// diagnostics shown as output and blocks that leave a part out (`...`).
func TestLanguageDocSnippets(t *testing.T) {
	blocks := docBlocks(t, "../docs/language.md")
	dir := t.TempDir()
	var plans []string
	for _, b := range blocks {
		first, _, _ := strings.Cut(b.text, "\n")
		if m := docPlanName.FindStringSubmatch(first); m != nil {
			name := m[1] + m[2]
			if ex := strings.TrimPrefix(strings.Fields(first)[1], "../"); strings.HasPrefix(ex, "examples/") {
				// A copy of an example: the same code, comments aside.
				src, err := os.ReadFile(filepath.Join("..", ex))
				if err != nil || codeOnly(string(src)) != codeOnly(b.text) {
					t.Errorf("docs/language.md:%d: the block is not the code of %s (%v)", b.line, ex, err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			plans = append(plans, name)
		}
	}
	if len(plans) < 4 {
		t.Fatalf("docs/language.md has %d complete plans (%v), want at least 4", len(plans), plans)
	}
	for _, name := range plans {
		src, _ := os.ReadFile(filepath.Join(dir, name))
		_, diags := Load(filepath.Join(dir, name))
		if diags.HasErrors() || len(diags) > 0 && regexp.MustCompile(`(?m)^step\b`).Match(src) {
			var out strings.Builder
			diags.Render(&out)
			t.Errorf("docs/language.md's %s has diagnostics:\n%s", name, out.String())
		}
	}

	errorBlocks := 0
	for _, b := range blocks {
		first, _, _ := strings.Cut(b.text, "\n")
		switch {
		case docPlanName.MatchString(first), strings.HasPrefix(first, "File "), diagnosticLine.MatchString(first):
			continue
		case strings.Contains(b.text, "// error: "):
			errorBlocks++
			checkDocError(t, b)
		case strings.Contains(b.text, "..."):
			continue
		default:
			_, diags := Format("snippet.sync", []byte(b.text))
			if diags.HasErrors() {
				_, diags = Format("snippet.sync", []byte("step {\n"+b.text+"}\n"))
			}
			if diags.HasErrors() {
				var out strings.Builder
				diags.Render(&out)
				t.Errorf("docs/language.md:%d: the block parses neither as declarations nor as statements:\n%s", b.line, out.String())
			}
		}
	}
	if errorBlocks < 2 {
		t.Errorf("docs/language.md has %d blocks with an `// error:` comment, want at least 2", errorBlocks)
	}
}

// codeOnly is a plan's code without its comments, blank lines and
// spacing.
func codeOnly(src string) string {
	var out []string
	for _, l := range strings.Split(src, "\n") {
		l, _, _ = strings.Cut(l, "//")
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return strings.Join(out, "\n")
}

// checkDocError checks a block of docs/language.md shown for its error.
func checkDocError(t *testing.T, b docBlock) {
	t.Helper()
	const preamble = "tensor w f32[4]\nbucket grads { * }\n"
	lines := strings.Split(b.text, "\n")
	var errLine int
	var msg, hint string
	for i, l := range lines {
		if _, m, ok := strings.Cut(l, "// error: "); ok {
			errLine, msg = i+1, m
		}
		if _, h, ok := strings.Cut(l, "// hint: "); ok {
			hint = h
		}
	}
	_, diags := Check("snippet.sync", []byte(preamble+b.text))
	var errs []Diagnostic
	for _, d := range diags {
		if d.Severity == Error {
			errs = append(errs, d)
		}
	}
	want := strings.Count(preamble, "\n") + errLine
	if len(errs) != 1 || errs[0].Pos.Line != want || !strings.HasPrefix(errs[0].Message, msg) || !strings.HasPrefix(errs[0].Hint, hint) {
		var out strings.Builder
		diags.Render(&out)
		t.Errorf("docs/language.md:%d: want one error on the block's line %d, %q..., hint %q...; got:\n%s", b.line, errLine, msg, hint, out.String())
	}
}

// diagnosticLine matches the first line of a diagnostic as syncgen check
// prints it: FILE:LINE:COL: SEVERITY: MESSAGE.
var diagnosticLine = regexp.MustCompile(`^([^ :]+\.sync):(\d+):(\d+): (?:error|warning): `)

// TestDocDiagnosticsAgree checks the diagnostics that the README and
// docs/language.md show as syncgen check prints them: the caret under the
// source line stands at the column the first line names, and is as wide as
// the name in backquotes that the message is about.
func TestDocDiagnosticsAgree(t *testing.T) {
	n := 0
	for _, path := range []string{"../README.md", "../docs/language.md"} {
		for _, b := range docBlocks(t, path) {
			lines := strings.Split(b.text, "\n")
			for i := 0; i+2 < len(lines); i++ {
				m := diagnosticLine.FindStringSubmatch(lines[i])
				if m == nil {
					continue
				}
				n++
				col, _ := strconv.Atoi(m[3])
				snippet, carets := lines[i+1], lines[i+2]
				at := strings.Index(carets, "^")
				width := strings.Count(carets, "^")
				// The source line is shown after 4 spaces.
				if !strings.HasPrefix(snippet, "    ") || at-4 != col-1 {
					t.Errorf("%s:%d: %s:%s:%s, but the caret stands at column %d of the source line", path, b.line+i, m[1], m[2], m[3], at-3)
				}
				if name := regexp.MustCompile("`([^`]+)`").FindStringSubmatch(lines[i]); name != nil && at >= 0 && snippet[at:min(at+width, len(snippet))] != name[1] {
					t.Errorf("%s:%d: the caret is under %q, not the message's `%s`", path, b.line+i, snippet[at:min(at+width, len(snippet))], name[1])
				}
			}
		}
	}
	if n < 2 {
		t.Errorf("found %d diagnostics in the README and docs/language.md, want at least 2", n)
	}
}

// TestReadmeTourPlan checks that the plan of the README's tour is
// examples/hello.sync as the README says: the file without its header
// comment, byte for byte.
func TestReadmeTourPlan(t *testing.T) {
	hello, err := os.ReadFile("../examples/hello.sync")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range docBlocks(t, "../README.md") {
		if strings.Contains(b.text, "\ntensor ") {
			if !strings.HasSuffix(string(hello), b.text) {
				t.Errorf("README.md:%d: the tour's plan is not the end of examples/hello.sync", b.line)
			}
			return
		}
	}
	t.Error("README.md has no plan with tensors")
}

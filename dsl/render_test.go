package dsl

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
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
// line are not written to the terminal as they are but escaped, and that
// the caret stays under the subject, its escape.
func TestRenderControlCharacters(t *testing.T) {
	_, diags := Check("t.sync", []byte("tensor a f32[4] \x1b[31m\n"))
	var b bytes.Buffer
	diags.Render(&b)
	got := b.String()
	if strings.ContainsAny(got, "\x1b") {
		t.Fatalf("rendered diagnostics hold a control character:\n%q", got)
	}
	want := "t.sync:1:17: error: unexpected character \"\\x1b\"\n    tensor a f32[4] \\x1b[31m\n                    ^^^^\n"
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

// runeColumns counts East Asian wide characters, emoji included, as two
// columns and zero-width characters as none.
func TestRuneColumns(t *testing.T) {
	tests := []struct {
		r    rune
		want int
	}{
		{'a', 1}, {'é', 1}, {'梯', 2}, {'한', 2}, {'Ａ', 2}, {'\u303f', 1},
		{'😀', 2}, {'🌀', 2}, {'🤖', 2}, {'🚀', 2}, {'⚡', 2}, {'✅', 2}, {'⭐', 2},
		{'☺', 1}, {'✓', 1}, {'🌡', 1},
		{'\u0301', 0}, {'\u20dd', 0}, {'\u200b', 0}, {'\u200d', 0}, {'\u200f', 0}, {'\ufeff', 0},
	}
	for _, tt := range tests {
		if got := runeColumns(tt.r); got != tt.want {
			t.Errorf("runeColumns(%U) = %d, want %d", tt.r, got, tt.want)
		}
	}
}

// printable escapes what does not print, as strconv.Quote writes it, and
// leaves the rest, wide and combining characters included, as it is.
func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain.name", "plain.name"},
		{"梯度😀é", "梯度😀é"},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f`},
		{"tab\tx", `tab\tx`},
		{"a\nb\rc\x1b\x7f\u0085", `a\nb\rc\x1b\x7f\u0085`},
		{"zw\u200bsp\ufeff", `zw\u200bsp\ufeff`},
		{"tag\U000e0001", `tag\U000e0001`},
		{"bad\xffbyte", `bad\xffbyte`},
		{`back\slash`, `back\slash`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// The snippet counts an escape's columns without making it.
	for _, s := range []string{"\a", "\t", "\n", "\v", "\x00", "\x1b", "\x7f", "\u0085", "\u200b", "\u202e", "\ufeff", "\U000e0001", "\xff", "\xc3"} {
		r, size := utf8.DecodeRuneInString(s)
		if e := escapeRune(r, s[:size]); len(e) != escapeLen(r, size) {
			t.Errorf("escapeLen(%q) = %d, want len(%s)", s, escapeLen(r, size), e)
		}
	}
}

// Names cut for a message are cut between characters, never inside one.
func TestCutText(t *testing.T) {
	long := "非常に長い名前のバケットです非常に長い名前"
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 40, "short"},
		{strings.Repeat("a", 41), 40, strings.Repeat("a", 40) + "..."},
		{long, 40, "非常に長い名前のバケットで..."},
		{"ab😀", 5, "ab..."},
		{"\xff\xfe\xfd", 2, "\xff\xfe..."},
	}
	for _, tt := range tests {
		if got := cutText(tt.in, tt.n); got != tt.want {
			t.Errorf("cutText(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
	for _, s := range []string{quoteText(long), tokenText(token{Value: long}), shortText(long), code(strings.Repeat("名", 200))} {
		if !utf8.ValidString(s) {
			t.Errorf("%q is cut inside a character", s)
		}
	}
}

// Messages, hints and snippets show control and format characters of
// names escaped, and the caret stays under its subject after an escape,
// an emoji or a zero-width character.
func TestRenderEscapesNames(t *testing.T) {
	tests := []struct{ src, want string }{
		{"tensor \"😀\u200b\" f32[1] extra\n",
			"    tensor \"😀\\u200b\" f32[1] extra\n" +
				"    " + strings.Repeat(" ", len(`tensor "\u200b" f32[1] `)+2) + "^^^^^\n"},
		{"tensor \"tab\tx\" f32[1]\n",
			"error: invalid quoted name \"tab\\tx\"\n    tensor \"tab    x\" f32[1]\n           ^^^^^^^^^^\n"},
		{"tensor \"bidi\u202eevil\" f32[1]\n",
			"warning: tensor `bidi\\u202eevil` is in no bucket and no collective synchronises it\n" +
				"    tensor \"bidi\\u202eevil\" f32[1]\n           ^^^^^^^^^^^^^^^^\n"},
		{"tensor a f32[1]\nbucket \"b\u2067idi\" { a }\n",
			"error: invalid bucket name `\"b\\u2067idi\"`\n    bucket \"b\\u2067idi\" { a }\n           ^^^^^^^^^^^^\n"},
	}
	for _, tt := range tests {
		_, ds := Check("plan.sync", []byte(tt.src))
		var b strings.Builder
		ds.Render(&b)
		got := b.String()
		for _, bad := range []string{"\u202e", "\u2067", "\u200b", "\t"} {
			if strings.Contains(got, bad) {
				t.Errorf("rendered diagnostics hold %q:\n%s", bad, got)
			}
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("rendered\n%s\nwant it to contain\n%s", got, tt.want)
		}
		js, err := ds.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(string(js), "\u202e\u2067\u200b") {
			t.Errorf("JSON diagnostics hold a raw format character:\n%s", js)
		}
	}
}

// A line too long for the terminal is cut to a window of at most
// maxSnippetWidth columns, between characters and escapes, and the caret
// stays under the subject.
func TestSnippetWindowColumns(t *testing.T) {
	pre := strings.Repeat("\"😀\u202e\", ", 30)
	src := "bucket b { " + pre + "nosuch, " + pre + "}\n"
	_, ds := Check("plan.sync", []byte(src))
	var b strings.Builder
	ds.Render(&b)
	out := b.String()
	i := strings.Index(out, "`nosuch`")
	if i < 0 {
		t.Fatalf("no error about nosuch:\n%s", out)
	}
	lines := strings.Split(out[i:], "\n")
	if len(lines) < 3 {
		t.Fatalf("no snippet:\n%s", out)
	}
	line, caret := strings.TrimPrefix(lines[1], "    "), strings.TrimPrefix(lines[2], "    ")
	cols := 0
	for _, r := range line {
		cols += runeColumns(r)
	}
	if cols > maxSnippetWidth+6 || !strings.HasPrefix(line, "...") || !strings.HasSuffix(line, "...") {
		t.Errorf("window of %d columns, want at most %d and cut on both sides:\n%s", cols, maxSnippetWidth+6, line)
	}
	if strings.Contains(line, "...u202e") || strings.Contains(line, "\\u20...") || strings.Contains(line, "\\u202...") {
		t.Errorf("window cuts an escape:\n%s", line)
	}
	pad := len(caret) - len(strings.TrimLeft(caret, " "))
	before := 0
	for _, r := range line[:strings.Index(line, "nosuch")] {
		before += runeColumns(r)
	}
	if pad != before || strings.TrimLeft(caret, " ") != "^^^^^^" {
		t.Errorf("caret not under nosuch:\n%s\n%s", line, caret)
	}
}

// allocated returns the bytes that f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Diagnostics on a very long line cost what their window of it shows,
// not the line: neither keeping one nor rendering it may copy or scan the
// whole line, which a plan of one long line with thousands of errors
// would then pay thousands of times over.
func TestLongLineDiagnosticsCost(t *testing.T) {
	line := strings.Repeat("tensor a f32[4] ", 1<<16) // 1 MiB on one line
	f := newSourceFile("ll.sync", []byte(line))
	ds := make(Diagnostics, 0, 1000)
	made := allocated(func() {
		for i := range cap(ds) {
			off := i * 16 * 61
			ds = append(ds, f.errorAt(off, off+6, "duplicate tensor `a`", "tensor names are unique"))
		}
	})
	if made > 64<<10 {
		t.Errorf("1000 diagnostics on a line of %d bytes allocated %d bytes, want at most 64 KiB", len(line), made)
	}
	var out strings.Builder
	rendered := allocated(func() { ds.Render(&out) })
	if limit := uint64(maxRendered * 64 << 10); rendered > limit {
		t.Errorf("rendering %d diagnostics on a line of %d bytes allocated %d bytes, want at most %d", maxRendered, len(line), rendered, limit)
	}
	// Every snippet is a window with its caret under `tensor`.
	lines := strings.Split(out.String(), "\n")
	for i := 0; i+3 < len(lines) && i < 4*maxRendered; i += 4 {
		snippet, caret := lines[i+1], lines[i+2]
		col := len(caret) - len(strings.TrimLeft(caret, " "))
		if len(snippet) > maxSnippetWidth+6+4 || strings.TrimLeft(caret, " ") != "^^^^^^" || !strings.HasPrefix(snippet[col:], "tensor") {
			t.Fatalf("diagnostic %d:\n%s\n%s", i/4, snippet, caret)
		}
	}
	// The whole check, parsing included, grows with the source, not with
	// its errors times its line.
	src := []byte(strings.Repeat("tensor a f32[4] ", 4000))
	var diags Diagnostics
	total := allocated(func() {
		_, diags = Check("ll.sync", src)
		diags.Render(io.Discard)
	})
	if len(diags) < 3999 || total > uint64(len(src))*2560 {
		t.Errorf("checking a line of %d bytes gave %d diagnostics and allocated %d bytes, want at most %d", len(src), len(diags), total, len(src)*2560)
	}
}

// A subject that runs on past the window's end is underlined up to the
// window's "..." and no further: the caret line was one column longer
// than the line it stands under.
func TestCaretCutWithTheLine(t *testing.T) {
	for _, src := range []string{
		"tensor \"*" + strings.Repeat("a", 300) + "\" f32[4]\n",
		"tensor \"*" + strings.Repeat("名", 300) + "\" f32[4]\n",
		strings.Repeat("/* padding */ ", 100) + "tensor \"*" + strings.Repeat("a", 3000) + "\" f32[4]\n",
	} {
		_, ds := Check("plan.sync", []byte(src))
		var b strings.Builder
		ds.Render(&b)
		lines := strings.Split(b.String(), "\n")
		if len(lines) < 3 {
			t.Fatalf("no snippet:\n%s", b.String())
		}
		cols := func(s string) int {
			n := 0
			for _, r := range s {
				n += runeColumns(r)
			}
			return n
		}
		if !strings.HasSuffix(lines[1], "...") || cols(lines[2]) != cols(lines[1]) || !strings.HasSuffix(lines[2], "^^^") {
			t.Errorf("caret line of %d columns under a line of %d, want it to end under the line's \"...\":\n%s\n%s", cols(lines[2]), cols(lines[1]), lines[1], lines[2])
		}
	}
}

// snippetBytes cuts a line between two characters, around the subject.
func TestSnippetBytes(t *testing.T) {
	line := strings.Repeat("名", 1000) // 3 bytes each
	for _, col0 := range []int{0, 3, 1500, 2997, 3000} {
		piece, off, cutLeft, cutRight := snippetBytes(line, col0)
		if !utf8.ValidString(piece) || line[off:off+len(piece)] != piece || off > col0 || off+len(piece) < min(col0+1, len(line)) {
			t.Errorf("snippetBytes(col0 %d) = [%d, %d), not whole characters around the subject", col0, off, off+len(piece))
		}
		if cutLeft != (off > 0) || cutRight != (off+len(piece) < len(line)) || len(piece) > 2*snippetMargin+3 {
			t.Errorf("snippetBytes(col0 %d) = [%d, %d), cut %v %v", col0, off, off+len(piece), cutLeft, cutRight)
		}
	}
}

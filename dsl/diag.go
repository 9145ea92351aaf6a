package dsl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/syncgen/syncgen/ir"
)

// Severity says whether a diagnostic stops compilation.
type Severity int

// The severities. An error means no program is produced; a warning is
// reported but does not fail the check.
const (
	Error Severity = iota + 1
	Warning
)

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one error or warning about a source file, in the style of
// hashicorp/hcl: a message about the subject between Pos and End, and an
// optional hint that says how to fix it.
type Diagnostic struct {
	Severity Severity
	// Pos is the start of the subject; End is just after it (End.Offset is
	// exclusive). A diagnostic about a whole file (one that cannot be read)
	// has Line 0.
	Pos     ir.Pos
	End     ir.Pos
	Message string
	Hint    string

	// snippet is the source line of Pos, kept so that Render works on
	// diagnostics collected from many files without the sources.
	snippet string
}

// Diagnostics is a list of diagnostics, sorted by position once a check
// has finished.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (d Diagnostics) HasErrors() bool {
	for _, x := range d {
		if x.Severity == Error {
			return true
		}
	}
	return false
}

// Errors returns the number of errors.
func (d Diagnostics) Errors() int {
	n := 0
	for _, x := range d {
		if x.Severity == Error {
			n++
		}
	}
	return n
}

// Error formats the diagnostic on one line: file:line:col: error: message.
func (x Diagnostic) Error() string {
	loc := x.Pos.File
	if x.Pos.Line > 0 {
		loc = x.Pos.String()
	}
	return fmt.Sprintf("%s: %s: %s", loc, x.Severity, x.Message)
}

// Render writes every diagnostic as text: the location and message, the
// source line, a caret range under the subject and the hint, e.g.
//
//	plan.sync:7:24: error: no stream `com`
//	    allreduce grads on com after ready
//	                       ^^^
//	hint: did you mean `comm`?
func (d Diagnostics) Render(w io.Writer) {
	for i, x := range d {
		if i == maxRendered {
			fmt.Fprintf(w, "... and %d more (fix the ones above first; check --format json lists them all)\n", len(d)-i)
			return
		}
		x.render(w)
	}
}

// maxRendered is how many diagnostics Render shows: a bucket of 2000
// patterns that match nothing made 2000 errors, and the first ones, which
// usually explain the rest, scrolled away.
const maxRendered = 50

func (x Diagnostic) render(w io.Writer) {
	fmt.Fprintln(w, x.Error())
	if x.Pos.Line > 0 && x.snippet != "" {
		line := printableLine(x.snippet)
		// Columns as displayed: one per rune of the printable line.
		lineWidth := utf8.RuneCountInString(line)
		start := displayCol(x.snippet, x.Pos.Col)
		end := lineWidth
		if x.End.Line == x.Pos.Line && x.End.Col > x.Pos.Col {
			end = displayCol(x.snippet, x.End.Col)
		}
		end = max(start+1, min(end, lineWidth+1))
		line, start, end = snippetWindow(line, lineWidth, start, end)
		// start and end count runes; a terminal gives East Asian wide
		// characters two columns, so the caret line counts them twice.
		pad, marks := 0, 0
		runes := []rune(line)
		for i := range end {
			cols := 1
			if i < len(runes) {
				cols = runeColumns(runes[i])
			}
			if i < start {
				pad += cols
			} else {
				marks += cols
			}
		}
		fmt.Fprintf(w, "    %s\n", line)
		fmt.Fprintf(w, "    %s%s\n", strings.Repeat(" ", pad), strings.Repeat("^", marks))
	}
	if x.Hint != "" {
		fmt.Fprintf(w, "hint: %s\n", x.Hint)
	}
}

// maxSnippetWidth is the most columns of a source line a diagnostic
// shows.
const maxSnippetWidth = 120

// snippetWindow cuts a source line of width columns that is too long for
// a terminal (a generated file, a minified plan on one line) to a window
// around the caret columns [start, end), marking each cut side with "...",
// and returns the window and the caret columns in it. A caret range wider
// than the window is cut too.
func snippetWindow(line string, width, start, end int) (string, int, int) {
	if width <= maxSnippetWidth {
		return line, start, end
	}
	runes := []rune(line)
	from := max(0, start-maxSnippetWidth/4)
	to := min(len(runes), from+maxSnippetWidth)
	from = max(0, min(from, to-maxSnippetWidth))
	out, shift := string(runes[from:to]), from
	if from > 0 {
		out, shift = "..."+out, from-3
	}
	if to < len(runes) {
		out += "..."
	}
	start -= shift
	end = min(end-shift, utf8.RuneCountInString(out)+1)
	return out, start, max(end, start+1)
}

// displayCol converts a 1-based byte column of line into a 0-based column
// of the line as rendered (tabs expanded to 4 spaces, one column per rune).
func displayCol(line string, col int) int {
	n := 0
	for i, r := range line {
		if i >= col-1 {
			break
		}
		if r == '\t' {
			n += 4
		} else {
			n++
		}
	}
	if col-1 > len(line) {
		n += col - 1 - len(line)
	}
	return n
}

// printableLine prepares a source line for the terminal: tabs expanded to
// 4 spaces, and control characters and bytes that are not UTF-8 shown as
// U+FFFD, one column each (as displayCol counts them), so that a stray
// escape sequence or NUL in a file cannot garble the output.
func printableLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString("    ")
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r) // an invalid byte decodes as utf8.RuneError
		}
	}
	return b.String()
}

// jsonDiagnostic is the JSON form of a diagnostic, for editors.
type jsonDiagnostic struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Severity  string `json:"severity"`
	Message   string `json:"message"`
	Hint      string `json:"hint"`
}

// JSON returns the diagnostics as a JSON array of objects with the fields
// file, line, column, end_line, end_column, severity, message and hint.
// An empty list is `[]`.
func (d Diagnostics) JSON() ([]byte, error) {
	out := make([]jsonDiagnostic, 0, len(d))
	for _, x := range d {
		out = append(out, jsonDiagnostic{
			File: x.Pos.File, Line: x.Pos.Line, Column: x.Pos.Col,
			EndLine: x.End.Line, EndColumn: x.End.Col,
			Severity: x.Severity.String(), Message: x.Message, Hint: x.Hint,
		})
	}
	// Without HTML escaping: a file `<stdin>` and a cycle `a -> b` read as
	// written, not as `\u003cstdin\u003e` and `a -\u003e b`.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("encoding diagnostics as JSON: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// sortDiagnostics orders diagnostics by file (in the order the files were
// loaded) and by position inside each file, and drops exact duplicates.
func sortDiagnostics(d Diagnostics, fileOrder map[string]int) Diagnostics {
	sort.SliceStable(d, func(i, j int) bool {
		a, b := d[i], d[j]
		if a.Pos.File != b.Pos.File {
			oa, oka := fileOrder[a.Pos.File]
			ob, okb := fileOrder[b.Pos.File]
			if oka && okb {
				return oa < ob
			}
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Offset != b.Pos.Offset {
			return a.Pos.Offset < b.Pos.Offset
		}
		return a.Severity < b.Severity
	})
	out := d[:0]
	for i, x := range d {
		if i > 0 && x.Pos == d[i-1].Pos && x.Message == d[i-1].Message {
			continue
		}
		out = append(out, x)
	}
	return out
}

// runeColumns is how many terminal columns r takes: 2 for the East Asian
// wide and fullwidth ranges (Hangul Jamo, CJK, Hangul syllables, CJK
// compatibility, fullwidth forms, the supplementary ideographic planes),
// 1 otherwise.
func runeColumns(r rune) int {
	switch {
	case r >= 0x1100 && r <= 0x115f, r >= 0x2e80 && r <= 0xa4cf && r != 0x303f,
		r >= 0xac00 && r <= 0xd7a3, r >= 0xf900 && r <= 0xfaff, r >= 0xfe30 && r <= 0xfe4f,
		r >= 0xff00 && r <= 0xff60, r >= 0xffe0 && r <= 0xffe6, r >= 0x20000 && r <= 0x3fffd:
		return 2
	}
	return 1
}

package dsl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
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
		snippet, off, cutLeft, cutRight := snippetBytes(x.snippet, x.Pos.Col-1)
		cells := snippetCells(snippet)
		start := cellIndex(cells, len(snippet), x.Pos.Col-off)
		end := len(cells)
		if x.End.Line == x.Pos.Line && x.End.Col > x.Pos.Col {
			end = cellIndex(cells, len(snippet), x.End.Col-off)
		}
		end = max(start+1, min(end, len(cells)+1))
		cells, start, end = snippetWindow(cells, start, end, cutLeft, cutRight)
		// The caret line counts the columns of each cell: two for an East
		// Asian wide character, none for a combining mark, the length of
		// an escape; one for each column past the end of the line.
		var line strings.Builder
		for _, c := range cells {
			line.WriteString(c.text(snippet))
		}
		pad, marks := 0, 0
		for i := range end {
			cols := 1
			if i < len(cells) {
				cols = cells[i].cols
			}
			if i < start {
				pad += cols
			} else {
				marks += cols
			}
		}
		// A subject of zero-width characters still gets a caret.
		marks = max(marks, 1)
		fmt.Fprintf(w, "    %s\n", line.String())
		fmt.Fprintf(w, "    %s%s\n", strings.Repeat(" ", pad), strings.Repeat("^", marks))
	}
	if x.Hint != "" {
		fmt.Fprintf(w, "hint: %s\n", x.Hint)
	}
}

// snippetCell is one character of a source line as a diagnostic shows it:
// the character itself, 4 spaces for a tab, an escape for a character
// that does not print, or the "..." that marks a cut.
type snippetCell struct {
	off, size int // byte range of the character in the line
	kind      cellKind
	cols      int // terminal columns the cell takes
}

// cellKind says how a snippetCell shows its character.
type cellKind int

// The kinds of cells.
const (
	cellChar cellKind = iota
	cellTab
	cellEscape
	cellCut
)

// text returns what the cell shows of line. An escape is only made here,
// for the cells that are shown: a long line of control characters would
// otherwise make one for each.
func (c snippetCell) text(line string) string {
	switch c.kind {
	case cellTab:
		return "    "
	case cellEscape:
		r, _ := utf8.DecodeRuneInString(line[c.off : c.off+c.size])
		return escapeRune(r, line[c.off:c.off+c.size])
	case cellCut:
		return "..."
	}
	return line[c.off : c.off+c.size]
}

// snippetCells prepares a source line for the terminal: tabs expanded to
// 4 spaces, and characters that do not print (control and format
// characters such as ESC or the bidirectional override U+202E, and bytes
// that are not UTF-8) escaped as in messages (see escapeRune), so that a
// stray escape sequence cannot garble the output nor a bidi control
// reorder it.
func snippetCells(line string) []snippetCell {
	cells := make([]snippetCell, 0, utf8.RuneCountInString(line))
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRuneInString(line[i:])
		c := snippetCell{off: i, size: size}
		switch {
		case r == '\t':
			c.kind, c.cols = cellTab, 4
		case r == utf8.RuneError && size == 1, !unicode.IsGraphic(r):
			c.kind, c.cols = cellEscape, escapeLen(r, size)
		default:
			c.cols = runeColumns(r)
		}
		cells = append(cells, c)
		i += size
	}
	return cells
}

// cellIndex converts a 1-based byte column of a line of n bytes into the
// index of the cell that holds it; a column past the end of the line
// counts one cell for each byte after it.
func cellIndex(cells []snippetCell, n, col int) int {
	off := col - 1
	if off >= n {
		return len(cells) + off - n
	}
	i := 0
	for i < len(cells) && cells[i].off < off {
		i++
	}
	return i
}

// maxSnippetWidth is the most columns of a source line a diagnostic
// shows.
const maxSnippetWidth = 120

// snippetMargin is how many bytes of a source line before and after the
// start of a diagnostic's subject render looks at. A character that takes
// a column takes at most 4 bytes, so the window of maxSnippetWidth
// columns that snippetWindow cuts around the subject lies inside them
// (on a line of zero-width characters it shows fewer columns).
const snippetMargin = 4 * maxSnippetWidth

// snippetBytes returns the part of a source line that render looks at for
// a subject starting at byte col0 (from 0): at most snippetMargin bytes
// on each side, cut between two characters, with the byte offset of its
// start in the line and whether the line goes on before and after it.
// A diagnostic's cost does not grow with its line: a plan of one
// line of megabytes has thousands of diagnostics on it.
func snippetBytes(line string, col0 int) (piece string, off int, cutLeft, cutRight bool) {
	col0 = max(0, min(col0, len(line)))
	a, b := max(0, col0-snippetMargin), min(len(line), col0+snippetMargin)
	for a > 0 && a < col0 && !utf8.RuneStart(line[a]) {
		a++
	}
	for b < len(line) && !utf8.RuneStart(line[b]) {
		b++
	}
	return line[a:b], a, a > 0, b < len(line)
}

// snippetWindow cuts the cells of a source line that is too long for a
// terminal (a generated file, a minified plan on one line) to a window of
// at most maxSnippetWidth columns around the caret cells [start, end),
// marking each cut side with "...", and returns the window and the caret
// cells in it. cutLeft and cutRight say that the cells are already a
// part of the line that goes on before or after them (see snippetBytes).
// A caret range that goes on past the window's end is cut at its "...",
// which it underlines: the caret line is never longer than the line.
func snippetWindow(cells []snippetCell, start, end int, cutLeft, cutRight bool) ([]snippetCell, int, int) {
	width := 0
	for _, c := range cells {
		width += c.cols
	}
	if width <= maxSnippetWidth && !cutLeft && !cutRight {
		return cells, start, end
	}
	// The window starts about a quarter of its width before the caret
	// and takes what fits; near the line's end it reaches further back.
	from, cols := min(start, len(cells)), 0
	for from > 0 && cols+cells[from-1].cols <= maxSnippetWidth/4 {
		from--
		cols += cells[from].cols
	}
	to, cols := from, 0
	for to < len(cells) && cols+cells[to].cols <= maxSnippetWidth {
		cols += cells[to].cols
		to++
	}
	for from > 0 && cols+cells[from-1].cols <= maxSnippetWidth {
		from--
		cols += cells[from].cols
	}
	dots := snippetCell{kind: cellCut, cols: 3}
	out := make([]snippetCell, 0, to-from+2)
	shift := from
	if from > 0 || cutLeft {
		out = append(out, dots)
		shift--
	}
	out = append(out, cells[from:to]...)
	last := len(out) + 1 // a caret may stand one column past the line's end
	if to < len(cells) || cutRight {
		out = append(out, dots)
		last = len(out)
	}
	start -= shift
	end = min(end-shift, last)
	return out, start, max(end, start+1)
}

// escapeRune returns the escape that shows a character that does not
// print, s being its bytes in the text: \t, \x1b, \u202e, \U000e0001 as Go
// and strconv.Quote write them, or \xff for a byte that is not UTF-8.
func escapeRune(r rune, s string) string {
	if r == utf8.RuneError && len(s) == 1 {
		return fmt.Sprintf(`\x%02x`, s[0])
	}
	q := strconv.QuoteRune(r)
	return q[1 : len(q)-1]
}

// escapeLen is the length of the escape of a character that does not
// print (see escapeRune), size being its length in bytes, without making
// the escape.
func escapeLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return 4 // \xff
	case r == '\a', r == '\b', r == '\f', r == '\n', r == '\r', r == '\t', r == '\v':
		return 2
	case r < ' ' || r == 0x7f:
		return 4 // \x1b
	case r < 0x10000:
		return 6 // \u202e
	}
	return 10 // \U000e0001
}

// printable returns s with every character that does not print escaped
// (see escapeRune): names in messages may hold any character a quoted
// name takes, and a control or format character must neither act on the
// terminal (a bidi override reorders the rest of the line) nor hide.
// Printable text is returned as it is.
func printable(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !unicode.IsGraphic(r) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !unicode.IsGraphic(r) {
			b.WriteString(escapeRune(r, s[i:i+size]))
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// cutText returns s cut to at most n bytes, between two characters, with
// "..." after it when it was cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for i < len(s) {
		_, size := utf8.DecodeRuneInString(s[i:])
		if i+size > n {
			break
		}
		i += size
	}
	return s[:i] + "..."
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
// compatibility, fullwidth forms, the emoji, the supplementary
// ideographic planes), 0 for combining marks and zero-width characters
// (U+200B to U+200F, U+2060 to U+2064, U+FEFF), 1 otherwise.
func runeColumns(r rune) int {
	switch {
	case r >= 0x1100 && r <= 0x115f, r >= 0x2e80 && r <= 0xa4cf && r != 0x303f,
		r >= 0xac00 && r <= 0xd7a3, r >= 0xf900 && r <= 0xfaff, r >= 0xfe30 && r <= 0xfe4f,
		r >= 0xff00 && r <= 0xff60, r >= 0xffe0 && r <= 0xffe6, r >= 0x20000 && r <= 0x3fffd:
		return 2
	case r >= 0x200b && r <= 0x200f, r >= 0x2060 && r <= 0x2064, r == 0xfeff,
		unicode.In(r, unicode.Mn, unicode.Me):
		return 0
	case r >= 0x231a && isWideEmoji(r):
		return 2
	}
	return 1
}

// wideEmoji are the ranges of emoji that Unicode's East Asian Width
// property makes wide (W) and terminals show in two columns, sorted.
var wideEmoji = [][2]rune{
	{0x231a, 0x231b}, {0x2329, 0x232a}, {0x23e9, 0x23ec}, {0x23f0, 0x23f0}, {0x23f3, 0x23f3},
	{0x25fd, 0x25fe}, {0x2614, 0x2615}, {0x2648, 0x2653}, {0x267f, 0x267f}, {0x2693, 0x2693},
	{0x26a1, 0x26a1}, {0x26aa, 0x26ab}, {0x26bd, 0x26be}, {0x26c4, 0x26c5}, {0x26ce, 0x26ce},
	{0x26d4, 0x26d4}, {0x26ea, 0x26ea}, {0x26f2, 0x26f3}, {0x26f5, 0x26f5}, {0x26fa, 0x26fa},
	{0x26fd, 0x26fd}, {0x2705, 0x2705}, {0x270a, 0x270b}, {0x2728, 0x2728}, {0x274c, 0x274c},
	{0x274e, 0x274e}, {0x2753, 0x2755}, {0x2757, 0x2757}, {0x2795, 0x2797}, {0x27b0, 0x27b0},
	{0x27bf, 0x27bf}, {0x2b1b, 0x2b1c}, {0x2b50, 0x2b50}, {0x2b55, 0x2b55},
	{0x1f004, 0x1f004}, {0x1f0cf, 0x1f0cf}, {0x1f18e, 0x1f18e}, {0x1f191, 0x1f19a},
	{0x1f200, 0x1f202}, {0x1f210, 0x1f23b}, {0x1f240, 0x1f248}, {0x1f250, 0x1f251},
	{0x1f260, 0x1f265}, {0x1f300, 0x1f320}, {0x1f32d, 0x1f335}, {0x1f337, 0x1f37c},
	{0x1f37e, 0x1f393}, {0x1f3a0, 0x1f3ca}, {0x1f3cf, 0x1f3d3}, {0x1f3e0, 0x1f3f0},
	{0x1f3f4, 0x1f3f4}, {0x1f3f8, 0x1f43e}, {0x1f440, 0x1f440}, {0x1f442, 0x1f4fc},
	{0x1f4ff, 0x1f53d}, {0x1f54b, 0x1f54e}, {0x1f550, 0x1f567}, {0x1f57a, 0x1f57a},
	{0x1f595, 0x1f596}, {0x1f5a4, 0x1f5a4}, {0x1f5fb, 0x1f64f}, {0x1f680, 0x1f6c5},
	{0x1f6cc, 0x1f6cc}, {0x1f6d0, 0x1f6d2}, {0x1f6d5, 0x1f6d7}, {0x1f6dc, 0x1f6df},
	{0x1f6eb, 0x1f6ec}, {0x1f6f4, 0x1f6fc}, {0x1f7e0, 0x1f7eb}, {0x1f7f0, 0x1f7f0},
	{0x1f90c, 0x1f93a}, {0x1f93c, 0x1f945}, {0x1f947, 0x1f9ff}, {0x1fa70, 0x1fa7c},
	{0x1fa80, 0x1fa88}, {0x1fa90, 0x1fabd}, {0x1fabf, 0x1fac5}, {0x1face, 0x1fadb},
	{0x1fae0, 0x1fae8}, {0x1faf0, 0x1faf8},
}

// isWideEmoji reports whether r is in one of the wideEmoji ranges.
func isWideEmoji(r rune) bool {
	i := sort.Search(len(wideEmoji), func(i int) bool { return wideEmoji[i][1] >= r })
	return i < len(wideEmoji) && wideEmoji[i][0] <= r
}

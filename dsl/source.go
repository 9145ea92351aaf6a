package dsl

import (
	"bytes"
	"sort"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/syncgen/syncgen/ir"
)

// sourceFile is one .sync file's text, with what diagnostics need to point
// into it.
type sourceFile struct {
	name  string // as shown in diagnostics
	src   []byte
	str   string // src as a string, which the diagnostics' snippets share
	lines []int  // byte offset of the start of each line
}

// newSourceFile keeps src with its line endings made uniform (see
// unifyLineEnds): every position, snippet and token is counted in it.
func newSourceFile(name string, src []byte) *sourceFile {
	src = unifyLineEnds(src)
	f := &sourceFile{name: name, src: src, str: string(src), lines: []int{0}}
	for i, c := range src {
		if c == '\n' {
			f.lines = append(f.lines, i+1)
		}
	}
	return f
}

// unifyLineEnds returns src with every lone CR (the line end of old Mac
// files) made an LF. LF, CRLF and CR all end a line: read with LF alone, a
// CR-only file was one line, which its first `//` comment swallowed whole.
// One byte for one keeps every offset, so diagnostics point into the file
// as it is; CRLF is left alone (the CR is whitespace before the LF). The
// caller's bytes are never changed: a copy is made when a lone CR is found.
func unifyLineEnds(src []byte) []byte {
	copied := false
	for i := bytes.IndexByte(src, '\r'); i >= 0; {
		if i+1 == len(src) || src[i+1] != '\n' {
			if !copied {
				src, copied = bytes.Clone(src), true
			}
			src[i] = '\n'
		}
		j := bytes.IndexByte(src[i+1:], '\r')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return src
}

// pos converts a byte offset into a position; offsets outside the file are
// clamped to it, so every diagnostic points inside the file.
func (f *sourceFile) pos(off int) ir.Pos {
	off = max(0, min(off, len(f.src)))
	line := sort.Search(len(f.lines), func(i int) bool { return f.lines[i] > off }) - 1
	line = max(line, 0)
	return ir.Pos{File: f.name, Offset: off, Line: line + 1, Col: off - f.lines[line] + 1}
}

// lineText returns line n (1-based) without its newline. It is a slice of
// the file's text, not a copy: every diagnostic keeps its line, and a
// file of one very long line may have thousands of them.
func (f *sourceFile) lineText(n int) string {
	if n < 1 || n > len(f.lines) {
		return ""
	}
	start := f.lines[n-1]
	end := len(f.str)
	if n < len(f.lines) {
		end = f.lines[n] - 1
	}
	return strings.TrimSuffix(f.str[start:end], "\r")
}

// text returns the source between two offsets.
func (f *sourceFile) text(a, b int) string {
	a = max(0, min(a, len(f.src)))
	b = max(a, min(b, len(f.src)))
	return f.str[a:b]
}

// diag builds a diagnostic about the bytes [start, end) of the file. The
// message and hint quote names and source, which may hold characters that
// do not print: they are escaped (see printable).
func (f *sourceFile) diag(sev Severity, start, end int, msg, hint string) Diagnostic {
	p := f.pos(start)
	e := f.pos(max(start, end))
	return Diagnostic{Severity: sev, Pos: p, End: e, Message: printable(msg), Hint: printable(hint), snippet: f.lineText(p.Line)}
}

func (f *sourceFile) errorAt(start, end int, msg, hint string) Diagnostic {
	return f.diag(Error, start, end, msg, hint)
}

// span is the byte range of a syntax node.
type span struct{ start, end int }

// spanOf returns the range between a node's participle positions.
func spanOf(pos, end lexer.Position) span {
	if end.Offset < pos.Offset {
		end = pos
	}
	return span{pos.Offset, end.Offset}
}

// quoteText quotes a piece of source for a message, cut to 40 bytes or
// fewer between two characters.
func quoteText(s string) string {
	return strconv.Quote(cutText(s, 40))
}

// maxCodeRunes bounds what code shows of a name or piece of source.
const maxCodeRunes = 80

// code formats a name for a message: `name`, with the characters that do
// not print escaped (see printable). A very long one (a generated
// name, a line without spaces) is cut: the caret shows where it is, and
// a message thousands of characters wide would hide everything else. The
// cut is in the middle: long names tend to differ at their ends
// (`....weight` and `....bias`), and a "did you mean" that showed only
// their common start would not show the difference.
func code(s string) string {
	if r := []rune(s); len(r) > maxCodeRunes {
		tail := (maxCodeRunes - 3) * 3 / 8
		s = string(r[:maxCodeRunes-3-tail]) + "..." + string(r[len(r)-tail:])
	}
	return "`" + printable(s) + "`"
}

package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
)

// parser is the participle parser of .sync files. Comments and whitespace
// are elided; the formatter reads comments from its own lexing pass.
var parser = participle.MustBuild[File](
	participle.Lexer(syncLexer),
	participle.Elide(tokComment, tokWhitespace),
	participle.UseLookahead(2),
)

// topKeywords start the top-level declarations; syntax error recovery
// resumes at the next line that starts with one of them.
var topKeywords = []string{"import", "tensor", "stream", "bucket", "init", "step", "run"}

// maxSyntaxErrors bounds the syntax errors reported for one file.
const maxSyntaxErrors = 20

// parseFile parses one file. With syntax errors it returns nil and every
// syntax error it could find: after an error it blanks the declaration that
// holds it (keeping offsets and newlines) and parses again, so that the
// user sees the errors of later declarations too.
func parseFile(f *sourceFile) (*File, Diagnostics) {
	toks := lex(f.name, f.src)
	if diags := lexErrors(f, toks); len(diags) > 0 {
		return nil, diags
	}
	src := bytes.Clone(f.src)
	var diags Diagnostics
	resumeAt := 0 // errors before this offset are echoes of a blanked one
	for range maxSyntaxErrors {
		ast, err := parser.ParseBytes(f.name, src)
		if err == nil {
			if len(diags) > 0 {
				return nil, diags
			}
			return ast, nil
		}
		d, off := syntaxDiagnostic(f, err)
		if off < resumeAt {
			break
		}
		diags = append(diags, d)
		start, end := recoveryRange(src, off)
		if start >= end {
			break
		}
		for i := start; i < end; i++ {
			if src[i] != '\n' {
				src[i] = ' '
			}
		}
		resumeAt = end
	}
	return nil, diags
}

// syntaxDiagnostic converts a participle error into a diagnostic and
// returns the offset it points at.
func syntaxDiagnostic(f *sourceFile, err error) (Diagnostic, int) {
	var ute *participle.UnexpectedTokenError
	if errors.As(err, &ute) {
		t := ute.Unexpected
		off := t.Pos.Offset
		if t.EOF() {
			off = len(f.src)
			return f.errorAt(off, off, "unexpected end of file", expectHint(ute.Expect)), off
		}
		msg := fmt.Sprintf("unexpected %s", quoteText(t.Value))
		return f.errorAt(off, off+len(t.Value), msg, expectHint(ute.Expect)), off
	}
	var perr participle.Error
	if errors.As(err, &perr) {
		off := perr.Position().Offset
		return f.errorAt(off, off+1, perr.Message(), ""), off
	}
	return f.errorAt(0, 0, err.Error(), ""), 0
}

// expectHint turns participle's "expected" list into a hint.
func expectHint(expect string) string {
	if expect == "" {
		return ""
	}
	return "expected " + expect
}

// recoveryRange returns the region to blank after a syntax error at off:
// from the start of the last line before off that begins with a top-level
// keyword (the declaration that holds the error) to the start of the next
// such line at or after off. An error at the very start of a declaration
// line belongs to the declaration above it, which the parser was still in.
func recoveryRange(src []byte, off int) (int, int) {
	off = min(off, len(src))
	starts := []int{}
	for ls := 0; ls <= len(src); {
		if startsTopLevel(src[ls:]) {
			starts = append(starts, ls)
		}
		nl := bytes.IndexByte(src[ls:], '\n')
		if nl < 0 {
			break
		}
		ls += nl + 1
	}
	start := 0
	for _, s := range starts {
		if s < off {
			start = s
		}
	}
	end := len(src)
	for _, s := range starts {
		if s >= off && s > start {
			end = s
			break
		}
	}
	return start, end
}

// startsTopLevel reports whether a line begins (in column 1) with a
// top-level keyword followed by a space or the end of the line.
func startsTopLevel(line []byte) bool {
	for _, kw := range topKeywords {
		if bytes.HasPrefix(line, []byte(kw)) {
			rest := line[len(kw):]
			if len(rest) == 0 || strings.ContainsRune(" \t\r\n{", rune(rest[0])) {
				return true
			}
		}
	}
	return false
}

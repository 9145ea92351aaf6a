package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// parser is the participle parser of .sync files. Comments and whitespace
// are elided; the formatter reads comments from its own lexing pass.
var parser = participle.MustBuild[File](
	participle.Lexer(definition{}),
	participle.Elide(tokComment, tokWhitespace),
	participle.UseLookahead(2),
)

// topKeywords start the top-level declarations; syntax error recovery
// resumes at the next line that starts with one of them.
var topKeywords = []string{"import", "tensor", "stream", "bucket", "init", "step", "run"}

// maxSyntaxErrors bounds the syntax errors reported for one file.
const maxSyntaxErrors = 20

// parseFile parses one file. With lexical or syntax errors it returns nil
// and every error it could find. Participle stops at the first syntax
// error, so when the file does not parse, each top-level declaration is
// parsed again on its own (a declaration starts with a top-level keyword at
// the start of a line, outside braces): the user then sees the first error
// of every broken declaration, not just the first of the file.
func parseFile(f *sourceFile) (*File, Diagnostics) {
	if d, ok := binaryFileError(f); ok {
		return nil, Diagnostics{d}
	}
	toks := lex(f.name, f.src)
	if diags := lexErrors(f, toks); len(diags) > 0 {
		return nil, diags
	}
	ptoks := participleTokens(toks)
	ast, err := parseTokens(ptoks, eofAt(f, toks, len(f.src)))
	if err == nil {
		return ast, nil
	}
	var diags Diagnostics
	starts := declarationStarts(toks)
	for i, start := range starts {
		end := len(toks)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		endOff := len(f.src)
		if end < len(toks) {
			endOff = toks[end].Pos.Offset
		}
		if _, err := parseTokens(ptoks[start:end], eofAt(f, toks, endOff)); err != nil {
			diags = append(diags, syntaxDiagnostic(f, toks, endOff, err))
			if len(diags) == maxSyntaxErrors {
				break
			}
		}
	}
	if len(diags) == 0 {
		// Each declaration parses alone but not together: report the
		// error of the whole file.
		diags = append(diags, syntaxDiagnostic(f, toks, len(f.src), err))
	}
	return nil, diags
}

// binaryFileError reports a file that holds a NUL byte: it is not text
// (most likely the compiled program, NAME_sync, given instead of its
// plan), and one error about that says more than the thousands of
// unexpected characters its bytes would make. The diagnostic shows no
// source line: a binary file's "line" can be megabytes long.
func binaryFileError(f *sourceFile) (Diagnostic, bool) {
	i := bytes.IndexByte(f.src, 0)
	if i < 0 {
		return Diagnostic{}, false
	}
	d := f.errorAt(i, i+1, "not a text file: it holds a NUL byte",
		"a .sync plan is UTF-8 text; is this a compiled program (NAME_sync) or another binary file?")
	d.snippet = ""
	return d, true
}

// parseTokens parses a sequence of tokens that ends with eof.
func parseTokens(toks []lexer.Token, eof lexer.Token) (*File, error) {
	pl, err := lexer.Upgrade(&tokenLexer{toks: toks, eof: eof}, tokenTypes[tokComment], tokenTypes[tokWhitespace])
	if err != nil {
		return nil, err
	}
	return parser.ParseFromLexer(pl)
}

// eofAt returns an end-of-input token at offset off of the file.
func eofAt(f *sourceFile, toks []token, off int) lexer.Token {
	i := sort.Search(len(toks), func(i int) bool { return toks[i].Pos.Offset >= off })
	if i < len(toks) {
		return lexer.EOFToken(toks[i].Pos)
	}
	pos := lexer.Position{Filename: f.name, Line: 1, Column: 1}
	if len(toks) > 0 {
		last := toks[len(toks)-1]
		pos = last.Pos
		pos.Advance(last.Value)
	}
	return lexer.EOFToken(pos)
}

// declarationStarts returns the indices of the tokens where top-level
// declarations start: 0, and every top-level keyword that is the first
// token of its line and outside braces.
func declarationStarts(toks []token) []int {
	starts := []int{0}
	depth, line := 0, 0
	for i, t := range toks {
		if t.Type == tokWhitespace || t.Type == tokComment {
			continue
		}
		first := t.Pos.Line != line
		line = t.Pos.Line
		switch {
		case t.Value == "{":
			depth++
		case t.Value == "}":
			depth = max(0, depth-1)
		case first && depth == 0 && t.Type == tokKeyword && slices.Contains(topKeywords, t.Value) && i > 0:
			starts = append(starts, i)
		}
	}
	return starts
}

// syntaxDiagnostic converts a participle error into a diagnostic. end is
// where the parsed tokens ended: an unexpected end of a declaration parsed
// on its own is an unexpected start of the next one (or the real end of
// the file).
func syntaxDiagnostic(f *sourceFile, toks []token, end int, err error) Diagnostic {
	off := 0
	var ute *participle.UnexpectedTokenError
	var perr participle.Error
	switch {
	case errors.As(err, &ute) && ute.Unexpected.EOF():
		off = end
	case errors.As(err, &ute):
		off = ute.Unexpected.Pos.Offset
	case errors.As(err, &perr):
		off = perr.Position().Offset
	}
	if o, ok := targetlessCollectiveInGroup(toks, off); ok {
		off = o
	}
	if d, ok := missingTensorPart(f, toks, off); ok {
		return d
	}
	if d, ok := missingTargetComma(f, toks, off); ok {
		return d
	}
	if o, ok := endOfContent(toks, off); ok {
		// An unexpected end of file is shown at the end of the last line
		// with content, so that the snippet shows that line.
		off = o
	}
	length := 0
	at := sort.Search(len(toks), func(i int) bool { return toks[i].Pos.Offset >= off })
	if at < len(toks) && toks[at].Pos.Offset == off && toks[at].Type != tokWhitespace {
		length = len(toks[at].Value)
	}
	msg, hint := explainSyntaxError(toks, off)
	return f.errorAt(off, off+length, msg, hint)
}

// targetlessCollectiveInGroup finds, when the syntax error at offset off is
// reported at a `group` (participle gives up on the whole group when a
// collective inside it has no target), the first collective of that group
// with no target, and returns its offset, so that the error says so
// instead of blaming the statement before the group.
func targetlessCollectiveInGroup(all []token, off int) (int, bool) {
	toks := significantTokens(all)
	at := sort.Search(len(toks), func(i int) bool { return toks[i].Pos.Offset >= off })
	if at+1 >= len(toks) || toks[at].Pos.Offset != off || toks[at].Value != "group" || toks[at+1].Value != "{" {
		return 0, false
	}
	depth := 0
	for i := at + 1; i < len(toks); i++ {
		switch v := toks[i].Value; {
		case v == "{":
			depth++
		case v == "}":
			if depth--; depth == 0 {
				return 0, false
			}
		case toks[i].Type == tokKeyword && isCollective(v):
			if i+1 == len(toks) || missingTarget(toks[i+1].Value) {
				return toks[i].Pos.Offset, true
			}
		}
	}
	return 0, false
}

// significantTokens returns the tokens other than whitespace and comments.
func significantTokens(all []token) []token {
	var toks []token
	for _, t := range all {
		if t.Type != tokComment && t.Type != tokWhitespace {
			toks = append(toks, t)
		}
	}
	return toks
}

// isCollective reports whether word is a collective's keyword.
func isCollective(word string) bool {
	_, ok := collectiveKinds[word]
	return ok
}

// missingTarget reports whether a token right after a collective's keyword
// means that the collective has no target: the end of a group or block, a
// `;` or a keyword.
func missingTarget(next string) bool {
	return next == "}" || next == ";" || slices.Contains(reservedWords, next)
}

// constructSyntax is how each construct is written, for hints.
var constructSyntax = map[string]string{
	"import":        "an import is written `import \"models/NAME\"` or `import \"./file.sync\"`",
	"tensor":        "a tensor is declared as `tensor NAME DTYPE[DIM, ...]`, optionally followed by `frozen`",
	"stream":        "a stream is declared as `stream NAME`, optionally followed by `priority high|low`",
	"bucket":        "a bucket is declared as `bucket NAME { PATTERN, ... }` followed by options: cap SIZE, first SIZE, order reverse|declared, wire DTYPE",
	"init":          "a block is written `init { STATEMENTS }`",
	"step":          "a block is written `step { STATEMENTS }`",
	"run":           "run settings are written `run steps N warmup N check every N` (or `check off`), each part optional",
	"backward":      "backward is written `backward DURATION on STREAM` (e.g. `backward 60ms on compute`)",
	"compute":       "compute is written `compute DURATION on STREAM` (e.g. `compute 20ms on compute`)",
	"allreduce":     "a collective is written `allreduce TARGET, ...` followed by options: op OP, on STREAM, after ready|STREAM",
	"broadcast":     "broadcast is written `broadcast TARGET, ... from RANK` followed by options: on STREAM, after ready|STREAM",
	"reduce":        "reduce is written `reduce TARGET, ... to RANK` followed by options: op OP, on STREAM, after ready|STREAM",
	"allgather":     "allgather is written `allgather TARGET, ...` followed by options: on STREAM, after ready|STREAM",
	"reducescatter": "reducescatter is written `reducescatter TARGET, ...` followed by options: op OP, on STREAM, after ready|STREAM",
	"group":         "a group is written `group { COLLECTIVES }`",
	"wait":          "wait is written `wait STREAM`",
}

// statementKeywords start the statements of a block.
var statementKeywords = []string{"backward", "compute", "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "group", "wait"}

// allKeywords are every keyword, for "did you mean" on a misspelt one.
var allKeywords = append(append([]string{"frozen", "priority", "cap", "first", "order", "wire", "op", "on", "after",
	"from", "to", "steps", "warmup", "check", "every", "off", "ready"}, topKeywords...), statementKeywords...)

// explainSyntaxError says what is wrong at offset off of a file that does
// not parse, from the tokens around it: which construct it is in, how that
// construct is written, and what a misspelt keyword may have meant.
func explainSyntaxError(all []token, off int) (string, string) {
	toks := significantTokens(all)
	at := sort.Search(len(toks), func(i int) bool { return toks[i].Pos.Offset >= off })
	depth := 0
	var opens []int      // the index of each open `{`
	var openers []string // the token before each open `{`
	bracket := -1        // the index of an open `[`, or -1
	for i, t := range toks[:at] {
		switch t.Value {
		case "{":
			depth++
			opens = append(opens, i)
			opener := ""
			if i > 0 {
				opener = toks[i-1].Value
			}
			openers = append(openers, opener)
			bracket = -1
		case "}":
			if depth > 0 {
				depth--
				opens = opens[:len(opens)-1]
				openers = openers[:len(openers)-1]
			}
			bracket = -1
		case "[":
			bracket = i
		case "]":
			bracket = -1
		}
	}
	// inStatements: the error is among the statements of a block or group
	// (not, say, in a bucket's pattern list, where `allreduce` is a name).
	inStatements := len(openers) > 0 && slices.Contains([]string{"init", "step", "group"}, openers[len(openers)-1])
	// The construct the error is in: the nearest keyword before it that
	// starts one (not a keyword used as a value, as in `on compute`). A
	// block's keyword found across its `{` means the error is where a
	// statement should start.
	construct, constructLine, inBody := "", 0, false
	for i := at - 1; i >= 0; i-- {
		v := toks[i].Value
		if v == "}" {
			if b, ok := bucketClosedAt(toks, i); ok {
				// After a bucket's patterns: among its options.
				construct, constructLine = "bucket", toks[b].Pos.Line
				break
			}
			inBody = depth > 0
			break
		}
		if v == "{" {
			inBody = true
			continue
		}
		if _, ok := constructSyntax[v]; ok && (i == 0 || !isOptionKey(toks[i-1].Value)) {
			construct, constructLine = v, toks[i].Pos.Line
			break
		}
	}
	isBlock := construct == "init" || construct == "step" || construct == "group"
	if isBlock && inBody || construct == "" && depth > 0 {
		construct = ""
		inBody = true
	}
	hint := constructSyntax[construct]
	if at >= len(toks) {
		return explainEOF(toks, opens, bracket, construct, constructLine, hint)
	}
	t := toks[at]
	msg := "unexpected " + tokenText(t)
	// A collective whose first target is missing or is a keyword: the
	// parser reports the keyword or the collective itself.
	kw, next := "", ""
	if _, ok := collectiveKinds[t.Value]; ok && at+1 < len(toks) {
		kw, next = t.Value, toks[at+1].Value
	} else if at > 0 {
		kw, next = toks[at-1].Value, t.Value
	}
	if _, ok := collectiveKinds[kw]; ok && (slices.Contains(reservedWords, next) || inStatements && missingTarget(next)) {
		hint := "targets are buckets, pieces like grads[0], tensors and patterns; quote a tensor named like a keyword: \"" + next + "\""
		if next == "}" || next == ";" {
			hint = "targets are buckets, pieces like grads[0], tensors and patterns, e.g. `" + kw + " grads`"
		}
		return fmt.Sprintf("%s needs a target before %s", kw, code(next)), hint
	}
	startsLine := at == 0 || toks[at-1].Pos.Line != t.Pos.Line
	keyword := ""
	if t.Type == tokWord && !slices.Contains(allKeywords, t.Value) {
		expected := expectedKeywords(construct, toks[max(at-1, 0)].Value)
		if startsLine {
			// A new statement or declaration may start here too.
			if inBody || depth > 0 {
				expected = append(expected, statementKeywords...)
			} else {
				expected = append(expected, topKeywords...)
			}
		}
		keyword = suggestKeyword(t.Value, expected)
	}
	if startsLine && keyword != "" {
		// Most likely a misspelt keyword starting a new line: an option
		// of the construct continued on this line, or a new statement or
		// declaration.
		if !slices.Contains(expectedKeywords(construct, toks[max(at-1, 0)].Value), keyword) {
			construct = ""
		}
	} else if startsLine && construct != "" && !isBlock && constructLine < t.Pos.Line {
		msg += fmt.Sprintf(": the %s on line %d is incomplete", construct, constructLine)
	}
	if construct == "" {
		if inBody || depth > 0 {
			hint = "a statement starts with one of: " + strings.Join(statementKeywords, ", ")
		} else {
			hint = "a declaration starts with one of: " + strings.Join(topKeywords, ", ")
		}
	}
	if keyword != "" {
		hint = "did you mean " + code(keyword) + "? " + hint
	}
	return msg, hint
}

// isOptionKey reports whether a keyword takes a value after it, so that a
// keyword after it (`on compute`) is a value, not a construct.
func isOptionKey(v string) bool {
	switch v {
	case "on", "after", "priority", "wire", "wait", "order", "op", "from", "to", "cap", "first", "steps", "warmup", "every", ",":
		return true
	}
	return false
}

// tokenText shows a token in a message.
func tokenText(t token) string {
	if t.Type == tokString {
		return "string " + quoteText(t.Value)
	}
	if len(t.Value) > 40 {
		return code(t.Value[:40] + "...")
	}
	return code(t.Value)
}

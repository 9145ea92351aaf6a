package dsl

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// The lexer of .sync files. It is deliberately coarse: every run of
// name-like characters is one Word token, whether it is a number (`64`,
// `-1`), a size (`1.5MiB`), a duration (`60ms`), a dtype, or a dotted
// tensor name with brace ranges and globs (`h.{0..47}.attn.*`). A word
// that is exactly a reserved keyword is a Keyword token; a keyword inside
// a dotted name (`encoder.layer.0.output.dense.weight`, `step.weight`) is
// just part of that Word. The checker interprets a Word by its place in
// the grammar (a size after `cap`, a dtype after a tensor name), where it
// can say precisely what is wrong with `cap 25Mib` or `f31[3]`.
//
// The token rules, in the order they are tried at each position (the
// first that matches wins), as regular expressions:
//
//	Comment     //[^\n]*  |  /\*(?:[^*]|\*+[^*/])*\*+/
//	String      "(?:\\.|[^"\\\n])*"
//	Word        (?:[A-Za-z0-9_*?\-]|\{[0-9]+\.\.[0-9]+\})(?:[A-Za-z0-9_*?.\-]|\{[A-Za-z0-9_*?.\-]*\.\.[A-Za-z0-9_*?.\-]*\})*
//	            (a Keyword when it is one of reservedWords)
//	NameWord    (?:[A-Za-z0-9_*?\-]|\{[0-9]+\.\.[0-9]+\}|\{[A-Za-z][A-Za-z0-9_]*\})(?:[A-Za-z0-9_*?.\-]|\{[A-Za-z0-9_*?.\-]*\.\.[A-Za-z0-9_*?.\-]*\}|\{[A-Za-z][A-Za-z0-9_]*\})*
//	            instead of Word right after the keyword `tensor` (comments
//	            and whitespace between them aside): a tensor's name, where
//	            `{i}` stands for a template's loop variable (h.{i}.attn.weight)
//	Punct       [{}\[\],;]
//	Whitespace  [ \t\r\n]+
//	BadString   "(?:\\.|[^"\\\n])*        an unterminated string
//	BadComment  /\*(?s:.*)                an unterminated block comment
//	Invalid     (?s:.)                    any other character
//
// Inside a word, braces around word characters with `..` in them are part
// of the word even when they are not a brace range (`c.{a..b}`, `c.{0..}`,
// `c.{-1..3}`), so that the checker can say what a range is, pointing at
// it, instead of the parser stumbling on a `{`. Nothing valid changes: a
// `{` glued to a word opens a bucket's patterns or a block, and neither a
// pattern nor a statement is a lone word with `..` in it.
//
// The name of a tensor declaration is the one place where the lexer looks
// back (at the token before it): there, braces around an identifier, a
// template's loop variable `{i}`, are part of the word too, at its start
// as well (`{i}.weight`). Elsewhere `b{a}` is still the word `b` and a
// `{` (`bucket b{a}` opens its patterns).
//
// The bad-token rules never appear in the grammar: they let the lexer go
// on past a lexical error, so that one pass reports all of them (see
// lexErrors). The lexer is written by hand rather than with participle's
// regexp lexer because it is about ten times faster, which matters for
// models with tens of thousands of tensors; lexer_test.go checks it
// against these rules compiled with lexer.MustSimple.
const (
	tokComment    = "Comment"
	tokString     = "String"
	tokWord       = "Word"
	tokKeyword    = "Keyword"
	tokPunct      = "Punct"
	tokWhitespace = "Whitespace"
	tokBadString  = "BadString"
	tokBadComment = "BadComment"
	tokInvalid    = "Invalid"
)

// reservedWords are lexed as Keyword tokens. The grammar never takes a
// Keyword as a value (a stream after `on`, a dtype, a duration) or as a
// collective target, so that an incomplete statement is reported where the
// next one starts instead of swallowing its keyword. Keywords can still be
// tensor names and patterns, and parts of dotted names; a tensor named
// exactly like one is targeted with quotes (`allreduce "wait"`). `compute`
// is not reserved: it is the usual name of the compute stream.
var reservedWords = []string{
	"import", "tensor", "stream", "bucket", "init", "step", "run",
	"cap", "first", "order", "wire", "op", "on", "after", "from", "to", "frozen", "priority",
	"backward", "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "group", "wait",
	"update", "unscale", "scaler",
}

// tokenTypes numbers the token types for participle (EOF is -1).
var tokenTypes = map[string]lexer.TokenType{
	"EOF": lexer.EOF, tokComment: -2, tokString: -3, tokWord: -4, tokKeyword: -5, tokPunct: -6,
	tokWhitespace: -7, tokBadString: -8, tokBadComment: -9, tokInvalid: -10,
}

// token is one lexed token.
type token struct {
	Type  string
	Value string
	Pos   lexer.Position
}

// end returns the offset just after the token.
func (t token) end() int { return t.Pos.Offset + len(t.Value) }

// lex splits src into tokens, comments and whitespace included. It never
// fails: characters that start no token become Invalid tokens.
func lex(filename string, src []byte) []token {
	s := string(src)
	// Count the tokens before making the slice: a token is large (its
	// position holds the file name), and growing the slice of a big file
	// cost more than scanning it twice.
	count := 0
	name := false // the next word is a tensor's name
	for i := 0; i < len(s); count++ {
		typ, n := scan(s, i, name)
		name = nextIsName(name, typ, s[i:i+n])
		i += n
	}
	toks := make([]token, 0, count)
	pos := lexer.Position{Filename: filename, Line: 1, Column: 1}
	name = false
	for pos.Offset < len(s) {
		typ, n := scan(s, pos.Offset, name)
		value := s[pos.Offset : pos.Offset+n]
		name = nextIsName(name, typ, value)
		toks = append(toks, token{Type: typ, Value: value, Pos: pos})
		pos.Advance(value)
	}
	return toks
}

// nextIsName reports whether the token after one of type typ and value
// value is in the name position of a tensor declaration (name: whether
// this one was): right after the keyword `tensor`, comments and
// whitespace aside.
func nextIsName(name bool, typ, value string) bool {
	if typ == tokWhitespace || typ == tokComment {
		return name
	}
	return typ == tokKeyword && value == "tensor"
}

// scan returns the type and length of the token at s[i:]; name says that
// it is in the name position of a tensor declaration, where a word may
// hold loop variables `{i}`.
func scan(s string, i int, name bool) (string, int) {
	c := s[i]
	switch {
	case c == '/' && i+1 < len(s) && s[i+1] == '/':
		n := strings.IndexByte(s[i:], '\n')
		if n < 0 {
			n = len(s) - i
		}
		return tokComment, n
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		if n := strings.Index(s[i+2:], "*/"); n >= 0 {
			return tokComment, n + 4
		}
		return tokBadComment, len(s) - i
	case c == '"':
		return scanString(s, i)
	case isWordStart(s, i) || name && loopRefLen(s, i) > 0:
		j := i
		for j < len(s) {
			if isWordByte(s[j]) {
				j++
			} else if n := braceGroupLen(s, j); n > 0 {
				j += n
			} else if n := loopRefLen(s, j); name && n > 0 {
				j += n
			} else {
				break
			}
		}
		if slices.Contains(reservedWords, s[i:j]) {
			return tokKeyword, j - i
		}
		return tokWord, j - i
	case strings.IndexByte("{}[],;", c) >= 0:
		return tokPunct, 1
	case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		j := i + 1
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return tokWhitespace, j - i
	}
	_, n := utf8.DecodeRuneInString(s[i:])
	return tokInvalid, n
}

// scanString scans a string starting at the quote s[i]: escapes are a
// backslash and any character but a newline; a newline, a backslash
// before a newline or the end of the file leave it unterminated.
func scanString(s string, i int) (string, int) {
	j := i + 1
	for j < len(s) {
		switch s[j] {
		case '"':
			return tokString, j + 1 - i
		case '\n':
			return tokBadString, j - i
		case '\\':
			if j+1 >= len(s) || s[j+1] == '\n' {
				return tokBadString, j - i
			}
			_, n := utf8.DecodeRuneInString(s[j+1:])
			j += 1 + n
		default:
			j++
		}
	}
	return tokBadString, j - i
}

// isWordByte reports whether c can continue a Word.
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '*' || c == '?' || c == '-' || c == '.'
}

// isWordStart reports whether a Word starts at s[i] (anything that can
// continue one but a dot, or a brace range).
func isWordStart(s string, i int) bool {
	return s[i] != '.' && isWordByte(s[i]) || braceRangeLen(s, i) > 0
}

// braceRangeLen returns the length of a brace range {N..M} at s[i:], or 0.
func braceRangeLen(s string, i int) int {
	if i >= len(s) || s[i] != '{' {
		return 0
	}
	j := i + 1
	digits := func() bool {
		start := j
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return j > start
	}
	if !digits() || !strings.HasPrefix(s[j:], "..") {
		return 0
	}
	j += 2
	if !digits() || j >= len(s) || s[j] != '}' {
		return 0
	}
	return j + 1 - i
}

// loopRefLen returns the length of a reference to a loop variable `{i}`
// at s[i:] (braces around a letter, then letters, digits and _), or 0.
func loopRefLen(s string, i int) int {
	if i+2 >= len(s) || s[i] != '{' || !isLetter(s[i+1]) {
		return 0
	}
	j := i + 2
	for j < len(s) && (isLetter(s[j]) || s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
		j++
	}
	if j >= len(s) || s[j] != '}' {
		return 0
	}
	return j + 1 - i
}

// isLetter reports whether c is an ASCII letter.
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// braceGroupLen returns the length of braces at s[i:] that hold word
// characters with `..` among them, or 0: a brace range {N..M}, or braces
// that look like one but are not (`{a..b}`, `{0..}`, `{-1..3}`).
func braceGroupLen(s string, i int) int {
	if i >= len(s) || s[i] != '{' {
		return 0
	}
	j := i + 1
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	if j >= len(s) || s[j] != '}' || !strings.Contains(s[i+1:j], "..") {
		return 0
	}
	return j + 1 - i
}

// definition is the lexer definition participle builds the grammar with.
// The parser is always fed tokens that lex already produced (see
// parseTokens); Lex is there to satisfy participle's interface.
type definition struct{}

// Symbols returns the token types.
func (definition) Symbols() map[string]lexer.TokenType { return tokenTypes }

// Lex lexes everything r holds.
func (definition) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	toks := lex(filename, src)
	end := lexer.Position{Filename: filename, Offset: len(src), Line: 1, Column: 1}
	if len(toks) > 0 {
		last := toks[len(toks)-1]
		end = last.Pos
		end.Advance(last.Value)
	}
	return &tokenLexer{toks: toks, eof: lexer.EOFToken(end)}, nil
}

// tokenLexer hands participle a slice of lexed tokens, converted one by
// one as participle reads them (a copy of a large file's tokens would
// add to the parser's memory). Whitespace and comments go too, for
// participle to elide: a node's EndPos is the start of the token after its
// last one, which must be that whitespace. The one context the lexer does not see:
// `after` right after the word `divide` is the bucket option's value
// (`divide after`), a word there, not the keyword that starts an option
// (the grammar never takes a keyword as a value).
type tokenLexer struct {
	toks []token
	eof  lexer.Token
	prev token // the last token handed out that is not whitespace or a comment
}

// Next returns the next token, then EOF forever.
func (l *tokenLexer) Next() (lexer.Token, error) {
	if len(l.toks) == 0 {
		return l.eof, nil
	}
	t := l.toks[0]
	l.toks = l.toks[1:]
	out := lexer.Token{Type: tokenTypes[t.Type], Value: t.Value, Pos: t.Pos}
	if t.Type == tokKeyword && t.Value == "after" && l.prev.Type == tokWord && l.prev.Value == "divide" {
		out.Type = tokenTypes[tokWord]
	}
	if t.Type != tokWhitespace && t.Type != tokComment {
		l.prev = t
	}
	return out, nil
}

// lexErrors reports the lexical errors of src, at most maxSyntaxErrors of
// them, and then, when there are more, how many more (as Render does past
// its limit): unterminated strings and block comments, and characters
// that start no token (adjacent invalid characters are reported once).
func lexErrors(f *sourceFile, toks []token) Diagnostics {
	var diags Diagnostics
	more, moreAt := 0, 0 // the errors past the limit, and where the first is
	// add reports an error, or counts it past the limit (without making a
	// diagnostic, which copies the source line).
	add := func(start, end int, msg, hint string) {
		if len(diags) < maxSyntaxErrors {
			diags = append(diags, f.errorAt(start, end, msg, hint))
			return
		}
		if more == 0 {
			moreAt = start
		}
		more++
	}
	sc := &lexScan{toks: toks}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.Type {
		case tokBadString:
			add(t.Pos.Offset, t.end(), "unterminated string", "a string ends with `\"` on the same line")
		case tokBadComment:
			add(t.Pos.Offset, t.Pos.Offset+2, "unterminated block comment", "close it with `*/`")
		case tokInvalid:
			j := i
			for j+1 < len(toks) && toks[j+1].Type == tokInvalid && toks[j+1].Value != "\n" {
				j++
			}
			text := f.text(t.Pos.Offset, toks[j].end())
			hint, nameEnd := sc.invalidHint(i, j)
			add(t.Pos.Offset, toks[j].end(), "unexpected character "+quoteText(text), hint)
			// When the hint quotes a whole name, the name's other invalid
			// characters (`tensor ü.λ`) need no error of their own.
			i = max(j, nameEnd)
		}
	}
	if more > 0 {
		// Where the errors that are not shown start, without the source
		// line: it is not about one of them.
		d := f.errorAt(moreAt, moreAt, fmt.Sprintf("... and %d more lexical errors from here on (a file reports at most %d; fix the ones above first)", more, maxSyntaxErrors), "")
		d.snippet = ""
		diags = append(diags, d)
	}
	return diags
}

// lexScan finds the hints of a file's lexical errors (invalidHint). It
// remembers what it found out about the run of glued tokens and the line
// of the last error, so that a file with errors all along one long line
// (a pasted base64 blob) takes linear time however many there are: the
// errors are visited in order, and each token is looked at a bounded
// number of times.
type lexScan struct {
	toks []token
	// run is the glued run of the last error that needed one (none when
	// its text is empty).
	run gluedRun
	// bracketAt is the first token that bracketOpen has not taken into
	// account, on line bracketLine: whether a `[` is open on that line.
	bracketAt, bracketLine int
	bracketOpen            bool
	// bracketIdx is the index of the last `[` that bracketOpen took
	// into account.
	bracketIdx int
	// No `)` of the line of toks[parenFrom] is in toks(parenFrom,
	// parenAt); toks[parenAt] is the first `)` after it on that line, or
	// not a `)` at all (another line or the end of the file).
	parenFrom, parenAt int
}

// gluedRun is a run of Word, Keyword and Invalid tokens with no space
// between them, toks[a..b]: the name or value that invalid characters are
// part of.
type gluedRun struct {
	a, b    int
	text    string
	letters bool // isLetters(text)
	globs   bool // text has `*`, `?` or `{`
	prev    int  // the significant token before the run, or -1
}

// isGlued reports whether toks[k] can be part of a glued run.
func isGlued(toks []token, k int) bool {
	return k >= 0 && k < len(toks) && (toks[k].Type == tokWord || toks[k].Type == tokKeyword || toks[k].Type == tokInvalid)
}

// gluedRunOf returns the glued run that holds toks[i].
func (sc *lexScan) gluedRunOf(i int) gluedRun {
	if r := sc.run; r.a <= i && i <= r.b && r.text != "" {
		return r
	}
	toks := sc.toks
	a, b := i, i
	for isGlued(toks, a-1) {
		a--
	}
	for isGlued(toks, b+1) {
		b++
	}
	var whole strings.Builder
	for _, t := range toks[a : b+1] {
		whole.WriteString(t.Value)
	}
	prev := a - 1
	for prev >= 0 && (toks[prev].Type == tokWhitespace || toks[prev].Type == tokComment) {
		prev--
	}
	text := whole.String()
	sc.run = gluedRun{a: a, b: b, text: text, letters: isLetters(text), globs: strings.ContainsAny(text, "*?{"), prev: prev}
	return sc.run
}

// inBrackets reports whether toks[i] is between a `[` and its `]` on the
// same line, like the function inBrackets, for i that never decrease from
// one call to the next.
func (sc *lexScan) inBrackets(i int) bool {
	if i < sc.bracketAt {
		return inBrackets(sc.toks, i)
	}
	for ; sc.bracketAt < i; sc.bracketAt++ {
		t := sc.toks[sc.bracketAt]
		if t.Pos.Line != sc.bracketLine {
			sc.bracketLine, sc.bracketOpen = t.Pos.Line, false
		}
		switch t.Value {
		case "[":
			sc.bracketOpen, sc.bracketIdx = true, sc.bracketAt
		case "]":
			sc.bracketOpen = false
		}
	}
	return sc.toks[i].Pos.Line == sc.bracketLine && sc.bracketOpen
}

// closingParen returns the index of the first `)` after toks[j] on the
// same line, or j, remembering how far it looked.
func (sc *lexScan) closingParen(j int) int {
	toks := sc.toks
	if !(sc.parenFrom <= j && j < sc.parenAt) {
		k := j + 1
		for k < len(toks) && toks[k].Pos.Line == toks[j].Pos.Line && !(toks[k].Type == tokInvalid && toks[k].Value == ")") {
			k++
		}
		sc.parenFrom, sc.parenAt = j, k
	}
	if k := sc.parenAt; k < len(toks) && toks[k].Pos.Line == toks[j].Pos.Line && toks[k].Type == tokInvalid && toks[k].Value == ")" {
		return k
	}
	return j
}

// punctuationHint says what the invalid characters text, ending at
// toks[j], are written as if they are another language's punctuation, or
// returns "". It returns the index of the last token the hint covers.
func (sc *lexScan) punctuationHint(text string, j int) (string, int) {
	h, ok := punctuationHints[text[:1]]
	if !ok {
		return "", j
	}
	if text[0] == '(' {
		// `f32(4)`: one error for the pair.
		j = sc.closingParen(j)
	}
	return h, j
}

// isOddSpace reports whether r is a Unicode space other than the ASCII
// ones, or an invisible character (zero-width space and joiners, word
// joiner, a byte order mark inside the file).
func isOddSpace(r rune) bool {
	switch r {
	case '\u200b', '\u200c', '\u200d', '\u2060', '\ufeff':
		return true
	}
	return r > unicode.MaxASCII && unicode.IsSpace(r)
}

// fullwidthOffset is the distance from the fullwidth forms U+FF01-U+FF5E
// to the ASCII characters they stand for.
const fullwidthOffset = 0xFEE0

// isFullwidthPunct reports whether r is the fullwidth form of ASCII
// punctuation (`［`, `，`, `：`), which input methods for East Asian
// languages type. Fullwidth letters and digits are letters and digits,
// which a quoted name may hold.
func isFullwidthPunct(r rune) bool {
	return r >= 0xFF01 && r <= 0xFF5E && !unicode.IsLetter(r) && !unicode.IsDigit(r)
}

// isLetters reports whether s is made of letters and digits only (a
// name such as `é` or `λ1` in a script other than ASCII).
func isLetters(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) < 0
}

// invalidHint suggests a fix for the invalid characters toks[i..j]: a byte
// order mark, bytes that are not UTF-8, an import path or a tensor name
// that needs quotes (`import models/resnet50`, `tensor attn/0 f32[4]`,
// `tensor ünï f32[4]`). When it quotes a name, nameEnd is the index of the
// name's last token; otherwise it is j.
func (sc *lexScan) invalidHint(i, j int) (hint string, nameEnd int) {
	toks := sc.toks
	var b strings.Builder
	for _, t := range toks[i : j+1] {
		b.WriteString(t.Value)
	}
	text := b.String()
	space := strings.IndexFunc(text, isOddSpace)
	switch {
	case toks[i].Pos.Offset == 0 && strings.HasPrefix(text, "\ufeff"):
		return "remove the byte order mark (BOM) at the start of the file: save it as UTF-8 without BOM", j
	case !utf8.ValidString(text):
		return "this is not UTF-8 text: save the file as UTF-8", j
	case space >= 0:
		r, _ := utf8.DecodeRuneInString(text[space:])
		return fmt.Sprintf("U+%04X is not an ordinary space (a non-breaking, zero-width or other Unicode space, often pasted from a web page); replace it with a space or delete it", r), j
	case strings.ContainsAny(text, typographicQuotes):
		return typographicQuoteHint(toks, i), lineEnd(toks, i)
	case strings.IndexFunc(text, isFullwidthPunct) >= 0:
		r, _ := utf8.DecodeRuneInString(text[strings.IndexFunc(text, isFullwidthPunct):])
		ascii := string(r - fullwidthOffset)
		what := fmt.Sprintf("%s (U+%04X) is the fullwidth form of %s, as an input method for Chinese, Japanese or Korean types it", code(string(r)), r, code(ascii))
		if h, ok := punctuationHints[ascii]; ok {
			// The ASCII character is not the language's either.
			return what + "; " + h, j
		}
		return what + ": write " + code(ascii), j
	}
	if next := j + 1; text == "." && next < len(toks) && toks[next].Type == tokWord && toks[next].Pos.Offset == toks[j].end() &&
		fractionRest.MatchString(toks[next].Value) {
		// `cap .5KiB`, `backward .5ms`: a number without its leading 0.
		return "a number starts with a digit: write " + code("0."+toks[next].Value), j
	}
	// The run of tokens with no space between them that holds the
	// characters, and the token before it.
	run := sc.gluedRunOf(i)
	if h, ok := sc.annotationHint(text, i, j, run); ok {
		return h, run.b
	}
	if h, ok := sc.sliceHint(text, i); ok {
		return h, j
	}
	if run.a == i && text == "+" && isDigits(strings.TrimPrefix(run.text, "+")) && sc.inBrackets(i) {
		// `f32[4, +4]`: a dimension with a sign, not a name.
		return sc.punctuationHint(text, j)
	}
	if run.prev < 0 {
		return sc.punctuationHint(text, j)
	}
	// A name: the invalid characters are glued to name characters (on
	// either side: `attn/0`, `ünï`), after a keyword or punctuation that
	// a name follows.
	switch p := toks[run.prev]; {
	case p.Type == tokKeyword && (p.Value == "bucket" || p.Value == "stream") && run.letters:
		return p.Value + " names are identifiers: ASCII letters, digits and _, not starting with a digit", run.b
	case p.Type == tokKeyword && p.Value == "import":
		return "an import path is a quoted string: import " + strconv.Quote(run.text), run.b
	case (run.a < i || run.b > j || run.letters) && !run.globs &&
		(p.Type == tokKeyword && (p.Value == "tensor" || isCollective(p.Value)) ||
			p.Type == tokPunct && (p.Value == "{" || p.Value == ",")):
		return "names with characters other than ASCII letters, digits, _ and dots are written in quotes: " + strconv.Quote(run.text), run.b
	}
	return sc.punctuationHint(text, j)
}

// annotationHint explains a `:` or `=` glued to the end of the name of a
// tensor declaration, before its dtype (`tensor a: f32[4]`, `tensor
// a: float32[4]`, `tensor a.b:f32[4]`: another language's type
// annotation): a tensor's name and dtype are separated by a space. A `:`
// glued to something other than a dtype (`tensor dense/kernel:0 f32[4]`,
// a TensorFlow name) is part of a name, which the quoting hint covers.
func (sc *lexScan) annotationHint(text string, i, j int, run gluedRun) (string, bool) {
	toks := sc.toks
	if text != ":" && text != "=" || run.prev < 0 || !isTensorKeyword(toks[run.prev]) || run.a == i {
		return "", false
	}
	// The dtype: glued to the `:`, or the next word of the line.
	from := j + 1
	glued := from <= run.b
	if !glued {
		for from < len(toks) && toks[from].Type == tokWhitespace && toks[from].Pos.Line == toks[j].Pos.Line {
			from++
		}
	}
	if from >= len(toks) || toks[from].Pos.Line != toks[j].Pos.Line || toks[from].Type != tokWord ||
		glued && !isDTypeWord(toks[from].Value) {
		return "", false
	}
	// The dtype (the language's name for another tool's, `float32`) and
	// its shape as written, when the shape closes soon on the same line.
	dtype := toks[from].Value
	if a, ok := dtypeAliases[foreignDType(dtype)]; ok && !isDTypeWord(dtype) {
		dtype = a
	}
	decl := dtype + "[SHAPE]"
	for k := from + 1; k < len(toks) && k <= from+16 && toks[k].Pos.Line == toks[j].Pos.Line; k++ {
		if toks[k].Value == "]" {
			if s := tokensText(toks[from+1 : k+1]); len(s) <= 40 {
				decl = dtype + s
			}
			break
		}
	}
	name := tokensText(toks[run.a:i])
	return "a tensor's name and its dtype are separated by a space, without " + code(text) + ": write " + code("tensor "+name+" "+decl), true
}

// sliceHint explains a `:` between the brackets after a collective's
// target (`allreduce g[0:2]`, a slice as Python writes it): a target names
// one piece or a whole bucket. A `:` in a tensor's shape (after a dtype)
// is left to the other hints.
func (sc *lexScan) sliceHint(text string, i int) (string, bool) {
	toks := sc.toks
	if text != ":" || !sc.inBrackets(i) {
		return "", false
	}
	// The `[`: the one inBrackets saw open, so that many `:` on one
	// line take linear time; or else found on the line, for an i below
	// where inBrackets had scanned.
	k := sc.bracketIdx
	if k >= i || toks[k].Value != "[" {
		for k = i - 1; k > 0 && toks[k].Value != "["; k-- {
		}
	}
	if k < 1 || toks[k].Value != "[" || toks[k-1].Type != tokWord && toks[k-1].Type != tokString || isDTypeWord(toks[k-1].Value) {
		return "", false
	}
	name := toks[k-1].Value
	return "a target names one piece, " + code(name+"[0]") + ", or every piece of a bucket, " + code(name) +
		"; list several pieces with commas: " + code(name+"[0], "+name+"[1]"), true
}

// tokensText returns the source text of toks.
func tokensText(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.Value)
	}
	return b.String()
}

// fractionRest matches what follows the point of a number written
// without its leading 0: digits and a unit, if any (`.5KiB`, `.5ms`,
// `.5`), not the rest of a name (`.5.weight`).
var fractionRest = regexp.MustCompile(`^[0-9]+[A-Za-z]*$`)

// inBrackets reports whether toks[i] is between a `[` and its `]` on the
// same line.
func inBrackets(toks []token, i int) bool {
	for k := i - 1; k >= 0 && toks[k].Pos.Line == toks[i].Pos.Line; k-- {
		switch toks[k].Value {
		case "[":
			return true
		case "]":
			return false
		}
	}
	return false
}

// typographicQuotes are quotation marks that word processors and web pages
// put where `"` was typed.
const typographicQuotes = "“”„‟«»‘’"

// typographicQuoteHint says to write the string that starts at the
// invalid token toks[i] with straight quotes.
func typographicQuoteHint(toks []token, i int) string {
	var line strings.Builder
	for _, t := range toks[i : lineEnd(toks, i)+1] {
		line.WriteString(t.Value)
	}
	_, n := utf8.DecodeRuneInString(line.String()) // the opening quote
	s := line.String()[n:]
	if k := strings.IndexAny(s, typographicQuotes); k >= 0 {
		s = s[:k]
	}
	return "strings are written in straight quotes `\"`, not typographic ones: " + strconv.Quote(strings.TrimSpace(s))
}

// lineEnd returns the index of the last token of toks[i]'s line.
func lineEnd(toks []token, i int) int {
	for i+1 < len(toks) && toks[i+1].Pos.Line == toks[i].Pos.Line {
		i++
	}
	return i
}

// punctuationHints say what other languages' punctuation is written as.
var punctuationHints = map[string]string{
	"#": "comments start with `//` (to the end of the line) or are written `/* ... */`",
	":": "declarations need no `:` or `=`: e.g. `tensor a f32[4]`, `step {`, `cap 25MiB`",
	"=": "declarations need no `:` or `=`: e.g. `tensor a f32[4]`, `step {`, `cap 25MiB`",
	"(": "a shape is written in square brackets, e.g. `f32[4, 4]`, and a block in braces, `step { ... }`",
	")": "a shape is written in square brackets, e.g. `f32[4, 4]`, and a block in braces, `step { ... }`",
	"+": "numbers are written without a `+` sign, e.g. `f32[4]`, `steps 10`",
}

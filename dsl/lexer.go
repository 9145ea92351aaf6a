package dsl

import (
	"github.com/alecthomas/participle/v2/lexer"
)

// The token types of the .sync language. The lexer is deliberately coarse:
// every run of name-like characters is one Word token, whether it is a
// keyword (`tensor`), a dotted tensor name with brace ranges and globs
// (`h.{0..47}.attn.*`), a number (`64`, `-1`), a size (`1.5MiB`) or a
// duration (`60ms`). Keywords are matched by value in the grammar, so a
// keyword inside a dotted name (`encoder.layer.0.output.dense.weight`,
// `step.weight`) is simply part of that name, and the checker interprets a
// Word by its place in the grammar (a size after `cap`, a dtype after the
// tensor name) where it can give a precise error.
const (
	tokComment    = "Comment"
	tokString     = "String"
	tokWord       = "Word"
	tokPunct      = "Punct"
	tokWhitespace = "Whitespace"
	// The bad-token rules never appear in the grammar: they let the lexer
	// go on past a lexical error so that one pass reports every one of
	// them with a precise message (see lexErrors).
	tokBadString  = "BadString"
	tokBadComment = "BadComment"
	tokInvalid    = "Invalid"
)

// syncLexer is the lexer of .sync files.
var syncLexer = lexer.MustSimple([]lexer.SimpleRule{
	{Name: tokComment, Pattern: `//[^\n]*|/\*(?:[^*]|\*+[^*/])*\*+/`},
	{Name: tokString, Pattern: `"(?:\\.|[^"\\\n])*"`},
	{Name: tokWord, Pattern: `(?:[A-Za-z0-9_*?\-]|\{[0-9]+\.\.[0-9]+\})(?:[A-Za-z0-9_*?.\-]|\{[0-9]+\.\.[0-9]+\})*`},
	{Name: tokPunct, Pattern: `[{}\[\],;]`},
	{Name: tokWhitespace, Pattern: `[ \t\r\n]+`},
	{Name: tokBadString, Pattern: `"(?:\\.|[^"\\\n])*`},
	{Name: tokBadComment, Pattern: `/\*(?s:.*)`},
	{Name: tokInvalid, Pattern: `(?s:.)`},
})

// symbols maps token type numbers to rule names.
var symbols = syncLexer.Symbols()

// token is one lexed token with its byte range.
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
	l, err := syncLexer.LexString(filename, string(src))
	if err != nil {
		return nil
	}
	names := map[lexer.TokenType]string{}
	for name, typ := range symbols {
		names[typ] = name
	}
	var toks []token
	for {
		t, err := l.Next()
		if err != nil || t.EOF() {
			break
		}
		toks = append(toks, token{Type: names[t.Type], Value: t.Value, Pos: t.Pos})
	}
	return toks
}

// lexErrors reports every lexical error of src: unterminated strings and
// block comments, and characters that start no token (adjacent invalid
// characters are reported once).
func lexErrors(f *sourceFile, toks []token) Diagnostics {
	var diags Diagnostics
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.Type {
		case tokBadString:
			diags = append(diags, f.errorAt(t.Pos.Offset, t.end(), "unterminated string", "a string ends with `\"` on the same line"))
		case tokBadComment:
			diags = append(diags, f.errorAt(t.Pos.Offset, t.Pos.Offset+2, "unterminated block comment", "close it with `*/`"))
		case tokInvalid:
			j := i
			for j+1 < len(toks) && toks[j+1].Type == tokInvalid && toks[j+1].Value != "\n" {
				j++
			}
			text := f.text(t.Pos.Offset, toks[j].end())
			diags = append(diags, f.errorAt(t.Pos.Offset, toks[j].end(), "unexpected character "+quoteText(text), ""))
			i = j
		}
	}
	return diags
}

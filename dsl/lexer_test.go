package dsl

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2/lexer"
)

// significant returns the type:value pairs of the tokens that are not
// whitespace or comments.
func significant(src string) []string {
	var out []string
	for _, t := range significantTokens(lex("t.sync", []byte(src))) {
		out = append(out, t.Type+":"+t.Value)
	}
	return out
}

func TestLexTokens(t *testing.T) {
	cases := []struct {
		src  string
		want string
	}{
		{`tensor h.{0..47}.attn.weight f16[1600, 4800] frozen`,
			`Keyword:tensor Word:h.{0..47}.attn.weight Word:f16 Punct:[ Word:1600 Punct:, Word:4800 Punct:] Keyword:frozen`},
		// Keywords inside dotted names are part of the name.
		{`tensor encoder.layer.0.output.dense.weight f32[4]`,
			`Keyword:tensor Word:encoder.layer.0.output.dense.weight Word:f32 Punct:[ Word:4 Punct:]`},
		{`tensor layer1.0.conv1.weight f32[64,3,7,7]`,
			`Keyword:tensor Word:layer1.0.conv1.weight Word:f32 Punct:[ Word:64 Punct:, Word:3 Punct:, Word:7 Punct:, Word:7 Punct:]`},
		{`bucket g { *, "embeddings.*", pooler.? } cap 1.5MiB first 512KiB`,
			`Keyword:bucket Word:g Punct:{ Word:* Punct:, String:"embeddings.*" Punct:, Word:pooler.? Punct:} Keyword:cap Word:1.5MiB Keyword:first Word:512KiB`},
		{`broadcast grads[3] from -1; wait comm`,
			`Keyword:broadcast Word:grads Punct:[ Word:3 Punct:] Keyword:from Word:-1 Punct:; Keyword:wait Word:comm`},
		{"a // line comment\n/* block\ncomment */ b", `Word:a Word:b`},
		{`tensor "odd name/with:chars" f16[10]`, `Keyword:tensor String:"odd name/with:chars" Word:f16 Punct:[ Word:10 Punct:]`},
		{`x @ "open`, `Word:x Invalid:@ BadString:"open`},
		{"/* open\n", `BadComment:/* open` + "\n"},
		// Braces with `..` inside a word are part of it, range or not;
		// other braces are punctuation.
		{`tensor c.{a..b}.w c{-1..3} c{0..} c{01..10}`, `Keyword:tensor Word:c.{a..b}.w Word:c{-1..3} Word:c{0..} Word:c{01..10}`},
		{`bucket b{a,b} b{ a..b } {a..b}`, `Keyword:bucket Word:b Punct:{ Word:a Punct:, Word:b Punct:} Word:b Punct:{ Word:a..b Punct:} Punct:{ Word:a..b Punct:}`},
		// In the name of a tensor declaration, and only there, braces
		// around an identifier (a template's loop variable) are part of
		// the word, at its start too; `for` and `in` are words.
		{"for i in 0..47 {\n tensor h.{i}.attn{j}_{k}.w f32[1]\n tensor /* c */ {i}.weight f32[1]\n}",
			`Word:for Word:i Word:in Word:0..47 Punct:{ Keyword:tensor Word:h.{i}.attn{j}_{k}.w Word:f32 Punct:[ Word:1 Punct:] Keyword:tensor Word:{i}.weight Word:f32 Punct:[ Word:1 Punct:] Punct:}`},
		{`bucket b{a} step{x} tensor a f32{i}`, `Keyword:bucket Word:b Punct:{ Word:a Punct:} Keyword:step Punct:{ Word:x Punct:} Keyword:tensor Word:a Word:f32 Punct:{ Word:i Punct:}`},
		{`tensor a{1} b{i}`, `Keyword:tensor Word:a Punct:{ Word:1 Punct:} Word:b Punct:{ Word:i Punct:}`},
	}
	for _, c := range cases {
		got := strings.Join(significant(c.src), " ")
		if got != c.want {
			t.Errorf("lex(%q)\n got %s\nwant %s", c.src, got, c.want)
		}
	}
}

func TestLexPositions(t *testing.T) {
	toks := lex("t.sync", []byte("tensor a f32[1]\n  stream comm"))
	var stream token
	for _, tk := range toks {
		if tk.Value == "stream" {
			stream = tk
		}
	}
	if stream.Pos.Line != 2 || stream.Pos.Column != 3 || stream.Pos.Offset != 18 {
		t.Errorf("stream at %+v, want line 2 col 3 offset 18", stream.Pos)
	}
}

func TestLexErrorsAll(t *testing.T) {
	src := "tensor a f32[1] @@\ntensor b: f32[1]\ntensor \"x f32[1]\n"
	f := newSourceFile("t.sync", []byte(src))
	diags := lexErrors(f, lex(f.name, f.src))
	if len(diags) != 3 {
		t.Fatalf("got %d lexical errors, want 3: %v", len(diags), diags)
	}
	if diags[0].Pos.Line != 1 || diags[0].Pos.Col != 17 || diags[0].End.Col != 19 {
		t.Errorf("first error at %v..%v, want 1:17..1:19", diags[0].Pos, diags[0].End)
	}
}

// referenceRules are the token rules specified in lexer.go's comment, in
// the order they are tried; the hand-written lex must agree with them.
// referenceNameWord replaces the Word rule in the name position of a
// tensor declaration.
var (
	referenceRules = []struct {
		name string
		re   *regexp.Regexp
	}{
		{tokComment, regexp.MustCompile(`^(?://[^\n]*|/\*(?:[^*]|\*+[^*/])*\*+/)`)},
		{tokString, regexp.MustCompile(`^"(?:\\.|[^"\\\n])*"`)},
		{tokWord, regexp.MustCompile(`^(?:[A-Za-z0-9_*?\-]|\{[0-9]+\.\.[0-9]+\})(?:[A-Za-z0-9_*?.\-]|\{[A-Za-z0-9_*?.\-]*\.\.[A-Za-z0-9_*?.\-]*\})*`)},
		{tokPunct, regexp.MustCompile(`^[{}\[\],;]`)},
		{tokWhitespace, regexp.MustCompile(`^[ \t\r\n]+`)},
		{tokBadString, regexp.MustCompile(`^"(?:\\.|[^"\\\n])*`)},
		{tokBadComment, regexp.MustCompile(`^/\*(?s:.*)`)},
		{tokInvalid, regexp.MustCompile(`^(?s:.)`)},
	}
	referenceNameWord = regexp.MustCompile(`^(?:[A-Za-z0-9_*?\-]|\{[0-9]+\.\.[0-9]+\}|\{[A-Za-z][A-Za-z0-9_]*\})(?:[A-Za-z0-9_*?.\-]|\{[A-Za-z0-9_*?.\-]*\.\.[A-Za-z0-9_*?.\-]*\}|\{[A-Za-z][A-Za-z0-9_]*\})*`)
)

// referenceLex lexes with referenceRules, the first rule that matches at
// each position winning (as participle's regexp lexer does), marking
// reserved words.
func referenceLex(src string) ([]token, error) {
	var out []token
	pos := lexer.Position{Filename: "t.sync", Line: 1, Column: 1}
	name := false // after the keyword `tensor`
	for pos.Offset < len(src) {
		rest := src[pos.Offset:]
		typ, n := "", 0
		for _, r := range referenceRules {
			re := r.re
			if r.name == tokWord && name {
				re = referenceNameWord
			}
			if m := re.FindStringIndex(rest); m != nil && m[1] > 0 {
				typ, n = r.name, m[1]
				break
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("no rule matches at %v", pos)
		}
		value := rest[:n]
		if typ == tokWord && slices.Contains(reservedWords, value) {
			typ = tokKeyword
		}
		if typ != tokWhitespace && typ != tokComment {
			name = typ == tokKeyword && value == "tensor"
		}
		out = append(out, token{Type: typ, Value: value, Pos: pos})
		pos.Advance(value)
	}
	return out, nil
}

// compareLexers fails when lex and the reference lexer disagree on src.
func compareLexers(t *testing.T, src string) {
	t.Helper()
	want, err := referenceLex(src)
	if err != nil {
		t.Fatalf("reference lexer: %v", err)
	}
	got := lex("t.sync", []byte(src))
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			var g, w token
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			t.Fatalf("token %d of %q: got %+v, want %+v", i, src, g, w)
		}
	}
}

func TestLexMatchesRules(t *testing.T) {
	srcs := []string{
		"", "a", "-", ".", "..", "{", "{0..1}", "{0..}", "a{0..1}b.{2..3}", "/", "/*/", "/**/", "/***/ x", "/* a */ b",
		"\"\\", "\"\\\n\"", "\"a\\\"b\"", "\"é\" ü \xff", "x\r\n\ty", "a..b", "1.5MiB", "-1", "grads[3]",
		"c.{a..b}", "c.{0..}x", "c{-1..3}", "c{..}", "c{.}", "c{a,b..c}", "c{x..y", "c{1..2}{3..}", "c{{1..2}}", "{a..b}", "c{a..b }",
		"tensor {i}", "tensor a{i}{j}.{0..1}{k}", "tensor\n//x\n{i}.w", "tensor {i", "tensor {i}}", "tensor {1}", "tensor {_i}", "tensor {a.b}", "tensor{i}",
		"tensor tensor {i}", "a{i}", "tensor \"{i}\" {i}", "for i in 0..3 { tensor h.{i}.w f32[1] }",
	}
	for _, g := range []string{"../examples/*.sync", "../stdlib/models/*.sync", "testdata/*/*.sync"} {
		files, _ := filepath.Glob(g)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, string(b))
		}
	}
	for _, s := range srcs {
		compareLexers(t, s)
	}
}

// FuzzLex checks the hand-written lexer against the reference rules.
func FuzzLex(f *testing.F) {
	for _, s := range []string{"tensor h.{0..3}.w f32[1] // c", "\"a\\\"\" /* x */ {1..2}", "a/b", "\"\\\n", "c.{a..b}{0..}x{-1..3}", "{01..10}", "for i in 0..3 { tensor h.{i}.w{j} f32[1] }", "tensor /**/ {i}{0..1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		compareLexers(t, src)
	})
}

// TestLexErrorsOnePerName checks that a name with several invalid
// characters gets one error, whose hint quotes the whole name.
func TestLexErrorsOnePerName(t *testing.T) {
	for _, src := range []string{"tensor ünï f32[4]\n", "tensor attn/0/w f32[4]\n", "import ./lib/x.sync\n", "tensor a f32(4)\n", "import \u201cmodels/x\u201d\n"} {
		f := newSourceFile("t.sync", []byte(src))
		if diags := lexErrors(f, lex(f.name, f.src)); len(diags) != 1 {
			t.Errorf("%q: %d lexical errors, want 1: %v", src, len(diags), diags)
		}
	}
}

// TestLexSliceHints checks the hint of every slice of a line, each about
// its own target: the `[` of each comes from lexScan's bracket state, not
// from a scan back along the line (which took quadratic time on a line of
// many).
func TestLexSliceHints(t *testing.T) {
	src := "step { allreduce g[0:1], hh[2:3]; allreduce x[1:2:3] }\n"
	f := newSourceFile("t.sync", []byte(src))
	var got []string
	for _, d := range lexErrors(f, lex(f.name, f.src)) {
		h, _, _ := strings.Cut(d.Hint, ", or")
		got = append(got, h)
	}
	want := []string{"a target names one piece, `g[0]`", "a target names one piece, `hh[0]`", "a target names one piece, `x[0]`", "a target names one piece, `x[0]`"}
	if !slices.Equal(got, want) {
		t.Errorf("hints %q, want %q", got, want)
	}
}

func TestLexErrorHints(t *testing.T) {
	for _, tc := range []struct{ src, hint string }{
		{"import models/resnet50\n", `an import path is a quoted string: import "models/resnet50"`},
		{"import ./lib/x.sync\n", `import "./lib/x.sync"`},
		{"tensor attn/0.w f32[4]\n", `written in quotes: "attn/0.w"`},
		{"tensor a f32[4]\nbucket b { a, x@y }\n", `written in quotes: "x@y"`},
		{"\ufefftensor a f32[4]\n", "byte order mark"},
		{"tensor a\xff f32[4]\n", "not UTF-8"},
		{"tensor ünï f32[4]\n", `written in quotes: "ünï"`},
		{"tensor é f32[4]\n", `written in quotes: "é"`},
		{"tensor a f32[4]\nbucket g { a, λ1 }\n", `written in quotes: "λ1"`},
		{"tensor a.λ f32[4]\n", `written in quotes: "a.λ"`},
		{"tensor a f32[4]\nstep { allreduce a\u00a0on comm }\n", "U+00A0 is not an ordinary space"},
		{"tensor a f32[4]\u200b\n", "U+200B is not an ordinary space"},
		// Other languages' punctuation, typographic quotes, a bucket
		// name in another script.
		{"# a comment\ntensor a f32[4]\n", "comments start with `//`"},
		{"step:\n", "declarations need no `:` or `=`"},
		{"tensor a = f32[4]\n", "declarations need no `:` or `=`"},
		{"tensor a f32(4)\n", "a shape is written in square brackets"},
		// A type annotation's `:` after a tensor's name, glued to the
		// dtype too; a `:` inside a name with no dtype after it is the
		// name's.
		{"tensor a: f32[4]\n", "separated by a space, without `:`: write `tensor a f32[4]`"},
		{"tensor a.b:f32[4, 2] frozen\n", "write `tensor a.b f32[4, 2]`"},
		{"tensor y: float32[4]\n", "write `tensor y f32[4]`"},
		{"tensor z= bf16\n", "without `=`: write `tensor z bf16[SHAPE]`"},
		{"tensor kernel:0 f32[4]\n", `written in quotes: "kernel:0"`},
		{"tensor a : f32[4]\n", "declarations need no `:` or `=`"},
		// Fullwidth punctuation that input methods for East Asian
		// languages type; the fullwidth form of punctuation the language
		// lacks gets that character's hint.
		{"tensor a f32\uff3b4\uff3d\n", "`\uff3b` (U+FF3B) is the fullwidth form of `[`, as an input method for Chinese, Japanese or Korean types it: write `[`"},
		{"tensor a f32[4\uff0c4]\n", "is the fullwidth form of `,`"},
		{"tensor a\uff1af32[4]\n", "is the fullwidth form of `:`, as an input method for Chinese, Japanese or Korean types it; declarations need no `:` or `=`"},
		{"tensor \uff41 f32[4]\n", "written in quotes: \"\uff41\""},
		// A slice of a bucket's pieces, as Python writes it.
		{"tensor a f32[4]\nstep { allreduce g[0:2] }\n", "a target names one piece, `g[0]`, or every piece of a bucket, `g`; list several pieces with commas: `g[0], g[1]`"},
		{"tensor a f32[0:2]\n", "declarations need no `:` or `=`"},
		{"import \u201cmodels/resnet50\u201d\n", `straight quotes ` + "`\"`" + `, not typographic ones: "models/resnet50"`},
		{"tensor a f32[4]\nstep { allreduce \u2018a\u2019 }\n", `not typographic ones: "a"`},
		{"bucket \u6876 { a }\n", "bucket names are identifiers: ASCII letters"},
		// A `+` sign on a number, which is written without one; in a
		// pattern list it is part of a name.
		{"tensor a f32[+4]\n", "numbers are written without a `+` sign"},
		{"tensor a f32[4, +4]\n", "numbers are written without a `+` sign"},
		{"run steps +5\n", "numbers are written without a `+` sign"},
		{"bucket g { a, +4 }\n", `written in quotes: "+4"`},
		// A number written without its leading 0; in a name the point
		// is part of the name.
		{"tensor a f32[4]\nbucket g { a } cap .5KiB\n", "a number starts with a digit: write `0.5KiB`"},
		{"step { backward .5ms }\n", "write `0.5ms`"},
		{"run steps .5\n", "write `0.5`"},
		{"tensor .5.weight f32[4]\n", `written in quotes: ".5.weight"`},
		{"tensor a f32[3] @@\n", ""},
		{"bucket c/d { a }\n", ""},
	} {
		f := newSourceFile("t.sync", []byte(tc.src))
		diags := lexErrors(f, lex(f.name, f.src))
		if len(diags) == 0 {
			t.Errorf("%q: no lexical error", tc.src)
			continue
		}
		if got := diags[0].Hint; tc.hint == "" && got != "" || !strings.Contains(got, tc.hint) {
			t.Errorf("%q: hint %q, want one containing %q", tc.src, got, tc.hint)
		}
	}
}

// TestLexScanMatchesScans checks that lexScan's incremental inBrackets and
// closingParen agree with scanning the line, for indices in increasing
// order as lexErrors asks.
func TestLexScanMatchesScans(t *testing.T) {
	closingParen := func(toks []token, j int) int {
		for k := j + 1; k < len(toks) && toks[k].Pos.Line == toks[j].Pos.Line; k++ {
			if toks[k].Type == tokInvalid && toks[k].Value == ")" {
				return k
			}
		}
		return j
	}
	for _, src := range []string{
		"tensor a f32[+4, +4] +4 [\n+4 ] [ +4\n(a(b)c) (d\n) (e)",
		"x [a] (b [c ( d ) ] e) (f\n[g (h) ]",
		"",
	} {
		toks := lex("t.sync", []byte(src))
		// Every index, and every second or third one (lexErrors skips
		// the tokens between errors).
		for step := 1; step <= 3; step++ {
			sc := &lexScan{toks: toks}
			for i := 0; i < len(toks); i += step {
				if got, want := sc.inBrackets(i), inBrackets(toks, i); got != want {
					t.Errorf("%q: inBrackets(%d) = %v, want %v", src, i, got, want)
				}
				if got, want := sc.closingParen(i), closingParen(toks, i); got != want {
					t.Errorf("%q: closingParen(%d) = %d, want %d", src, i, got, want)
				}
			}
		}
	}
}

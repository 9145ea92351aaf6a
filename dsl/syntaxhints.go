package dsl

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"
	"github.com/syncgen/syncgen/ir"
)

// Precise explanations of common syntax errors, from where participle
// stopped (syntaxContext: the partial tree it returned and the tokens
// there): a tensor declaration that lacks its name or dtype, a shape
// written otherwise, a missing comma between a collective's targets or a
// bucket's patterns, a block or pattern list left open, an unknown
// option, an unexpected end of file, and misspelt or abbreviated keywords.

// dtypeList is how messages list the dtypes.
const dtypeList = "f64 f32 f16 bf16 i64 i32 i8 u8"

// tensorForm is how a tensor declaration is written, for hints.
const tensorForm = "a tensor is declared as `tensor NAME DTYPE[DIMS]`"

// missingTensorPart explains a syntax error at the `[` of a tensor
// declaration that lacks its name (`tensor f32[4]`: the dtype was taken
// for the name), its dtype (`tensor a [4]`) or both (`tensor [4]`). The
// caret is where the missing part goes: on the dtype that should follow
// the name, or on the `[` that should follow the dtype.
func missingTensorPart(f *sourceFile, toks []token, at int, _ syntaxContext) (Diagnostic, bool) {
	if at < 1 || toks[at].Value != "[" {
		return Diagnostic{}, false
	}
	open := toks[at]
	shape := shapeText(f, toks, at)
	if isTensorKeyword(toks[at-1]) {
		return f.errorAt(open.Pos.Offset, open.end(),
			"tensor declaration: missing the tensor's name and element type before the shape",
			tensorForm+", e.g. `tensor NAME f32"+shape+"`"), true
	}
	if at < 2 || !isTensorKeyword(toks[at-2]) {
		return Diagnostic{}, false
	}
	x := toks[at-1]
	switch {
	case x.Type == tokWord && isDTypeWord(x.Value):
		return f.errorAt(x.Pos.Offset, x.end(),
			"tensor declaration: missing the tensor's name before its dtype "+code(x.Value),
			tensorForm+", e.g. `tensor NAME "+x.Value+shape+"`"), true
	case x.Type == tokWord || x.Type == tokKeyword || x.Type == tokString:
		return f.errorAt(open.Pos.Offset, open.end(),
			"tensor "+code(shortText(x.Value))+": missing the element type (f32, bf16, ...) before the shape",
			tensorForm+", e.g. `tensor "+shortText(x.Value)+" f32"+shape+"`; dtypes are "+dtypeList), true
	}
	return Diagnostic{}, false
}

// badRangeAtStart explains a syntax error at a `{` that starts a name
// with braces that are not a brace range (`tensor {a..b} f32[1]`): the
// lexer takes a valid range there as the start of a word, an invalid one
// not. Braces inside a name are part of its word, and the checker's
// (badRangeError).
func badRangeAtStart(f *sourceFile, toks []token, at int, _ syntaxContext) (Diagnostic, bool) {
	if toks[at].Value != "{" || at+2 >= len(toks) {
		return Diagnostic{}, false
	}
	inner, closing := toks[at+1], toks[at+2]
	if inner.Type != tokWord || inner.Pos.Offset != toks[at].end() || closing.Value != "}" || closing.Pos.Offset != inner.end() {
		return Diagnostic{}, false
	}
	text := f.text(toks[at].Pos.Offset, closing.end())
	if braceGroupLen(text, 0) != len(text) {
		return Diagnostic{}, false
	}
	return f.errorAt(toks[at].Pos.Offset, closing.end(), "invalid brace range "+code(text), rangeSyntaxHint), true
}

// shapeSyntax explains a syntax error inside the shape of a tensor
// declaration (`tensor a f32[- 4]`, `f32[4 4]`, `f32[4 * 4]`, `f32[4,]`),
// where the parser only sees an unexpected token: it says what is wrong
// with the dimensions, which are positive integers separated by commas.
func shapeSyntax(f *sourceFile, toks []token, at int, cx syntaxContext) (Diagnostic, bool) {
	n := cx.node
	if toks[at].Type == tokKeyword || n == nil || n.decl == nil || n.decl.Tensor == nil || n.decl.Tensor.DType == nil {
		// A keyword: the shape was left open (`f32[4` and a new line),
		// which the end-of-declaration explanation says.
		return Diagnostic{}, false
	}
	// `tensor NAME DTYPE [`: the `[` opens the tensor's shape.
	open := tokenIndex(toks, n.decl.Tensor.DType.EndPos.Offset)
	if open >= at || toks[open].Value != "[" {
		return Diagnostic{}, false
	}
	if n.end.Line > 0 {
		// The tensor is complete: a second pair of brackets, or not a shape error.
		return shapeInBrackets(f, toks, at, open)
	}
	t, prev := toks[at], toks[at-1]
	example := "e.g. `" + toks[open-1].Value + "[64, 3, 7, 7]`"
	hint := "dimensions are positive integers separated by commas, " + example
	start, msg := t.Pos.Offset, ""
	switch {
	case prev.Value == "-" && isDigits(t.Value):
		// `[- 4]`: a lone `-`, taken for a dimension, and then a number.
		start = prev.Pos.Offset
		msg = fmt.Sprintf("dimension `- %s` is not a positive integer", t.Value)
		hint = "a dimension counts elements: a whole number of at least 1, with no sign, " + example
	case t.Value == "," && prev.Value == "[":
		msg = "tensor shape: missing the first dimension before `,`"
	case t.Value == "," && at+1 < len(toks) && toks[at+1].Value == "]":
		msg = "tensor shape: a trailing `,` before `]`"
		hint = "remove the `,`; " + hint
	case t.Value == "," && at+1 < len(toks) && toks[at+1].Value == ",":
		msg = "tensor shape: an empty dimension between two commas"
	case t.Type == tokWord && slices.Contains([]string{"*", "x", "X", "-", "/"}, t.Value) && isDigits(prev.Value):
		// `[4 * 4]`: arithmetic is not evaluated.
		msg = fmt.Sprintf("tensor shape: unexpected %s: a dimension is one integer, not an expression", code(t.Value))
		hint = "write its value as one number, or separate the dimensions with commas, " + example
		if product, factors, ok := shapeProduct(toks, at-1); ok {
			hint = fmt.Sprintf("write the product, `%d`, or separate the dimensions with commas: `%s[%s]`",
				product, toks[open-1].Value, strings.Join(factors, ", "))
		}
	case t.Type == tokWord && isDigits(prev.Value) && isDigits(strings.TrimPrefix(t.Value, "-")):
		// The dimensions participle kept, then this one.
		var dims []string
		for _, d := range n.decl.Tensor.Dims {
			dims = append(dims, d.Text)
		}
		msg = fmt.Sprintf("dimensions are separated by commas: `%s[%s, %s]`", toks[open-1].Value, shortText(strings.Join(dims, ", ")), t.Value)
		if len(t.Value) == 3 {
			// `[1 024]`: digits grouped by a space.
			hint += fmt.Sprintf("; for one dimension, write the number without a space: `%s%s`", prev.Value, t.Value)
		}
	default:
		msg = "tensor shape: unexpected " + tokenText(t)
	}
	return f.errorAt(start, t.end(), msg, hint), true
}

// shapeInBrackets explains a shape written in brackets per dimension, as
// in C (`tensor a f32[4][4]`): the second `[`, toks[at], right after the
// shape of a tensor declaration that opens at toks[open]. A shape is one
// pair of brackets.
func shapeInBrackets(f *sourceFile, toks []token, at, open int) (Diagnostic, bool) {
	if toks[at].Value != "[" || toks[at-1].Value != "]" || toks[at-1].end() != toks[at].Pos.Offset {
		return Diagnostic{}, false
	}
	// The dimensions of every pair, up to the last `]` of the line.
	var dims []string
	for i := open; i < len(toks) && toks[i].Pos.Line == toks[at].Pos.Line; i++ {
		switch v := toks[i].Value; {
		case isDigits(v):
			dims = append(dims, v)
		case v == "]" && (i+1 == len(toks) || toks[i+1].Value != "["):
			return f.errorAt(toks[at].Pos.Offset, toks[at].end(),
				"tensor shape: one pair of brackets holds all the dimensions",
				fmt.Sprintf("write `%s[%s]`", toks[open-1].Value, strings.Join(dims, ", "))), true
		case v != "[" && v != "]" && v != ",":
			return Diagnostic{}, false
		}
	}
	return Diagnostic{}, false
}

// shapeProduct multiplies the factors of a product written in a shape,
// `3 x 224 x 224` or `4 * 4`, starting at toks[i]; ok is false when it is
// not a product of small numbers.
func shapeProduct(toks []token, i int) (product int64, factors []string, ok bool) {
	product = 1
	for ; i < len(toks); i += 2 {
		n, err := strconv.ParseInt(toks[i].Value, 10, 32)
		if err != nil || !isDigits(toks[i].Value) {
			return 0, nil, false
		}
		product *= n
		factors = append(factors, toks[i].Value)
		if product > math.MaxInt32 || len(factors) > 8 {
			return 0, nil, false
		}
		if i+1 >= len(toks) || !slices.Contains([]string{"*", "x", "X"}, toks[i+1].Value) {
			break
		}
	}
	return product, factors, len(factors) > 1
}

// isDigits reports whether s is a non-empty run of decimal digits.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// isTensorKeyword reports whether t is the keyword `tensor` (not a tensor
// named "tensor" in quotes, nor part of a dotted name).
func isTensorKeyword(t token) bool {
	return t.Type == tokKeyword && t.Value == "tensor"
}

// isDTypeWord reports whether a word is a dtype, in any case.
func isDTypeWord(w string) bool {
	_, ok := ir.ParseDType(strings.ToLower(w))
	return ok
}

// shapeText returns the shape starting at the `[` toks[at] as written,
// when it is closed on the same line and short, or else "[DIMS]".
func shapeText(f *sourceFile, toks []token, at int) string {
	for i := at + 1; i < len(toks) && i < at+16 && toks[i].Pos.Line == toks[at].Pos.Line; i++ {
		if toks[i].Value == "]" {
			if s := f.text(toks[at].Pos.Offset, toks[i].end()); len(s) <= 40 {
				return s
			}
			break
		}
	}
	return "[DIMS]"
}

// shortText shortens a long name for a message to 40 bytes or fewer,
// cut between two characters.
func shortText(s string) string {
	return cutText(s, 40)
}

// missingComma explains a syntax error at a name right after the targets
// of a collective (`allreduce g b`) or in the pattern list of a bucket
// (`bucket g { a b }`), as participle kept them: most likely a missing
// comma. A bucket option there (`bucket g { a cap 1MiB`), or a
// declaration that starts a line taken for a pattern, means the list was
// not closed, unless a tensor has that name. A word that looks like a
// misspelt option or statement keyword (`allreduce g aftr ready`) is left
// to explainSyntaxError, unless a tensor or bucket has that name.
func missingComma(f *sourceFile, toks []token, at int, cx syntaxContext) (Diagnostic, bool) {
	if at == 0 || cx.node == nil {
		return Diagnostic{}, false
	}
	t, prev, n := toks[at], toks[at-1], cx.node
	var first, last lexer.Position
	switch {
	case n.stmt != nil && n.stmt.Collective != nil && cx.complete && len(n.stmt.Collective.Options) == 0 && n.end.Offset == prev.end():
		// A word that could be a name, not a number, size or duration.
		if !(t.Type == tokWord && !strings.ContainsRune("0123456789-", rune(t.Value[0])) || t.Type == tokString) {
			return Diagnostic{}, false
		}
		if t.Type == tokWord && !isDeclared(toks, t.Value) {
			if expected := keywordsAt(toks, at, cx); slices.Contains(expected, t.Value) || suggestKeyword(t.Value, expected) != "" {
				return Diagnostic{}, false
			}
		}
		targets := n.stmt.Collective.Targets
		first, last = targets[0].Pos, targets[len(targets)-1].Pos
	case n.decl != nil && n.decl.Bucket != nil && n.open != nil && len(n.decl.Bucket.Patterns) > 0:
		patterns := n.decl.Bucket.Patterns
		first, last = patterns[0].Pos, patterns[len(patterns)-1].Pos
		if t.Type != tokWord && t.Type != tokKeyword && t.Type != tokString || patterns[len(patterns)-1].EndPos.Offset != prev.end() {
			return Diagnostic{}, false
		}
		// The list not closed before a bucket option, or before a
		// declaration that starts a line, whether the parser stopped at
		// it (`bucket g { a` and then `stream comm`) or took it for a
		// pattern after a comma (`bucket g { a,` and then `stream comm`).
		before := -1
		if t.Type == tokKeyword && slices.Contains(expectedKeywords("bucket", ""), t.Value) {
			before = at
		} else if t.Type == tokKeyword && slices.Contains(topKeywords, t.Value) && t.Pos.Line != prev.Pos.Line {
			before = at
		} else if prev.Type == tokKeyword && slices.Contains(topKeywords, prev.Value) && at >= 2 && toks[at-2].Pos.Line != prev.Pos.Line {
			before = at - 1
		}
		if before >= 0 && !isDeclared(toks, toks[before].Value) {
			b := toks[before]
			return f.errorAt(b.Pos.Offset, b.end(),
				fmt.Sprintf("the pattern list of bucket %s opened on line %d is not closed before %s", code(shortText(n.decl.Bucket.Name.source())), toks[n.open.at].Pos.Line, code(b.Value)),
				"add `}` after the last pattern; "+constructSyntax["bucket"]), true
		}
	default:
		return Diagnostic{}, false
	}
	// The names so far, or the last one when they are long.
	names := f.text(first.Offset, prev.end())
	if len(names) > 40 {
		names = "..., " + shortText(f.text(last.Offset, prev.end()))
	}
	if n.keyword != "bucket" {
		msg := fmt.Sprintf("targets are separated by commas: `%s %s, %s`", n.keyword, names, shortText(t.Value))
		return f.errorAt(t.Pos.Offset, t.end(), msg, constructSyntax[n.keyword]), true
	}
	rest := " }"
	if at+1 < len(toks) && toks[at+1].Value != "}" {
		rest = ", ... }"
	}
	msg := fmt.Sprintf("patterns are separated by commas: `bucket %s { %s, %s%s`", shortText(n.decl.Bucket.Name.source()), names, shortText(t.Value), rest)
	return f.errorAt(t.Pos.Offset, t.end(), msg, constructSyntax["bucket"]), true
}

// isDeclared reports whether a tensor or bucket is declared with name,
// as written, in the tokens.
func isDeclared(toks []token, name string) bool {
	for i := 1; i < len(toks); i++ {
		if toks[i].Value == name && toks[i-1].Type == tokKeyword && (toks[i-1].Value == "tensor" || toks[i-1].Value == "bucket") {
			return true
		}
	}
	return false
}

// explainEOF says what is missing at an unexpected end of file: the value
// of an option that ends the file outside any brackets, the `]` of an open
// `[`, the `}` of the innermost open block, or the rest of an incomplete
// construct.
func explainEOF(toks []token, cx syntaxContext, hint string) (string, string) {
	const msg = "unexpected end of file"
	if m, h, ok := missingValue(toks, len(toks), cx.construct, hint); ok && len(cx.opens) == 0 && cx.bracket < 0 {
		return m, h
	}
	opens := cx.opens
	switch {
	case cx.bracket >= 0:
		line := toks[cx.bracket].Pos.Line
		h := fmt.Sprintf("add `]` to close the `[` on line %d", line)
		if hint != "" {
			h += "; " + hint
		}
		return fmt.Sprintf("%s: the `[` on line %d is never closed", msg, line), h
	case len(opens) > 0:
		innermost := opens[len(opens)-1]
		line := toks[innermost.at].Pos.Line
		h := fmt.Sprintf("add `}` to close the `{` on line %d", line)
		if len(opens) > 1 {
			// The lines of the outer `{`, each once and at most a few:
			// a generated file can leave thousands open on one line.
			var outer []string
			for _, o := range opens[:len(opens)-1] {
				l := fmt.Sprint(toks[o.at].Pos.Line)
				if !slices.Contains(outer, l) {
					outer = append(outer, l)
				}
			}
			if n := len(outer); n > 5 {
				outer = append(outer[:5], fmt.Sprintf("and %d more", n-5))
			}
			where := "line " + strings.Join(outer, ", ")
			if len(outer) < len(opens)-1 {
				where = fmt.Sprintf("%d of them, on line %s", len(opens)-1, strings.Join(outer, ", "))
			}
			h += fmt.Sprintf(", and one `}` for each `{` still open before it (%s)", where)
		}
		return fmt.Sprintf("%s: %s opened on line %d is never closed", msg, innermost.what, line), h
	case cx.construct != "":
		return fmt.Sprintf("%s: the %s on line %d is incomplete", msg, cx.construct, cx.line), hint
	}
	return msg, hint
}

// constructOptions are the option keywords each construct takes: a
// tensor's, stream's and bucket's, a statement's, the scaler's and run's
// (after run's `check` and `checkpoint`, see expectedKeywords), in the
// order the formatter writes them. TestConstructOptionsAreTheCheckers
// checks them against what the checker accepts.
var constructOptions = map[string][]string{
	"tensor":        {"frozen"},
	"stream":        {"priority"},
	"bucket":        {"cap", "first", "order", "wire", "divide"},
	"run":           {"steps", "warmup", "check", "checkpoint", "to", "keep"},
	"backward":      {"on", "after", "for"},
	"compute":       {"on", "after"},
	"allreduce":     {"op", "algo", "into", "on", "after"},
	"broadcast":     {"from", "into", "on", "after"},
	"reduce":        {"to", "op", "into", "on", "after"},
	"allgather":     {"into", "on", "after"},
	"reducescatter": {"op", "into", "on", "after"},
	"update":        {"lr", "momentum", "weight_decay", "beta1", "beta2", "eps", "master", "on", "after"},
	"unscale":       {"agree", "on", "after"},
	"barrier":       {"on", "after"},
	"scaler":        {"init", "growth", "backoff", "interval", "hysteresis", "min", "max"},
}

// expectedKeywords returns the keywords that may come next in a construct
// (the keyword that starts it, "" when unknown), after the token prev:
// its options, or what follows run's `check`.
func expectedKeywords(construct, prev string) []string {
	switch {
	case construct == "run" && prev == "check":
		return []string{"every", "off"}
	case construct == "run" && prev == "checkpoint":
		return []string{"every"}
	}
	return slices.Clone(constructOptions[construct])
}

// suggestKeyword returns the keyword a misspelt or abbreviated word most
// likely stands for: the likeliest of the keywords expected there (see
// expectedKeyword), else the closest of all keywords; "" when none is
// close.
func suggestKeyword(word string, expected []string) string {
	if k := expectedKeyword(word, expected); k != "" {
		return k
	}
	return suggest(word, allKeywords)
}

// expectedKeyword returns the keyword of expected that a misspelt or
// abbreviated word most likely stands for, or "": the closest one, else
// the only one it is the start of (`prio` for `priority`; two letters at
// least), else the only long one two edits away (`evr` for `every`; three
// letters at least). suggest allows one edit for words this short; where
// a keyword is expected, two are still a likely typo.
func expectedKeyword(word string, expected []string) string {
	if k := suggest(word, expected); k != "" {
		return k
	}
	w := strings.ToLower(word)
	prefix := func(c string) bool { return len(w) >= 2 && c != w && strings.HasPrefix(c, w) }
	near := func(c string) bool { return len(w) >= 3 && len(c) >= 5 && editDistance(w, c) <= 2 }
	for _, match := range []func(string) bool{prefix, near} {
		var found []string // each keyword once: expected may repeat one
		for _, c := range expected {
			if match(c) && !slices.Contains(found, c) {
				found = append(found, c)
			}
		}
		if len(found) == 1 {
			return found[0]
		}
	}
	return ""
}

// declarationInBlock explains a syntax error at a top-level keyword that
// starts a line inside a block or group (participle stops there expecting
// the block's `}`): the block opened before it is not closed, when no `}`
// closes it later, or else the declaration is inside it.
func declarationInBlock(f *sourceFile, toks []token, at int, cx syntaxContext) (Diagnostic, bool) {
	t := toks[at]
	if !cx.inStatements || at == 0 || toks[at-1].Pos.Line == t.Pos.Line ||
		!(t.Type == tokKeyword && slices.Contains(topKeywords, t.Value) || startsTemplate(t, toks[at-1])) {
		return Diagnostic{}, false
	}
	open := cx.opens[len(cx.opens)-1]
	msg := fmt.Sprintf("unexpected %s: %s opened on line %d is not closed", tokenText(t), open.what, toks[open.at].Pos.Line)
	hint := fmt.Sprintf("add `}` before line %d to close it", t.Pos.Line)
	depth := len(cx.opens)
	for i := at; i < len(toks) && depth > 0; i++ {
		depth += braceDelta[toks[i].Value]
	}
	if depth == 0 {
		// A `}` later closes the block: the declaration is inside it.
		msg = fmt.Sprintf("unexpected %s inside %s opened on line %d: a declaration starts outside any block", tokenText(t), open.what, toks[open.at].Pos.Line)
		hint = "move it before or after the block; a statement starts with one of: " + strings.Join(statementKeywords, ", ")
	}
	return f.errorAt(t.Pos.Offset, t.end(), msg, hint), true
}

// optionSynonyms are other tools' words for an option (NCCL's and
// PyTorch's root, dst, stream, dtype), by what they mean here.
var optionSynonyms = map[string]string{
	"root": "from", "src": "from", "source": "from", "dst": "to", "dest": "to", "destination": "to",
	"stream": "on", "reduce_op": "op", "reduction": "op", "dtype": "wire", "type": "wire",
}

// fixedOptimizerOptions are torch.optim's options that syncgen's
// optimizers keep at PyTorch's default, with what they are here.
var fixedOptimizerOptions = map[string]string{
	"dampening": "syncgen's sgd is torch.optim.SGD with dampening 0, its default",
	"nesterov":  "syncgen's sgd is torch.optim.SGD without Nesterov momentum, its default",
	"amsgrad":   "syncgen's adamw is torch.optim.AdamW without AMSGrad, its default",
	"maximize":  "syncgen's optimizers minimise, as torch.optim's do by default",
}

// unknownOption explains a syntax error at a word WORD, followed by a
// value on its line, after a complete statement or bucket: `broadcast g
// root 0`, `compute 20ms reads g`. Read as a missing comma between targets
// it would send the user the wrong way: it is an unknown option, named
// with the option it likely stands for and the options the construct
// takes. A misspelt option (`aftr ready`) is left to explainSyntaxError.
func unknownOption(f *sourceFile, toks []token, at int, cx syntaxContext) (Diagnostic, bool) {
	if at+1 >= len(toks) || toks[at].Type != tokWord || toks[at+1].Type != tokWord || toks[at+1].Pos.Line != toks[at].Pos.Line {
		return Diagnostic{}, false
	}
	t, value := toks[at], toks[at+1]
	construct := cx.construct
	opts := expectedKeywords(construct, "")
	// Not inside a bucket's pattern list, where words are patterns.
	inList := len(cx.opens) > 0 && (!cx.inStatements || cx.at < cx.opens[len(cx.opens)-1].at)
	// Only on the construct's line, and not after a `;` that ends it: a
	// new statement or declaration starts there.
	if !cx.complete || inList || construct == "run" || len(opts) == 0 || cx.line != t.Pos.Line || startsItem(toks, at) ||
		isDeclared(toks, t.Value) || expectedKeyword(t.Value, opts) != "" {
		return Diagnostic{}, false
	}
	var takes []string
	for _, o := range opts {
		takes = append(takes, strings.TrimSpace(o+" "+optionValue(construct, o)))
	}
	hint := fmt.Sprintf("%s takes: %s", construct, strings.Join(takes, ", "))
	mean := optionSynonyms[strings.ToLower(t.Value)]
	switch {
	case mean == "wire" && construct != "bucket":
		bucket := "its bucket"
		if cx.at+1 < at && toks[cx.at+1].Type == tokWord {
			bucket = "bucket " + code(shortText(toks[cx.at+1].Value))
		}
		hint = fmt.Sprintf("a collective sends its tensors' dtype, or the `wire` dtype of their bucket: write `wire %s` on %s; %s", shortText(value.Value), bucket, hint)
	case slices.Contains(opts, mean):
		hint = fmt.Sprintf("did you mean `%s %s`? %s", mean, shortText(value.Value), hint)
	case construct == "update" && fixedOptimizerOptions[strings.ToLower(t.Value)] != "":
		hint = fixedOptimizerOptions[strings.ToLower(t.Value)] + "; " + hint
	}
	return f.errorAt(t.Pos.Offset, t.end(), fmt.Sprintf("unknown option %s of %s", code(t.Value), construct), hint), true
}

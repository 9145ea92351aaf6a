package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
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
// resumes at the next line that starts with one of them (`for`, which
// starts a template, is a word there, not a reserved one: see
// startsTemplate).
var topKeywords = []string{"import", "tensor", "stream", "bucket", "scaler", "init", "step", "run", "for", "ranks"}

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
	ast, err := parseTokens(toks, eofAt(f, toks, len(toks)))
	if err == nil {
		return ast, nil
	}
	// The explainers look at significant tokens only: made once here, not
	// per error, so that a large broken file costs one copy.
	sig := significantTokens(toks)
	var diags Diagnostics
	starts := append(declarationStarts(toks), len(toks))
	for i, start := range starts[:len(starts)-1] {
		end := starts[i+1]
		if part, err := parseTokens(toks[start:end], eofAt(f, toks, end)); err != nil {
			diags = append(diags, syntaxDiagnostic(f, sig, part, toks[start].Pos.Offset, err))
			if len(diags) == maxSyntaxErrors {
				break
			}
		}
	}
	if len(diags) == 0 {
		// Each declaration parses alone but not together: report the
		// error of the whole file.
		diags = append(diags, syntaxDiagnostic(f, sig, ast, 0, err))
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
	if bytes.HasPrefix(f.src, []byte{0xff, 0xfe}) || bytes.HasPrefix(f.src, []byte{0xfe, 0xff}) {
		// UTF-16's byte order mark: text, in an encoding whose ASCII
		// characters carry a NUL byte each.
		d := f.errorAt(0, 2, "not a UTF-8 file: it is UTF-16 text (it starts with UTF-16's byte order mark)",
			"save it as UTF-8 without a byte order mark (Windows PowerShell 5's `>` and Out-File, and Notepad's \"Unicode\", write UTF-16)")
		d.snippet = ""
		return d, true
	}
	d := f.errorAt(i, i+1, "not a text file: it holds a NUL byte",
		"a .sync plan is UTF-8 text; is this a compiled program (NAME_sync) or another binary file?")
	d.snippet = ""
	return d, true
}

// parseTokens parses a sequence of tokens that ends with eof.
func parseTokens(toks []token, eof lexer.Token) (*File, error) {
	pl, err := lexer.Upgrade(&tokenLexer{toks: toks, eof: eof}, tokenTypes[tokComment], tokenTypes[tokWhitespace])
	if err != nil {
		return nil, err
	}
	return parser.ParseFromLexer(pl)
}

// eofAt returns an end-of-input token where toks[i] starts, or after the
// last token when i is len(toks). A declaration parsed on its own ends
// where the next one starts, so an unexpected end of it is shown there.
func eofAt(f *sourceFile, toks []token, i int) lexer.Token {
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
	depth := 0
	var prev token // the significant token before t
	for i, t := range toks {
		if t.Type == tokWhitespace || t.Type == tokComment {
			continue
		}
		first := t.Pos.Line != prev.Pos.Line
		switch {
		case t.Value == "{":
			depth++
		case t.Value == "}":
			depth = max(0, depth-1)
		case first && depth == 0 && i > 0 && (t.Type == tokKeyword && slices.Contains(topKeywords, t.Value) || startsTemplate(t, prev) || startsRanks(t, prev)):
			starts = append(starts, i)
		}
		prev = t
	}
	return starts
}

// syntaxDiagnostic converts a participle error into a diagnostic, from
// what participle knows where it stopped: ast, the partial tree it
// returned with err for the tokens from offset start on, and the file's
// significant tokens (no whitespace, no comments).
func syntaxDiagnostic(f *sourceFile, toks []token, ast *File, start int, err error) Diagnostic {
	off := 0
	var perr participle.Error
	if errors.As(err, &perr) {
		off = perr.Position().Offset
	}
	off = errorInside(ast, toks, start, off)
	at, onToken := tokenAt(toks, off)
	cx := syntaxContextAt(ast, toks, start, at)
	length := 0
	switch {
	case onToken:
		for _, explain := range tokenExplainers {
			if d, ok := explain(f, toks, at, cx); ok {
				return d
			}
		}
		length = len(toks[at].Value)
	case at == len(toks) && at > 0:
		// An unexpected end of file is shown at the end of the last line
		// with content, so that the snippet shows that line.
		off = toks[at-1].end()
	}
	msg, hint := explainSyntaxError(toks, at, cx)
	return f.errorAt(off, off+length, msg, hint)
}

// tokenExplainers explain a syntax error at a token, toks[at], that
// participle's message would leave unclear, in the order they are tried:
// the first one that knows the case gives the diagnostic.
var tokenExplainers = []func(f *sourceFile, toks []token, at int, cx syntaxContext) (Diagnostic, bool){
	missingTensorPart, badRangeAtStart, shapeSyntax, declarationInBlock, unknownOption, missingComma, missingOperand,
}

// errorInside returns the offset of the syntax error at offset off, moved
// inside the statement or group of a block when participle reports it at
// its keyword (participle backs out of a statement as a whole when a value
// in it is a keyword, `wait step`, `compute wait`, and of a group when a
// statement in it fails, `group { allreduce }`): the statement's line, or
// the group's body, is parsed alone in a block, and the error found in a
// group's body is looked into in turn.
func errorInside(ast *File, toks []token, start, off int) int {
	at, ok := tokenAt(toks, off)
	// `compute` is a statement keyword but not a reserved word.
	if !ok || toks[at].Type == tokString || !slices.Contains(statementKeywords, toks[at].Value) || !syntaxContextAt(ast, toks, start, at).inStatements {
		return off
	}
	first, end := at, at+1
	if toks[at].Value == "group" {
		first, end = at+2, at+2
		for depth := 1; end < len(toks) && depth > 0; end++ {
			depth += braceDelta[toks[end].Value]
		}
		end--
	} else {
		for end < len(toks) && toks[end].Pos.Line == toks[at].Pos.Line && !slices.Contains([]string{"{", "}", ";"}, toks[end].Value) {
			end++
		}
	}
	_, err := parseTokens(inStepBlock(toks[min(first, end):end]), lexer.EOFToken(lexer.Position{Offset: -1}))
	var ute *participle.UnexpectedTokenError
	switch {
	case !errors.As(err, &ute):
	case ute.Unexpected.Pos.Offset > off && first > at:
		// In a group, maybe at a statement's keyword: inside that statement.
		return errorInside(ast, toks, start, ute.Unexpected.Pos.Offset)
	case ute.Unexpected.Pos.Offset > off:
		return ute.Unexpected.Pos.Offset
	case ute.Unexpected.Pos.Offset < 0 && end < len(toks):
		// The statement ends too early (`wait` alone): the error is
		// where the next line starts, which says it is incomplete.
		return toks[end].Pos.Offset
	}
	return off
}

// braceDelta is how a token changes the depth of braces.
var braceDelta = map[string]int{"{": 1, "}": -1}

// tokenIndex returns the index of the first of toks (sorted by offset)
// that starts at or after offset off, or len(toks).
func tokenIndex(toks []token, off int) int {
	return sort.Search(len(toks), func(i int) bool { return toks[i].Pos.Offset >= off })
}

// tokenAt returns the index of the token of toks that starts at offset
// off; ok is false when no token starts there.
func tokenAt(toks []token, off int) (at int, ok bool) {
	at = tokenIndex(toks, off)
	return at, at < len(toks) && toks[at].Pos.Offset == off
}

// inStepBlock wraps a statement's tokens in `step { ... }` so that it
// parses alone. The added closing `}` is at offset -1, which no source
// token has: a parse error there means the statement ended too early.
func inStepBlock(stmt []token) []token {
	return slices.Concat([]token{{Type: tokKeyword, Value: "step"}, {Type: tokPunct, Value: "{"}},
		stmt, []token{{Type: tokPunct, Value: "}", Pos: lexer.Position{Offset: -1}}})
}

// significantTokens returns the tokens other than whitespace and comments.
func significantTokens(all []token) []token {
	toks := make([]token, 0, len(all)/2+1)
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

// constructSyntax is how each construct is written, for hints.
var constructSyntax = map[string]string{
	"import":        "an import is written `import \"models/NAME\"` or `import \"./file.sync\"`",
	"tensor":        "a tensor is declared as `tensor NAME DTYPE[DIM, ...]`, optionally followed by `frozen`",
	"stream":        "a stream is declared as `stream NAME`, optionally followed by `priority high|low`",
	"bucket":        "a bucket is declared as `bucket NAME { PATTERN, ... }` followed by options: cap SIZE, first SIZE, order reverse|declared, wire DTYPE, divide before|after",
	"scaler":        "a loss scaler is declared as `scaler dynamic` (or torch, megatron, deepspeed) followed by options: init, growth, backoff, interval, hysteresis, min, max; or `scaler static SCALE`",
	"init":          "a block is written `init { STATEMENTS }`",
	"step":          "a block is written `step { STATEMENTS }`, or `step accumulate N { STATEMENTS }`",
	"run":           "run settings are written `run steps N warmup N check every N` (or `check off`) `checkpoint every N to DIR keep K`, each part optional",
	"backward":      "backward is written `backward DURATION on STREAM` (e.g. `backward 60ms on compute`), and one layer's piece of it `backward 2ms on compute for l.3.*`",
	"compute":       "compute is written `compute DURATION on STREAM` (e.g. `compute 20ms on compute`)",
	"allreduce":     "a collective is written `allreduce TARGET, ...` followed by options: op OP, algo flat|hierarchical, into NAME (one target), on STREAM, after ready|STREAM",
	"broadcast":     "broadcast is written `broadcast TARGET, ... from RANK` followed by options: into NAME (one target), on STREAM, after ready|STREAM",
	"reduce":        "reduce is written `reduce TARGET, ... to RANK` followed by options: op OP, into NAME (one target), on STREAM, after ready|STREAM",
	"allgather":     "allgather is written `allgather TARGET, ...` followed by options: into NAME (one target), on STREAM, after ready|STREAM",
	"reducescatter": "reducescatter is written `reducescatter TARGET, ...` followed by options: op OP, into NAME (one target), on STREAM, after ready|STREAM",
	"group":         "a group is written `group { COLLECTIVES }`",
	"update":        "update is written `update TARGET, ... sgd|adamw` followed by settings (lr, momentum, weight_decay, beta1, beta2, eps) and options: master f32, on STREAM, after synced|STREAM",
	"unscale":       "unscale is written `unscale TARGET, ...` followed by options: agree, on STREAM, after synced|STREAM",
	"wait":          "wait is written `wait STREAM`",
	"barrier":       "barrier is written `barrier` followed by options: on STREAM, after STREAM",
	"for":           forSyntax,
	"ranks":         ranksSyntax,
}

// statementKeywords start the statements of a block (the Stmt of the
// grammar; TestHintKeywordsFollowTheGrammar keeps them in step).
var statementKeywords = []string{"backward", "compute", "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "group", "wait", "barrier", "update", "unscale"}

// allKeywords are every keyword, for "did you mean" on a misspelt one:
// those that start declarations and statements, the options of every
// construct (constructOptions), and the words that follow a keyword
// (continuations). TestHintKeywordsFollowTheGrammar checks that every
// word the grammar names is one of them.
var allKeywords = func() []string {
	all := slices.Concat(topKeywords, statementKeywords, continuations)
	for _, construct := range slices.Sorted(maps.Keys(constructOptions)) {
		for _, o := range constructOptions[construct] {
			if !slices.Contains(all, o) {
				all = append(all, o)
			}
		}
	}
	return all
}()

// continuations are the keywords that only follow another: `check every`,
// `check off`, `after ready`, `after synced`, `step accumulate`, a
// template's `in`, a ranks entry's `speed`.
var continuations = []string{"every", "off", "ready", "synced", "accumulate", "in", "speed"}

// explainSyntaxError says what is wrong at toks[at] (at the end of the
// file when at is len(toks)) of a file that does not parse, in the
// context cx: which construct it is in, how that construct is written,
// and what a misspelt keyword may have meant.
func explainSyntaxError(toks []token, at int, cx syntaxContext) (string, string) {
	hint := constructSyntax[cx.construct]
	if at >= len(toks) {
		return explainEOF(toks, cx, hint)
	}
	t := toks[at]
	// A new statement or declaration may start here: at the start of a
	// line, or after a `;`.
	startsLine := startsItem(toks, at)
	keyword := ""
	if t.Type == tokWord && !slices.Contains(allKeywords, t.Value) {
		// Most likely a misspelt or abbreviated keyword.
		keyword = suggestKeyword(t.Value, keywordsAt(toks, at, cx))
	}
	msg, construct, stray := "unexpected "+tokenText(t), cx.construct, ""
	if startsLine && keyword != "" {
		// Most likely a misspelt keyword starting a new line: an option
		// of the construct continued on this line, or a new statement or
		// declaration.
		if !slices.Contains(expectedKeywords(construct, toks[max(at-1, 0)].Value), keyword) {
			construct = ""
		}
	} else if m, h, ok := missingValue(toks, at, construct, hint); ok {
		// `allreduce g op }`: the option is there, its value is not.
		msg, hint = m, h
	} else if t.Value == "[" && at > 0 && at+1 < len(toks) && toks[at+1].Type != tokWord && (toks[at-1].Type == tokWord || toks[at-1].Type == tokString) {
		// `allreduce g[step]`, `g[]`: participle backs out of the whole
		// index and reports its `[`.
		msg = fmt.Sprintf("unexpected %s in the index of %s: a piece index is a number", tokenText(toks[at+1]), code(shortText(toks[at-1].Value)))
		hint = "write e.g. `" + shortText(toks[at-1].Value) + "[0]`; " + hint
	} else if h, ok := spacedUnit(toks, at); ok {
		// `backward 60 ms`: the statement is complete with a duration
		// of "60", which the checker would reject for its missing unit.
		msg = fmt.Sprintf("unexpected %s: a number and its unit are written without a space between them", tokenText(t))
		hint = h
	} else if keyword == "" && construct != "" && !cx.isBlock && cx.complete {
		// A stray token after a declaration or statement that is
		// complete without it: saying it is incomplete would send the
		// user looking for something missing.
		noun := "statement"
		if slices.Contains(topKeywords, construct) {
			noun = "declaration"
		}
		msg = fmt.Sprintf("unexpected %s after the complete %s %s", tokenText(t), construct, noun)
		if cx.line < t.Pos.Line {
			msg += fmt.Sprintf(" on line %d", cx.line)
		}
		if startsLine {
			// Not a continuation of it: a new one should start here.
			construct = ""
		}
		stray = tokenText(t)
	} else if startsLine && construct != "" && !cx.isBlock && cx.line < t.Pos.Line {
		msg += fmt.Sprintf(": the %s on line %d is incomplete", construct, cx.line)
	}
	return msg, finishSyntaxHint(hint, construct, keyword, stray, cx)
}

// missingOperand explains a collective whose first target is missing or
// is a keyword, and a backward or compute without its duration: the parser
// reports the keyword or the statement's keyword, so both are tried.
func missingOperand(f *sourceFile, toks []token, at int, cx syntaxContext) (Diagnostic, bool) {
	t := toks[at]
	kw, next := "", ""
	if _, ok := collectiveKinds[t.Value]; ok && at+1 < len(toks) {
		kw, next = t.Value, toks[at+1].Value
	} else if at > 0 {
		kw, next = toks[at-1].Value, t.Value
	}
	if _, ok := collectiveKinds[kw]; ok && (slices.Contains(reservedWords, next) || cx.inStatements && (next == "}" || next == ";")) {
		hint := "targets are buckets, pieces like grads[0], tensors and patterns; quote a tensor named like a keyword: \"" + next + "\""
		if next == "}" || next == ";" {
			hint = "targets are buckets, pieces like grads[0], tensors and patterns, e.g. `" + kw + " grads`"
		}
		return f.errorAt(t.Pos.Offset, t.end(), fmt.Sprintf("%s needs a target before %s", kw, code(next)), hint), true
	}
	if (kw == "backward" || kw == "compute") && kw == cx.construct && t.Value == "on" {
		// `backward on comm`: the duration is what is missing.
		return f.errorAt(t.Pos.Offset, t.end(), fmt.Sprintf("%s needs a duration before %s", code(kw), code("on")), constructSyntax[kw]), true
	}
	return Diagnostic{}, false
}

// keywordsAt returns the keywords expected at toks[at], the likeliest
// first: the options of the construct cx is in and, at the start of a
// line, those that start a new statement or declaration.
func keywordsAt(toks []token, at int, cx syntaxContext) []string {
	expected := expectedKeywords(cx.construct, toks[max(at-1, 0)].Value)
	switch {
	case !startsItem(toks, at):
	case cx.inBraces:
		expected = append(expected, statementKeywords...)
	default:
		expected = append(expected, topKeywords...)
	}
	return expected
}

// startsItem reports whether a statement or declaration may start at
// toks[at]: at the start of the file or of a line, or after a `;`, which
// ends the one before.
func startsItem(toks []token, at int) bool {
	return at == 0 || at > len(toks)-1 || toks[at-1].Pos.Line != toks[at].Pos.Line || toks[at-1].Value == ";"
}

// finishSyntaxHint completes a syntax error's hint: outside any construct,
// what starts a statement (in braces) or a declaration; led by the likeliest
// fixes, a suggested keyword and then removing the stray token (or "").
func finishSyntaxHint(hint, construct, keyword, stray string, cx syntaxContext) string {
	if construct == "" {
		switch {
		case cx.inBraces:
			hint = "a statement starts with one of: " + strings.Join(statementKeywords, ", ")
		case cx.inTemplate:
			hint = forBody
		default:
			hint = "a declaration starts with one of: " + strings.Join(topKeywords, ", ")
		}
	}
	if keyword != "" {
		hint = "did you mean " + code(keyword) + "? " + hint
	}
	if stray != "" {
		hint = "remove " + stray + "; " + hint
	}
	return hint
}

// optionValues says what value each option takes, for hints; an option
// that takes another value in some constructs has it in
// constructOptionValues. The reductions and the algorithms are the
// checker's own (redOpNames, algos).
var optionValues = map[string]string{
	"op": strings.Join(redOpNames, "|"), "algo": strings.Join(slices.Sorted(maps.Keys(algos)), "|"),
	"on": "STREAM", "after": "ready|STREAM", "from": "RANK", "to": "RANK", "into": "NAME",
	"cap": "SIZE", "first": "SIZE", "order": "reverse|declared", "wire": "DTYPE", "priority": "high|low",
	"steps": "N", "warmup": "N", "check": "every N|off", "every": "N", "wait": "STREAM", "checkpoint": "every N", "keep": "K",
	"divide": "before|after", "master": "f32", "lr": "NUMBER", "momentum": "NUMBER", "weight_decay": "NUMBER", "beta1": "NUMBER", "beta2": "NUMBER", "eps": "NUMBER",
	"init": "SCALE", "growth": "NUMBER", "backoff": "NUMBER", "interval": "N", "hysteresis": "N", "min": "NUMBER", "max": "NUMBER",
	"for": "PATTERN, ...",
}

// constructOptionValues are the values of the options that take another
// value in a construct than optionValues says: `after` waits for a stream
// only on backward, compute and barrier (`after ready` is a collective's),
// for synced or a stream on update and unscale; run's `to` is the
// checkpoints' directory.
var constructOptionValues = map[string]map[string]string{
	"backward": {"after": "STREAM"},
	"compute":  {"after": "STREAM"},
	"barrier":  {"after": "STREAM"},
	"update":   {"after": "synced|STREAM"},
	"unscale":  {"after": "synced|STREAM"},
	"run":      {"to": "DIR"},
}

// optionValue says what value option takes in construct, for hints.
func optionValue(construct, option string) string {
	if v, ok := constructOptionValues[construct][option]; ok {
		return v
	}
	return optionValues[option]
}

// missingValue explains a syntax error at toks[at] (at the end of the
// file when at is len(toks)) that is an option of the construct without
// its value: at the option itself when no word follows it (participle
// gives up on the option as a whole), or at the token after it. A keyword
// or a string after the option was likely meant as its value, so is named.
func missingValue(toks []token, at int, construct, hint string) (string, string, bool) {
	isOption := func(i int) bool {
		if _, ok := optionValues[toks[i].Value]; !ok || toks[i].Type == tokString {
			return false
		}
		if toks[i].Type == tokKeyword && toks[i].Value == "wait" {
			return construct == "wait"
		}
		return slices.Contains(expectedKeywords(construct, toks[max(i-1, 0)].Value), toks[i].Value)
	}
	opt := at
	switch {
	case at < len(toks) && isOption(at) && (at+1 == len(toks) || toks[at+1].Type != tokWord):
	case at > 0 && isOption(at-1) && (at == len(toks) || toks[at].Type != tokWord):
		opt = at - 1
	default:
		return "", "", false
	}
	o, next := toks[opt], token{}
	if opt+1 < len(toks) {
		next = toks[opt+1]
	}
	unexpected, line := "", o.Pos.Line
	switch {
	case at == len(toks):
		unexpected = "unexpected end of file: "
	case opt != at:
		unexpected, line = "unexpected "+tokenText(toks[at])+": ", toks[at].Pos.Line
	}
	msg, value := unexpected+code(o.Value), optionValue(construct, o.Value)
	switch {
	case next.Type == tokString:
		// `on "comm"`: values are words, never quoted.
		msg = fmt.Sprintf("%s takes a value without quotes", code(o.Value))
		value = strings.Trim(next.Value, `"`)
	case next.Type == tokKeyword && next.Pos.Line == o.Pos.Line:
		// `on step`: a reserved word is never a value.
		msg += fmt.Sprintf(" needs a value, and %s is a keyword", code(next.Value))
	case o.Pos.Line != line:
		msg += fmt.Sprintf(" on line %d needs a value after it", o.Pos.Line)
	default:
		msg += " needs a value after it"
	}
	if write := "`" + o.Value + " " + value + "`"; !strings.Contains(hint, write) {
		hint = "write " + write + "; " + hint
	}
	return msg, hint, true
}

// spacedUnit reports whether toks[at] is a size or duration unit written
// apart from the number before it on the same line (`60 ms`, `25 MiB`),
// and returns the hint: the two written together. Where the number is a
// size or a duration (after `cap`, `backward`, ...), any word of letters
// is taken for a unit (`60 msec`), and the hint says how to write it.
func spacedUnit(toks []token, at int) (string, bool) {
	if at == 0 || toks[at].Type != tokWord || toks[at-1].Type != tokWord || toks[at-1].Pos.Line != toks[at].Pos.Line {
		return "", false
	}
	m := numberUnit.FindStringSubmatch(toks[at-1].Value)
	if m == nil || m[2] != "" {
		return "", false
	}
	num, unit := toks[at-1].Value, toks[at].Value
	_, size := sizeUnits[unit]
	if _, duration := durationUnits[unit]; size || duration {
		return "write " + code(num+unit), true
	}
	// A size after cap or first, a duration after backward or compute.
	what, units, list := "", map[string]int64(nil), ""
	switch toks[max(at-2, 0)].Value {
	case "cap", "first":
		what, units, list = "size", sizeUnits, sizeUnitList
	case "backward", "compute":
		what, units, list = "duration", durationUnits, durationUnitList
	}
	if at < 2 || what == "" || strings.Trim(unit, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return "", false
	}
	hint := "write the unit right after the number; " + what + "s take " + list
	if s := unitSuggestion(num, unit, what, units); s != "" {
		hint = s + " " + hint
	}
	return hint, true
}

// tokenText shows a token in a message.
func tokenText(t token) string {
	if t.Type == tokString {
		return "string " + quoteText(t.Value)
	}
	return code(cutText(t.Value, 40))
}

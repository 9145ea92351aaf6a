package dsl

import (
	"math"
	"slices"

	"github.com/alecthomas/participle/v2/lexer"
)

// Where a syntax error is, from what participle knows where it stops.
// With its error, participle returns the partial tree it built, in which
// a node it did not finish (a block without its `}`, a bucket in its
// pattern list) has no EndPos. Going down the last node of each body while
// its `{` is still open gives the blocks, groups, template bodies and
// pattern lists the error is in; the last node of the innermost one is the
// construct the error is in or after. Participle backs out of a statement
// or option it could not finish within its lookahead (two tokens), so the
// few tokens after the last node it kept are read too: a construct's
// keyword there is the one the error is in.

// syntaxContext is where a syntax error is: every kind of syntax error is
// explained from it.
type syntaxContext struct {
	opens        []opening // the `{` still open at the error, outermost first
	bracket      int       // the index of a `[` still open, or -1
	inStatements bool      // among the statements of a block or group
	node         *node     // the last declaration or statement participle kept there, or nil
	construct    string    // the keyword of the construct the error is in or after, or ""
	line, at     int       // the line and the index of that keyword
	complete     bool      // participle finished that construct, and only `;` follow it
	isBlock      bool      // the construct is init, step or group, before its `{`
	inBraces     bool      // a statement, not a declaration, may start here
	inTemplate   bool      // in the body of a template, where tensors are declared
}

// opening is a `{` still open at a syntax error: what it opens, its index
// in the tokens and what its body holds.
type opening struct {
	what       string // "the `step` block", "the group", "the pattern list of bucket `g`", "the body of the `for`", "the `{`"
	at         int
	statements bool // a block's or group's statements
	template   bool // a template's declarations
}

// blocks name the constructs whose body is statements, by keyword.
var blocks = map[string]string{"init": "the `init` block", "step": "the `step` block", "group": "the group"}

// node is a declaration or statement of the partial tree: its keyword (""
// for a `;`), where it starts and ends (Line 0 when participle did not
// finish it), its `{` when that is open at the error, and its body.
type node struct {
	keyword  string
	pos, end lexer.Position
	open     *opening
	body     []node
	decl     *Decl // the node itself: one of decl and stmt is set
	stmt     *Stmt
}

// newNode returns the node from pos to end: its keyword is its first
// token, when that is a construct's.
func newNode(pos, end lexer.Position, toks []token) node {
	n := node{pos: pos, end: end}
	if i := tokenIndex(toks, pos.Offset); pos.Line > 0 && i < len(toks) && constructSyntax[toks[i].Value] != "" {
		n.keyword = toks[i].Value
	}
	return n
}

// declNode returns the node of a declaration, for an error at offset off.
func declNode(d *Decl, toks []token, off int) node {
	n := newNode(d.Pos, d.EndPos, toks)
	n.decl = d
	switch {
	case d.Bucket != nil && d.Bucket.Name != nil && d.EndPos.Line == 0:
		// The pattern list has no node: its `{` follows the name, and it
		// is closed when the bucket is finished.
		if i := tokenIndex(toks, d.Bucket.Name.EndPos.Offset); i < len(toks) && toks[i].Value == "{" && toks[i].Pos.Offset < off {
			n.open = &opening{what: "the pattern list of bucket " + code(shortText(toks[i-1].Value)), at: i}
		}
	case d.Block != nil:
		n.open = opened(d.Block.Open, d.Block.Close, toks, off, opening{what: blocks[d.Block.Kind], statements: true})
		for _, s := range d.Block.Body {
			n.body = append(n.body, stmtNode(s, toks, off))
		}
	case d.For != nil:
		n.open = opened(d.For.Open, d.For.Close, toks, off, opening{what: "the body of the `for`", template: true})
		for _, d := range d.For.Body {
			n.body = append(n.body, declNode(d, toks, off))
		}
	case d.Ranks != nil:
		n.open = opened(d.Ranks.Open, d.Ranks.Close, toks, off, opening{what: "the `{`"})
	}
	return n
}

// stmtNode returns the node of a statement, for an error at offset off.
func stmtNode(s *Stmt, toks []token, off int) node {
	n := newNode(s.Pos, s.EndPos, toks)
	n.stmt = s
	if s.Group != nil {
		n.open = opened(s.Group.Open, s.Group.Close, toks, off, opening{what: blocks["group"], statements: true})
		for _, s := range s.Group.Body {
			n.body = append(n.body, stmtNode(s, toks, off))
		}
	}
	return n
}

// opened returns o for the `{` open, when it is read before offset off
// and its `}` is not.
func opened(open *OpenBrace, close *CloseBrace, toks []token, off int, o opening) *opening {
	if open == nil || open.Pos.Offset >= off || close != nil && close.Pos.Offset < off {
		return nil
	}
	o.at = tokenIndex(toks, open.Pos.Offset)
	return &o
}

// lastNode returns the last of nodes with a keyword that starts before
// offset off, or nil.
func lastNode(nodes []node, off int) *node {
	for i := len(nodes) - 1; i >= 0; i-- {
		if n := &nodes[i]; n.keyword != "" && n.pos.Line > 0 && n.pos.Offset < off {
			return n
		}
	}
	return nil
}

// syntaxContextAt finds the context of the syntax error at toks[at]
// (len(toks) at the end of the input) in ast, the partial tree that
// participle returned with it for the tokens from offset start on.
func syntaxContextAt(ast *File, toks []token, start, at int) syntaxContext {
	off := math.MaxInt
	if at < len(toks) {
		off = toks[at].Pos.Offset
	}
	cx := syntaxContext{bracket: -1}
	var nodes []node
	for i := 0; ast != nil && i < len(ast.Decls); i++ {
		nodes = append(nodes, declNode(ast.Decls[i], toks, off))
	}
	// Down the last node while its `{` is open (a bucket's patterns and
	// the entries of ranks are no constructs: there, the bucket or the
	// ranks is).
	from, last := tokenIndex(toks, start), lastNode(nodes, off)
	for last != nil && last.open != nil && last.keyword != "bucket" && last.keyword != "ranks" {
		cx.opens = append(cx.opens, *last.open)
		from = last.open.at + 1
		last = lastNode(last.body, off)
	}
	cx.node = last
	switch {
	case last == nil:
	case last.open != nil:
		// In a bucket's pattern list or the entries of ranks.
		cx.opens = append(cx.opens, *last.open)
		cx.construct, cx.line, cx.at = last.keyword, last.pos.Line, tokenIndex(toks, last.pos.Offset)
		from = last.open.at + 1
	case last.end.Line == 0:
		// Participle stopped in it.
		cx.construct, cx.line, cx.at = last.keyword, last.pos.Line, tokenIndex(toks, last.pos.Offset)
		from = cx.at + 1
	case slices.Contains([]string{"init", "step", "group", "for", "ranks"}, last.keyword):
		// After the `}` of a block, group, template or ranks.
		from = tokenIndex(toks, last.end.Offset)
	default:
		cx.construct, cx.line, cx.at, cx.complete = last.keyword, last.pos.Line, tokenIndex(toks, last.pos.Offset), true
		from = tokenIndex(toks, last.end.Offset)
	}
	cx.readPast(toks, from, at)
	if n := len(cx.opens); n > 0 {
		cx.inStatements, cx.inTemplate = cx.opens[n-1].statements, cx.opens[n-1].template
	}
	_, cx.isBlock = blocks[cx.construct]
	cx.inBraces = len(cx.opens) > 0 && !cx.inTemplate
	return cx
}

// readPast reads the tokens toks[from:at] that participle read past the
// last node it kept: a construct's keyword there is the construct the
// error is in, and the braces and brackets there are still open.
func (cx *syntaxContext) readPast(toks []token, from, at int) {
	for i := from; i < at; i++ {
		t := toks[i]
		switch t.Value {
		case "{":
			o := opening{what: "the `{`", at: i}
			if k := toks[max(i-1, 0)]; k.Type == tokKeyword && blocks[k.Value] != "" {
				o = opening{what: blocks[k.Value], at: i, statements: true}
				cx.construct = ""
			}
			cx.opens = append(cx.opens, o)
			cx.bracket, cx.complete = -1, false
		case "}":
			if len(cx.opens) > 0 {
				cx.opens = cx.opens[:len(cx.opens)-1]
			}
			cx.construct, cx.bracket, cx.complete = "", -1, false
		case ";":
		default:
			if t.Value == "[" {
				cx.bracket = i
			} else if t.Value == "]" {
				cx.bracket = -1
			}
			cx.complete = false
			if _, ok := constructSyntax[t.Value]; ok && startsConstruct(toks, i) {
				cx.construct, cx.line, cx.at = t.Value, t.Pos.Line, i
			}
		}
	}
}

// startsConstruct reports whether the construct keyword toks[i] starts a
// construct: not an option's value on the option's line (`on compute`), a
// target after a comma, the name of a tensor, stream or bucket (`tensor
// step`, `stream compute`) or a backward's `for PATTERN`.
func startsConstruct(toks []token, i int) bool {
	if i == 0 {
		return true
	}
	prev := toks[i-1]
	if toks[i].Value == "for" && prev.Pos.Line == toks[i].Pos.Line && !slices.Contains([]string{"{", "}", ";"}, prev.Value) {
		return false
	}
	_, value := optionValues[prev.Value]
	named := prev.Type == tokKeyword && (prev.Value == "tensor" || prev.Value == "stream" || prev.Value == "bucket")
	return !(value && prev.Pos.Line == toks[i].Pos.Line) && prev.Value != "," && !named
}

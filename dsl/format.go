package dsl

import (
	"bytes"
	"slices"
	"sort"
	"strings"
)

// Format returns src in canonical form: one declaration or statement per
// line, four spaces of indentation per block, single spaces between
// tokens, options in a fixed order (bucket: cap first order wire divide;
// collective: from/to op on after; update: settings, master, on, after;
// unscale: agree on after; scaler: init growth backoff interval
// hysteresis min max; run: steps warmup check; ranks: batch balance
// every, one entry a line), no
// semicolons, at most one blank line where the source had blank lines
// (none at the start or end of a block), and trailing comments of
// consecutive lines aligned. Every comment is kept: a comment on its own
// line stays on its own line before what followed it, a comment after a
// declaration on the same line stays there, and a comment inside a
// declaration moves to its own line just before it. Sizes, durations,
// names and brace ranges are printed as written. Formatting formatted
// output changes nothing. A template (`for`) is printed as a block, its
// declarations one level deeper. With syntax errors it returns nil and the
// errors.
func Format(filename string, src []byte) ([]byte, Diagnostics) {
	f := newSourceFile(filename, src)
	ast, diags := parseFile(f)
	if len(diags) > 0 {
		return nil, sortDiagnostics(diags, nil)
	}
	p := &printer{f: f}
	p.file(ast)
	p.comments(lex(filename, f.src))
	return p.output(), nil
}

// fmtItem is one output line made from the syntax tree.
type fmtItem struct {
	start, end int // the source bytes it was printed from
	depth      int
	text       string
	open       bool    // ends with `{`: the next line starts a block
	close      bool    // a closing `}`
	before     []token // comments on lines of their own before it
	inner      []token // comments inside it, printed before it
	trailing   []token
}

// printer builds the formatted text.
type printer struct {
	f     *sourceFile
	items []*fmtItem
	// tail holds the comments after the last item.
	tail []token
}

func (p *printer) add(start, end, depth int, text string) *fmtItem {
	it := &fmtItem{start: start, end: end, depth: depth, text: text}
	p.items = append(p.items, it)
	return it
}

// file turns the declarations into output lines.
func (p *printer) file(ast *File) {
	p.decls(ast.Decls, 0)
}

// decls turns declarations at depth into output lines (a template's body
// is one level deeper).
func (p *printer) decls(decls []*Decl, depth int) {
	for _, d := range decls {
		switch {
		case d.Import != nil:
			x := d.Import
			p.add(x.Pos.Offset, x.EndPos.Offset, depth, "import "+x.Path.source())
		case d.Tensor != nil:
			p.add(d.Tensor.Pos.Offset, d.Tensor.EndPos.Offset, depth, tensorText(d.Tensor))
		case d.Stream != nil:
			x := d.Stream
			text := "stream " + x.Name.source()
			if x.Priority != nil {
				text += " priority " + x.Priority.Text
			}
			p.add(x.Pos.Offset, x.EndPos.Offset, depth, text)
		case d.Bucket != nil:
			p.add(d.Bucket.Pos.Offset, d.Bucket.EndPos.Offset, depth, bucketText(d.Bucket))
		case d.Scaler != nil:
			p.add(d.Scaler.Pos.Offset, d.Scaler.EndPos.Offset, depth, scalerText(d.Scaler))
		case d.Block != nil:
			b := d.Block
			p.block(b.Pos.Offset, b.Open.Pos.Offset, b.Close.Pos.Offset, depth, b.Kind+accumulateText(b.Accumulate), b.Body)
		case d.Run != nil:
			p.add(d.Run.Pos.Offset, d.Run.EndPos.Offset, depth, runText(d.Run))
		case d.Ranks != nil:
			p.ranks(d.Ranks, depth)
		case d.For != nil:
			x := d.For
			// Without its `in` as written: adding it would change what
			// the checker says.
			head := "for " + x.Var.Text
			if x.In {
				head += " in"
			}
			it := p.add(x.Pos.Offset, x.Open.Pos.Offset+1, depth, head+" "+x.Range.Text+" {")
			it.open = true
			p.decls(x.Body, depth+1)
			end := p.add(x.Close.Pos.Offset, x.Close.Pos.Offset+1, depth, "}")
			end.close = true
		}
	}
}

// block prints `kind {`, the statements one level deeper, and `}`.
func (p *printer) block(start, open, close, depth int, kind string, body []*Stmt) {
	it := p.add(start, open+1, depth, kind+" {")
	it.open = true
	for _, s := range body {
		switch {
		case s.Timed != nil:
			t := s.Timed
			p.add(t.Pos.Offset, t.EndPos.Offset, depth+1, timedText(t))
		case s.Collective != nil:
			cs := s.Collective
			p.add(cs.Pos.Offset, cs.EndPos.Offset, depth+1, cs.Kind+" "+targetsText(cs.Targets)+optionsText(cs.Options))
		case s.Update != nil:
			u := s.Update
			text := "update " + targetsText(u.Targets)
			if u.Optimizer != nil {
				text += " " + u.Optimizer.Text
			}
			p.add(u.Pos.Offset, u.EndPos.Offset, depth+1, text+optionsText(u.Options))
		case s.Unscale != nil:
			u := s.Unscale
			p.add(u.Pos.Offset, u.EndPos.Offset, depth+1, "unscale "+targetsText(u.Targets)+optionsText(u.Options))
		case s.Group != nil:
			g := s.Group
			p.block(g.Pos.Offset, g.Open.Pos.Offset, g.Close.Pos.Offset, depth+1, "group", g.Body)
		case s.Wait != nil:
			p.add(s.Wait.Pos.Offset, s.Wait.EndPos.Offset, depth+1, "wait "+s.Wait.Stream.Text)
		case s.Barrier != nil:
			b := s.Barrier
			p.add(b.Pos.Offset, b.EndPos.Offset, depth+1, "barrier"+optionsText(b.Options))
		}
	}
	end := p.add(close, close+1, depth, "}")
	end.close = true
}

// targetsText prints a statement's targets.
func targetsText(ts []*Target) string {
	var targets []string
	for _, t := range ts {
		x := t.Name.name().source()
		if t.Index != nil {
			x += "[" + t.Index.Text + "]"
		}
		targets = append(targets, x)
	}
	return strings.Join(targets, ", ")
}

// scalerText prints a scaler with its options in canonical order (the
// bare scale first), or its words as written when they do not pair up
// (an unknown option, one without its value, a stray value).
func scalerText(d *ScalerDecl) string {
	text := "scaler " + d.Rule.Text
	items := scalerItems(d)
	rank := func(it scalerItem) int {
		if it.key == nil {
			return -1
		}
		return slices.Index(scalerKeys, it.key.Text)
	}
	for i, it := range items {
		if it.key == nil && i > 0 || it.key != nil && (it.value == nil || rank(it) < 0) {
			for _, w := range d.Words {
				text += " " + w.Text
			}
			return text
		}
	}
	slices.SortStableFunc(items, func(a, b scalerItem) int { return rank(a) - rank(b) })
	for _, it := range items {
		if it.key != nil {
			text += " " + it.key.Text
		}
		text += " " + it.value.Text
	}
	return text
}

func tensorText(d *TensorDecl) string {
	var dims []string
	for _, w := range d.Dims {
		dims = append(dims, w.Text)
	}
	text := "tensor " + d.Name.source() + " " + d.DType.Text + "[" + strings.Join(dims, ", ") + "]"
	if d.Frozen {
		text += " frozen"
	}
	return text
}

// timedText prints a backward or compute: its options (those written
// after `for` included) before its `for` patterns.
func timedText(t *TimedStmt) string {
	text := t.Kind + " " + t.Duration.Text + optionsText(slices.Concat(t.Options, t.Late))
	if len(t.For) > 0 {
		var pats []string
		for _, n := range t.For {
			pats = append(pats, n.name().source())
		}
		text += " for " + strings.Join(pats, ", ")
	}
	return text
}

func bucketText(d *BucketDecl) string {
	var pats []string
	for _, n := range d.Patterns {
		pats = append(pats, n.source())
	}
	list := "{ }"
	if len(pats) > 0 {
		list = "{ " + strings.Join(pats, ", ") + " }"
	}
	return "bucket " + d.Name.source() + " " + list + optionsText(d.Options)
}

// optionOrder is the canonical order of options.
var optionOrder = map[string]int{
	"cap": 0, "first": 1, "order": 2, "wire": 3, "divide": 4,
	"from": 5, "to": 6, "op": 7, "algo": 8, "into": 9,
	"lr": 10, "momentum": 11, "beta1": 12, "beta2": 13, "eps": 14, "weight_decay": 15, "wd": 15, "master": 16, "agree": 17,
	"on": 18, "after": 19,
}

// optionsText prints options in canonical order (stable among repeats,
// which the checker rejects anyway).
func optionsText(opts []*Option) string {
	sorted := make([]*Option, len(opts))
	copy(sorted, opts)
	sort.SliceStable(sorted, func(i, j int) bool { return optionOrder[sorted[i].Key] < optionOrder[sorted[j].Key] })
	var b strings.Builder
	for _, o := range sorted {
		b.WriteString(" " + o.Key)
		if o.Value != nil {
			b.WriteString(" " + o.Value.Text)
		}
	}
	return b.String()
}

func runText(r *RunDecl) string {
	rank := func(o *RunOption) int {
		switch {
		case o.Count != nil && o.Count.Key == "steps":
			return 0
		case o.Count != nil:
			return 1
		case o.Check != nil:
			return 2
		}
		return 3
	}
	sorted := make([]*RunOption, len(r.Options))
	copy(sorted, r.Options)
	sort.SliceStable(sorted, func(i, j int) bool { return rank(sorted[i]) < rank(sorted[j]) })
	text := "run"
	for _, o := range sorted {
		switch {
		case o.Count != nil:
			text += " " + o.Count.Key + " " + o.Count.Value.Text
		case o.Checkpoint != nil:
			cp := o.Checkpoint
			text += " checkpoint every " + cp.Every.Text
			if cp.Dir != nil {
				text += " to " + cp.Dir.source()
			}
			if cp.Keep != nil {
				text += " keep " + cp.Keep.Text
			}
		case o.Check.Off:
			text += " check off"
		default:
			text += " check every " + o.Check.Every.Text
		}
	}
	return text
}

// comments attaches every comment to an output line: as a trailing
// comment of the line it ends (nothing but spaces between them), or as a
// comment line before the next line (a comment inside a multi-line
// declaration goes before that declaration). The tokens are kept as
// lexed, CRs included, so that their ends are source offsets (blank lines
// are found from them); output prints them through commentText.
func (p *printer) comments(toks []token) {
	i := 0 // items[:i] start at or before the comment
	for _, t := range toks {
		if t.Type != tokComment {
			continue
		}
		off := t.Pos.Offset
		for i < len(p.items) && p.items[i].start <= off {
			i++
		}
		if i > 0 && i < len(p.items) && p.emptyBlockOnOneLine(p.items[i-1], p.items[i], t) {
			p.items[i].before = append(p.items[i].before, t)
			continue
		}
		if i > 0 {
			prev := p.items[i-1]
			if off >= prev.end && !bytes.ContainsRune(p.f.src[prev.end:off], '\n') {
				prev.trailing = append(prev.trailing, t)
				continue
			}
			if off < prev.end {
				prev.inner = append(prev.inner, t)
				continue
			}
		}
		if i < len(p.items) {
			p.items[i].before = append(p.items[i].before, t)
		} else {
			p.tail = append(p.tail, t)
		}
	}
}

// emptyBlockOnOneLine reports whether comment c stands between the `{` of
// an empty block (open) and its `}` (close), with the `}` on the line
// where c ends: `step { /* x */ }`. The comment is then the block's
// content and is printed as a line of its body. As a trailing comment of
// `step {` it would move the `}` to a line of its own and leave the
// comment outside the body; after `step { // x` the `}` is on another
// line anyway, and the comment stays at the end of the `{` line.
func (p *printer) emptyBlockOnOneLine(open, close *fmtItem, c token) bool {
	return open.open && close.close && close.start >= c.end() &&
		!bytes.ContainsRune(p.f.src[c.end():close.start], '\n')
}

// commentText returns a comment as the formatter prints it. In a file
// with CRLF line endings a line comment runs up to the \n and so ends
// with the \r, and a block comment has \r\n inside; the output's lines
// end with \n alone, and a stray \r would mix the two. Every \r at a
// line's end goes, not one: "\r\r\n" left as "\r\n" changed again on the
// next run, and formatting must be idempotent.
func commentText(c string) string {
	lines := strings.Split(c, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, "\r")
	}
	return strings.Join(lines, "\n")
}

// line is one line of output before alignment.
type line struct {
	indent   int
	text     string
	trailing string
	blank    bool // a blank line before it
}

// output lays out the lines, blank lines and comments.
func (p *printer) output() []byte {
	var lines []line
	prevEnd := -1     // last source line of the previous output line
	afterOpen := true // at the start of the file or of a block
	emit := func(l line, startLine, endLine int, isClose bool) {
		l.blank = !afterOpen && !isClose && prevEnd >= 0 && startLine > prevEnd+1
		lines = append(lines, l)
		prevEnd = max(prevEnd, endLine)
		afterOpen = false
	}
	commentLines := func(cs []token, depth int) {
		for _, c := range cs {
			emit(line{indent: depth, text: commentText(c.Value)},
				p.f.pos(c.Pos.Offset).Line, p.f.pos(c.end()).Line, false)
		}
	}
	for _, it := range p.items {
		depth := it.depth
		if it.close {
			depth++ // comments before `}` belong to the block's body
		}
		commentLines(it.before, depth)
		// Comments from inside the item are laid out as if they were on
		// its first line.
		startLine := p.f.pos(it.start).Line
		for _, c := range it.inner {
			emit(line{indent: depth, text: commentText(c.Value)}, startLine, startLine, false)
		}
		var trail []string
		end := it.end
		for _, c := range it.trailing {
			trail = append(trail, commentText(c.Value))
			end = c.end()
		}
		emit(line{indent: it.depth, text: it.text, trailing: strings.Join(trail, " ")},
			p.f.pos(it.start).Line, p.f.pos(max(it.start, end-1)).Line, it.close)
		if it.open {
			afterOpen = true
		}
	}
	commentLines(p.tail, 0)
	return render(lines)
}

// render writes the lines, aligning the trailing comments of each run of
// consecutive lines that have one (as gofmt does). Widths are counted in
// terminal columns, not bytes, so that a quoted name in UTF-8 does not push
// its comments out of line.
func render(lines []line) []byte {
	var b bytes.Buffer
	for i := 0; i < len(lines); {
		j := i
		width := 0
		if lines[i].trailing != "" {
			for j < len(lines) && lines[j].trailing != "" && (j == i || !lines[j].blank) {
				width = max(width, 4*lines[j].indent+textColumns(lines[j].text))
				j++
			}
		} else {
			j = i + 1
		}
		for _, l := range lines[i:j] {
			if l.blank {
				b.WriteByte('\n')
			}
			code := strings.Repeat("    ", l.indent) + l.text
			b.WriteString(code)
			if l.trailing != "" {
				b.WriteString(strings.Repeat(" ", width-textColumns(code)+1))
				b.WriteString(l.trailing)
			}
			b.WriteByte('\n')
		}
		i = j
	}
	return b.Bytes()
}

// textColumns is how many terminal columns s takes (as the carets of
// diagnostics count them).
func textColumns(s string) int {
	n := 0
	for _, r := range s {
		n += runeColumns(r)
	}
	return n
}

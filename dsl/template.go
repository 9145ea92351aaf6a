package dsl

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/ir"
)

// Layer templates: `for i in 0..47 { tensor h.{i}.ln_1.weight f32[1600] ... }`
// declares the tensors of its body for i = 0, then all of them for i = 1,
// and so on: block by block, in the order in which a model registers its
// parameters (brace ranges declare one name across all layers, then the
// next). `{i}` in a tensor name, bare or quoted, is the variable's value in
// decimal. Templates nest, and expand into ordinary tensors: the program
// (ir.Tensors) is the same as with the declarations written out.
//
// A template is checked once, not once per iteration: its range, its
// variable, and each tensor declaration of its body (name, dtype, shape),
// so that an error in a body is reported once. Then it is expanded, and
// the names are declared as any others; a repeated name is reported once
// per declaration, with the iteration that repeats it.

// loopVarRE is what a loop variable's name looks like.
var loopVarRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// forSyntax is how a template is written, for hints.
const forSyntax = "a template is written `for NAME in FIRST..LAST { TENSORS }` and repeats the tensor declarations of its body for each value, `{NAME}` in their names standing for it"

// forBody says what the body of a template holds, for hints.
const forBody = "the body of a `for` holds `tensor` declarations and nested `for` templates"

// rangeForm is the hint for a template's range.
const rangeForm = "a `for` runs over FIRST..LAST, non-negative integers with FIRST <= LAST, both included: `0..47` is 48 values"

// loopRef is a reference `{i}` to a loop variable in a tensor name.
type loopRef struct {
	start, end int // the byte range of the braces in the name as written
	name       string
}

// loopRefs returns the references to loop variables in a tensor name as
// written: a bare name, or a quoted one with its quotes.
func loopRefs(s string) []loopRef {
	var out []loopRef
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		if n := loopRefLen(s, i); n > 0 {
			out = append(out, loopRef{start: i, end: i + n, name: s[i+1 : i+n-1]})
			i += n - 1
		}
	}
	return out
}

// tmplLoop is a checked template.
type tmplLoop struct {
	decl   *ForDecl
	name   string
	lo, hi int64
	ok     bool // checked without error: it is expanded
	used   bool // a tensor of its body refers to its variable
	once   bool // its variable is not used: the body is declared once, for lo
	body   []tmplItem
}

// tmplItem is a tensor declaration or a nested template of a template's
// body, checked without error.
type tmplItem struct {
	tensor *tmplTensor
	loop   *tmplLoop
}

// tmplTensor is a tensor declaration of a template's body.
type tmplTensor struct {
	decl *TensorDecl
	text string // the name as written
	refs []loopRef
	// depth is, for each reference, the index of the loop it refers to
	// among the enclosing ones, outermost first.
	depth []int
	form  nameForm
	typ   tensorType
	dups  dupSet
	// unused are the enclosing loops' variables that the name does not use.
	unused []string
}

// declareTemplate checks and expands a template declared at the top of
// file f. It returns false when the program has too many tensors (the
// declarations after it are not checked).
func (c *checker) declareTemplate(f *sourceFile, fd *ForDecl) bool {
	l := c.compileLoop(f, fd, nil)
	if !l.ok {
		return true
	}
	count, bytes := l.size()
	header := spanOf(fd.Pos, fd.Range.EndPos)
	if count > maxExpansion {
		what := "more than " + strconv.Itoa(maxExpansion)
		if count < math.MaxInt64 {
			what = fmt.Sprintf("%d", count)
		}
		c.errorf(f, header, "one declaration declares at most 100000 tensors; split it into several `for` declarations",
			"this `for` declares %s tensors (at most %d)", what, maxExpansion)
		c.rejectLoop(l)
		return true
	}
	if c.nameBytes+bytes > maxNameBytes {
		c.errorf(f, header, "shorten the names or declare fewer tensors",
			"the tensor names of this program would take more than %d MiB", maxNameBytes>>20)
		c.rejectLoop(l)
		return true
	}
	c.nameBytes += bytes
	c.prog.Tensors = slices.Grow(c.prog.Tensors, int(count))
	x := &expansion{c: c, f: f}
	x.iter = x.iteration
	if !x.loop(l) {
		return false
	}
	c.reportTemplateDups(f, l)
	return true
}

// rejectLoop marks the tensors of a template that is not expanded: they
// are missing, and a pattern that matches nothing may have been meant for
// them.
func (c *checker) rejectLoop(l *tmplLoop) {
	c.tensorNameRejected = true
	for _, it := range l.body {
		if it.loop != nil {
			c.rejectLoop(it.loop)
		} else {
			c.badTensorDecl[it.tensor.decl] = true
		}
	}
}

// reportTemplateDups reports the repeated names of each tensor
// declaration of a template, once per declaration.
func (c *checker) reportTemplateDups(f *sourceFile, l *tmplLoop) {
	for _, it := range l.body {
		if it.loop != nil {
			c.reportTemplateDups(f, it.loop)
			continue
		}
		t := it.tensor
		if t.dups.count == 0 {
			continue
		}
		hint := ""
		switch {
		case t.dups.sameDecl && len(t.unused) > 0:
			refs := make([]string, len(t.unused))
			for i, v := range t.unused {
				refs[i] = code("{" + v + "}")
			}
			hint = fmt.Sprintf("its name does not use %s, so each iteration declares it again: put %s in the name, or declare it outside the `for`",
				strings.Join(refs, ", "), refs[0])
		case t.dups.sameDecl:
			hint = "two iterations give the same name: separate the loop variables in the name, e.g. `a.{i}.{j}` rather than `a{i}{j}`"
		}
		c.reportDups(f, t.decl, &t.dups, hint)
		c.badTensorDecl[t.decl] = true
	}
}

// compileLoop checks a template whose enclosing templates are scope
// (outermost first). A template with an error is not expanded, but its
// body is checked all the same, its variable bound, so that every error is
// reported.
func (c *checker) compileLoop(f *sourceFile, fd *ForDecl, scope []*tmplLoop) *tmplLoop {
	l := &tmplLoop{decl: fd, name: fd.Var.Text, ok: true}
	vs := spanOf(fd.Var.Pos, fd.Var.EndPos)
	switch {
	case !fd.In && l.name == "in":
		c.errorf(f, vs, "write e.g. "+code("for i in "+fd.Range.Text+" {")+", and `{i}` in the names of its tensors", "`for` without a loop variable")
		l.ok = false
	case !fd.In:
		c.errorf(f, wordSpan(fd.Range), "write "+code("for "+l.name+" in "+fd.Range.Text+" {")+"; "+forSyntax,
			"missing `in` between the loop variable %s and the range", code(l.name))
		l.ok = false
	case !loopVarRE.MatchString(l.name):
		c.errorf(f, vs, "a loop variable is letters, digits and _, starting with a letter, e.g. `i`",
			"invalid loop variable name %s", code(l.name))
		l.ok = false
	}
	if l.ok {
		for _, o := range scope {
			if o.name == l.name {
				c.errorf(f, vs, "name it differently, e.g. "+code(freshLoopVar(scope)),
					"loop variable %s is already the variable of the `for` on line %d", code(l.name), o.decl.Pos.Line)
				// Its uses in this body were meant for this loop: no
				// "unused" error about the enclosing one.
				o.used = true
				l.ok = false
				break
			}
		}
	}
	lo, hi, ok := c.loopRange(f, fd.Range)
	l.lo, l.hi = lo, hi
	l.ok = l.ok && ok
	inner := append(slices.Clip(scope), l)
	items, others := 0, 0
	for _, d := range fd.Body {
		switch {
		case d.Tensor != nil:
			items++
			if t := c.compileTemplateTensor(f, d.Tensor, inner); t != nil {
				l.body = append(l.body, tmplItem{tensor: t})
			}
		case d.For != nil:
			items++
			if sub := c.compileLoop(f, d.For, inner); sub.ok {
				l.body = append(l.body, tmplItem{loop: sub})
			}
		case d.Semi != nil:
		default:
			others++
			c.notInTemplate(f, d)
		}
	}
	switch {
	case items == 0 && others == 0:
		c.errorf(f, span{fd.Open.Pos.Offset, fd.Close.Pos.Offset + 1}, "a `for` repeats the `tensor` declarations in its braces; "+forBody,
			"empty `for`: its body declares no tensor")
		l.ok = false
	case items == 0:
		// Only declarations that a template cannot hold, each an error
		// already: the body is not empty.
		l.ok = false
	}
	if l.ok && !l.used {
		// A range of one value repeats nothing, so no name would be
		// declared twice: the message says what the rule is instead.
		what := fmt.Sprintf("its body would declare the same names %d times", hi-lo+1)
		if hi == lo {
			what = "no name of its body says which iteration it belongs to"
		}
		c.errorf(f, vs, fmt.Sprintf("write %s in the names of the tensors it repeats, e.g. `h.{%s}.weight`; a name without it is declared again in every iteration",
			code("{"+l.name+"}"), l.name),
			"loop variable %s is not used: %s", code(l.name), what)
		l.once = true
	}
	if !l.ok {
		c.rejectLoop(l)
	}
	return l
}

// freshLoopVar returns a name for a loop variable that none of scope has.
func freshLoopVar(scope []*tmplLoop) string {
	taken := func(s string) bool {
		return slices.ContainsFunc(scope, func(l *tmplLoop) bool { return l.name == s })
	}
	for _, v := range []string{"i", "j", "k", "l", "m", "n"} {
		if !taken(v) {
			return v
		}
	}
	for n := 2; ; n++ {
		if v := "i" + strconv.Itoa(n); !taken(v) {
			return v
		}
	}
}

// loopRange interprets the range of a template, `FIRST..LAST`.
func (c *checker) loopRange(f *sourceFile, w *Word) (lo, hi int64, ok bool) {
	text, sp := w.Text, wordSpan(w)
	if braceRangeLen(text, 0) == len(text) {
		c.errorf(f, sp, rangeForm, "the range of a `for` is written without braces: %s", code(text[1:len(text)-1]))
		return 0, 0, false
	}
	a, b, found := strings.Cut(text, "..")
	if !found {
		hint := rangeForm
		if n, err := strconv.ParseInt(text, 10, 64); err == nil && n > 0 && isDigits(text) {
			hint = fmt.Sprintf("for %d values from 0, write `0..%d`; %s", n, n-1, rangeForm)
		}
		c.errorf(f, sp, hint, "%s is not a range: a `for` runs over FIRST..LAST", code(text))
		return 0, 0, false
	}
	bound := func(s string, off int) (int64, bool) {
		bs := span{sp.start + off, sp.start + off + len(s)}
		switch {
		case s == "":
			c.errorf(f, sp, rangeForm, "range %s lacks a bound", code(text))
		case strings.HasPrefix(s, "-") && isDigits(s[1:]):
			c.errorf(f, bs, rangeForm, "bound %s of the range is negative", code(s))
		case !isDigits(s):
			c.errorf(f, bs, rangeForm, "bound %s of the range is not an integer", code(s))
		case hasLeadingZero(s):
			c.errorf(f, bs, "write "+code(strings.TrimLeft(s[:len(s)-1], "0")+s[len(s)-1:])+": `{i}` stands for the value without leading zeros; a brace range such as `{00..15}` gives zero-padded names",
				"bound %s of the range has a leading zero", code(s))
		default:
			n, err := strconv.ParseInt(s, 10, 64)
			if err == nil {
				return n, true
			}
			c.errorf(f, sp, rangeForm, "range %s is too large (at most %d values)", code(text), maxExpansion)
		}
		return 0, false
	}
	lo, ok1 := bound(a, 0)
	hi, ok2 := bound(b, len(a)+2)
	switch {
	case !ok1 || !ok2:
		return 0, 0, false
	case lo > hi:
		c.errorf(f, sp, "write "+code(b+".."+a)+": a `for` counts up, from FIRST to LAST",
			"range %s is empty: its first bound is larger than its last", code(text))
		return 0, 0, false
	case hi-lo >= maxExpansion:
		c.errorf(f, sp, rangeForm+"; one declaration declares at most 100000 tensors",
			"range %s is too large (at most %d values)", code(text), maxExpansion)
		return 0, 0, false
	}
	return lo, hi, true
}

// notInTemplate reports a declaration other than a tensor or a template
// in the body of a template. It is left out of the program: a stream or
// bucket named so gets no "no such name" error, which would only echo
// this one.
func (c *checker) notInTemplate(f *sourceFile, d *Decl) {
	kw := ""
	switch {
	case d.Import != nil:
		kw = "import"
		c.incomplete = true // its declarations are missing
	case d.Stream != nil:
		kw = "stream"
		c.markBadName(d.Stream.Name)
	case d.Bucket != nil:
		kw = "bucket"
		c.markBadName(d.Bucket.Name)
	case d.Scaler != nil:
		kw = "scaler"
	case d.Block != nil:
		kw = d.Block.Kind
	case d.Run != nil:
		kw = "run"
	case d.Ranks != nil:
		kw = "ranks"
	}
	c.errorf(f, keywordSpan(d.Pos.Offset, len(kw)), "declare it outside the `for`; "+forBody,
		"a template only repeats tensors: %s cannot be inside a `for`", code(kw))
}

// compileTemplateTensor checks a tensor declaration of the body of the
// innermost of the templates scope, once for all its iterations. It
// returns nil when the declaration is rejected for its name.
func (c *checker) compileTemplateTensor(f *sourceFile, d *TensorDecl, scope []*tmplLoop) *tmplTensor {
	errs := len(c.diags)
	n := d.Name
	t := &tmplTensor{decl: d, text: n.source()}
	t.refs = loopRefs(t.text)
	// The name with each reference replaced by as many digits: the form
	// of the name of every iteration, at the offsets of the source.
	form := []byte(t.text)
	uses := make([]bool, len(scope))
	bound := true
	reported := map[string]bool{}
	for _, r := range t.refs {
		k := len(scope) - 1
		for k >= 0 && scope[k].name != r.name {
			k--
		}
		if k < 0 {
			if !reported[r.name] {
				reported[r.name] = true
				c.unboundRef(f, n, r, scope)
			}
			bound = false
			continue
		}
		scope[k].used, uses[k] = true, true
		t.depth = append(t.depth, k)
		for i := r.start; i < r.end; i++ {
			form[i] = '0'
		}
	}
	nameOK := false
	if bound {
		t.form, nameOK = c.checkTensorName(f, n, string(form))
	}
	if !nameOK {
		c.markBadName(n)
		c.tensorNameRejected = true
	}
	t.typ = c.tensorType(f, d)
	for k, used := range uses {
		if !used {
			t.unused = append(t.unused, scope[k].name)
		}
	}
	// dtype == InvalidDType too: a repeated unknown dtype adds no error.
	if len(c.diags) > errs || t.typ.dtype == ir.InvalidDType {
		c.badTensorDecl[d] = true
	}
	if !nameOK {
		return nil
	}
	return t
}

// loopRefOutside reports the references to loop variables in a bare
// tensor name outside any template (a quoted one takes braces
// literally there), and returns whether there are any.
func (c *checker) loopRefOutside(f *sourceFile, n *Name) bool {
	if n.Quoted != "" {
		return false
	}
	refs := loopRefs(n.Bare)
	reported := map[string]bool{}
	for _, r := range refs {
		if !reported[r.name] {
			reported[r.name] = true
			c.unboundRef(f, n, r, nil)
		}
	}
	return len(refs) > 0
}

// unboundRef reports the reference r in name n to a variable that none of
// the enclosing templates scope binds.
func (c *checker) unboundRef(f *sourceFile, n *Name, r loopRef, scope []*tmplLoop) {
	sp := span{n.Pos.Offset + r.start, n.Pos.Offset + r.end}
	ref := code("{" + r.name + "}")
	for _, l := range scope {
		// It was likely meant for one of them: no "not used" error.
		l.used = true
	}
	if len(scope) == 0 {
		c.errorf(f, sp, fmt.Sprintf("%s stands for the variable of an enclosing template: %s declares the tensor for each value; a quoted name takes braces literally: %s",
			ref, code("for "+r.name+" in 0..3 { tensor "+n.Bare+" ... }"), strconv.Quote(n.Bare)),
			"%s refers to no loop variable: the declaration is in no `for`", ref)
		return
	}
	var names, refs []string
	for _, l := range scope {
		names = append(names, l.name)
		refs = append(refs, code("{"+l.name+"}"))
	}
	hint := "the enclosing loops' variables are " + strings.Join(refs, ", ")
	if len(scope) == 1 {
		hint = "the enclosing loop's variable is " + refs[0]
	}
	if s := suggest(r.name, names); s != "" {
		hint = "did you mean " + code("{"+s+"}") + "? " + hint
	}
	c.errorf(f, sp, hint, "%s refers to no loop variable: no enclosing `for` binds %s", ref, code(r.name))
}

// size returns how many tensors a template declares, and at most how many
// bytes their names take (saturating at math.MaxInt64).
func (l *tmplLoop) size() (count, bytes int64) {
	for _, it := range l.body {
		if it.loop != nil {
			n, b := it.loop.size()
			count, bytes = satAdd(count, n), satAdd(bytes, b)
			continue
		}
		t := it.tensor
		count = satAdd(count, t.form.count)
		// Each number adds at most 19 digits to the name's length.
		bytes = satAdd(bytes, satMul(t.form.count, int64(len(t.text)+19*(len(t.form.rs)+len(t.refs)))))
	}
	iters := l.hi - l.lo + 1
	if l.once {
		iters = 1
	}
	return satMul(iters, count), satMul(iters, bytes)
}

// satAdd and satMul add and multiply non-negative numbers, saturating at
// math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// expansion declares the tensors of a template, iteration by iteration.
type expansion struct {
	c *checker
	f *sourceFile
	// loops are the templates being expanded, outermost first, and vals
	// the value of each one's variable.
	loops []*tmplLoop
	vals  []int64
	// iter is x.iteration, made once.
	iter func() string
}

// loop declares the tensors of template l for each value of its variable.
// It returns false when the program has too many tensors.
func (x *expansion) loop(l *tmplLoop) bool {
	hi := l.hi
	if l.once {
		hi = l.lo
	}
	k := len(x.vals)
	x.loops = append(x.loops, l)
	x.vals = append(x.vals, 0)
	for v := l.lo; v <= hi; v++ {
		x.vals[k] = v
		for _, it := range l.body {
			if it.loop != nil {
				if !x.loop(it.loop) {
					return false
				}
				continue
			}
			t := it.tensor
			if !x.c.addTensors(declIn[*TensorDecl]{x.f, t.decl}, t.names(x.vals), t.typ, &t.dups, x.iter) {
				return false
			}
		}
	}
	x.loops, x.vals = x.loops[:k], x.vals[:k]
	return true
}

// iteration says which iteration is being expanded: "i = 3", "l = 1, b = 0".
func (x *expansion) iteration() string {
	parts := make([]string, len(x.loops))
	for i, l := range x.loops {
		parts[i] = fmt.Sprintf("%s = %d", l.name, x.vals[i])
	}
	return strings.Join(parts, ", ")
}

// names returns the tensor names of one iteration: the name with each
// loop variable replaced by its value (vals, by the depth of its loop),
// and brace ranges expanded.
func (t *tmplTensor) names(vals []int64) []string {
	s := t.text
	if len(t.refs) > 0 {
		var b strings.Builder
		prev := 0
		for i, r := range t.refs {
			b.WriteString(t.text[prev:r.start])
			b.WriteString(strconv.FormatInt(vals[t.depth[i]], 10))
			prev = r.end
		}
		b.WriteString(t.text[prev:])
		s = b.String()
	}
	if t.decl.Name.Quoted != "" {
		u, _ := unquote(s)
		return []string{u}
	}
	if len(t.form.rs) == 0 {
		return []string{s}
	}
	rs, _ := ranges(s)
	return expand(s, rs)
}

// opensTemplate reports whether the `{` toks[o] (significant tokens)
// opens the body of a template: `for NAME in RANGE {`, or `for NAME RANGE
// {` without its `in`, the `for` starting a line or following a brace or
// `;` (not a stream named `for` before `bucket b {`).
func opensTemplate(toks []token, o int) bool {
	isFor := func(i int) bool {
		return i >= 0 && toks[i].Type == tokWord && toks[i].Value == "for" &&
			(i == 0 || toks[i-1].Pos.Line != toks[i].Pos.Line || slices.Contains([]string{"{", "}", ";"}, toks[i-1].Value))
	}
	return isFor(o-4) && toks[o-2].Value == "in" || isFor(o-3)
}

// startsTemplate reports whether the word toks[i] is the `for` that starts
// a template, rather than a tensor named so: prev is the significant token
// before it.
func startsTemplate(t, prev token) bool {
	return t.Type == tokWord && t.Value == "for" && !isTensorKeyword(prev)
}

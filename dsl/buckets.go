package dsl

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/ir"
)

// bucketInfo is a checked bucket declaration and where its pieces are.
type bucketInfo struct {
	name   string
	file   *sourceFile
	decl   *BucketDecl
	first  int // index of its first piece in Program.Buckets
	count  int // number of pieces
	wire   ir.DType
	capped bool
}

// bucketOptions are a bucket declaration's options, interpreted.
type bucketOptions struct {
	cap, first int64 // bytes; 0 when absent
	declared   bool  // order declared (the default is reverse)
	wire       ir.DType
	wireWord   *Word
	preDivide  bool // divide before
	ok         bool
}

// declareBuckets checks the bucket declarations in source order (imports
// first), gives each the untaken non-frozen tensors its patterns match
// (first match wins), lays them out and splits capped buckets into pieces.
func (c *checker) declareBuckets() {
	owner := make([]*bucketInfo, len(c.prog.Tensors))
	c.inBucket = make([]bool, len(c.prog.Tensors))
	for _, bd := range c.bucketDecls {
		f, d := bd.file, bd.decl
		name, nameOK := c.identName(f, d.Name, "bucket")
		info := &bucketInfo{name: name, file: f, decl: d}
		if !nameOK {
			// Messages about the bucket name it as written.
			info.name = d.Name.source()
		}
		if nameOK {
			if prev, dup := c.buckets[name]; dup {
				c.errorf(f, nameSpan(d.Name), "bucket names are unique across the program and its imports",
					"duplicate bucket %s (first declared at %s)", code(name), prev.file.pos(prev.decl.Name.Pos.Offset))
			} else {
				c.buckets[name] = info
			}
		}
		opts := c.bucketOptions(f, d)
		if len(d.Patterns) == 0 {
			c.errorf(f, spanOf(d.Pos, d.EndPos), "list the tensors' names or patterns, e.g. `{ * }`", "bucket %s has no patterns", code(d.Name.source()))
		}
		var members []int
		for _, p := range d.Patterns {
			matched := c.matchBucketPattern(f, p, owner)
			for _, ti := range matched {
				if owner[ti] == nil {
					owner[ti] = info
					c.inBucket[ti] = true
					members = append(members, ti)
				}
			}
		}
		c.bucketOrder = append(c.bucketOrder, info)
		c.layoutBucket(info, members, opts)
	}
}

// bucketOptions interprets a bucket's options: cap SIZE, first SIZE,
// order reverse|declared, wire DTYPE, divide before|after, each at most
// once.
func (c *checker) bucketOptions(f *sourceFile, d *BucketDecl) bucketOptions {
	o := bucketOptions{ok: true}
	seen := map[string]*Option{}
	var firstOpt *Option
	for _, opt := range d.Options {
		sp := spanOf(opt.Pos, opt.EndPos)
		if prev, dup := seen[opt.Key]; dup {
			c.errorf(f, sp, "each option is given at most once: remove one of them", "duplicate option %s (first on line %d)", code(opt.Key), prev.Pos.Line)
			o.ok = false
			continue
		}
		seen[opt.Key] = opt
		switch opt.Key {
		case "cap", "first":
			n, msg, hint := parseSize(opt.Value.Text)
			switch {
			case msg != "":
				c.errorf(f, wordSpan(opt.Value), hint, "%s", msg)
				o.ok = false
			case n == 0:
				c.errorf(f, wordSpan(opt.Value), "leave out `"+opt.Key+"` for one unsplit bucket", "%s 0: a bucket piece must hold at least one byte", opt.Key)
				o.ok = false
			case opt.Key == "cap":
				o.cap = n
			default:
				o.first = n
				firstOpt = opt
			}
		case "order":
			switch opt.Value.Text {
			case "reverse":
			case "declared":
				o.declared = true
			default:
				c.errorf(f, wordSpan(opt.Value), "order is reverse (the default: the order backward makes gradients ready) or declared",
					"unknown order %s", code(opt.Value.Text))
			}
		case "wire":
			o.wire = c.dtype(f, opt.Value, "wire")
			o.wireWord = opt.Value
			if o.wire == ir.InvalidDType {
				o.ok = false
			}
		case "divide":
			o.preDivide = c.divideOption(f, opt)
		default:
			c.errorf(f, keywordSpan(opt.Pos.Offset, len(opt.Key)), "bucket options are cap, first, order, wire and divide",
				"%s is not a bucket option", code(opt.Key))
			o.ok = false
		}
	}
	if firstOpt != nil && seen["cap"] == nil {
		c.errorf(f, spanOf(firstOpt.Pos, firstOpt.EndPos), "`first` caps the first piece of a capped bucket; add `cap SIZE` for the others",
			"`first` without `cap`")
		o.first = 0
	}
	return o
}

// matchBucketPattern returns the untaken non-frozen tensors a bucket
// pattern matches, in declaration order, and reports a pattern that
// matches none.
func (c *checker) matchBucketPattern(f *sourceFile, p *Name, owner []*bucketInfo) []int {
	pat, ok := c.compileName(f, p)
	if !ok {
		return nil
	}
	var out []int
	var takenBy *bucketInfo
	frozen := 0
	for _, ti := range c.matchTensors(pat) {
		switch {
		case c.prog.Tensors[ti].Frozen:
			frozen++
		case owner[ti] != nil:
			takenBy = owner[ti]
		default:
			out = append(out, ti)
		}
	}
	if len(out) > 0 || c.incomplete {
		return out
	}
	sp := nameSpan(p)
	switch {
	case takenBy != nil:
		c.errorf(f, sp, fmt.Sprintf("first match wins: the tensors it matches are already in bucket %s (%s)", code(takenBy.name), takenBy.file.pos(takenBy.decl.Name.Pos.Offset)),
			"pattern %s matches no tensor that is not already in a bucket", code(p.source()))
	case frozen > 0:
		c.errorf(f, sp, "frozen tensors have no gradient and are never put in buckets",
			"pattern %s matches only frozen tensors", code(p.source()))
	case c.mayMatchRejected(pat):
	default:
		c.errorf(f, sp, c.noMatchHint(pat, owner), "pattern %s matches no tensor", code(p.source()))
	}
	return nil
}

// tensorHint suggests a tensor name close to a literal pattern: one that
// a bucket could still take (not frozen, not in an earlier bucket, as
// owner says) if any is close, else any.
func (c *checker) tensorHint(p pattern, owner []*bucketInfo) string {
	if !p.literal {
		return ""
	}
	if h := c.prefixHint(p.text); h != "" {
		return h
	}
	var free []string
	for i, t := range c.prog.Tensors {
		if !t.Frozen && (i >= len(owner) || owner[i] == nil) {
			free = append(free, t.Name)
		}
	}
	if h := didYouMean(p.text, free); h != "" {
		return h
	}
	return didYouMean(p.text, c.tensorNames())
}

// prefixHint suggests a glob for a name that is no tensor but begins
// tensor names: `ln_f` for ln_f.weight and ln_f.bias is `ln_f.*`, the way
// a module's name stands for its parameters elsewhere.
func (c *checker) prefixHint(name string) string {
	var first string
	n := 0
	for _, t := range c.prog.Tensors {
		if strings.HasPrefix(t.Name, name+".") {
			if n == 0 {
				first = t.Name
			}
			n++
		}
	}
	switch {
	case n == 1:
		return fmt.Sprintf("no tensor is named %s, but %s is: name it, or write %s for every tensor under %s", code(name), code(first), code(name+".*"), code(name+"."))
	case n > 1:
		return fmt.Sprintf("no tensor is named %s, but %d tensors start with %s (%s, ...): write %s to take them all", code(name), n, code(name+"."), code(first), code(name+".*"))
	}
	return ""
}

// noMatchHint says what to do about a pattern that matches no tensor when
// no tensor name is close to it.
func (c *checker) noMatchHint(p pattern, owner []*bucketInfo) string {
	if h := c.tensorHint(p, owner); h != "" {
		return h
	}
	if len(c.prog.Tensors) == 0 {
		return "the program declares no tensors: declare them with `tensor` or import a model (`import \"models/NAME\"`)"
	}
	if h := c.paddingHint(p); h != "" {
		return h
	}
	return "fix the pattern or remove it; `*` matches any run of characters, dots included (`layer1.*`)"
}

// paddingHint suggests the pattern with its brace ranges written with
// another number of digits, when that matches tensors: a range matches
// numbers written as it writes them, so `h.{5..10}.w` does not match
// `h.005.w` (declared with `{000..012}`), and `g.{01..03}` not `g.1`.
func (c *checker) paddingHint(p pattern) string {
	hasRange := false
	for _, part := range p.parts {
		hasRange = hasRange || part.kind == 'r'
	}
	if !hasRange {
		return ""
	}
	// Widths up to 8 digits, and a bounded number of matches: a hint must
	// not make an error path slow on a program of a million tensors.
	budget := 1 << 20
	for width := 0; width <= 8 && budget > 0; width++ {
		if width == 1 {
			continue // the same as no padding
		}
		text := rangeRE.ReplaceAllStringFunc(p.text, func(r string) string {
			m := rangeRE.FindStringSubmatch(r)
			lo, _ := strconv.ParseInt(m[1], 10, 64)
			hi, _ := strconv.ParseInt(m[2], 10, 64)
			w := braceRange{width: width}
			return "{" + w.format(lo) + ".." + w.format(hi) + "}"
		})
		if text == p.text {
			continue
		}
		alt := compilePattern(text, true)
		for _, t := range c.prog.Tensors {
			if budget--; budget < 0 {
				break
			}
			if alt.match(t.Name) {
				return fmt.Sprintf("did you mean %s? A brace range matches numbers written with as many digits as it has (%s is a tensor)", code(text), code(t.Name))
			}
		}
	}
	return ""
}

// tensorNames returns every tensor name, for suggestions.
func (c *checker) tensorNames() []string {
	out := make([]string, len(c.prog.Tensors))
	for i, t := range c.prog.Tensors {
		out[i] = t.Name
	}
	return out
}

// compileName validates a pattern (or a tensor name used as one) and
// compiles it: a bare pattern may have brace ranges, a quoted one is
// taken literally (globs still apply).
func (c *checker) compileName(f *sourceFile, p *Name) (pattern, bool) {
	sp := nameSpan(p)
	if p.Quoted != "" {
		s, why := p.unquoted()
		if why != "" || s == "" {
			c.errorf(f, sp, why, "invalid pattern %s", p.Quoted)
			return pattern{}, false
		}
		return compilePattern(s, false), true
	}
	if c.badRangeError(f, p, p.Bare) {
		return pattern{}, false
	}
	if !barePatternRE.MatchString(p.Bare) {
		c.errorf(f, sp, "quote names with characters other than letters, digits, _ and dots: \""+p.Bare+"\"", "invalid pattern %s", code(p.Bare))
		return pattern{}, false
	}
	if _, bad := ranges(p.Bare); bad != nil {
		c.reportRangeError(f, p, bad)
		return pattern{}, false
	}
	return compilePattern(p.Bare, true), true
}

// matchTensors returns the indices of the tensors (frozen included) that
// match a pattern, in declaration order. A literal name is looked up;
// other patterns scan the tensors.
func (c *checker) matchTensors(p pattern) []int {
	if p.literal {
		if ti, ok := c.tensorIndex[p.text]; ok {
			return []int{ti}
		}
		return nil
	}
	var out []int
	for ti, t := range c.prog.Tensors {
		if p.match(t.Name) {
			out = append(out, ti)
		}
	}
	return out
}

// layoutBucket orders a bucket's tensors, picks its wire dtype, checks the
// casts and splits it into pieces under the cap, appending the pieces to
// Program.Buckets and setting each tensor's Bucket and Offset.
func (c *checker) layoutBucket(info *bucketInfo, members []int, o bucketOptions) {
	f, d := info.file, info.decl
	slices.Sort(members)
	if !o.declared {
		slices.Reverse(members)
	}
	info.wire = c.wireDType(info, members, o)
	info.first = len(c.prog.Buckets)
	info.capped = o.cap > 0
	if len(members) == 0 {
		return
	}
	wsize := info.wire.Size()
	var pieces [][]int
	var cur []int
	var curBytes int64
	for _, ti := range members {
		t := &c.prog.Tensors[ti]
		var b int64
		if wsize > 0 && t.Elems <= math.MaxInt64/wsize {
			b = t.Elems * wsize
		} else if wsize > 0 {
			c.errorf(f, nameSpan(d.Name), "a buffer is at most 2^63-1 bytes; send it on a smaller wire dtype or split the tensor",
				"tensor %s is 2^63 bytes or more on the %s wire", code(t.Name), info.wire)
			return
		}
		limit := o.cap
		if len(pieces) == 0 && o.first > 0 {
			limit = o.first
		}
		if o.cap > 0 && len(cur) > 0 && b > limit-curBytes {
			pieces = append(pieces, cur)
			cur, curBytes = nil, 0
		}
		if curBytes > math.MaxInt64-b {
			c.errorf(f, nameSpan(d.Name), "give it a `cap`", "bucket %s is 2^63 bytes or more", code(info.name))
			return
		}
		if c.wireBytes > math.MaxInt64-b {
			// Each piece fits, but not all of the buckets' buffers
			// together: a wire wider than the tensors' dtype multiplies
			// their bytes.
			c.errorf(f, nameSpan(d.Name), "the buckets' wire buffers, added up, have at most 2^63-1 bytes; send them on a narrower `wire`, or make the tensors smaller",
				"the buckets total 2^63 bytes or more on the wire, from bucket %s on", code(info.name))
			return
		}
		c.wireBytes += b
		cur = append(cur, ti)
		curBytes += b
	}
	pieces = append(pieces, cur)
	for pi, piece := range pieces {
		name := info.name
		if o.cap > 0 {
			name = fmt.Sprintf("%s[%d]", info.name, pi)
		}
		b := ir.Bucket{Name: name, Decl: info.name, Piece: pi, Wire: info.wire, PreDivide: o.preDivide, Pos: f.pos(d.Name.Pos.Offset)}
		bi := len(c.prog.Buckets)
		for _, ti := range piece {
			t := &c.prog.Tensors[ti]
			t.Bucket = bi
			t.Offset = b.Elems
			b.Elems += t.Elems
			b.Tensors = append(b.Tensors, ti)
		}
		c.prog.Buckets = append(c.prog.Buckets, b)
	}
	info.count = len(pieces)
}

// wireDType returns a bucket's wire dtype: the `wire` option or the
// tensors' common dtype. Mixed dtypes need `wire`; a cast (tensor dtype
// other than the wire's) is only between float dtypes.
func (c *checker) wireDType(info *bucketInfo, members []int, o bucketOptions) ir.DType {
	f, d := info.file, info.decl
	if o.wire != ir.InvalidDType {
		for _, ti := range members {
			t := c.prog.Tensors[ti]
			if t.DType == o.wire || t.DType == ir.InvalidDType {
				continue
			}
			if !t.DType.IsFloat() || !o.wire.IsFloat() {
				c.errorf(f, wordSpan(o.wireWord), "casts are only between float dtypes (f64 f32 f16 bf16); put integer tensors in a bucket of their own",
					"wire %s cannot carry %s tensor %s", o.wire, t.DType, code(t.Name))
				break
			}
		}
		return o.wire
	}
	common := ir.InvalidDType
	for _, ti := range members {
		t := c.prog.Tensors[ti]
		if t.DType == ir.InvalidDType {
			continue
		}
		if common == ir.InvalidDType {
			common = t.DType
			continue
		}
		if t.DType != common {
			first := c.firstOfDType(members, common)
			hint := "add `wire f32` (or another float dtype) to cast them to one dtype on the wire"
			if !t.DType.IsFloat() || !common.IsFloat() {
				hint = "integer tensors cannot be cast; put them in a bucket of their own"
			}
			c.errorf(f, nameSpan(d.Name), hint, "bucket %s mixes dtypes without `wire`: %s (%s) and %s (%s)",
				code(info.name), common, code(first), t.DType, code(t.Name))
			return common
		}
	}
	return common
}

func (c *checker) firstOfDType(members []int, dt ir.DType) string {
	for _, ti := range members {
		if c.prog.Tensors[ti].DType == dt {
			return c.prog.Tensors[ti].Name
		}
	}
	return ""
}

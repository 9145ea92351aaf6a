package dsl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/syncgen/syncgen/ir"
)

// Out-of-place collectives: `allreduce grads into sums`. The first `into
// NAME` of the program declares the output buffer NAME (a bucket of the
// plan that holds no tensors): its dtype is the source's wire dtype, its
// length follows from the source's and the collective (allreduce,
// broadcast, reduce: the same; reducescatter: one rank's slice of the
// padded source; allgather: the world's size times the source). A later
// statement may name it as a target (a source of its own, or in place) or
// write it again with the same length and dtype. A collective with `into`
// reads its source and writes only the output.

// intoState is what the checker knows of the output buffers.
type intoState struct {
	// outputs are the buffers declared so far, by name.
	outputs map[string]*outputInfo
	// firstWrite is, for every name that an `into` writes anywhere in the
	// step or init block, the line of its first `into` (what a use before
	// it is told).
	firstWrite map[string]int
}

// outputInfo is one output buffer.
type outputInfo struct {
	bucket int
	size   sizeExpr
	dtype  ir.DType
	line   int // of the `into` that declared it
}

// sizeExpr is a buffer's length as a function of the world size: base
// elements, then ops applied in order, 's' for one rank's slice of the
// padded buffer (ceil(n/size)) and 'g' for size times n. A slice of a
// gathered buffer is the buffer again, so "gs" never occurs.
type sizeExpr struct {
	base int64
	ops  string
}

// then returns the length after an out-of-place collective of kind k.
func (e sizeExpr) then(k ir.Collective) sizeExpr {
	switch k {
	case ir.ReduceScatter:
		if strings.HasSuffix(e.ops, "g") {
			return sizeExpr{e.base, strings.TrimSuffix(e.ops, "g")}
		}
		return sizeExpr{e.base, e.ops + "s"}
	case ir.AllGather:
		return sizeExpr{e.base, e.ops + "g"}
	}
	return e
}

// String writes the length for messages: "1000 elements",
// "ceil(1000/ranks) elements", "ranks×1000 elements".
func (e sizeExpr) String() string {
	s := fmt.Sprint(e.base)
	for _, op := range e.ops {
		if op == 's' {
			s = "ceil(" + s + "/ranks)"
		} else {
			s = "ranks×" + s
		}
	}
	return s + " elements"
}

// outSizes maps a collective to how its output's length derives from its
// source's.
var outSizes = map[ir.Collective]ir.OutSize{
	ir.AllReduce: ir.OutSame, ir.Broadcast: ir.OutSame, ir.Reduce: ir.OutSame,
	ir.ReduceScatter: ir.OutShard, ir.AllGather: ir.OutGather,
}

// scanInto notes the first `into` of every output name in the init and
// step blocks, for the error of a use before it.
func (c *checker) scanInto() {
	c.into.outputs = map[string]*outputInfo{}
	c.into.firstWrite = map[string]int{}
	var walk func(body []*Stmt)
	walk = func(body []*Stmt) {
		for _, s := range body {
			switch {
			case s.Group != nil:
				walk(s.Group.Body)
			case s.Collective != nil:
				for _, o := range s.Collective.Options {
					if o.Key == "into" && o.Value != nil {
						if line, seen := c.into.firstWrite[o.Value.Text]; !seen || o.Pos.Line < line {
							c.into.firstWrite[o.Value.Text] = o.Pos.Line
						}
					}
				}
			}
		}
	}
	for _, b := range []*BlockDecl{c.initBlock, c.stepBlock} {
		if b != nil {
			walk(b.Body)
		}
	}
}

// intoOption returns the collective's first `into` option, or nil.
func intoOption(cs *CollectiveStmt) *Option {
	for _, o := range cs.Options {
		if o.Key == "into" {
			return o
		}
	}
	return nil
}

// sizeOf returns bucket b's length as an expression.
func (c *checker) sizeOf(b int) sizeExpr {
	bk := &c.prog.Buckets[b]
	if bk.Output != nil {
		if o := c.into.outputs[bk.Name]; o != nil {
			return o.size
		}
	}
	return sizeExpr{base: bk.Elems}
}

// resolveInto resolves the `into NAME` option o of collective cs, whose
// other options and targets s holds (targetsOK: they resolved): it
// declares the output buffer NAME, or checks a later write of it against
// its declaration, and sets s.Into.
func (c *checker) resolveInto(cs *CollectiveStmt, o *Option, s *ir.Stmt, targetsOK bool) bool {
	ok := c.declareInto(cs, o, s, targetsOK)
	if name := o.Value.Text; !ok && c.into.outputs[name] == nil {
		// Its later uses would only echo this error.
		c.badNames[name] = true
	}
	return ok
}

// declareInto is resolveInto but for the names of failed declarations.
func (c *checker) declareInto(cs *CollectiveStmt, o *Option, s *ir.Stmt, targetsOK bool) bool {
	f := c.main.file
	kw := keywordSpan(o.Pos.Offset, len(o.Key))
	name := o.Value.Text
	val := wordSpan(o.Value)
	if !identRE.MatchString(name) || isReserved(name) {
		c.errorf(f, val, "an output buffer is named like a bucket: letters, digits and _, not starting with a digit, not a keyword",
			"invalid output buffer name %s", code(name))
		return false
	}
	if len(cs.Targets) != 1 {
		c.errorf(f, kw, "write one collective per source, each with its own `into`",
			"`into` takes one source: this %s has %d targets", cs.Kind, len(cs.Targets))
		return false
	}
	if !targetsOK {
		return false // the target's error is reported
	}
	if len(s.Buckets) == 0 {
		c.errorf(f, kw, "name a bucket that holds gradients", "`into` from %s, which holds no tensors", code(cs.Targets[0].Name.name().source()))
		return false
	}
	if len(s.Buckets) != 1 {
		c.errorf(f, kw, fmt.Sprintf("name one piece (`%s into ...`) or a bucket without `cap`: an output buffer has one source buffer", c.prog.Buckets[s.Buckets[0]].Name),
			"`into` takes one buffer: %s is %d buckets", code(cs.Targets[0].Name.name().source()), len(s.Buckets))
		return false
	}
	src := s.Buckets[0]
	sb := &c.prog.Buckets[src]
	switch {
	case s.Op == ir.WAvg:
		c.errorf(f, kw, "use `op avg`, or the in-place form: a weighted average scales each rank's input in place, and `into` leaves its source as it was",
			"`into` with op wavg")
		return false
	case s.Hierarchical:
		c.errorf(f, kw, "use `algo flat` (the default) with `into`, or the in-place form",
			"`into` with algo hierarchical")
		return false
	case s.Op == ir.Avg && sb.PreDivide:
		c.errorf(f, kw, fmt.Sprintf("bucket %s divides before the sum, in place; `into` leaves its source as it was: use the in-place form", sb.Decl),
			"`into` with `divide before`")
		return false
	}
	if _, clash := c.streamIndex[name]; clash {
		c.errorf(f, val, "choose another name for the output buffer", "%s is a stream", code(name))
		return false
	}
	if _, clash := c.tensorIndex[name]; clash {
		c.errorf(f, val, "choose another name for the output buffer", "%s is a tensor", code(name))
		return false
	}
	if b := c.buckets[name]; b != nil && b.decl != nil {
		c.errorf(f, val, "`into` names a new output buffer, or one that an earlier `into` wrote; drop `into` to work in place on the bucket",
			"%s is a bucket (declared at %s)", code(name), b.file.pos(b.decl.Name.Pos.Offset))
		return false
	}
	if sb.Name == name {
		c.errorf(f, val, "drop `into` to work in place, or write into another buffer", "%s is this collective's source", code(name))
		return false
	}
	size := c.sizeOf(src).then(s.Collective)
	if prev := c.into.outputs[name]; prev != nil {
		if prev.size != size || prev.dtype != sb.Wire {
			c.errorf(f, val, "an output buffer keeps the length and dtype of its first write: write into another name",
				"%s is written on line %d as %s of %s, here as %s of %s", code(name), prev.line, prev.size, prev.dtype, size, sb.Wire)
			return false
		}
		s.Into = []int{prev.bucket}
		return true
	}
	idx := len(c.prog.Buckets)
	c.prog.Buckets = append(c.prog.Buckets, ir.Bucket{
		Name: name, Decl: name, Wire: sb.Wire, Elems: sb.Elems,
		Output: &ir.Output{Of: src, Size: outSizes[s.Collective]},
		Pos:    f.pos(o.Value.Pos.Offset),
	})
	c.into.outputs[name] = &outputInfo{bucket: idx, size: size, dtype: sb.Wire, line: o.Pos.Line}
	c.buckets[name] = &bucketInfo{name: name, file: f, first: idx, count: 1, wire: sb.Wire}
	s.Into = []int{idx}
	return true
}

// isReserved reports whether w is a reserved word.
func isReserved(w string) bool { return slices.Contains(reservedWords, w) }

// outputLater reports a target that names an output buffer that an `into`
// writes only later in the program, and says so.
func (c *checker) outputLater(f *sourceFile, t *Target, name string) bool {
	line, later := c.into.firstWrite[name]
	if !later || c.into.outputs[name] != nil {
		return false
	}
	if c.badNames[name] {
		return true // its `into` has an error
	}
	c.errorf(f, spanOf(t.Pos, t.EndPos), "an output buffer exists from its first `into` on: move this statement after it",
		"%s is used before it is written: its first `into` is on line %d", code(name), line)
	return true
}

// noOutputs reports the output buffers among the buckets of an update or
// unscale (what): they hold no gradients.
func (c *checker) noOutputs(targets []*Target, buckets []int, what string) bool {
	for _, b := range buckets {
		if bk := &c.prog.Buckets[b]; bk.Output != nil {
			sp := spanOf(targets[0].Pos, targets[len(targets)-1].EndPos)
			c.errorf(c.main.file, sp, what+" works on the gradients' buckets; name the bucket that the output was computed from",
				"%s is an output buffer of `into`, with no tensors", code(bk.Name))
			return false
		}
	}
	return true
}

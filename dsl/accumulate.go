package dsl

// Gradient accumulation: `step accumulate N { ... }` is one optimizer step
// of N micro-batches (docs/language.md, "init and step"). Its backwards
// and computes run on every micro-batch, every other statement only on the
// last, after its backward; each backward adds its gradients to what the
// buffers hold. The rules checked here:
//
//   - `accumulate` only on `step`, at most once, with an integer N >= 1
//     (`accumulate 1` is a plain step);
//   - with N >= 2, at most one whole backward (a second one would add the
//     micro-batch's gradients twice);
//   - with N >= 2, a statement that synchronises a bucket (a collective,
//     update or unscale) comes after every backward that fills one of its
//     tensors: it runs on the last micro-batch, and must see that
//     micro-batch's gradients.

import (
	"github.com/syncgen/syncgen/ir"
)

// resolveAccumulate checks the `accumulate` of the init and step blocks
// and sets the program's Accumulate.
func (c *checker) resolveAccumulate() {
	f := c.main.file
	if b := c.initBlock; b != nil {
		for _, a := range b.Accumulate {
			c.errorf(f, spanOf(a.Pos, a.EndPos), "init runs once, before the first step; write `step accumulate N { ... }` to accumulate the step's gradients",
				"`accumulate` on init")
		}
	}
	b := c.stepBlock
	if b == nil || len(b.Accumulate) == 0 {
		return
	}
	for _, a := range b.Accumulate[1:] {
		c.errorf(f, spanOf(a.Pos, a.EndPos), "give the number of micro-batches once", "`accumulate` given twice (first on line %d)", b.Accumulate[0].Pos.Line)
	}
	a := b.Accumulate[0]
	if a.Count == nil {
		c.errorf(f, spanOf(a.Pos, a.EndPos), "give the number of micro-batches of a step, e.g. `step accumulate 4 {`", "`accumulate` without its number of micro-batches")
		return
	}
	n, msg := parseInt(a.Count.Text, "accumulate")
	switch {
	case msg != "":
		c.errorf(f, wordSpan(a.Count), intHint(a.Count.Text, msg, "accumulate 4"), "%s", msg)
		return
	case n < 1:
		c.errorf(f, wordSpan(a.Count), "a step has at least one micro-batch: `accumulate 1` is a plain step", "accumulate %d: the number of micro-batches must be at least 1", n)
		return
	}
	if n >= 2 && len(b.Accumulate) == 1 {
		c.prog.Accumulate = n
	}
}

// checkAccumulated checks the rules of a step of several micro-batches
// (see the top of the file) on the resolved step.
func (c *checker) checkAccumulated() {
	n := c.prog.Accumulate
	if n < 2 || c.stepBlock == nil {
		return
	}
	f := c.main.file
	body := stmts(c.stepBlock.Body)
	steps := c.prog.Step
	whole := 0
	for i, s := range steps {
		if i >= len(body) {
			return
		}
		if s.Kind == ir.StmtBackward && s.Tensors == nil {
			if whole > 0 {
				c.errorf(f, spanOf(body[i].Pos, body[i].EndPos),
					"with `accumulate`, the step's backward runs once per micro-batch; remove this one, or raise the number of micro-batches",
					"second whole backward in a step with `accumulate %d` (the first is on line %d)", n, whole)
			} else {
				whole = s.Pos.Line
			}
		}
	}
	for i, s := range steps {
		if i >= len(body) || !synchronises(s) {
			continue
		}
		for j := i + 1; j < len(steps); j++ {
			if steps[j].Kind == ir.StmtBackward && c.fillsAny(steps[j], s) {
				c.errorf(f, spanOf(body[i].Pos, body[i].EndPos),
					"with `accumulate`, collectives, updates and unscales run on the last micro-batch, after the gradients are accumulated; move it after the backward",
					"%s before the backward on line %d in a step with `accumulate %d`: it would miss the last micro-batch's gradients", stmtWord(body[i]), steps[j].Pos.Line, n)
				break
			}
		}
	}
}

// synchronises reports whether s reads or moves buckets' gradients: a
// collective, a group of them, an update or an unscale.
func synchronises(s ir.Stmt) bool {
	switch s.Kind {
	case ir.StmtCollective, ir.StmtGroup, ir.StmtUpdate, ir.StmtUnscale:
		return true
	}
	return false
}

// fillsAny reports whether backward b fills a gradient of a bucket that s
// (or a member of group s) targets: a whole backward fills every bucket, a
// piece those of its tensors.
func (c *checker) fillsAny(b, s ir.Stmt) bool {
	if b.Tensors == nil {
		return true
	}
	filled := map[int]bool{}
	for _, t := range b.Tensors {
		if t >= 0 && t < len(c.prog.Tensors) {
			filled[c.prog.Tensors[t].Bucket] = true
		}
	}
	targets := s.Buckets
	for _, m := range s.Body {
		targets = append(targets[:len(targets):len(targets)], m.Buckets...)
	}
	for _, bk := range targets {
		if filled[bk] {
			return true
		}
	}
	return false
}

// stmtWord names a statement by its keyword, for messages.
func stmtWord(s *Stmt) string {
	switch {
	case s.Collective != nil:
		return code(s.Collective.Kind)
	case s.Group != nil:
		return "`group`"
	case s.Update != nil:
		return "`update`"
	case s.Unscale != nil:
		return "`unscale`"
	}
	return "statement"
}

// accumulateText is a block's `accumulate N` parts as the formatter writes
// them, each as written (a repeated or incomplete one stays, for the
// checker to report).
func accumulateText(acc []*Accumulate) string {
	out := ""
	for _, a := range acc {
		out += " accumulate"
		if a.Count != nil {
			out += " " + a.Count.Text
		}
	}
	return out
}

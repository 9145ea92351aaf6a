package dsl

// A backward in pieces: `backward DURATION for PATTERN {, PATTERN}` makes
// ready only the non-frozen tensors its patterns match (docs/language.md,
// §4). The rules of a block that has pieces:
//
//   - every pattern matches a tensor with a gradient;
//   - each tensor is made ready by at most one piece of the block, and a
//     block's backwards are either all pieces or all whole (a whole backward
//     refills every gradient, so mixing them would refill some twice);
//   - a collective `after ready` waits for buckets whose every non-frozen
//     tensor an earlier piece of the block made ready;
//   - every non-frozen tensor of a bucket that a statement of the block
//     synchronises (collective, update, unscale) is made ready by a piece.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/syncgen/syncgen/ir"
)

// piecesState is what the checks of a block's backward pieces remember.
type piecesState struct {
	// wholeLine and pieceLine are the lines of the block's first whole
	// backward and first piece (0: none yet).
	wholeLine, pieceLine int
	// readyBy[t] is the line of the piece that made tensor t ready.
	readyBy map[int]int
	// targets lists the buckets that the block's statements synchronise,
	// each with where it is first targeted, in that order.
	targets []pieceTarget
}

type pieceTarget struct {
	bucket int
	at     span
}

// resolvePiece checks a backward's or compute's `for` patterns and returns
// the tensors of a backward in pieces (nil for a whole backward).
func (c *checker) resolvePiece(st *blockState, t *TimedStmt) ([]int, bool) {
	f := c.main.file
	ps := &st.pieces
	line := t.Pos.Line
	if len(t.For) == 0 {
		if t.Kind != "backward" {
			return nil, true
		}
		if ps.pieceLine > 0 {
			c.errorf(f, keywordSpan(t.Pos.Offset, len(t.Kind)),
				"a whole backward refills every gradient; give it `for PATTERN` as the other backwards of the block, or remove the pieces",
				"whole backward after the backward in pieces on line %d", ps.pieceLine)
			return nil, false
		}
		if ps.wholeLine == 0 {
			ps.wholeLine = line
		}
		return nil, true
	}
	if t.Kind != "backward" {
		c.errorf(f, spanOf(t.For[0].Pos, t.For[len(t.For)-1].EndPos), "only a backward makes gradients ready; remove `for ...`",
			"%s takes no `for`", t.Kind)
		return nil, false
	}
	ok := true
	if ps.wholeLine > 0 {
		c.errorf(f, spanOf(t.For[0].Pos, t.For[len(t.For)-1].EndPos),
			"the whole backward already refilled every gradient; give every backward of the block `for PATTERN`, or none",
			"backward in pieces after the whole backward on line %d", ps.wholeLine)
		ok = false
	}
	if ps.readyBy == nil {
		ps.readyBy = map[int]int{}
	}
	if ps.pieceLine == 0 {
		ps.pieceLine = line
	}
	mine := map[int]bool{}
	for _, pn := range t.For {
		n := pn.name()
		p, pok := c.compileName(f, n)
		if !pok {
			ok = false
			continue
		}
		var live []int
		for _, ti := range c.matchTensors(p) {
			if !c.prog.Tensors[ti].Frozen {
				live = append(live, ti)
			}
		}
		if len(live) == 0 {
			hint := "a piece covers the tensors its patterns match, as a bucket's do"
			if h := c.tensorHint(p, nil); h != "" {
				hint = h
			}
			what := "no tensor"
			if len(c.matchTensors(p)) > 0 {
				what = "only frozen tensors, which have no gradient,"
				hint = "remove the pattern: frozen tensors are never made ready"
			}
			c.errorf(f, nameSpan(n), hint, "pattern %s of the backward matches %s", code(n.source()), what)
			ok = false
			continue
		}
		for _, ti := range live {
			if mine[ti] {
				continue
			}
			if prev, dup := ps.readyBy[ti]; dup {
				c.errorf(f, nameSpan(n),
					"each tensor is made ready by one piece of a step; remove it from one of the two backwards (a micro-batch is a step of its own)",
					"tensor %s is already made ready by the backward on line %d", code(c.prog.Tensors[ti].Name), prev)
				ok = false
				continue
			}
			mine[ti] = true
		}
	}
	var out []int
	for ti := range c.prog.Tensors {
		if mine[ti] {
			out = append(out, ti)
			ps.readyBy[ti] = line
		}
	}
	return out, ok
}

// notePieceTargets remembers the buckets that a collective, update or
// unscale synchronises, and checks that a collective `after ready` waits
// only for buckets that earlier pieces made ready.
func (c *checker) notePieceTargets(st *blockState, s ir.Stmt, at span, opts []*Option) {
	ps := &st.pieces
	if s.Kind == 0 || st.kind != "step" {
		return
	}
	for _, b := range s.Buckets {
		if !hasTarget(ps.targets, b) {
			ps.targets = append(ps.targets, pieceTarget{bucket: b, at: at})
		}
	}
	if ps.pieceLine == 0 || ps.wholeLine > 0 || s.Kind != ir.StmtCollective || s.After.Kind != ir.AfterReady {
		return
	}
	sp := at
	for _, o := range opts {
		if o.Key == "after" && o.Value != nil && o.Value.Text == "ready" {
			sp = spanOf(o.Pos, o.EndPos)
		}
	}
	for _, b := range s.Buckets {
		if missing := c.notReady(ps, b); len(missing) > 0 {
			c.errorf(c.main.file, sp,
				"add them to the `for` of a backward before this statement, or wait with `after STREAM`",
				"`after ready` on bucket %s, whose tensors %s no earlier backward of the step makes ready",
				code(c.prog.Buckets[b].Name), missing)
		}
	}
}

// checkPiecesCover checks, at the end of a block with pieces, that every
// bucket it synchronises has all its gradients made ready.
func (c *checker) checkPiecesCover(st *blockState) {
	ps := &st.pieces
	if ps.pieceLine == 0 || ps.wholeLine > 0 {
		return // no pieces, or a whole backward made everything ready
	}
	for _, tg := range ps.targets {
		if missing := c.notReady(ps, tg.bucket); len(missing) > 0 {
			c.errorf(c.main.file, tg.at,
				"add them to the `for` of a backward of the step: a bucket holds gradients only once every tensor of it is made ready",
				"bucket %s is synchronised, but no backward of the step makes ready its tensors %s", code(c.prog.Buckets[tg.bucket].Name), missing)
		}
	}
}

// notReady lists (for a message) bucket b's non-frozen tensors that no
// piece has made ready so far; "" when there is none.
func (c *checker) notReady(ps *piecesState, b int) string {
	if b < 0 || b >= len(c.prog.Buckets) {
		return ""
	}
	var names []string
	for _, ti := range c.prog.Buckets[b].Tensors {
		if _, ok := ps.readyBy[ti]; ok || c.prog.Tensors[ti].Frozen {
			continue
		}
		names = append(names, code(c.prog.Tensors[ti].Name))
	}
	const shown = 3
	if len(names) > shown {
		return fmt.Sprintf("%s (and %d more)", strings.Join(names[:shown], ", "), len(names)-shown)
	}
	return strings.Join(names, ", ")
}

func hasTarget(ts []pieceTarget, b int) bool {
	for _, t := range ts {
		if t.bucket == b {
			return true
		}
	}
	return false
}

// filledBuckets returns the buckets whose gradients a backward of tensors
// refills: nil for a whole backward (every bucket), else those of the
// piece's tensors that are in a bucket (an implicit bucket not yet
// created holds nothing to forget).
func (c *checker) filledBuckets(tensors []int) []int {
	if tensors == nil {
		return nil
	}
	out := []int{}
	for _, t := range tensors {
		if b := c.prog.Tensors[t].Bucket; b >= 0 && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

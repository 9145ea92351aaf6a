package dsl

import "github.com/syncgen/syncgen/ir"

// resolveBarrier resolves `barrier [on STREAM] [after STREAM]`: every rank
// meets the others on STREAM (by default the collectives' stream, comm).
// It moves no bucket, so it takes only the options of a timed statement.
func (c *checker) resolveBarrier(b *BarrierStmt, inGroup bool) ir.Stmt {
	f := c.main.file
	kw := keywordSpan(b.Pos.Offset, len("barrier"))
	if inGroup {
		c.errorf(f, kw, "a group only issues collectives; put the barrier before or after the group", "barrier inside group")
		return ir.Stmt{}
	}
	s := ir.Stmt{Kind: ir.StmtBarrier, Pos: f.pos(b.Pos.Offset)}
	on, ok := c.timedOptions(&TimedStmt{Kind: "barrier", Options: b.Options}, &s)
	stream, sok := c.stmtStream(f, on, "comm", "barrier", kw)
	if !ok || !sok {
		return ir.Stmt{}
	}
	s.Stream = stream
	return s
}

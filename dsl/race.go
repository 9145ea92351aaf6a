package dsl

import (
	"fmt"

	"github.com/syncgen/syncgen/ir"
)

// The data race check. Streams run concurrently; two statements on
// different streams that touch the same bucket, at least one of them
// writing it, must be ordered, or the result depends on timing. Orders come
// from: program order on one stream; `after STREAM` (the collective waits
// for everything queued on STREAM so far); `after ready` (the collective
// waits for the latest backward's filling of its buckets); `wait S` (the
// host waits for S, so everything issued later comes after S's queued
// work). Between steps the runtime drains every stream, so each block is
// checked on its own from an empty history.
//
// It is modelled with vector clocks: every statement is an event on its
// stream, and its clock says, for each stream, how many of that stream's
// events are ordered before it. Event p happens before event e exactly
// when p.clock[p.stream] <= e.clock[p.stream].
//
// backward writes every bucket (every bucket holds gradients of non-frozen
// tensors); collectives read and write their buckets; compute touches none.
// So any two accesses of one bucket from different streams must be
// ordered; for each bucket it is enough to remember the latest access per
// stream, since earlier ones on the same stream are ordered before it.

// vclock is a vector clock indexed by stream.
type vclock []int

func (v vclock) join(w vclock) {
	for i := range v {
		v[i] = max(v[i], w[i])
	}
}

// event is one statement's execution on its stream.
type event struct {
	stream int
	clock  vclock
	what   string // "backward", "allreduce", ... for messages
	pos    ir.Pos
}

// before reports whether p happens before e.
func (p *event) before(e *event) bool { return p.clock[p.stream] <= e.clock[p.stream] }

// raceState is the vector-clock state of one block.
type raceState struct {
	c            *checker
	streams      []vclock // what each stream's next event is ordered after
	host         vclock   // what the host has waited for
	lastBackward *event
	// access[b][s] is the latest event on stream s that touched bucket b.
	access   map[int][]*event
	reported map[raceKey]bool
}

// raceKey identifies a reported race: the statement and the other stream.
type raceKey struct {
	pos    ir.Pos
	stream int
}

// checkRaces checks one block (nil: nothing to check).
func (c *checker) checkRaces(b *BlockDecl, resolved []ir.Stmt) {
	if b == nil {
		return
	}
	n := len(c.prog.Streams)
	r := &raceState{c: c, host: make(vclock, n), access: map[int][]*event{}, reported: map[raceKey]bool{}}
	for range n {
		r.streams = append(r.streams, make(vclock, n))
	}
	body := stmts(b.Body)
	for i, s := range resolved {
		if i >= len(body) {
			break
		}
		if s.Kind == ir.StmtGroup && body[i].Group != nil {
			members := stmts(body[i].Group.Body)
			for j, m := range s.Body {
				if j < len(members) {
					r.stmt(m, members[j])
				}
			}
			continue
		}
		r.stmt(s, body[i])
	}
}

// stmt applies one statement to the clocks and checks its accesses.
func (r *raceState) stmt(s ir.Stmt, src *Stmt) {
	n := len(r.host)
	if s.Kind == 0 || s.Stream < 0 || s.Stream >= n {
		return // not resolved: already an error
	}
	if s.Kind == ir.StmtWait {
		r.host.join(r.streams[s.Stream])
		return
	}
	clock := make(vclock, n)
	copy(clock, r.streams[s.Stream])
	clock.join(r.host)
	switch s.After.Kind {
	case ir.AfterStream:
		if s.After.Stream >= 0 && s.After.Stream < n {
			clock.join(r.streams[s.After.Stream])
		}
	case ir.AfterReady:
		if r.lastBackward != nil {
			clock.join(r.lastBackward.clock)
		}
	}
	clock[s.Stream]++
	copy(r.streams[s.Stream], clock)
	e := &event{stream: s.Stream, clock: clock, pos: s.Pos}
	var touched []int
	switch s.Kind {
	case ir.StmtBackward:
		e.what = "backward"
		r.lastBackward = e
		touched = make([]int, len(r.c.prog.Buckets))
		for i := range touched {
			touched[i] = i
		}
	case ir.StmtCollective:
		e.what = s.Collective.String()
		touched = s.Buckets
	default:
		return
	}
	for _, b := range touched {
		last := r.access[b]
		if last == nil {
			last = make([]*event, n)
			r.access[b] = last
		}
		for t, p := range last {
			if p != nil && t != e.stream && !p.before(e) {
				r.report(e, p, b, src)
			}
		}
		last[e.stream] = e
	}
}

// report records a race between e and the earlier p on bucket b, once per
// statement and other stream (one fix, such as a wait, orders them all).
func (r *raceState) report(e, p *event, b int, src *Stmt) {
	key := raceKey{e.pos, p.stream}
	if r.reported[key] {
		return
	}
	r.reported[key] = true
	c := r.c
	streams := c.prog.Streams
	es, ps := streams[e.stream].Name, streams[p.stream].Name
	var hint string
	switch {
	case p.what == "backward" && e.what != "backward":
		hint = fmt.Sprintf("add `after ready` (or `after %s`) so that it waits for the gradients", ps)
	case e.what == "backward":
		hint = fmt.Sprintf("add `wait %s` before the backward, so that the %s has finished with the bucket", ps, p.what)
	default:
		hint = fmt.Sprintf("add `after %s`, or `wait %s` before it, or run both on one stream", ps, ps)
	}
	f := c.main.file
	c.errorf(f, spanOf(src.Pos, src.EndPos), hint,
		"data race on bucket %s: this %s on stream %s is not ordered after the %s on stream %s (line %d)",
		code(c.prog.Buckets[b].Name), e.what, code(es), p.what, code(ps), p.pos.Line)
}

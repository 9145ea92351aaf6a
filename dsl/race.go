package dsl

import (
	"fmt"
	"slices"

	"github.com/syncgen/syncgen/ir"
)

// The data race check. Streams run concurrently; two statements on
// different streams that touch the same bucket, at least one of them
// writing it, must be ordered, or the result depends on timing. Orders come
// from: program order on one stream; `after STREAM` (the collective waits
// for everything queued on STREAM so far); `after ready` (the collective
// waits for the latest backward's filling of its own buckets); `wait S` (the
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
// tensors), a backward in pieces the buckets of its tensors; collectives and unscale read and write their buckets
// (a collective with `into` reads its source and writes its output buffer, which no backward writes); update
// reads them, and writes a bucket only where it was reduce-scattered since
// the last backward (the new parameters of this rank's slice go back into
// it, for the allgather); compute touches none. A write must be ordered
// after every access of the bucket on other streams, a read after every
// write; for each bucket it is enough to remember the latest access and
// the latest write per stream, since earlier ones on the same stream are
// ordered before them. `after synced` orders an update or unscale after
// each of its buckets' latest collective: the runtime works on the
// buckets in turn on the statement's stream, each after waiting for its
// own collective, so a bucket's work is ordered after the collectives of
// the buckets before it in the statement, and not after those of the
// buckets after it. The step's overflow flag is touched like a bucket:
// every unscale writes it, every update reads it, first as it works on the
// statement's first bucket.
//
// A backward is not one event but one per bucket, in the order the buckets
// become ready (the runtime fills the gradients in reverse declaration
// order and records a bucket's ready event after its last gradient), and
// `after ready` orders a collective after the ready events of its own
// buckets only: a bucket that becomes ready early can be reduced, and what
// follows it on its stream can run, while the backward still fills the
// buckets that become ready later.

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
	// synced: the work of an update or unscale `after synced`.
	synced bool
}

// before reports whether p happens before e.
func (p *event) before(e *event) bool { return p.clock[p.stream] <= e.clock[p.stream] }

// raceState is the vector-clock state of one block.
type raceState struct {
	c       *checker
	streams []vclock // what each stream's next event is ordered after
	host    vclock   // what the host has waited for
	// ready[b] is the ready event of bucket b in the latest backward
	// (nil before the block's first backward).
	ready []*event
	// readyOrder lists the buckets in the order a backward makes them ready.
	readyOrder []int
	// access[b][s] is the latest event on stream s that touched bucket b,
	// writes[b][s] the latest that wrote it.
	access, writes map[int][]*event
	// synced[b] is the latest collective of bucket b (for `after synced`);
	// lastColl[b] the kind of the latest since the last backward.
	synced   map[int]*event
	lastColl map[int]ir.Collective
	reported map[raceKey]bool
	// inGroup is set while a group's members are applied.
	inGroup bool
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
	r := &raceState{c: c, host: make(vclock, n), access: map[int][]*event{}, writes: map[int][]*event{},
		synced: map[int]*event{}, lastColl: map[int]ir.Collective{}, reported: map[raceKey]bool{},
		readyOrder: readyOrder(c.prog)}
	for range n {
		r.streams = append(r.streams, make(vclock, n))
	}
	body := stmts(b.Body)
	for i, s := range resolved {
		if i >= len(body) {
			break
		}
		if s.Kind == ir.StmtGroup && body[i].Group != nil {
			r.group(s, stmts(body[i].Group.Body))
			continue
		}
		r.stmt(s, body[i], r.streams)
	}
}

// group applies a group's collectives. They are issued together (one NCCL
// group), so they are not ordered among themselves: an `after STREAM` in
// a member waits for what STREAM had queued before the group, not for
// another member on it (the runtime records the event as each member is
// issued, before the group's collectives are queued), and a bucket in two
// members is a race whatever their streams.
func (r *raceState) group(s ir.Stmt, members []*Stmt) {
	before := make([]vclock, len(r.streams))
	for i, c := range r.streams {
		before[i] = slices.Clone(c)
	}
	// A bucket in two members is a race unless both only read it (the
	// sources of out-of-place collectives).
	type use struct {
		member int
		write  bool
	}
	first := map[int]use{} // bucket -> the first member that has it
	// A group's collectives on one stream end together, at one event,
	// so each member is one event, whatever its buckets.
	r.inGroup = true
	defer func() { r.inGroup = false }()
	for j, m := range s.Body {
		if j >= len(members) {
			break
		}
		for i, b := range slices.Concat(m.Buckets, m.Into) {
			write := m.Into == nil || i >= len(m.Buckets)
			u, ok := first[b]
			if !ok {
				first[b] = use{j, write}
				continue
			}
			if k := u.member; k != j && (write || u.write) {
				r.groupReuse(m.Pos, members[j], members[k], b)
				// The race with that member is this error, not another
				// one that asks for an `after`, which cannot order them.
				r.reported[raceKey{m.Pos, s.Body[k].Stream}] = true
			}
		}
		r.stmt(m, members[j], before)
	}
}

// groupReuse reports bucket b in two collectives of one group, src (at
// pos) and the earlier p, once per statement.
func (r *raceState) groupReuse(pos ir.Pos, src, p *Stmt, b int) {
	key := raceKey{pos, -1}
	if r.reported[key] {
		return
	}
	r.reported[key] = true
	c := r.c
	c.errorf(c.main.file, spanOf(src.Pos, src.EndPos),
		"a group's collectives run at the same time; move one of them after the group's closing brace",
		"data race on bucket %s: it is in two collectives of one group (this one and line %d)",
		code(c.prog.Buckets[b].Name), p.Pos.Line)
}

// stmt applies one statement to the clocks and checks its accesses; an
// `after STREAM` waits for what afterOf (r.streams, or for a group's
// members the streams before the group) says STREAM has queued.
func (r *raceState) stmt(s ir.Stmt, src *Stmt, afterOf []vclock) {
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
			clock.join(afterOf[s.After.Stream])
		}
	case ir.AfterReady:
		// Each bucket waits for its own ready event; after the statement
		// the stream has passed all of them. (Joining them all for every
		// bucket of the statement is exact for other streams: nothing on
		// another stream is ordered between two ready events of one
		// backward.)
		if r.ready != nil {
			for _, b := range s.Buckets {
				if b >= 0 && b < len(r.ready) && r.ready[b] != nil {
					clock.join(r.ready[b].clock)
				}
			}
		}
	case ir.AfterSynced:
		if s.Kind == ir.StmtUpdate || s.Kind == ir.StmtUnscale {
			r.syncedWork(s, clock, src)
			return
		}
	}
	if s.Kind == ir.StmtBackward {
		r.backward(s, clock, src)
		return
	}
	if s.Kind == ir.StmtCollective && !r.inGroup && len(s.Buckets) > 1 {
		r.collectivesInTurn(s, clock, src)
		return
	}
	clock[s.Stream]++
	copy(r.streams[s.Stream], clock)
	e := &event{stream: s.Stream, clock: clock, pos: s.Pos, what: s.Kind.String()}
	for _, b := range s.Buckets {
		switch s.Kind {
		case ir.StmtCollective:
			e.what = s.Collective.String()
			// Out of place (`into`), the source is only read.
			r.touch(e, b, src, s.Into == nil)
			r.synced[b] = e
			if s.Into == nil {
				r.lastColl[b] = s.Collective
			}
		case ir.StmtUnscale:
			r.touch(e, b, src, true)
		case ir.StmtUpdate:
			r.touch(e, b, src, r.lastColl[b] == ir.ReduceScatter)
		}
	}
	for _, b := range s.Into {
		r.touch(e, b, src, true)
		r.synced[b] = e
		r.lastColl[b] = s.Collective
	}
	// The step's overflow flag: every unscale sets it (and may agree on it
	// with the other ranks), every update reads it to skip a step that
	// overflowed.
	switch s.Kind {
	case ir.StmtUnscale:
		r.touch(e, overflowFlag, src, true)
	case ir.StmtUpdate:
		r.touch(e, overflowFlag, src, false)
	}
}

// collectivesInTurn applies a collective statement of several buckets
// outside a group that starts at clock: one event per bucket, in the
// statement's order, as the runtime issues one collective per bucket on
// the statement's stream and records each one's end. An `after synced`
// that waits for a bucket's collective is so ordered after the
// collectives of the buckets before it in the statement, and not after
// those of the buckets after it. (Such a statement has no `into`: an
// out-of-place collective has one source.)
func (r *raceState) collectivesInTurn(s ir.Stmt, clock vclock, src *Stmt) {
	for _, b := range s.Buckets {
		clock[s.Stream]++
		e := &event{stream: s.Stream, clock: slices.Clone(clock), pos: s.Pos, what: s.Collective.String()}
		r.touch(e, b, src, true)
		r.synced[b] = e
		r.lastColl[b] = s.Collective
	}
	copy(r.streams[s.Stream], clock)
}

// overflowFlag stands for the step's overflow flag where a bucket index
// goes: it is touched as a bucket is.
const overflowFlag = -1

// syncedWork applies an update or unscale `after synced` that starts at
// clock: one event per bucket, in the statement's order, each ordered
// after the latest collective of its bucket and of the buckets before it,
// as the runtime waits for them in turn on the statement's stream. The
// overflow flag is touched by the first bucket's work, the least ordered.
func (r *raceState) syncedWork(s ir.Stmt, clock vclock, src *Stmt) {
	clock[s.Stream]++
	var first *event
	for _, b := range s.Buckets {
		if p := r.synced[b]; p != nil {
			clock.join(p.clock)
		}
		e := &event{stream: s.Stream, clock: slices.Clone(clock), pos: s.Pos, what: s.Kind.String(), synced: true}
		if first == nil {
			first = e
		}
		r.touch(e, b, src, s.Kind == ir.StmtUnscale || r.lastColl[b] == ir.ReduceScatter)
	}
	copy(r.streams[s.Stream], clock)
	if first != nil {
		r.touch(first, overflowFlag, src, s.Kind == ir.StmtUnscale)
	}
}

// backward applies a backward pass that starts at clock: one event per
// bucket, in the order the buckets become ready, each writing its bucket.
//
// A backward in pieces (s.Tensors) writes only the buckets of its tensors.
// A bucket whose tensors two pieces make ready is ready after both: its
// ready event is ordered after the earlier piece's as well.
func (r *raceState) backward(s ir.Stmt, clock vclock, src *Stmt) {
	covers := func(int) bool { return true }
	if s.Tensors != nil {
		mine := map[int]bool{}
		for _, t := range s.Tensors {
			mine[r.c.prog.Tensors[t].Bucket] = true
		}
		covers = func(b int) bool { return mine[b] }
	}
	if r.ready == nil || s.Tensors == nil {
		r.ready = make([]*event, len(r.c.prog.Buckets))
	}
	for _, b := range r.readyOrder {
		if !covers(b) || r.c.prog.Buckets[b].Output != nil {
			continue // an output buffer holds no gradients
		}
		delete(r.lastColl, b)
		clock[s.Stream]++
		e := &event{stream: s.Stream, clock: slices.Clone(clock), what: "backward", pos: s.Pos}
		if prev := r.ready[b]; prev != nil && s.Tensors != nil {
			e.clock.join(prev.clock)
		}
		r.ready[b] = e
		r.touch(e, b, src, true)
	}
	clock[s.Stream]++
	copy(r.streams[s.Stream], clock)
}

// touch checks e's access to bucket b (a write, or a read) against the
// latest access (or write) of every other stream, and records it.
func (r *raceState) touch(e *event, b int, src *Stmt, write bool) {
	last, lastWrite := r.access[b], r.writes[b]
	if last == nil {
		last, lastWrite = make([]*event, len(r.host)), make([]*event, len(r.host))
		r.access[b], r.writes[b] = last, lastWrite
	}
	against := lastWrite
	if write {
		against = last
	}
	for t, p := range against {
		if p != nil && t != e.stream && !p.before(e) {
			r.report(e, p, b, src)
		}
	}
	last[e.stream] = e
	if write {
		lastWrite[e.stream] = e
	}
}

// readyOrder returns the program's buckets in the order a backward makes
// them ready, as the runtime does: it fills the non-frozen tensors in
// reverse declaration order, and a bucket is ready after its last one,
// which is the first of its tensors in declaration order. A bucket without
// a non-frozen tensor (there is none in a checked program) comes first.
func readyOrder(p *ir.Program) []int {
	first := make([]int, len(p.Buckets)) // declaration index of each bucket's first tensor
	for b := range first {
		first[b] = len(p.Tensors)
	}
	for i := len(p.Tensors) - 1; i >= 0; i-- {
		if t := &p.Tensors[i]; !t.Frozen && t.Bucket >= 0 && t.Bucket < len(first) {
			first[t.Bucket] = i
		}
	}
	order := make([]int, len(p.Buckets))
	for b := range order {
		order[b] = b
	}
	slices.SortStableFunc(order, func(a, b int) int { return first[b] - first[a] })
	return order
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
	case b == overflowFlag:
		hint = fmt.Sprintf("add `after %s`, or `wait %s` before it: an update must see the overflow flag of every unscale before it, and unscales on two streams must be ordered", ps, ps)
	case e.synced:
		hint = fmt.Sprintf("`after synced` waits for each bucket's latest collective, and for those of the buckets before it in the statement; add `after %s`, or `wait %s` before it, so that it waits for the %s", ps, ps, p.what)
	case e.what == "update" || e.what == "unscale":
		hint = fmt.Sprintf("add `after synced` (or `after %s`) so that it waits for the %s", ps, p.what)
	case p.what == "backward" && e.what != "backward":
		hint = fmt.Sprintf("add `after ready` (or `after %s`) so that it waits for the gradients", ps)
	case e.what == "backward":
		hint = fmt.Sprintf("add `after %s` to the backward (or `wait %s` before it), so that the %s has finished with the bucket", ps, ps, p.what)
	default:
		hint = fmt.Sprintf("add `after %s`, or `wait %s` before it, or run both on one stream", ps, ps)
	}
	what := "the overflow flag"
	if b != overflowFlag {
		what = "bucket " + code(c.prog.Buckets[b].Name)
	}
	c.errorf(c.main.file, spanOf(src.Pos, src.EndPos), hint,
		"data race on %s: this %s on stream %s is not ordered after the %s on stream %s (line %d)",
		what, e.what, code(es), p.what, code(ps), p.pos.Line)
}

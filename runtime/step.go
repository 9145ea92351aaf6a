package runtime

// The Step methods that generated code calls (the contract in plan.go).
// Each queues work on the backend's streams and returns at once; only Wait
// blocks the host. When the runtime records the program (program.go) they
// only note what they were asked to do.

import (
	"fmt"
	"slices"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// Step is the handle through which a plan's step function issues its work.
type Step struct {
	rec     *plan.Recorder
	e       *engine
	inGroup bool // the collectives go to e.groupBuf until the group ends
}

// collItem is one bucket of one collective statement.
type collItem struct {
	at     Src
	stream int
	coll   plan.Coll
	op     RedOp
	root   int
	after  After
	bucket int
	id     int
	// afterEv is the event an AfterStream dependency waits for, recorded
	// when the statement was issued.
	afterEv backend.Event
}

// Backward simulates a backward pass of duration d on stream: the
// gradients of all non-frozen tensors become ready in reverse declaration
// order, d shared among them in proportion to their bytes. Each gradient
// is filled with the deterministic pattern, and each bucket's "ready"
// event is recorded when its last gradient is written.
func (s *Step) Backward(at Src, stream int, d time.Duration) {
	if s.rec != nil {
		s.rec.Backward(at, stream, d)
		return
	}
	s.e.expect(plan.StmtBackward, at)
	s.e.backward(at, stream, d)
	s.e.flush()
}

// Compute simulates other work (forward pass, optimizer) of duration d on
// stream.
func (s *Step) Compute(at Src, stream int, d time.Duration) {
	if s.rec != nil {
		s.rec.Compute(at, stream, d)
		return
	}
	s.e.expect(plan.StmtCompute, at)
	e := s.e
	start := e.recordOn(stream, at)
	e.queued(stream)
	if err := e.streams[stream].Busy(d); err != nil {
		e.fatal(at, err)
	}
	end := e.recordOn(stream, at)
	e.addTimed(timed{kind: tCompute, stream: stream, at: at, name: "compute", bucket: -1, start: start, end: end})
	e.flush()
}

// AllReduce reduces each bucket with op across all ranks, every rank
// getting the result.
func (s *Step) AllReduce(at Src, stream int, op RedOp, after After, buckets ...int) {
	s.collective(plan.Stmt{Kind: plan.StmtColl, At: at, Stream: stream, Coll: plan.CollAllReduce, Op: op, After: after}, buckets)
}

// Broadcast copies root's buckets to every rank.
func (s *Step) Broadcast(at Src, stream int, root int, after After, buckets ...int) {
	s.collective(plan.Stmt{Kind: plan.StmtColl, At: at, Stream: stream, Coll: plan.CollBroadcast, Root: root, After: after}, buckets)
}

// Reduce reduces each bucket with op onto root; the other ranks' buckets
// are unchanged.
func (s *Step) Reduce(at Src, stream int, op RedOp, root int, after After, buckets ...int) {
	s.collective(plan.Stmt{Kind: plan.StmtColl, At: at, Stream: stream, Coll: plan.CollReduce, Op: op, Root: root, After: after}, buckets)
}

// AllGather gathers each bucket in place: rank r's slice r ends up in
// slice r on every rank.
func (s *Step) AllGather(at Src, stream int, after After, buckets ...int) {
	s.collective(plan.Stmt{Kind: plan.StmtColl, At: at, Stream: stream, Coll: plan.CollAllGather, After: after}, buckets)
}

// ReduceScatter reduces each bucket in place: rank r's slice r gets the
// reduction of all ranks' slices r; its other slices become undefined.
func (s *Step) ReduceScatter(at Src, stream int, op RedOp, after After, buckets ...int) {
	s.collective(plan.Stmt{Kind: plan.StmtColl, At: at, Stream: stream, Coll: plan.CollReduceScatter, Op: op, After: after}, buckets)
}

// Group issues the collectives that body issues as one group (NCCL's
// ncclGroupStart/End): each stream waits for all of its group members'
// dependencies, then they run together.
func (s *Step) Group(at Src, body func()) {
	if s.rec != nil {
		s.rec.Group(at, body)
		return
	}
	if s.inGroup {
		s.e.fatal(at, fmt.Errorf("groups do not nest"))
	}
	s.inGroup = true
	s.e.groupBuf = s.e.groupBuf[:0]
	body()
	s.inGroup = false
	s.e.issue(s.e.groupBuf, true)
	s.e.flush()
}

// Wait blocks the host until the work queued on stream so far is done.
func (s *Step) Wait(at Src, stream int) {
	if s.rec != nil {
		s.rec.Wait(at, stream)
		return
	}
	e := s.e
	e.expect(plan.StmtWait, at)
	e.hostAt.setWait(e.plan.Streams[stream].Name, at)
	t0 := time.Now()
	err := e.streams[stream].Synchronize()
	t1 := time.Now()
	e.hostBlocked()
	e.hostAt.set("")
	if err != nil {
		e.fatal(at, err)
	}
	e.addTimed(timed{kind: tWait, stream: stream, at: at, name: e.waitNames[stream], bucket: -1, hostStart: t0, hostEnd: t1})
}

// collective issues one collective statement. The buckets come apart from
// st so that the variadic slice of the generated call does not escape
// (st does, into the recording): the steps allocate nothing.
func (s *Step) collective(st plan.Stmt, buckets []int) {
	if s.rec != nil {
		s.rec.Collective(st, buckets)
		return
	}
	e := s.e
	id := e.expect(plan.StmtColl, st.At)
	if st.Coll.Reduces() && st.Op == NoOp {
		st.Op = Sum
	}
	var afterEv backend.Event
	if st.After.Kind() == plan.AfterStreamKind && st.After.Stream() != st.Stream {
		afterEv = e.recordOn(st.After.Stream(), st.At)
	}
	// A statement's items are issued at once, except in a group, which
	// keeps them until the group ends: only then can the slice be reused.
	items := e.itemBuf[:0]
	if s.inGroup {
		items = e.groupBuf
	}
	for _, b := range buckets {
		items = append(items, collItem{at: st.At, stream: st.Stream, coll: st.Coll, op: st.Op, root: st.Root,
			after: st.After, bucket: b, id: id, afterEv: afterEv})
	}
	if s.inGroup {
		e.groupBuf = items
		return
	}
	e.itemBuf = items
	e.issue(items, false)
	e.flush()
}

// flush tells a backend.Flusher backend that a statement's work is queued.
func (e *engine) flush() {
	if f, ok := e.be.(backend.Flusher); ok {
		f.Flush()
	}
}

// startQueued makes a backend.Flusher backend run everything queued so far.
func (e *engine) startQueued() {
	if f, ok := e.be.(backend.Flusher); ok {
		f.Start()
	}
}

// expect checks that the statement issued now is the one the recording
// saw at this point, and returns its collective id. The generated step
// function has no branches, so a difference is a bug worth stopping for:
// the checker's model and the report rows rely on it.
func (e *engine) expect(k plan.StmtKind, at Src) int {
	if e.stepNo < 0 {
		return -1 // init: not tracked
	}
	if e.cursor == e.hangAt {
		hangForever(e, fmt.Sprintf("SYNCGEN_TEST_HANG: rank %d stopped before %s in step %d on purpose", e.rank, at, e.stepNo))
	}
	if e.cursor >= len(e.flatStep) || e.flatStep[e.cursor].Kind != k || e.flatStep[e.cursor].At != at {
		e.fatal(at, fmt.Errorf("step %d issued a statement that the first recording of the step did not have; steps must issue the same statements every time", e.stepNo))
	}
	id := e.flatStep[e.cursor].ID
	e.cursor++
	return id
}

// backward queues a simulated backward pass.
func (e *engine) backward(at Src, stream int, d time.Duration) {
	p := e.plan
	st := e.streams[stream]
	start := e.recordOn(stream, at)
	var total int64
	for _, t := range e.backOrder {
		total += e.tensors[t].elems * p.Tensors[t].DType.Size()
	}
	var cum int64
	var done time.Duration
	prev := start
	for _, t := range e.backOrder {
		cum += e.tensors[t].elems * p.Tensors[t].DType.Size()
		until := time.Duration(float64(d) * float64(cum) / float64(max(total, 1)))
		e.queued(stream)
		if err := st.Busy(until - done); err != nil {
			e.fatal(at, err)
		}
		done = until
		params := e.shapes[t].Params(e.rank, e.size, e.seedStep, t)
		params.Unchecked = !e.checks(e.stepNo)
		if err := st.Fill(e.tensors[t].store, params); err != nil {
			e.fatal(at, fmt.Errorf("gradient of %q: %w", p.Tensors[t].Name, err))
		}
		if e.tracing {
			ev := e.recordOn(stream, at)
			e.addTimed(timed{kind: tGrad, stream: stream, at: at, name: p.Tensors[t].Name, bucket: p.Tensors[t].Bucket,
				bytes: e.tensors[t].elems * p.Tensors[t].DType.Size(), start: prev, end: ev})
			prev = ev
		}
		if b := e.lastOf[t]; b >= 0 {
			e.ready[b] = readyMark{ev: e.recordOn(stream, at), step: e.stepNo, ok: true}
		}
	}
	end := e.recordOn(stream, at)
	e.addTimed(timed{kind: tBackward, stream: stream, at: at, name: "backward", bucket: -1, start: start, end: end})
}

// issue queues collectives: one at a time in order, or all together as a
// group.
func (e *engine) issue(items []collItem, group bool) {
	if !group {
		for i := range items {
			e.issueGroup(items[i:i+1], false)
		}
		return
	}
	if len(items) > 0 {
		e.issueGroup(items, true)
	}
}

// issueGroup queues one group: per stream, the dependencies and casts into
// the wire buffers, a start event, then the collectives, then per stream an
// end event and the casts back.
func (e *engine) issueGroup(items []collItem, group bool) {
	p := e.plan
	// Streams in order of first use, and their start events. Groups are
	// small: slices and linear scans, no maps (this runs for every
	// collective of every step).
	var orderBuf [4]int
	order := orderBuf[:0]
	for _, it := range items {
		if !slices.Contains(order, it.stream) {
			order = append(order, it.stream)
		}
	}
	var startsBuf [4]backend.Event
	starts := startsBuf[:0]
	for _, si := range order {
		st := e.streams[si]
		var waitedBuf [4]backend.Event
		waited := waitedBuf[:0]
		for _, it := range items {
			if it.stream != si {
				continue
			}
			at := it.at
			switch {
			case it.after.Kind() == plan.AfterReadyKind:
				if m := e.ready[it.bucket]; m.ok && m.step == e.stepNo {
					if err := st.WaitEvent(m.ev); err != nil {
						e.fatal(at, err)
					}
					e.queued(si)
				}
			case it.afterEv != nil && !slices.Contains(waited, it.afterEv):
				waited = append(waited, it.afterEv)
				if err := st.WaitEvent(it.afterEv); err != nil {
					e.fatal(at, err)
				}
				e.queued(si)
			}
			e.castIn(st, it)
		}
		starts = append(starts, e.startEvent(si, items[0].at))
	}
	ops := e.opBuf[:0]
	for _, it := range items {
		bm := &e.buckets[it.bucket]
		span := bm.span
		if it.coll != plan.CollAllGather && it.coll != plan.CollReduceScatter {
			span.N = p.Buckets[it.bucket].Elems
		}
		ops = append(ops, backend.CollOp{Stream: e.streams[it.stream], Coll: it.coll, Op: it.op, Root: it.root, Buf: span, Name: p.Buckets[it.bucket].Name})
	}
	e.opBuf = ops // reused by the next statement (Collectives copies what it keeps)
	if err := e.be.Collectives(ops); err != nil {
		e.fatal(items[0].at, err)
	}
	for _, si := range order {
		e.queued(si)
	}
	for k, si := range order {
		end := e.recordOn(si, items[0].at)
		for i, it := range items {
			if it.stream != si {
				continue
			}
			e.addTimed(timed{kind: tColl, stream: si, at: it.at, name: p.Buckets[it.bucket].Name, bucket: it.bucket, id: it.id,
				coll: it.coll, op: it.op, bytes: ops[i].Buf.Bytes(), group: group, start: starts[k], end: end})
			e.castOut(e.streams[si], it)
		}
	}
}

// castIn converts the bucket's tensors that live apart into its wire
// buffer.
func (e *engine) castIn(st backend.Stream, it collItem) {
	for _, t := range e.plan.Buckets[it.bucket].Tensors {
		tm := &e.tensors[t]
		if tm.inPlace {
			continue
		}
		e.queued(it.stream)
		if err := st.Cast(tm.wire, tm.store); err != nil {
			e.fatal(it.at, fmt.Errorf("casting %q into bucket %q: %w", e.plan.Tensors[t].Name, e.plan.Buckets[it.bucket].Name, err))
		}
	}
}

// castOut converts the wire buffer back into the tensors that live apart.
func (e *engine) castOut(st backend.Stream, it collItem) {
	for _, t := range e.plan.Buckets[it.bucket].Tensors {
		tm := &e.tensors[t]
		if tm.inPlace {
			continue
		}
		e.queued(it.stream)
		if err := st.Cast(tm.store, tm.wire); err != nil {
			e.fatal(it.at, fmt.Errorf("casting bucket %q back into %q: %w", e.plan.Buckets[it.bucket].Name, e.plan.Tensors[t].Name, err))
		}
	}
}

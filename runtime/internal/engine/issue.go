package engine

// The statements of a step as the engine runs them: each queues work on the
// backend's streams and returns at once; only Wait blocks the host. The
// runtime's Step methods, which generated code calls, come here when they
// are not recording.

import (
	"fmt"
	"slices"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// collItem is one bucket of one collective statement.
type collItem struct {
	at     plan.Src
	stream int
	coll   plan.Coll
	op     plan.RedOp
	root   int
	hier   bool
	after  plan.After
	bucket int
	// into is the output bucket of an out-of-place collective, -1 in
	// place.
	into int
	id   int
	// afterEv is the event an AfterStream dependency waits for, recorded
	// when the statement was issued.
	afterEv backend.Event
}

// Backward queues a simulated backward pass of duration d on stream: the
// gradients of all non-frozen tensors become ready in reverse declaration
// order, d shared among them in proportion to their bytes. Each gradient
// is filled with the deterministic pattern, and each bucket's "ready"
// event is recorded when its last gradient is written.
//
// With after an AfterStream dependency, the stream first waits for the
// work queued on that stream so far (an event, not the host).
func (e *Engine) Backward(at plan.Src, stream int, d time.Duration, after plan.After) {
	e.expect(plan.StmtBackward, at)
	e.waitAfter(at, stream, after)
	e.backward(at, stream, e.stretch(d), nil)
	e.flush()
}

// BackwardFor queues a backward in pieces: as Backward, for the gradients
// of tensors only (see backward).
func (e *Engine) BackwardFor(at plan.Src, stream int, d time.Duration, after plan.After, tensors []int) {
	e.expect(plan.StmtBackward, at)
	e.waitAfter(at, stream, after)
	e.backward(at, stream, e.stretch(d), tensors)
	e.flush()
}

// Compute queues other simulated work (forward pass, optimizer) of
// duration d on stream, after an AfterStream dependency as Backward.
func (e *Engine) Compute(at plan.Src, stream int, d time.Duration, after plan.After) {
	e.expect(plan.StmtCompute, at)
	e.waitAfter(at, stream, after)
	start := e.recordOn(stream, at)
	e.queued(stream)
	if err := e.streams[stream].Busy(e.stretch(d)); err != nil {
		e.fatal(at, err)
	}
	end := e.recordOn(stream, at)
	e.addTimed(result.Record{Kind: result.Compute, Stream: stream, At: at, Name: "compute", Bucket: -1, Micro: e.micro, Start: start, End: end})
	e.flush()
}

// Barrier queues a barrier across all ranks on stream (backend.Barrierer),
// after an AfterStream dependency as Backward.
func (e *Engine) Barrier(at plan.Src, stream int, after plan.After) {
	if e.skips(plan.StmtBarrier, at) {
		return
	}
	e.expect(plan.StmtBarrier, at)
	e.waitAfter(at, stream, after)
	br, ok := e.be.(backend.Barrierer)
	if !ok {
		e.fatal(at, fmt.Errorf("the %s backend has no barrier on a stream", e.be.Name()))
		return
	}
	start := e.recordOn(stream, at)
	e.queued(stream)
	if err := br.Barrier(e.streams[stream]); err != nil {
		e.fatal(at, err)
	}
	end := e.recordOn(stream, at)
	e.addTimed(result.Record{Kind: result.Barrier, Stream: stream, At: at, Name: "barrier", Bucket: -1, Start: start, End: end})
	e.flush()
}

// waitAfter makes stream wait for the work queued so far on the stream
// that an AfterStream dependency names (cudaStreamWaitEvent); the
// statement's own timing starts after the wait.
func (e *Engine) waitAfter(at plan.Src, stream int, after plan.After) {
	if after.Kind() != plan.AfterStreamKind || after.Stream() == stream {
		return
	}
	ev := e.recordOn(after.Stream(), at)
	if err := e.streams[stream].WaitEvent(ev); err != nil {
		e.fatal(at, err)
	}
	e.queued(stream)
}

// BeginGroup starts a group (NCCL's ncclGroupStart): the collectives
// issued until EndGroup are kept and issued together.
func (e *Engine) BeginGroup(at plan.Src) {
	if !e.lastMicro() {
		return // its members skip themselves (Collective)
	}
	if e.inGroup {
		e.fatal(at, fmt.Errorf("groups do not nest"))
	}
	e.inGroup = true
	e.groupBuf = e.groupBuf[:0]
}

// EndGroup issues the group's collectives: each stream waits for all of
// its group members' dependencies, then they run together.
func (e *Engine) EndGroup() {
	if !e.lastMicro() {
		return
	}
	e.inGroup = false
	e.issue(e.groupBuf, true)
	e.flush()
}

// Wait blocks the host until the work queued on stream so far is done.
func (e *Engine) Wait(at plan.Src, stream int) {
	if e.skips(plan.StmtWait, at) {
		return
	}
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
	e.addTimed(result.Record{Kind: result.Wait, Stream: stream, At: at, Name: e.waitNames[stream], Bucket: -1, HostStart: t0, HostEnd: t1})
}

// Collective issues collective statement st on buckets. The buckets come
// apart from st so that the variadic slice of the generated call does not
// escape: the steps allocate nothing.
func (e *Engine) Collective(st plan.Stmt, buckets []int) {
	if e.skips(plan.StmtColl, st.At) {
		return
	}
	id := e.expect(plan.StmtColl, st.At)
	if st.Coll.Reduces() && st.Op == plan.NoOp {
		st.Op = plan.Sum
	}
	var afterEv backend.Event
	if st.After.Kind() == plan.AfterStreamKind && st.After.Stream() != st.Stream {
		afterEv = e.recordOn(st.After.Stream(), st.At)
	}
	// A statement's items are issued at once, except in a group, which
	// keeps them until the group ends: only then can the slice be reused.
	items := e.itemBuf[:0]
	if e.inGroup {
		items = e.groupBuf
	}
	for k, b := range buckets {
		into := -1
		if k < len(st.Into) {
			into = st.Into[k]
		}
		items = append(items, collItem{at: st.At, stream: st.Stream, coll: st.Coll, op: st.Op, root: st.Root, hier: st.Hier,
			after: st.After, bucket: b, into: into, id: id, afterEv: afterEv})
	}
	if e.inGroup {
		e.groupBuf = items
		return
	}
	e.itemBuf = items
	e.issue(items, false)
	e.flush()
}

// Into issues out-of-place collective statement st from bucket src into
// output bucket out.
func (e *Engine) Into(st plan.Stmt, src, out int) {
	st.Into = e.intoBuf[:0]
	st.Into = append(st.Into, out)
	e.intoBuf = st.Into
	e.srcBuf = append(e.srcBuf[:0], src)
	e.Collective(st, e.srcBuf)
}

// flush tells a backend.Flusher backend that a statement's work is queued.
func (e *Engine) flush() {
	if f, ok := e.be.(backend.Flusher); ok {
		f.Flush()
	}
}

// skips reports whether the statement of kind k at at is skipped: a
// statement that runs on a step's last micro-batch only (all but backward
// and compute), issued on another. It still advances the sanity check.
func (e *Engine) skips(k plan.StmtKind, at plan.Src) bool {
	if e.lastMicro() {
		return false
	}
	e.expect(k, at)
	return true
}

// lastMicro reports whether the statements issued now run whole: those
// of the init block, and of a step's last micro-batch (every step has
// one, unless the plan accumulates gradients).
func (e *Engine) lastMicro() bool { return e.stepNo < 0 || e.micro == e.micros-1 }

// expect checks that the statement issued now is the one the recording
// saw at this point, and returns its collective id. The generated step
// function has no branches, so a difference is a bug worth stopping for:
// the checker's model and the report rows rely on it.
func (e *Engine) expect(k plan.StmtKind, at plan.Src) int {
	if e.stepNo < 0 {
		return -1 // init: not tracked
	}
	e.hooks.beforeStatement(e, at)
	if e.cursor >= len(e.flatStep) || e.flatStep[e.cursor].Kind != k || e.flatStep[e.cursor].At != at {
		e.fatal(at, fmt.Errorf("step %d issued a statement that the first recording of the step did not have; steps must issue the same statements every time", e.stepNo))
	}
	id := e.flatStep[e.cursor].ID
	e.cursor++
	return id
}

// backward queues a simulated backward pass of the non-frozen tensors, or
// of tensors only (a backward in pieces), in reverse declaration order.
//
// A whole backward records each bucket's ready event after the bucket's
// last gradient, replacing the bucket's earlier events. A piece records
// one after its last gradient of each bucket it touches, added to the
// events of the step's earlier pieces: a bucket whose tensors several
// pieces make ready is ready when all of those events are (the pieces may
// run on different streams).
func (e *Engine) backward(at plan.Src, stream int, d time.Duration, tensors []int) {
	p := e.plan
	st := e.streams[stream]
	start := e.recordOn(stream, at)
	order, lastOf := e.backOrder, e.lastOf
	if tensors != nil {
		order, lastOf = e.pieceOrderOf(at, tensors)
	}
	var total int64
	for _, t := range order {
		total += e.mem.Tensors[t].Elems * p.Tensors[t].DType.Size()
	}
	var cum int64
	var done time.Duration
	prev := start
	for _, t := range order {
		cum += e.mem.Tensors[t].Elems * p.Tensors[t].DType.Size()
		until := time.Duration(float64(d) * float64(cum) / float64(max(total, 1)))
		e.queued(stream)
		if err := st.Busy(until - done); err != nil {
			e.fatal(at, err)
		}
		done = until
		// Micro-batch m's gradient has a pattern of its own; the first
		// one overwrites the buffers (zero_grad), the others add to them.
		params := e.shapes[t].Params(e.rank, e.size, elem.MicroStep(e.seedStep, e.micro), t)
		params.Unchecked = !e.checks(e.stepNo) && !e.tr.pattern
		params.Add = e.micro > 0
		if err := st.Fill(e.mem.Tensors[t].Store, params); err != nil {
			e.fatal(at, fmt.Errorf("gradient of %q: %w", p.Tensors[t].Name, err))
		}
		if e.lastMicro() {
			// The scale multiplies the accumulated gradient once: the
			// same as scaling each micro-batch's, since it is a power of
			// two that changes only between steps.
			e.scaleGradient(at, st, t)
		}
		if e.tracing {
			ev := e.recordOn(stream, at)
			e.addTimed(result.Record{Kind: result.Grad, Stream: stream, At: at, Name: p.Tensors[t].Name, Bucket: p.Tensors[t].Bucket,
				Bytes: e.mem.Tensors[t].Elems * p.Tensors[t].DType.Size(), Micro: e.micro, Start: prev, End: ev})
			prev = ev
		}
		if b := lastOf[t]; b >= 0 {
			ev := e.recordOn(stream, at)
			m := &e.ready[b]
			if tensors == nil || !m.ok || m.step != e.stepNo || m.micro != e.micro {
				m.evs, m.step, m.micro, m.ok = m.evs[:0], e.stepNo, e.micro, true
			}
			m.evs = append(m.evs, ev)
		}
	}
	end := e.recordOn(stream, at)
	e.addTimed(result.Record{Kind: result.Backward, Stream: stream, At: at, Name: "backward", Bucket: -1, Micro: e.micro, Start: start, End: end})
}

// issue queues collectives: one at a time in order, or all together as a
// group.
func (e *Engine) issue(items []collItem, group bool) {
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
func (e *Engine) issueGroup(items []collItem, group bool) {
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
					for _, ev := range m.evs {
						if err := st.WaitEvent(ev); err != nil {
							e.fatal(at, err)
						}
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
		for _, it := range items {
			if it.stream == si && it.op == plan.WAvg {
				e.wavgPremultiply(st, it)
			}
		}
	}
	ops := e.opBuf[:0]
	for _, it := range items {
		span := e.collSpan(it)
		op := it.op
		if op == plan.WAvg {
			op = plan.Sum // of the premultiplied inputs (wavgPremultiply)
		}
		ops = append(ops, backend.CollOp{Stream: e.streams[it.stream], Coll: it.coll, Op: op, Root: it.root, Hier: it.hier, Buf: span, Out: e.outSpan(it),
			Name: e.collName(it), PreDivide: p.Buckets[it.bucket].PreDivide})
	}
	e.opBuf = ops // reused by the next statement (Collectives copies what it keeps)
	if err := e.be.Collectives(ops); err != nil {
		e.fatal(items[0].at, err)
	}
	for _, si := range order {
		e.queued(si)
	}
	for _, si := range order {
		for _, it := range items {
			if it.stream == si && it.op == plan.WAvg {
				e.wavgDivide(e.streams[si], it)
			}
		}
	}
	for k, si := range order {
		end := e.recordOn(si, items[0].at)
		for i, it := range items {
			if it.stream != si {
				continue
			}
			// Out of place, nccl-tests' size is the larger buffer: an
			// allgather's output, a reducescatter's input.
			bytes := max(ops[i].Buf.Bytes(), ops[i].Out.Bytes())
			e.addTimed(result.Record{Kind: result.Collective, Stream: si, At: it.at, Name: ops[i].Name, Bucket: it.bucket, ID: it.id,
				Coll: it.coll, Op: it.op, Bytes: bytes, Group: group, Start: starts[k], End: end})
			if it.into >= 0 {
				// The source is unchanged: its tensors need no cast back.
				// It was read, though: an unscale after synced, which
				// writes the source, waits for this collective too, as
				// the checker's race rules (docs/language.md §7) order it.
				e.tr.synced[it.into] = readyMark{ev: end, step: e.stepNo, ok: true}
				e.tr.synced[it.bucket] = readyMark{ev: end, step: e.stepNo, ok: true}
				continue
			}
			e.tr.synced[it.bucket] = readyMark{ev: end, step: e.stepNo, ok: true}
			if e.castOut(e.streams[si], it) && len(e.tr.stmts) > 0 {
				// An update or unscale after synced reads the gradients
				// of the tensors that live apart: after the casts back.
				e.tr.synced[it.bucket].ev = e.recordOn(si, it.at)
			}
		}
	}
}

// outSpan is the output buffer of an out-of-place collective (its
// length in the world's size), or none in place.
func (e *Engine) outSpan(it collItem) backend.Span {
	if it.into < 0 {
		return backend.Span{}
	}
	span := e.mem.Buckets[it.into].Span
	span.N = e.plan.Buckets[it.into].Elems
	return span
}

// collName names a collective's buffers for reports and errors: the
// bucket, or "source→output" out of place.
func (e *Engine) collName(it collItem) string {
	if it.into < 0 {
		return e.plan.Buckets[it.bucket].Name
	}
	return e.intoNames[[2]int{it.bucket, it.into}]
}

// IntoName is the name of an out-of-place collective's row in reports:
// the source bucket, an arrow, the output bucket ("grads→sums").
func IntoName(p *plan.Plan, src, out int) string {
	return p.Buckets[src].Name + "→" + p.Buckets[out].Name
}

// castIn converts the bucket's tensors that live apart into its wire
// buffer.
func (e *Engine) castIn(st backend.Stream, it collItem) {
	for _, t := range e.plan.Buckets[it.bucket].Tensors {
		tm := &e.mem.Tensors[t]
		if tm.InPlace {
			continue
		}
		e.queued(it.stream)
		if err := st.Cast(tm.Wire, tm.Store); err != nil {
			e.fatal(it.at, fmt.Errorf("casting %q into bucket %q: %w", e.plan.Tensors[t].Name, e.plan.Buckets[it.bucket].Name, err))
		}
	}
}

// castOut converts the wire buffer back into the tensors that live apart,
// and reports whether there were any.
func (e *Engine) castOut(st backend.Stream, it collItem) bool {
	cast := false
	for _, t := range e.plan.Buckets[it.bucket].Tensors {
		tm := &e.mem.Tensors[t]
		if tm.InPlace {
			continue
		}
		cast = true
		e.queued(it.stream)
		if err := st.Cast(tm.Store, tm.Wire); err != nil {
			e.fatal(it.at, fmt.Errorf("casting bucket %q back into %q: %w", e.plan.Buckets[it.bucket].Name, e.plan.Tensors[t].Name, err))
		}
	}
	return cast
}

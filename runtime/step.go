package runtime

// The Step methods that generated code calls (the contract, with
// contract.go). Each queues work on the backend's streams and returns at
// once; only Wait blocks the host. When the runtime records the program
// (Plan.record) they only note what they were asked to do.

import (
	"time"

	"github.com/syncgen/syncgen/runtime/internal/engine"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// Step is the handle through which a plan's step function issues its work.
// It records the statements (rec) or runs them on the engine (e).
type Step struct {
	rec *plan.Recorder
	e   *engine.Engine
}

// Backward simulates a backward pass of duration d on stream: the
// gradients of all non-frozen tensors become ready in reverse declaration
// order, d shared among them in proportion to their bytes. Each gradient
// is filled with the deterministic pattern, and each bucket's "ready"
// event is recorded when its last gradient is written.
//
// With after (at most one, AfterStream), the stream first waits for the
// work queued on that stream so far; the host does not wait.
func (s *Step) Backward(at Src, stream int, d time.Duration, after ...After) {
	if s.rec != nil {
		s.rec.Backward(at, stream, d, after...)
		return
	}
	s.e.Backward(at, stream, d, firstAfter(after))
}

// BackwardFor simulates a backward in pieces (`backward d for PATTERN`):
// as Backward, but only the gradients of tensors (non-frozen, in
// declaration order) become ready, in reverse order, d shared among them
// in proportion to their bytes. A bucket's "ready" event is recorded once
// every piece of the step that makes one of its tensors ready has done so.
// after is an AfterStream dependency, or none.
func (s *Step) BackwardFor(at Src, stream int, d time.Duration, after After, tensors ...int) {
	if s.rec != nil {
		s.rec.BackwardFor(at, stream, d, after, tensors...)
		return
	}
	s.e.BackwardFor(at, stream, d, after, tensors)
}

// Compute simulates other work (forward pass, optimizer) of duration d on
// stream, after the work queued on stream so far and, with after (at most
// one, AfterStream), after the work queued on that stream so far.
func (s *Step) Compute(at Src, stream int, d time.Duration, after ...After) {
	if s.rec != nil {
		s.rec.Compute(at, stream, d, after...)
		return
	}
	s.e.Compute(at, stream, d, firstAfter(after))
}

// firstAfter is a statement's dependency: the first of after, or none.
// (The recording refuses more than one.)
func firstAfter(after []After) After {
	if len(after) > 0 {
		return after[0]
	}
	return After{}
}

// AllReduce reduces each bucket with op across all ranks, every rank
// getting the result.
func (s *Step) AllReduce(at Src, stream int, op RedOp, after After, buckets ...int) {
	s.collective(plan.Stmt{At: at, Stream: stream, Coll: plan.CollAllReduce, Op: op, After: after}, buckets)
}

// AllReduceHierarchical is AllReduce in Horovod's hierarchical form
// (`algo hierarchical`): reduce-scatter inside each host, allreduce of
// each slice across hosts, allgather inside the host. The results are
// AllReduce's, element by element.
func (s *Step) AllReduceHierarchical(at Src, stream int, op RedOp, after After, buckets ...int) {
	s.collective(plan.Stmt{At: at, Stream: stream, Coll: plan.CollAllReduce, Op: op, Hier: true, After: after}, buckets)
}

// Broadcast copies root's buckets to every rank.
func (s *Step) Broadcast(at Src, stream int, root int, after After, buckets ...int) {
	s.collective(plan.Stmt{At: at, Stream: stream, Coll: plan.CollBroadcast, Root: root, After: after}, buckets)
}

// Reduce reduces each bucket with op onto root; the other ranks' buckets
// are unchanged.
func (s *Step) Reduce(at Src, stream int, op RedOp, root int, after After, buckets ...int) {
	s.collective(plan.Stmt{At: at, Stream: stream, Coll: plan.CollReduce, Op: op, Root: root, After: after}, buckets)
}

// AllGather gathers each bucket in place: rank r's slice r ends up in
// slice r on every rank.
func (s *Step) AllGather(at Src, stream int, after After, buckets ...int) {
	s.collective(plan.Stmt{At: at, Stream: stream, Coll: plan.CollAllGather, After: after}, buckets)
}

// ReduceScatter reduces each bucket in place: rank r's slice r gets the
// reduction of all ranks' slices r; its other slices become undefined.
func (s *Step) ReduceScatter(at Src, stream int, op RedOp, after After, buckets ...int) {
	s.collective(plan.Stmt{At: at, Stream: stream, Coll: plan.CollReduceScatter, Op: op, After: after}, buckets)
}

// AllReduceInto reduces bucket src with op across all ranks into output
// bucket out on every rank; src is left as it was (MPI_Allreduce and
// ncclAllReduce with distinct buffers).
func (s *Step) AllReduceInto(at Src, stream int, op RedOp, after After, src, out int) {
	s.into(plan.Stmt{At: at, Stream: stream, Coll: plan.CollAllReduce, Op: op, After: after}, src, out)
}

// BroadcastInto copies root's bucket src into output bucket out on every
// rank; src is left as it was.
func (s *Step) BroadcastInto(at Src, stream int, root int, after After, src, out int) {
	s.into(plan.Stmt{At: at, Stream: stream, Coll: plan.CollBroadcast, Root: root, After: after}, src, out)
}

// ReduceInto reduces bucket src with op into output bucket out on root;
// src is left as it was, and the other ranks' out is undefined.
func (s *Step) ReduceInto(at Src, stream int, op RedOp, root int, after After, src, out int) {
	s.into(plan.Stmt{At: at, Stream: stream, Coll: plan.CollReduce, Op: op, Root: root, After: after}, src, out)
}

// AllGatherInto gathers every rank's bucket src into output bucket out,
// rank r's at out's slice r, on every rank; src is left as it was.
func (s *Step) AllGatherInto(at Src, stream int, after After, src, out int) {
	s.into(plan.Stmt{At: at, Stream: stream, Coll: plan.CollAllGather, After: after}, src, out)
}

// ReduceScatterInto reduces bucket src (padded to size slices) with op
// across all ranks and leaves rank r's slice r of the result in output
// bucket out; src is left as it was.
func (s *Step) ReduceScatterInto(at Src, stream int, op RedOp, after After, src, out int) {
	s.into(plan.Stmt{At: at, Stream: stream, Coll: plan.CollReduceScatter, Op: op, After: after}, src, out)
}

// into issues an out-of-place collective: recorded, or run on the engine.
func (s *Step) into(st plan.Stmt, src, out int) {
	if s.rec != nil {
		s.rec.Into(st, src, out)
		return
	}
	s.e.Into(st, src, out)
}

// Update applies one step of optimizer opt to the parameters of buckets
// on stream, reading their synchronised gradients: where a bucket was
// reduce-scattered, only this rank's slice (over whose gradients it then
// also writes the new parameters, for the allgather of the parameters).
// With AfterSynced each bucket's update waits for that bucket's
// collective; with a scaler, nothing changes in a step that overflowed.
func (s *Step) Update(at Src, stream int, opt Optimizer, after After, buckets ...int) {
	if s.rec != nil {
		s.rec.Update(at, stream, opt, after, buckets...)
		return
	}
	s.e.Update(at, stream, opt, after, buckets)
}

// Unscale divides the gradients of buckets by the loss scale on stream and
// sets the step's overflow flag if any is infinite or NaN; with agree (or
// where the buckets' gradients differ between ranks) the ranks agree on
// the flag with an allreduce of it.
func (s *Step) Unscale(at Src, stream int, agree bool, after After, buckets ...int) {
	if s.rec != nil {
		s.rec.Unscale(at, stream, agree, after, buckets...)
		return
	}
	s.e.Unscale(at, stream, agree, after, buckets)
}

// Group issues the collectives that body issues as one group (NCCL's
// ncclGroupStart/End): each stream waits for all of its group members'
// dependencies, then they run together.
func (s *Step) Group(at Src, body func()) {
	if s.rec != nil {
		s.rec.Group(at, body)
		return
	}
	s.e.BeginGroup(at)
	body()
	s.e.EndGroup()
}

// Wait blocks the host until the work queued on stream so far is done.
func (s *Step) Wait(at Src, stream int) {
	if s.rec != nil {
		s.rec.Wait(at, stream)
		return
	}
	s.e.Wait(at, stream)
}

// Barrier queues a barrier across all ranks on stream: the stream's work
// after it starts when every rank has reached it. With after (at most one,
// AfterStream), the stream first waits for the work queued on that stream
// so far; the host does not wait.
func (s *Step) Barrier(at Src, stream int, after ...After) {
	if s.rec != nil {
		s.rec.Barrier(at, stream, after...)
		return
	}
	s.e.Barrier(at, stream, firstAfter(after))
}

// collective issues one collective statement: recorded, or run on the
// engine.
func (s *Step) collective(st plan.Stmt, buckets []int) {
	if s.rec != nil {
		s.rec.Collective(st, buckets)
		return
	}
	s.e.Collective(st, buckets)
}

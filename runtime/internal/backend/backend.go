package backend

// This file is the contract between the runtime and its backends. The CPU
// backend (cpu*.go) implements it with goroutines and MPI's nonblocking
// collectives on host memory; the GPU backend (gpu*.go, packages cuda and
// nccl) implements it with CUDA streams, events, device memory and NCCL.
// The model is CUDA's: work is queued on streams and runs in queue order,
// streams run concurrently, events order streams against each other and
// against the host. Nothing above the backend knows which one it talks to.
//
// Threading: the runtime calls Backend and Stream methods from one
// goroutine at a time (the host goroutine that runs the step, or the main
// goroutine during setup and checks), except Event.Query, which the
// watchdog calls concurrently. A backend that needs a locked OS thread (the
// CUDA current device) must arrange that itself.
//
// Errors: methods that queue work return an error only for what they can
// see at queue time (bad arguments, a failed launch). Errors that happen
// while the work runs are reported by the next Synchronize of the stream or
// event concerned, with context (what, which bucket, the library's own
// error string).

import (
	"time"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// Backend executes stream-ordered work on one kind of device.
type Backend interface {
	// Name is the backend's short name as --backend spells it ("cpu",
	// "nccl").
	Name() string

	// Versions lists the library versions that reports show, in a fixed
	// order, e.g. {"MPI", "Open MPI v4.1.4, ..."} or {"NCCL", "2.21.5"},
	// {"CUDA runtime", "12.4"}, {"device", "NVIDIA H200"}.
	Versions() []text.KV

	// NewStream creates the executor of plan stream index (Plan.Streams
	// order). Every rank creates the same streams in the same order, once,
	// before any work is queued, so a backend may create collective
	// resources here (an MPI_Comm_dup, an NCCL communicator per stream):
	// collectives of different streams must never match each other.
	// prio maps to the device's stream priorities where it has them.
	NewStream(index int, name string, prio plan.Priority) (Stream, error)

	// NewEvent creates an event that streams can record and wait on. The
	// runtime reuses events from step to step: recording an event again
	// replaces what it marks (as cudaEventRecord does).
	NewEvent() (Event, error)

	// Alloc allocates a buffer of elems elements of dtype in the memory the
	// backend computes on (device memory on a GPU, C memory on the CPU;
	// never Go memory, since MPI and NCCL keep pointers into it while work
	// is in flight). The contents are undefined until written.
	Alloc(dtype elem.DType, elems int64) (Buffer, error)

	// Collectives queues one group of collectives (ncclGroupStart ...
	// ncclGroupEnd): every op runs on its own Stream, after the work queued
	// on that stream so far, and the work queued on a stream after this
	// call waits for that stream's ops of the group. A group of one op is a
	// plain collective. All ranks queue the same groups with the same ops
	// in the same order on the same streams. See CollOp for the semantics
	// of each collective. The caller reuses ops once the call returns.
	Collectives(ops []CollOp) error

	// Elapsed returns the time from start to end; both events must have
	// completed (cudaEventElapsedTime). The events may belong to different
	// streams. The result may be negative when end happened first.
	Elapsed(start, end Event) (time.Duration, error)

	// CopyToHost copies src into dst (len(dst) == src.Bytes()). It blocks
	// the host until the copy is done. The runtime calls it only when no
	// stream has pending work that writes src (after the step's streams
	// drained), for checks; on the CPU it is a memcpy.
	CopyToHost(dst []byte, src Span) error

	// CopyFromHost copies src (len(src) == dst.Bytes()) into dst, blocking
	// the host, under the same condition as CopyToHost. Tests use it to
	// corrupt an element on purpose.
	CopyFromHost(dst Span, src []byte) error

	// Close releases everything the backend holds (streams, events,
	// buffers, communicators). The runtime calls it once, after all streams
	// drained, before MPI_Finalize.
	Close() error
}

// StepAligner is implemented by backends that can queue a barrier across
// all ranks on a stream (the CPU backend). The runtime then aligns the
// ranks at the start of each step with a barrier queued on the step's first
// collective stream, which the other streams wait for, instead of blocking
// the host in one: the collective that follows runs right after the barrier
// on the same thread, as in a plain MPI program, with no wake-up between
// them. A backend without it gets a host barrier before each step.
type StepAligner interface {
	// QueueBarrier queues a barrier across all ranks on s. All ranks queue
	// it at the same point of their program.
	QueueBarrier(s Stream) error
	// EventTime returns the host time at which e completed.
	EventTime(e Event) (time.Time, error)
}

// Barrierer is implemented by backends that queue a barrier statement of
// the plan (`barrier on STREAM`) on a stream: every rank's stream passes it
// only when all ranks' streams have reached it. All ranks queue it at the
// same point of their program.
type Barrierer interface {
	Barrier(s Stream) error
}

// Flusher is implemented by backends that start queued work only when told
// (the CPU backend, whose streams are goroutines: waking one for every
// operation would put wake-ups between a collective and its end event).
// The runtime calls Flush after it queued each statement's work, and Start
// when the host stops issuing work without blocking on a stream (a test
// hook that models a stuck rank); blocking calls (Synchronize) start the
// streams as well. Backends whose work starts as soon as it is queued
// (CUDA streams) need not implement it.
type Flusher interface {
	// Flush says that a whole statement's work is queued.
	Flush()
	// Start makes every stream run the work queued so far.
	Start()
}

// Stream is an ordered executor of work: a CUDA stream on a GPU, a
// goroutine with a queue on the CPU. Each method queues one operation and
// returns at once; operations run in the order queued, one after another.
type Stream interface {
	// Name is the plan's name of the stream.
	Name() string

	// Fill writes the deterministic pattern p into dst: element i of dst
	// gets FillValue(p, i) converted to dst.DType (exactly: the pattern's
	// values are small integers that every dtype represents). See
	// pattern.go for the formula that a device kernel must reproduce.
	Fill(dst Span, p elem.FillParams) error

	// Cast converts src into dst element by element (dst.N == src.N),
	// rounding to nearest, ties to even, where dst cannot hold a value
	// exactly; float to integer rounds the same way and saturates at the
	// integer's range, NaN becomes 0. See CastValue in dtype.go.
	Cast(dst, src Span) error

	// Busy keeps the stream busy for d, like a compute kernel of that
	// length (a simulated backward or forward pass). A GPU spins on the
	// device clock; the CPU sleeps so that the host's cores stay free for
	// communication, as a GPU's would. The time that Fill operations queued
	// just before Busy took counts against d, so that a simulated backward
	// of many small tensors lasts d in total and not d plus the fills.
	Busy(d time.Duration) error

	// Record records e on the stream: e completes when all work queued on
	// the stream before it has completed (cudaEventRecord).
	Record(e Event) error

	// WaitEvent makes all work queued on the stream after this call wait
	// until e completes, as last recorded at the time of this call
	// (cudaStreamWaitEvent). The host does not block.
	WaitEvent(e Event) error

	// Synchronize blocks the host until all work queued on the stream so
	// far has completed, and returns the first error of that work.
	Synchronize() error

	// Scale multiplies every element of buf (a float dtype) by factor in
	// place, as optim.Scaled computes it (in float32 for f32, f16 and
	// bf16, float64 for f64, rounded to the dtype): with a power of two,
	// exact unless the result overflows or underflows. Loss scaling scales
	// the backward's gradients with it, and unscaling divides them (factor
	// 1/scale); a weighted average (plan.WAvg) multiplies each rank's input
	// by its weight and the sum by 1/Σ weights. With
	// flag (one I32 element; N == 0 for none) it also sets *flag to 1 when
	// any result is infinite or NaN; it never clears it.
	Scale(buf Span, factor float64, flag Span) error

	// Set writes v, rounded to dst's dtype as Cast rounds, into every
	// element of dst: the injected overflows, and the flag's reset.
	Set(dst Span, v float64) error

	// Update applies one optimizer step to u's elements, element by
	// element as optim.Hyper.Apply computes it (see UpdateOp).
	Update(u UpdateOp) error
}

// UpdateOp is one optimizer step over N elements.
type UpdateOp struct {
	// Grad holds the gradients (f64, f32, f16 or bf16).
	Grad Span
	// Param holds the parameters; State the optimizer's state in the
	// parameters' dtype: SGD's momentum in State[0] (none, N == 0, without
	// momentum), AdamW's first and second moments in State[0] and
	// State[1]. Every span with elements has Grad.N of them.
	Param Span
	State [2]Span
	// Out, when it has elements, also receives the new parameters,
	// rounded to Out.DType: a sharded update writes them over its slice
	// of the gradients, which the allgather after it then gathers.
	Out Span
	// Flag, when it has an element (I32), is the step's overflow flag:
	// when it is not zero the update changes nothing.
	Flag Span
	// Hyper holds the step's constants.
	Hyper optim.Hyper
}

// Event marks a point in a stream's work (a CUDA event).
type Event interface {
	// Synchronize blocks the host until the event completes, and returns
	// the first error of the work it marks.
	Synchronize() error
	// Query reports whether the event has completed without blocking
	// (cudaEventQuery). The watchdog calls it from its own goroutine.
	Query() (bool, error)
}

// Buffer is a block of backend memory. The runtime never dereferences it:
// it hands it back to the backend in Spans.
type Buffer interface {
	// DType and Elems are what it was allocated with.
	DType() elem.DType
	Elems() int64
}

// Span is N elements of DType starting at element Off of Buf (element
// offsets count in DType, so the byte offset is Off*DType.Size()). Buffers
// hold one dtype, so DType is normally Buf.DType().
type Span struct {
	Buf   Buffer
	Off   int64
	N     int64
	DType elem.DType
}

// Bytes returns the span's size in bytes.
func (s Span) Bytes() int64 { return s.N * s.DType.Size() }

// CollOp is one collective of a group.
type CollOp struct {
	// Stream runs the collective (and selects its communicator).
	Stream Stream
	Coll   plan.Coll
	// Op is the reduction for CollAllReduce, CollReduce and
	// CollReduceScatter. Avg is the sum divided by the number of ranks:
	// NCCL's ncclAvg; the CPU backend sums and then divides each element in
	// the buffer's dtype (integers truncate toward zero; floats divide in
	// float32 for f16/bf16/f32, float64 for f64, and round to nearest even).
	Op plan.RedOp
	// Root is the root rank for CollBroadcast and CollReduce.
	Root int
	// Hier runs a CollAllReduce hierarchically where the backend can
	// (reduce-scatter inside the host, allreduce of the slices across
	// hosts, allgather inside the host), with the flat form's results.
	Hier bool
	// Buf is the whole buffer, Buf.N elements of Buf.DType, in place. For
	// CollAllGather and CollReduceScatter Buf.N is a multiple of the number
	// of ranks (the runtime pads those buckets).
	Buf Span
	// Out, when it has elements, makes the collective out of place: Buf
	// is the input and stays as it was, Out (of Buf.DType) receives the
	// result. Its length: Buf.N for allreduce, broadcast and reduce (on
	// ranks other than a reduce's root Out is undefined afterwards);
	// Buf.N/size for a reducescatter, whose Buf.N is then a multiple of
	// the number of ranks (rank r gets the reduction of every rank's
	// slice r); size*Buf.N for an allgather (rank r's Buf lands at
	// Out's slice r). Zero: in place on Buf.
	Out Span
	// Name is the bucket's name, for error messages and traces
	// ("src→out" out of place).
	Name string
	// PreDivide, with Op Avg, divides every rank's input by the number of
	// ranks before summing (as DDP's fp16 compression hook does), rather
	// than the sum after: the sum of a 16-bit wire then cannot overflow
	// where the average would not. Each input is divided as the average
	// divides (elem.AvgOf's arithmetic), in place.
	PreDivide bool
}

// Bootstrap is the part of MPI that a backend may use while it starts: the
// NCCL unique id travels by Bcast. The methods are collective (every rank
// calls them in the same order) and safe to call from any goroutine.
type Bootstrap interface {
	// Bcast sends root's buf to every rank (all buf have the same length).
	Bcast(root int, buf []byte) error
	// Allgather returns every rank's rec, in rank order (all recs have the
	// same length).
	Allgather(rec []byte) ([][]byte, error)
}

// Env is what a backend's probe and constructor get to know about
// the job.
type Env struct {
	Rank, Size           int // in MPI_COMM_WORLD
	LocalRank, LocalSize int // among the ranks of this host
	Host                 string
	Boot                 Bootstrap
	Plan                 *plan.Plan
}

// Factory registers a backend with the runtime.
type Factory struct {
	// Name as --backend spells it.
	Name string
	// Priority orders the factories that --backend auto tries: higher
	// first. The CPU backend has 0 and always works.
	Priority int
	// Probe says whether the backend can run on this rank, and if not, why
	// ("no CUDA device", "libnccl.so.2: cannot open shared object file").
	// It must be cheap and must not fail destructively. Select runs every
	// rank's probes in the same order, so a probe may call collective
	// Bootstrap methods only when it calls them on every path, panics
	// included, on every rank (the runtime gathers every rank's answer
	// itself and picks a backend only when every rank can run it). For
	// NCCL it checks that the libraries load and, with one Allgather of
	// every rank's devices, that no two ranks of a host would share a GPU.
	Probe func(env *Env) (ok bool, why string)
	// New creates the backend. It may use env.Boot (collectively).
	New func(env *Env) (Backend, error)
}

// Register makes a backend available to --backend. The GPU backend
// calls it from an init function in gpu.go.
func Register(f Factory) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends = append(backends, f)
}

// PhaseTimer is implemented by backends that run hierarchical allreduces
// in phases and time each (the CPU backend). Phases returns the times that
// end, the completed event recorded after such an allreduce on its
// stream, carries: the reduce-scatter inside the host, the allreduce
// across hosts and the allgather inside the host, each summed over the
// allreduce's pieces. ok is false for any other event.
type PhaseTimer interface {
	Phases(end Event) (phases [3]time.Duration, ok bool)
}

// Aborter is implemented by backends that hold communicators of their own
// (NCCL): Abort aborts them before MPI_Abort ends the job, so that no rank
// stays blocked inside a collective whose peer is gone.
type Aborter interface {
	Abort()
}

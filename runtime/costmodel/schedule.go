package costmodel

import (
	"math"
	"time"
)

// Schedule is the neutral description of a plan's step that Replay
// predicts: what the compiler's IR and the runtime's recorded program are
// both converted to.
type Schedule struct {
	// Ranks is the world size.
	Ranks int
	// Streams names the streams; ops refer to them by index.
	Streams []string
	// Tensors are all tensors in declaration order (backward makes their
	// gradients ready in the reverse order).
	Tensors []Tensor
	// Buckets are the buckets that ops refer to by index.
	Buckets []Bucket
	// Step is the step's statements in program order.
	Step []Op
}

// Tensor is one parameter tensor.
type Tensor struct {
	// Bytes is the gradient's size in its own dtype.
	Bytes int64
	// Bucket is the index of the bucket that holds it, or -1.
	Bucket int
	// Frozen tensors have no gradient.
	Frozen bool
}

// Bucket is one buffer that collectives move.
type Bucket struct {
	Name string
	// Bytes is the wire buffer's size; DType the wire dtype ("f32").
	Bytes int64
	DType string
	// CastBytes are the bytes read and written by one cast of the tensors
	// stored in another dtype than the wire's into the buffer (the same
	// again for the cast back); 0 when every tensor lives in place.
	CastBytes int64
}

// OpKind says what an op does.
type OpKind uint8

// The statements of a step.
const (
	OpBackward OpKind = iota + 1
	OpCompute
	OpCollective
	OpGroup
	OpWait
	OpUpdate
	OpUnscale
)

// AfterKind is an op's dependency.
type AfterKind uint8

// The dependencies: none (the order of its own stream), each bucket's
// gradients ready (collectives), the work queued on another stream so far,
// each bucket's last collective (updates, unscales).
const (
	AfterNone AfterKind = iota
	AfterReady
	AfterStream
	AfterSynced
)

// Op is one statement of the step.
type Op struct {
	Kind   OpKind
	Stream int
	// Dur is a backward's or a compute's duration.
	Dur time.Duration
	// Tensors are a backward in pieces' tensors (indices into
	// Schedule.Tensors); nil for a backward of every non-frozen tensor.
	Tensors []int
	// Collective ("allreduce") and Op ("sum"; "" when it does not reduce).
	Collective string
	Op         string
	After      AfterKind
	// AfterStream is the stream an AfterStream dependency names.
	AfterStream int
	// Buckets are the targets of a collective, an update or an unscale.
	Buckets []int
	// Bytes are, per target bucket, the bytes a collective moves (the
	// padded buffer of an allgather or reducescatter) or an update reads
	// and writes; nil: the buckets' Bytes (collectives), not modelled
	// (updates).
	Bytes []int64
	// Agree makes an unscale agree on the overflow flag across ranks:
	// one 4-byte max allreduce.
	Agree bool
	// Body is a group's collectives.
	Body []Op
	// ID numbers the collectives of the step in program order (group
	// members included), as the runtime's table rows do.
	ID int
}

// UpdateBytes returns the bytes an optimizer update of a bucket of elems
// elements reads and writes: the gradient (gradBytes), and the float32
// parameters and optimizer states, each read and written (states: 0 for
// SGD without momentum, 1 with it, 2 for AdamW).
// The sum saturates at math.MaxInt64 (SatAdd, SatMul): a tensor that the
// checker accepts can have more bytes than an int64 holds, and a wrapped
// sum predicted a short update (the replay then reports a time that does
// not end).
func UpdateBytes(states int, elems, gradBytes int64) int64 {
	return SatAdd(gradBytes, SatMul(elems, 4*2*int64(1+states)))
}

// SatAdd returns a+b for byte counts (0 or more), math.MaxInt64 when the
// sum does not fit.
func SatAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// SatMul returns a*b for byte or element counts (0 or more),
// math.MaxInt64 when the product does not fit.
func SatMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return a * b
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// Accumulate returns the step of a plan whose steps have micro
// micro-batches (gradient accumulation) from its step function's ops: the
// backward and compute ops of the first micro-1 micro-batches, in order,
// then the whole step, as the runtime issues it. micro <= 1 returns step.
func Accumulate(step []Op, micro int) []Op {
	if micro <= 1 {
		return step
	}
	var out []Op
	for range micro - 1 {
		for _, o := range step {
			if o.Kind == OpBackward || o.Kind == OpCompute {
				out = append(out, o)
			}
		}
	}
	return append(out, step...)
}

package runtime

// This file is the contract between generated code and the runtime: the
// plan tables that codegen emits as Go literals and the Step methods that
// the generated step function calls. Change it only together with codegen
// and the golden files.

import "time"

// DType is an element type. The values match package ir's.
type DType uint8

// The element types.
const (
	InvalidDType DType = iota
	F64
	F32
	F16
	BF16
	I64
	I32
	I8
	U8
)

// Priority is a stream's scheduling priority.
type Priority uint8

// Stream priorities.
const (
	PriorityDefault Priority = iota
	PriorityHigh
	PriorityLow
)

// RedOp is a reduction operator.
type RedOp uint8

// The reduction operators.
const (
	NoOp RedOp = iota
	Sum
	Avg
	Min
	Max
	Prod
)

// Tensor is one parameter tensor of the plan.
type Tensor struct {
	Name   string
	DType  DType
	Shape  []int64
	Frozen bool
	// Bucket is the index of the bucket that holds the tensor, or -1.
	Bucket int
	// Offset is the tensor's first element inside the bucket's wire buffer.
	Offset int64
}

// Stream is an ordered executor of work.
type Stream struct {
	Name     string
	Priority Priority
}

// Bucket is a contiguous buffer of Elems elements of dtype Wire. Tensors
// lists the tensors inside it in layout order. A tensor whose DType equals
// Wire is a view into the buffer; one whose DType differs has storage of its
// own and is cast into the buffer before each collective and back after it.
type Bucket struct {
	Name    string
	Wire    DType
	Elems   int64
	Tensors []int
}

// Run holds the defaults for the program's flags.
type Run struct {
	Steps      int
	Warmup     int
	CheckEvery int // 0: off
}

// Plan is everything a generated program hands to Main.
type Plan struct {
	// Name is the program's name ("resnet50"); Source the .sync path it was
	// generated from.
	Name   string
	Source string
	// Hash identifies the plan; every rank must run the same one.
	Hash    string
	Tensors []Tensor
	Streams []Stream
	Buckets []Bucket
	Run     Run
	// Init, if not nil, runs once before the warm-up steps.
	Init func(s *Step)
	// Step issues one training step's work. It is called once per step.
	Step func(s *Step)
}

// After is a collective's dependency, built with AfterReady or AfterStream.
// The zero value waits for nothing but the collective's own stream.
type After struct {
	kind   uint8
	stream int
}

// AfterReady makes each bucket's collective start as soon as all of that
// bucket's gradients are ready in the current step.
func AfterReady() After { return After{kind: 1} }

// AfterStream makes the collective wait for the work queued on stream so far.
func AfterStream(stream int) After { return After{kind: 2, stream: stream} }

// Src is a position in the .sync source ("resnet50.sync:12:5"). Statements
// carry it so that errors and timeouts can point back at the plan.
type Src string

// The Step methods below queue work on streams and return at once, as CUDA
// calls do; only Wait blocks the host. At the end of every step the runtime
// waits for all streams.
//
// They are implemented in step.go:
//
//	func (s *Step) Backward(at Src, stream int, d time.Duration)
//	func (s *Step) Compute(at Src, stream int, d time.Duration)
//	func (s *Step) AllReduce(at Src, stream int, op RedOp, after After, buckets ...int)
//	func (s *Step) Broadcast(at Src, stream int, root int, after After, buckets ...int)
//	func (s *Step) Reduce(at Src, stream int, op RedOp, root int, after After, buckets ...int)
//	func (s *Step) AllGather(at Src, stream int, after After, buckets ...int)
//	func (s *Step) ReduceScatter(at Src, stream int, op RedOp, after After, buckets ...int)
//	func (s *Step) Group(at Src, body func())
//	func (s *Step) Wait(at Src, stream int)
var _ = time.Duration(0)

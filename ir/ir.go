// Package ir is the checked intermediate representation of a .sync program.
//
// The front end (package dsl) produces an *ir.Program only when the source
// has no errors; code generation (package codegen) consumes it and never sees
// the parser's structures. Everything the runtime needs is resolved here:
// buckets with caps are already split into their concrete sub-buckets with
// each tensor's offset, streams and buckets are referred to by index, and
// every statement keeps the source position it came from.
package ir

import (
	"fmt"
	"time"
)

// Pos is a position in a source file. Line and Col start at 1; Offset is the
// byte offset from the start of the file.
type Pos struct {
	File   string
	Offset int
	Line   int
	Col    int
}

// String formats the position as file:line:col.
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// DType is the element type of a tensor or of a bucket's wire buffer.
type DType uint8

// The element types of the language. The zero value is invalid so that a
// forgotten field is caught.
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

var dtypeNames = [...]string{"invalid", "f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"}
var dtypeSizes = [...]int64{0, 8, 4, 2, 2, 8, 4, 1, 1}

// String returns the dtype's name as written in .sync source ("f32").
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// Size returns the size of one element in bytes.
func (d DType) Size() int64 {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether the dtype is a floating-point type.
func (d DType) IsFloat() bool { return d == F64 || d == F32 || d == F16 || d == BF16 }

// ParseDType returns the dtype named s, or false.
func ParseDType(s string) (DType, bool) {
	for i, n := range dtypeNames {
		if i > 0 && n == s {
			return DType(i), true
		}
	}
	return InvalidDType, false
}

// Priority is a stream's scheduling priority.
type Priority uint8

// Stream priorities. Default leaves the choice to the backend.
const (
	PriorityDefault Priority = iota
	PriorityHigh
	PriorityLow
)

// String returns the priority as written in source ("high"), or "default".
func (p Priority) String() string {
	switch p {
	case PriorityHigh:
		return "high"
	case PriorityLow:
		return "low"
	}
	return "default"
}

// Program is a whole checked plan.
type Program struct {
	// Source is the path of the main .sync file as given to the compiler.
	// Generated code names the file by its base name only, so that it does
	// not depend on the directory the plan was built from.
	Source string
	// Name is the program's name: the source file's stem ("resnet50").
	Name string
	// Tensors are all declared tensors, imports first, in declaration order
	// (the order that defines "reverse declaration order" for backward).
	Tensors []Tensor
	// Streams are the declared streams (or the implicit compute and comm).
	Streams []Stream
	// Buckets are the concrete buckets in layout order: the sub-buckets of a
	// capped bucket declaration are consecutive.
	Buckets []Bucket
	// Init runs once on every rank before the warm-up steps; it may be empty.
	Init []Stmt
	// Step is what every rank does in one training step.
	Step []Stmt
	// Accumulate is the number of micro-batches of a step (`step
	// accumulate N`, N >= 2), 0 for a step of one: backward and compute
	// run on every micro-batch, every other statement on the last only,
	// and each backward adds its gradients to the buffers. (Left out of
	// the plan hash when 0, so that plans without it hash as they did.)
	Accumulate int `json:",omitempty"`
	// Run holds the defaults of the `run` declaration.
	Run Run
	// Scaler is the loss scaler of a `scaler` declaration, nil without one.
	Scaler *Scaler
	// Ranks are the ranks' speeds, the global batch and its balancing of
	// a `ranks` declaration, nil without one.
	Ranks *Ranks
	// Imports are the files on disk that the main file imports, directly
	// or through other imports, named as the loader opened them (the
	// embedded standard library is not on disk and not listed). The
	// generated code does not use them; the CLI does, to never write a
	// program over a plan's file.
	Imports []string
}

// Tensor is one parameter tensor.
type Tensor struct {
	Name   string
	DType  DType
	Shape  []int64
	Elems  int64 // product of Shape
	Frozen bool  // no gradient: never filled by backward, never synchronised
	// Bucket is the index of the bucket that holds the tensor, or -1.
	Bucket int
	// Offset is the tensor's first element inside its bucket's wire buffer
	// (element index, in the bucket's Wire dtype); 0 when Bucket is -1.
	Offset int64
	Pos    Pos
}

// Bytes returns the tensor's size in its own dtype.
func (t *Tensor) Bytes() int64 { return t.Elems * t.DType.Size() }

// Stream is an ordered executor: a CUDA stream on GPUs, a goroutine on CPUs.
type Stream struct {
	Name     string
	Priority Priority
	Pos      Pos
}

// Bucket is one contiguous buffer of gradients that collectives move as a
// whole. Its wire buffer holds Elems elements of dtype Wire; tensor i of
// Tensors occupies elements [Tensors[i].Offset, Tensors[i].Offset+Elems).
// A tensor whose dtype equals Wire lives inside the wire buffer (in place);
// one whose dtype differs is cast into it before each collective and back
// after it.
type Bucket struct {
	// Name is the concrete name: "grads" for an uncapped declaration,
	// "grads[3]" for the fourth piece of a capped one, or the tensor's
	// name for the implicit bucket of a tensor named directly as a target.
	Name string
	// Decl is the declared bucket name ("grads"), shared by all pieces.
	Decl string
	// Piece is the index inside the declaration (0 for uncapped buckets).
	Piece   int
	Wire    DType
	Elems   int64
	Tensors []int // indices into Program.Tensors, in layout order
	// PreDivide (`divide before`) makes an `op avg` of the bucket divide
	// every rank's input by the number of ranks before the sum, instead
	// of the sum after it. (Left out of the plan hash when false, so that
	// plans without it hash as they always did.)
	PreDivide bool `json:",omitempty"`
	// Output, when not nil, makes the bucket the output buffer of
	// out-of-place collectives (`into NAME`): it holds no tensors, its
	// Wire is its source's and its length derives from its source's with
	// the world size (Output.Size); Elems is that length in a world of
	// one rank. (Left out of the plan hash when nil.)
	Output *Output `json:",omitempty"`
	Pos    Pos
}

// Output says where an output buffer's length comes from: its first
// write, the out-of-place collective that declared it.
type Output struct {
	// Of is the bucket (a declared one, or an earlier output) that the
	// declaring collective read.
	Of int
	// Size derives the length from Of's.
	Size OutSize
}

// OutSize is how an output buffer's length derives from its source's n
// elements in a world of size ranks.
type OutSize uint8

// The output lengths: allreduce, broadcast and reduce write n elements;
// reducescatter one rank's slice of the padded source, ceil(n/size);
// allgather size*n.
const (
	OutSame OutSize = iota
	OutShard
	OutGather
)

// Bytes returns the size of the wire buffer.
func (b *Bucket) Bytes() int64 { return b.Elems * b.Wire.Size() }

// ElemsAt returns bucket b's length in a world of ranks ranks: its Elems,
// or for an output buffer the length that derives from its source's (the
// runtime's plan.SizeOutputs).
func (p *Program) ElemsAt(b, ranks int) int64 {
	bk := &p.Buckets[b]
	o := bk.Output
	if o == nil || o.Of < 0 || o.Of >= b || ranks < 1 {
		return bk.Elems
	}
	n, r := p.ElemsAt(o.Of, ranks), int64(ranks)
	switch o.Size {
	case OutShard:
		return (n + r - 1) / r
	case OutGather:
		return r * n
	}
	return n
}

// StmtKind says what a statement does.
type StmtKind uint8

// The statements of a step.
const (
	StmtBackward StmtKind = iota + 1
	StmtCompute
	StmtCollective
	StmtGroup
	StmtWait
	StmtUpdate
	StmtUnscale
	StmtBarrier
)

var stmtKindNames = [...]string{"invalid", "backward", "compute", "collective", "group", "wait", "update", "unscale", "barrier"}

// String returns the statement's keyword ("update"; "collective" for any
// collective).
func (k StmtKind) String() string {
	if int(k) < len(stmtKindNames) {
		return stmtKindNames[k]
	}
	return fmt.Sprintf("stmt(%d)", k)
}

// Collective names a collective operation.
type Collective uint8

// The collectives.
const (
	AllReduce Collective = iota + 1
	Broadcast
	Reduce
	AllGather
	ReduceScatter
)

var collectiveNames = [...]string{"invalid", "allreduce", "broadcast", "reduce", "allgather", "reducescatter"}

// String returns the collective's keyword ("allreduce").
func (c Collective) String() string {
	if int(c) < len(collectiveNames) {
		return collectiveNames[c]
	}
	return fmt.Sprintf("collective(%d)", c)
}

// RedOp is a reduction operator.
type RedOp uint8

// The reduction operators. NoOp is used by collectives that do not reduce.
const (
	NoOp RedOp = iota
	Sum
	Avg
	Min
	Max
	Prod
	// WAvg is the average weighted by each rank's share of the global
	// batch (the runtime's --batch and --balance).
	WAvg
)

var redOpNames = [...]string{"none", "sum", "avg", "min", "max", "prod", "wavg"}

// String returns the operator's keyword ("sum").
func (o RedOp) String() string {
	if int(o) < len(redOpNames) {
		return redOpNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// AfterKind says what a statement waits for before it starts.
type AfterKind uint8

// Dependencies of a statement. AfterNone means only the order of its own
// stream. AfterReady is a collective's (each bucket waits for its
// gradients); AfterSynced an update's or unscale's (each bucket waits for
// its last collective earlier in the step).
const (
	AfterNone AfterKind = iota
	AfterReady
	AfterStream
	AfterSynced
)

// After is a statement's dependency.
type After struct {
	Kind   AfterKind
	Stream int // with AfterStream: index into Program.Streams
}

// Stmt is one statement of a step (or of the init block).
type Stmt struct {
	Kind StmtKind
	Pos  Pos

	// Backward, Compute, Collective, Wait, Update, Unscale, Barrier: the stream
	// (index).
	Stream int
	// Backward, Compute: the simulated duration.
	Duration time.Duration
	// Backward only: the tensors (indices into Program.Tensors, non-frozen,
	// in declaration order) of a backward in pieces (`for PATTERN`); nil
	// for a backward of every non-frozen tensor.
	Tensors []int `json:",omitempty"`

	// Collective only.
	Collective Collective
	Op         RedOp // Sum by default for reducing collectives, NoOp otherwise
	Root       int   // Broadcast and Reduce
	// AllReduce only: `algo hierarchical`, reduce-scatter inside each
	// host, allreduce of each slice across hosts, allgather inside the
	// host (false: `algo flat`, the default).
	Hierarchical bool `json:",omitempty"`
	// Collective, Update, Unscale (and Backward, Compute, Barrier:
	// AfterStream).
	After   After
	Buckets []int // indices into Program.Buckets, in program order
	// Collective only: the output bucket of an out-of-place collective
	// (`into NAME`), one per entry of Buckets (which then has one); nil
	// for a collective in place.
	Into []int `json:",omitempty"`

	// Update only: the optimizer and its settings, defaults filled in.
	Update Update `json:",omitzero"`
	// Unscale only: the ranks agree on the overflow flag even where the
	// runtime would not see the need (`agree`).
	Agree bool `json:",omitempty"`

	// Group: the collectives inside, issued as one group.
	Body []Stmt
}

// Optimizer is an update's optimizer.
type Optimizer uint8

// The optimizers (the runtime's optim.Kind has the same numbering).
const (
	SGD Optimizer = iota + 1
	AdamW
)

var optimizerNames = [...]string{"invalid", "sgd", "adamw"}

// String returns the optimizer's keyword ("sgd").
func (o Optimizer) String() string {
	if int(o) < len(optimizerNames) {
		return optimizerNames[o]
	}
	return fmt.Sprintf("optimizer(%d)", o)
}

// Update is an update statement's optimizer with every setting it takes
// (the ones the source leaves out hold their defaults): SGD takes LR,
// Momentum and WeightDecay; AdamW LR, Beta1, Beta2, Eps and WeightDecay.
// Master asks for float32 master parameters for f16 and bf16 gradients.
type Update struct {
	Optimizer                 Optimizer
	LR, WeightDecay, Momentum float64
	Beta1, Beta2, Eps         float64
	Master                    bool
}

// The optimizers' defaults, as PyTorch's torch.optim.SGD and AdamW.
const (
	DefaultLR              = 1e-3
	DefaultSGDWeightDecay  = 0
	DefaultMomentum        = 0
	DefaultBeta1           = 0.9
	DefaultBeta2           = 0.999
	DefaultEps             = 1e-8
	DefaultAdamWeightDecay = 1e-2
)

// ScalerRule is a loss scaler's rule: how the scale reacts to overflows.
type ScalerRule uint8

// The rules (the runtime's scaler.Rule has the same numbering, with
// NoRule 0). `scaler dynamic` is ScaleTorch.
const (
	ScaleStatic ScalerRule = iota + 1
	ScaleTorch
	ScaleMegatron
	ScaleDeepSpeed
)

var scalerRuleNames = [...]string{"invalid", "static", "torch", "megatron", "deepspeed"}

// String returns the rule's keyword ("torch").
func (r ScalerRule) String() string {
	if int(r) < len(scalerRuleNames) {
		return scalerRuleNames[r]
	}
	return fmt.Sprintf("rule(%d)", r)
}

// Scaler is the plan's loss scaler (`scaler RULE OPTIONS`). A zero field
// was not given: the runtime takes it from the rule's preset.
type Scaler struct {
	Rule ScalerRule
	// Init is the first scale; Growth multiplies the scale after Interval
	// steps without overflow, Backoff after an overflow (with Hysteresis,
	// after that many); Min and Max bound it.
	Init, Growth, Backoff float64
	Interval, Hysteresis  int
	Min, Max              float64
	Pos                   Pos
}

// Run holds the defaults that the generated binary's flags override.
type Run struct {
	Steps      int
	Warmup     int
	CheckEvery int // 0: checks off
	// CheckpointEvery writes a checkpoint after every that many steps
	// (0: none) into CheckpointDir ("": the runtime's default), keeping
	// the newest CheckpointKeep (0: the runtime's default).
	// (Left out of the plan's hash when unset: codegen's hash.go marshals
	// the Run as JSON.)
	CheckpointEvery int    `json:",omitempty"`
	CheckpointDir   string `json:",omitempty"`
	CheckpointKeep  int    `json:",omitempty"`
}

// Default run settings, used where the program has no `run` line or leaves
// a field out.
const (
	DefaultSteps      = 20
	DefaultWarmup     = 2
	DefaultCheckEvery = 1
)

// Balance is how a `ranks` declaration shares the global batch.
type Balance uint8

// The balancing rules. BalanceOff (the zero value) shares it evenly.
const (
	BalanceOff Balance = iota
	BalanceStatic
	BalanceDynamic
)

// String is the rule as the plan writes it.
func (b Balance) String() string {
	switch b {
	case BalanceStatic:
		return "static"
	case BalanceDynamic:
		return "dynamic"
	}
	return "off"
}

// RankSpeed gives the ranks First..Last (First == Last for one rank) a
// relative speed.
type RankSpeed struct {
	First, Last int
	Speed       float64
	Pos         Pos
}

// Ranks is the plan's `ranks` declaration: the defaults of the generated
// program's --speed, --batch and --balance. Batch 0 was not given;
// Every is the period of BalanceDynamic in steps.
type Ranks struct {
	Speeds  []RankSpeed `json:",omitempty"`
	Batch   int         `json:",omitempty"`
	Balance Balance     `json:",omitempty"`
	Every   int         `json:",omitempty"`
	Pos     Pos
}

package runtime

// This file is the contract between generated code and the runtime: the
// plan tables that codegen emits as Go literals, the enums they use, and
// (in step.go) the Step methods that the generated step function calls.
// Change it only together with codegen and the golden files. The tables'
// types live in the runtime's internal packages; the names here are
// aliases, so that generated code names them all through this package.

import (
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/scaler"
)

// DType is an element type.
type DType = elem.DType

// The element types.
const (
	InvalidDType = elem.InvalidDType
	F64          = elem.F64
	F32          = elem.F32
	F16          = elem.F16
	BF16         = elem.BF16
	I64          = elem.I64
	I32          = elem.I32
	I8           = elem.I8
	U8           = elem.U8
)

// Priority is a stream's scheduling priority.
type Priority = plan.Priority

// Stream priorities.
const (
	PriorityDefault = plan.PriorityDefault
	PriorityHigh    = plan.PriorityHigh
	PriorityLow     = plan.PriorityLow
)

// RedOp is a reduction operator.
type RedOp = plan.RedOp

// The reduction operators.
const (
	NoOp = plan.NoOp
	Sum  = plan.Sum
	Avg  = plan.Avg
	Min  = plan.Min
	Max  = plan.Max
	Prod = plan.Prod
	WAvg = plan.WAvg
)

// Tensor is one parameter tensor of the plan: Name, DType, Shape, Frozen,
// and its place in a bucket's wire buffer (Bucket, -1 for none; Offset).
type Tensor = plan.Tensor

// Stream is an ordered executor of work: Name and Priority.
type Stream = plan.Stream

// Bucket is a contiguous buffer of Elems elements of dtype Wire holding the
// Tensors listed, in layout order. A tensor whose DType differs from Wire
// has storage of its own and is cast into the buffer before each collective
// and back after it.
type Bucket = plan.Bucket

// Output makes a bucket the output buffer of out-of-place collectives
// (`into NAME`): Of is the bucket its length derives from and Size how.
// The bucket holds no tensors; its Elems in the tables is its length in
// a world of one rank.
type Output = plan.Output

// OutSize is how an output buffer's length derives from its source's.
type OutSize = plan.OutSize

// The output lengths: the source's (allreduce, broadcast, reduce), one
// rank's slice of it (reducescatter), the world's size times it
// (allgather).
const (
	OutSame   = plan.OutSame
	OutShard  = plan.OutShard
	OutGather = plan.OutGather
)

// Run holds the defaults for the program's flags: Steps, Warmup and
// CheckEvery (0: off).
type Run = plan.Run

// After is a collective's dependency, built with AfterReady or AfterStream.
// The zero value waits for nothing but the collective's own stream.
type After = plan.After

// AfterReady makes each bucket's collective start as soon as all of that
// bucket's gradients are ready in the current step.
func AfterReady() After { return plan.AfterReady() }

// AfterStream makes the collective wait for the work queued on stream so far.
func AfterStream(stream int) After { return plan.AfterStream(stream) }

// AfterSynced makes each bucket's update or unscale wait for the end of
// that bucket's last collective before it in the step.
func AfterSynced() After { return plan.AfterSynced() }

// Optimizer is an update's optimizer and its settings: Kind (SGD or
// AdamW), LR, WeightDecay, Momentum, Beta1, Beta2, Eps, Master.
type Optimizer = optim.Spec

// The optimizers.
const (
	SGD   = optim.SGD
	AdamW = optim.AdamW
)

// Scaler is the plan's loss scaler: Rule, Init, Growth, Backoff,
// Interval, Hysteresis, Min, Max.
type Scaler = scaler.Spec

// ScaleRule is a loss scaler's rule.
type ScaleRule = scaler.Rule

// The loss scalers' rules.
const (
	ScaleStatic    = scaler.Static
	ScaleTorch     = scaler.Torch
	ScaleMegatron  = scaler.Megatron
	ScaleDeepSpeed = scaler.DeepSpeed
)

// Ranks is the plan's ranks declaration: Speeds (each a RankSpeed: First,
// Last, Speed, At), Batch, Balance ("static" or "dynamic") and Every; the
// defaults of --speed, --batch and --balance.
type Ranks = plan.Ranks

// RankSpeed gives the ranks First..Last a relative speed.
type RankSpeed = plan.RankSpeed

// Src is a position in the .sync source ("resnet50.sync:12:5"). Statements
// carry it so that errors and timeouts can point back at the plan.
type Src = plan.Src

// Plan is everything a generated program hands to Main.
type Plan struct {
	// Name is the program's name ("resnet50"); Source the name of the .sync
	// file it was generated from, without its directory ("resnet50.sync"),
	// so that the program is the same wherever it was built from.
	Name   string
	Source string
	// Hash identifies the plan; every rank must run the same one.
	Hash    string
	Tensors []Tensor
	Streams []Stream
	Buckets []Bucket
	Run     Run
	// Scaler, if not nil, scales the backward's gradients (mixed precision
	// with loss scaling); Unscale statements undo it.
	Scaler *Scaler
	// Ranks, if not nil, gives the defaults of --speed, --batch and
	// --balance.
	Ranks *Ranks
	// Init, if not nil, runs once before the warm-up steps.
	Init func(s *Step)
	// Step issues one training step's work. It is called once per step,
	// or, with Accumulate, once per micro-batch.
	Step func(s *Step)
	// Accumulate is the number of micro-batches of a step (`step
	// accumulate N`); 0 or 1 for one. Each micro-batch runs Step's
	// backwards and computes, each backward adding its gradients to the
	// buffers; the last one also runs every other statement.
	Accumulate int
}

// tables returns the plan's tables, which the runtime's internal packages
// work from.
func (p *Plan) tables() *plan.Plan {
	return &plan.Plan{Name: p.Name, Source: p.Source, Hash: p.Hash, Tensors: p.Tensors, Streams: p.Streams, Buckets: p.Buckets, Run: p.Run, Scaler: p.Scaler, Ranks: p.Ranks, Accumulate: max(p.Accumulate, 1)}
}

// record runs the plan's Init and Step functions in recording mode: the
// Step methods note what they are asked to do, and nothing runs.
func (p *Plan) record() (*plan.Program, error) {
	recorder := func(fn func(*Step)) func(*plan.Recorder) {
		if fn == nil {
			return nil
		}
		return func(r *plan.Recorder) { fn(&Step{rec: r}) }
	}
	return plan.Record(recorder(p.Init), recorder(p.Step))
}

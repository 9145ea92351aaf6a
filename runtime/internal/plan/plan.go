package plan

import (
	"fmt"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/scaler"
)

// Priority is a stream's scheduling priority.
type Priority uint8

// Stream priorities.
const (
	PriorityDefault Priority = iota
	PriorityHigh
	PriorityLow
)

var priorityNames = [...]string{"default", "high", "low"}

// String returns the priority as .sync source writes it, or "default".
func (p Priority) String() string {
	if int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return fmt.Sprintf("priority(%d)", p)
}

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
	// WAvg is the weighted average Σ w_r·x_r / Σ w_r, each rank's weight
	// its share of the global batch: every rank's input is multiplied by
	// its weight, the products summed, and the sum multiplied by 1/Σ w_r
	// (float dtypes only; see backend.Stream.Scale for the rounding).
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

// Tensor is one parameter tensor of the plan.
type Tensor struct {
	Name   string
	DType  elem.DType
	Shape  []int64
	Frozen bool
	// Bucket is the index of the bucket that holds the tensor, or -1.
	Bucket int
	// Offset is the tensor's first element inside the bucket's wire buffer.
	Offset int64
}

// Elems returns the number of elements of t.
func (t *Tensor) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
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
	Wire    elem.DType
	Elems   int64
	Tensors []int
	// PreDivide makes an `op avg` of the bucket divide every rank's input
	// by the number of ranks before the sum instead of the sum after it
	// (backend.CollOp.PreDivide).
	PreDivide bool
	// Out, when not nil, makes the bucket the output buffer of
	// out-of-place collectives (`into NAME`): it holds no tensors, and
	// its Elems derive from its source's with the world size (see
	// SizeOutputs).
	Out *Output
}

// Output says where an output buffer's length comes from: the bucket Of
// (a lower index) that its first write read, and how (Size).
type Output struct {
	Of   int
	Size OutSize
}

// OutSize is how an output buffer's length derives from its source's n
// elements in a world of size ranks.
type OutSize uint8

// The output lengths: allreduce, broadcast and reduce write n elements
// (OutSame); reducescatter one rank's slice of the source padded to a
// multiple of size, ceil(n/size) (OutShard); allgather size*n
// (OutGather).
const (
	OutSame OutSize = iota
	OutShard
	OutGather
)

// SizeOutputs sets the Elems of p's output buffers for a world of size
// ranks, in bucket order (a source has a lower index than its output).
// The generated tables hold their length in a world of one rank.
func SizeOutputs(p *Plan, size int) {
	for i := range p.Buckets {
		b := &p.Buckets[i]
		if b.Out == nil || b.Out.Of < 0 || b.Out.Of >= i {
			continue // Validate reports it
		}
		n, sz := p.Buckets[b.Out.Of].Elems, int64(size)
		switch b.Out.Size {
		case OutShard:
			b.Elems = (n + sz - 1) / sz
		case OutGather:
			b.Elems = sz * n
		default:
			b.Elems = n
		}
	}
}

// Run holds the defaults for the program's flags.
type Run struct {
	Steps      int
	Warmup     int
	CheckEvery int // 0: off
	// CheckpointEvery, CheckpointDir and CheckpointKeep are the run line's
	// checkpoint settings (zero: the flags' defaults).
	CheckpointEvery int
	CheckpointDir   string
	CheckpointKeep  int
}

// Plan is the plan's tables: what a generated program declares, without
// the functions that issue its statements (those are recorded into a
// Program).
type Plan struct {
	// Name is the program's name ("resnet50"); Source the name of the .sync
	// file it was generated from, without its directory ("resnet50.sync"),
	// so that the program is the same wherever it was built from.
	Name   string
	Source string
	// Hash identifies the plan; every rank must run the same one.
	Hash string
	// StateHash is StateDigest's, set once the plan is recorded: what a
	// checkpoint's state depends on, for resuming the plan edited only
	// where that does not change it.
	StateHash string
	Tensors   []Tensor
	Streams   []Stream
	Buckets   []Bucket
	Run       Run
	// Scaler is the loss scaler, nil for none.
	Scaler *scaler.Spec
	// Ranks is the plan's ranks declaration, nil for none.
	Ranks *Ranks
	// Accumulate is the number of micro-batches of a step, at least 1:
	// the step's backwards and computes run Accumulate times, each
	// backward adding its gradients, and the other statements once, on
	// the last micro-batch.
	Accumulate int
}

// Micro returns the number of micro-batches of a step: Accumulate, or 1
// for a plan made without it.
func (p *Plan) Micro() int { return max(p.Accumulate, 1) }

// Ranks is a plan's `ranks` declaration: the defaults of --speed, --batch
// and --balance. Batch 0 was not given; Balance is "", "static" or
// "dynamic", Every the period of dynamic balancing. At is the
// declaration's position.
type Ranks struct {
	Speeds  []RankSpeed
	Batch   int
	Balance string
	Every   int
	At      Src
}

// RankSpeed gives the ranks First..Last a relative speed; At is the
// entry's position, for the error when a rank is outside the world.
type RankSpeed struct {
	First, Last int
	Speed       float64
	At          Src
}

// AfterKind says what a collective waits for besides its own stream.
type AfterKind uint8

// The dependencies of a collective.
const (
	AfterNothing AfterKind = iota
	// AfterReadyKind: each bucket's collective waits for that bucket's
	// gradients of the current step.
	AfterReadyKind
	// AfterStreamKind: the collective waits for the work queued so far on
	// another stream.
	AfterStreamKind
	// AfterSyncedKind: each bucket's update or unscale waits for that
	// bucket's last collective before it in the step (its end event).
	AfterSyncedKind
)

// After is a collective's dependency, built with AfterReady or AfterStream.
// The zero value waits for nothing but the collective's own stream.
type After struct {
	kind   AfterKind
	stream int
}

// AfterReady makes each bucket's collective start as soon as all of that
// bucket's gradients are ready in the current step.
func AfterReady() After { return After{kind: AfterReadyKind} }

// AfterStream makes the collective wait for the work queued on stream so far.
func AfterStream(stream int) After { return After{kind: AfterStreamKind, stream: stream} }

// AfterSynced makes each bucket's update or unscale wait for the end of
// that bucket's last collective before it in the step.
func AfterSynced() After { return After{kind: AfterSyncedKind} }

// Kind says what the dependency waits for.
func (a After) Kind() AfterKind { return a.kind }

// Stream is the stream an AfterStream dependency waits for.
func (a After) Stream() int { return a.stream }

// Src is a position in the .sync source ("resnet50.sync:12:5"). Statements
// carry it so that errors and timeouts can point back at the plan.
type Src string

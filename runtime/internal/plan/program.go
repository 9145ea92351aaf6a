package plan

// The runtime learns what a step does by calling the plan's Step function
// once in recording mode before anything runs (a dry run: the generated
// code has no branches, so every step issues the same statements). The
// recorded Program drives the choice of fill patterns, the checker's model
// of what every bucket must hold, the report's table rows, the plan hash,
// and validation against the world size.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// StmtKind says what a recorded statement does.
type StmtKind uint8

const (
	StmtBackward StmtKind = iota + 1
	StmtCompute
	StmtColl
	StmtGroup
	StmtWait
	StmtUpdate
	StmtUnscale
	StmtBarrier
)

var stmtKindNames = [...]string{"none", "backward", "compute", "collective", "group", "wait", "update", "unscale", "barrier"}

// String names the kind as the .sync language does.
func (k StmtKind) String() string {
	if int(k) < len(stmtKindNames) {
		return stmtKindNames[k]
	}
	return fmt.Sprintf("stmt(%d)", k)
}

// Stmt is one recorded statement.
type Stmt struct {
	Kind   StmtKind
	At     Src
	Stream int
	// Dur is the simulated work's duration (backward, compute).
	Dur  time.Duration
	Coll Coll
	Op   RedOp
	Root int
	// Hier runs an allreduce hierarchically: reduce-scatter inside each
	// host, allreduce of each slice across hosts, allgather inside the host.
	Hier  bool
	After After
	// Buckets are the targets of a collective, an update or an unscale.
	Buckets []int
	// Into is an out-of-place collective's output bucket (`into NAME`),
	// one per entry of Buckets, which then has one; nil in place.
	Into []int
	// Tensors are a backward in pieces' tensors (non-frozen, in
	// declaration order); nil for a backward of every non-frozen tensor.
	Tensors []int
	// Optim is an update's optimizer.
	Optim optim.Spec
	// Agree makes an unscale agree on the overflow flag across ranks (an
	// allreduce of the flag with max). The recording sets it where the
	// plan asks for it or a bucket's gradients differ between ranks
	// (sharded or not yet synchronised); see Program.Prepare.
	Agree bool
	// Body holds a group's collectives.
	Body []Stmt
	// ID numbers the collective statements of a block in program order
	// (group members included); the report's rows are (ID, bucket).
	ID int
	// Weights are the ranks' weights of a WAvg as it ran (nil: 1 each):
	// set by the checker's model on its copy of the statement, never
	// part of the plan.
	Weights []int
}

// Program is the recorded plan: the init block and one step.
type Program struct {
	Init []Stmt
	Step []Stmt
	// Colls counts the collective statements of Step (IDs 0..Colls-1).
	Colls int
}

// Recorder collects statements while Step methods run in recording mode.
type Recorder struct {
	out   *[]Stmt
	group *[]Stmt
	errs  []error
	ids   int
}

// Add records statement s: a collective gets the next ID, and inside a
// group it becomes a member of the group.
func (r *Recorder) Add(s Stmt) {
	if s.Kind == StmtColl {
		s.ID = r.ids
		r.ids++
	}
	if r.group != nil {
		if s.Kind != StmtColl {
			r.errs = append(r.errs, fmt.Errorf("%s: only collectives may appear inside a group", s.At))
			return
		}
		*r.group = append(*r.group, s)
		return
	}
	*r.out = append(*r.out, s)
}

// Group records the collectives that body issues as one group statement.
// Groups do not nest.
func (r *Recorder) Group(at Src, body func()) {
	if r.group != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: groups do not nest", at))
		body()
		return
	}
	var members []Stmt
	r.group = &members
	body()
	r.group = nil
	r.Add(Stmt{Kind: StmtGroup, At: at, Body: members})
}

// Record runs a plan's init and step functions (either may be nil) in
// recording mode: each gets a Recorder, through which the plan's Step
// handle records what it is asked to do instead of doing it.
func Record(init, step func(r *Recorder)) (*Program, error) {
	prog := &Program{}
	run := func(fn func(*Recorder), out *[]Stmt) (int, []error) {
		if fn == nil {
			return 0, nil
		}
		r := &Recorder{out: out}
		fn(r)
		return r.ids, r.errs
	}
	_, errs := run(init, &prog.Init)
	n, errs2 := run(step, &prog.Step)
	prog.Colls = n
	errs = append(errs, errs2...)
	// The Program is returned even with errors: the plan hash covers what
	// was recorded, so ranks compare plans before judging them.
	return prog, text.JoinErrors(errs)
}

// Validate checks the recorded Program against the plan's tables and the
// world size; every problem is reported with the statement's position.
func (prog *Program) Validate(p *Plan, size int) error {
	var errs []error
	bad := func(at Src, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
	}
	var walk func(ss []Stmt)
	walk = func(ss []Stmt) {
		for _, s := range ss {
			if s.Kind == StmtGroup {
				walk(s.Body)
				continue
			}
			if s.Stream < 0 || s.Stream >= len(p.Streams) {
				bad(s.At, "stream %d does not exist (the plan has %d)", s.Stream, len(p.Streams))
			}
			if s.Dur < 0 {
				bad(s.At, "negative duration %v", s.Dur)
			}
			if s.After.Kind() == AfterStreamKind && (s.After.Stream() < 0 || s.After.Stream() >= len(p.Streams)) {
				bad(s.At, "after: stream %d does not exist", s.After.Stream())
			}
			if s.Kind == StmtUpdate || s.Kind == StmtUnscale {
				validateTrain(p, s, bad)
				continue
			}
			for _, t := range s.Tensors {
				if t < 0 || t >= len(p.Tensors) || p.Tensors[t].Frozen {
					bad(s.At, "backward: tensor %d is not a tensor with a gradient", t)
				}
			}
			if s.After.Kind() == AfterSyncedKind {
				bad(s.At, "%s cannot wait for synced buckets (after synced is an update's or an unscale's)", s.Kind)
			}
			if s.Kind != StmtColl {
				if s.After.Kind() == AfterReadyKind {
					bad(s.At, "%s cannot wait for ready gradients (after ready is a collective's); give it after a stream", s.Kind)
				}
				continue
			}
			if len(s.Buckets) == 0 {
				bad(s.At, "%s has no buckets", s.Coll)
			}
			for _, b := range slices.Concat(s.Buckets, s.Into) {
				if b < 0 || b >= len(p.Buckets) {
					bad(s.At, "bucket %d does not exist (the plan has %d)", b, len(p.Buckets))
				}
			}
			validateInto(p, s, bad)
			if opt := s.Coll.Info().RootWord; opt != "" && (s.Root < 0 || s.Root >= size) {
				fix := fmt.Sprintf("run with at least %d ranks (mpirun -np %d), or change `%s %d` in the plan", s.Root+1, s.Root+1, opt, s.Root)
				if s.Root < 0 {
					fix = fmt.Sprintf("change `%s %d` in the plan to a rank from 0 to %d", opt, s.Root, size-1)
				}
				bad(s.At, "%s of %s %s rank %d: root %d is outside the world of %d rank%s (ranks 0..%d); %s",
					s.Coll, BucketList(p, s.Buckets), opt, s.Root, s.Root, size, text.Plural(size), size-1, fix)
			}
			if s.Coll.Reduces() && (s.Op < Sum || s.Op > WAvg) {
				bad(s.At, "%s needs a reduction operator (sum, avg, min, max, prod or wavg), got %s", s.Coll, s.Op)
			}
			if s.Op == WAvg {
				for _, b := range s.Buckets {
					if w := p.Buckets[b].Wire; !w.IsFloat() {
						bad(s.At, "%s op wavg of bucket %q: its wire dtype %s is an integer; a weighted average needs a float bucket (or wire)", s.Coll, p.Buckets[b].Name, w)
					}
				}
			}
		}
	}
	if len(p.Streams) == 0 {
		errs = append(errs, fmt.Errorf("the plan has no streams"))
	}
	walk(prog.Init)
	walk(prog.Step)
	for _, s := range Flat(prog.Init) {
		if s.Kind == StmtUpdate || s.Kind == StmtUnscale {
			bad(s.At, "%s belongs in the step: init has no gradients", s.Kind)
		}
	}
	updated := map[int]Src{}
	for _, s := range Flat(prog.Step) {
		if s.Kind != StmtUpdate {
			continue
		}
		for _, b := range s.Buckets {
			if first, ok := updated[b]; ok && b >= 0 && b < len(p.Buckets) {
				bad(s.At, "bucket %q is updated twice in the step (first at %s)", p.Buckets[b].Name, first)
			}
			updated[b] = s.At
		}
	}
	for i, t := range p.Tensors {
		if !t.DType.Valid() {
			errs = append(errs, fmt.Errorf("tensor %q: invalid dtype %d", t.Name, t.DType))
		}
		if t.Bucket < -1 || t.Bucket >= len(p.Buckets) {
			errs = append(errs, fmt.Errorf("tensor %q (#%d): bucket %d does not exist", t.Name, i, t.Bucket))
		}
	}
	for i, b := range p.Buckets {
		if !b.Wire.Valid() {
			errs = append(errs, fmt.Errorf("bucket %q: invalid wire dtype %d", b.Name, b.Wire))
		}
		if b.Out != nil && (b.Out.Of < 0 || b.Out.Of >= i || len(b.Tensors) > 0 || p.Buckets[b.Out.Of].Wire != b.Wire) {
			errs = append(errs, fmt.Errorf("output bucket %q: its source %d is not an earlier bucket of its wire dtype, or it has tensors", b.Name, b.Out.Of))
		}
		for _, ti := range b.Tensors {
			if ti < 0 || ti >= len(p.Tensors) {
				errs = append(errs, fmt.Errorf("bucket %q: tensor %d does not exist", b.Name, ti))
				continue
			}
			t := p.Tensors[ti]
			if t.Offset < 0 || t.Offset+t.Elems() > b.Elems {
				errs = append(errs, fmt.Errorf("bucket %q: tensor %q at %d..%d lies outside its %d elements",
					b.Name, t.Name, t.Offset, t.Offset+t.Elems(), b.Elems))
			}
		}
	}
	return text.JoinErrors(errs)
}

// BucketList names a statement's buckets for messages: `bucket "a"`,
// `buckets "a", "b"`, or the first three and how many more.
func BucketList(p *Plan, buckets []int) string {
	var names []string
	for _, b := range buckets[:min(len(buckets), 3)] {
		if b >= 0 && b < len(p.Buckets) {
			names = append(names, fmt.Sprintf("%q", p.Buckets[b].Name))
		} else {
			names = append(names, fmt.Sprintf("#%d", b))
		}
	}
	switch {
	case len(buckets) == 1:
		return "bucket " + names[0]
	case len(buckets) > 3:
		return fmt.Sprintf("buckets %s and %d more", strings.Join(names, ", "), len(buckets)-3)
	}
	return "buckets " + strings.Join(names, ", ")
}

// Flat returns the block's collectives and other statements in Program
// order with groups expanded.
func Flat(ss []Stmt) []Stmt {
	var out []Stmt
	for _, s := range ss {
		if s.Kind == StmtGroup {
			out = append(out, s.Body...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// The methods below record one statement each; they mirror the Step
// methods of generated code, which call them in recording mode, and let
// the runtime's tests write programs the way a plan does.

// Backward records a simulated backward pass of duration d on stream,
// after at most one dependency.
func (r *Recorder) Backward(at Src, stream int, d time.Duration, after ...After) {
	r.Add(Stmt{Kind: StmtBackward, At: at, Stream: stream, Dur: d, After: r.oneAfter(at, after)})
}

// BackwardFor records a backward in pieces: a simulated backward pass of
// duration d on stream that makes ready the gradients of tensors only.
func (r *Recorder) BackwardFor(at Src, stream int, d time.Duration, after After, tensors ...int) {
	if len(tensors) == 0 {
		r.errs = append(r.errs, fmt.Errorf("%s: a backward in pieces needs at least one tensor", at))
		return
	}
	r.Add(Stmt{Kind: StmtBackward, At: at, Stream: stream, Dur: d, After: after, Tensors: slices.Clone(tensors)})
}

// Compute records other simulated work of duration d on stream, after at
// most one dependency.
func (r *Recorder) Compute(at Src, stream int, d time.Duration, after ...After) {
	r.Add(Stmt{Kind: StmtCompute, At: at, Stream: stream, Dur: d, After: r.oneAfter(at, after)})
}

// oneAfter returns a statement's one dependency (none without), noting an
// error when it has several.
func (r *Recorder) oneAfter(at Src, after []After) After {
	if len(after) > 1 {
		r.errs = append(r.errs, fmt.Errorf("%s: a statement waits for one stream at most (it was given %d dependencies)", at, len(after)))
	}
	if len(after) == 0 {
		return After{}
	}
	return after[0]
}

// Update records an update of buckets with optimizer opt on stream.
func (r *Recorder) Update(at Src, stream int, opt optim.Spec, after After, buckets ...int) {
	r.Add(Stmt{Kind: StmtUpdate, At: at, Stream: stream, Optim: opt, After: after, Buckets: slices.Clone(buckets)})
}

// Unscale records an unscale of buckets on stream; agree asks for the
// flag's agreement across ranks.
func (r *Recorder) Unscale(at Src, stream int, agree bool, after After, buckets ...int) {
	r.Add(Stmt{Kind: StmtUnscale, At: at, Stream: stream, Agree: agree, After: after, Buckets: slices.Clone(buckets)})
}

// Wait records that the host waits for stream.
func (r *Recorder) Wait(at Src, stream int) {
	r.Add(Stmt{Kind: StmtWait, At: at, Stream: stream})
}

// Barrier records a barrier across all ranks on stream, after at most
// one dependency.
func (r *Recorder) Barrier(at Src, stream int, after ...After) {
	r.Add(Stmt{Kind: StmtBarrier, At: at, Stream: stream, After: r.oneAfter(at, after)})
}

// AllReduce records an allreduce of buckets with op.
func (r *Recorder) AllReduce(at Src, stream int, op RedOp, after After, buckets ...int) {
	r.Collective(Stmt{At: at, Stream: stream, Coll: CollAllReduce, Op: op, After: after}, buckets)
}

// Broadcast records a broadcast of buckets from root.
func (r *Recorder) Broadcast(at Src, stream int, root int, after After, buckets ...int) {
	r.Collective(Stmt{At: at, Stream: stream, Coll: CollBroadcast, Root: root, After: after}, buckets)
}

// Reduce records a reduce of buckets with op onto root.
func (r *Recorder) Reduce(at Src, stream int, op RedOp, root int, after After, buckets ...int) {
	r.Collective(Stmt{At: at, Stream: stream, Coll: CollReduce, Op: op, Root: root, After: after}, buckets)
}

// AllGather records an in-place allgather of buckets.
func (r *Recorder) AllGather(at Src, stream int, after After, buckets ...int) {
	r.Collective(Stmt{At: at, Stream: stream, Coll: CollAllGather, After: after}, buckets)
}

// ReduceScatter records an in-place reducescatter of buckets with op.
func (r *Recorder) ReduceScatter(at Src, stream int, op RedOp, after After, buckets ...int) {
	r.Collective(Stmt{At: at, Stream: stream, Coll: CollReduceScatter, Op: op, After: after}, buckets)
}

// Into records an out-of-place collective st (its Coll, Op, Root set)
// from bucket src into output bucket out.
func (r *Recorder) Into(st Stmt, src, out int) {
	st.Kind = StmtColl
	st.Buckets, st.Into = []int{src}, []int{out}
	r.Add(st)
}

// validateInto checks an out-of-place collective: one source, one output
// bucket of the length and dtype that the collective writes (the lengths
// as SizeOutputs sets them, for any world size), and no op wavg or
// hierarchical algorithm, which work in place.
func validateInto(p *Plan, s Stmt, bad func(at Src, format string, args ...any)) {
	if s.Into == nil {
		return
	}
	if len(s.Buckets) != 1 || len(s.Into) != 1 {
		bad(s.At, "%s into: %d sources and %d outputs, want one each", s.Coll, len(s.Buckets), len(s.Into))
		return
	}
	src, out := s.Buckets[0], s.Into[0]
	if src < 0 || src >= len(p.Buckets) || out < 0 || out >= len(p.Buckets) {
		return // reported
	}
	o := p.Buckets[out].Out
	want := map[Coll]OutSize{CollAllReduce: OutSame, CollBroadcast: OutSame, CollReduce: OutSame, CollReduceScatter: OutShard, CollAllGather: OutGather}[s.Coll]
	switch {
	case o == nil:
		bad(s.At, "%s into bucket %q: it is not an output buffer", s.Coll, p.Buckets[out].Name)
	case src == out:
		bad(s.At, "%s into bucket %q: it is its own source", s.Coll, p.Buckets[out].Name)
	case p.Buckets[src].Wire != p.Buckets[out].Wire:
		bad(s.At, "%s of %s bucket %q into %s bucket %q: the dtypes differ", s.Coll, p.Buckets[src].Wire, p.Buckets[src].Name, p.Buckets[out].Wire, p.Buckets[out].Name)
	case o.Of != src && (o.Size != want || p.Buckets[o.Of].Elems != p.Buckets[src].Elems):
		// A later write from another source: the same length (checked
		// for one rank here; the compiler checks it for any world size).
		bad(s.At, "%s into bucket %q: it was declared by another kind of collective or from a source of another length", s.Coll, p.Buckets[out].Name)
	case o.Of == src && o.Size != want:
		bad(s.At, "%s into bucket %q: it was declared by another kind of collective", s.Coll, p.Buckets[out].Name)
	case s.Op == WAvg || s.Hier:
		bad(s.At, "%s into bucket %q: op wavg and algo hierarchical work in place only", s.Coll, p.Buckets[out].Name)
	case p.Buckets[src].PreDivide && s.Op == Avg:
		bad(s.At, "%s into bucket %q: bucket %q divides before the sum, in place", s.Coll, p.Buckets[out].Name, p.Buckets[src].Name)
	}
}

// Collective records collective statement st on buckets (a copy of them:
// the caller may reuse the slice).
func (r *Recorder) Collective(st Stmt, buckets []int) {
	st.Kind = StmtColl
	st.Buckets = slices.Clone(buckets)
	r.Add(st)
}

// validateTrain checks an update or an unscale against the plan's tables.
func validateTrain(p *Plan, s Stmt, bad func(at Src, format string, args ...any)) {
	if len(s.Buckets) == 0 {
		bad(s.At, "%s has no buckets", s.Kind)
	}
	if k := s.After.Kind(); k == AfterReadyKind {
		bad(s.At, "%s cannot wait for ready gradients; give it after synced or after a stream", s.Kind)
	}
	if s.Kind == StmtUnscale && p.Scaler == nil {
		bad(s.At, "unscale without a scaler: the plan declares none")
	}
	if s.Kind == StmtUpdate {
		o := s.Optim
		switch {
		case o.Kind != optim.SGD && o.Kind != optim.AdamW:
			bad(s.At, "update with unknown optimizer %s", o.Kind)
		case !(o.LR > 0):
			bad(s.At, "update with learning rate %v: it must be a positive number", o.LR)
		case o.Kind == optim.AdamW && !(o.Eps > 0 && o.Beta1 >= 0 && o.Beta1 < 1 && o.Beta2 >= 0 && o.Beta2 < 1):
			bad(s.At, "adamw needs 0 <= beta1, beta2 < 1 and eps > 0 (got %v, %v, %v)", o.Beta1, o.Beta2, o.Eps)
		}
	}
	for _, b := range s.Buckets {
		if b < 0 || b >= len(p.Buckets) {
			bad(s.At, "bucket %d does not exist (the plan has %d)", b, len(p.Buckets))
			continue
		}
		bk := &p.Buckets[b]
		var pdt elem.DType
		for i, t := range bk.Tensors {
			dt := p.Tensors[t].DType
			if !dt.IsFloat() {
				bad(s.At, "%s of bucket %q: tensor %q is %s; it needs float gradients", s.Kind, bk.Name, p.Tensors[t].Name, dt)
				break
			}
			if s.Kind == StmtUpdate {
				if d := s.Optim.ParamDType(dt); i == 0 {
					pdt = d
				} else if d != pdt {
					bad(s.At, "update of bucket %q: its tensors' parameters would be %s and %s; give the update master f32", bk.Name, pdt, d)
					break
				}
			}
		}
	}
}

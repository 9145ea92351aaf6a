package engine

// The training step after the sync: parameters and optimizer state beside
// the gradients, the loss scaler, unscale with its overflow flag, the
// optimizer update, and overflows injected on demand.

import (
	"fmt"
	"os"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/check"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/scaler"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// Injection puts Value (+Inf, -Inf or NaN) into the first element of
// tensor Tensor's gradient on rank Rank, right after the backward of step
// Step (counted from 0, warm-up included) made it.
type Injection struct {
	Tensor, Rank, Step int
	Value              float64
	// Spec is the flag's value, for messages.
	Spec string
}

// ParamMem is a bucket's parameters and optimizer state: laid out like the
// bucket (tensor t's parameters start at its Offset), in one dtype. A
// sharded update keeps only this rank's slice, as ZeRO does: element k of
// the bucket is element k-Base of the spans.
type ParamMem struct {
	Spec  optim.Spec
	DType elem.DType
	Param backend.Span
	State [2]backend.Span
	Base  int64
	// Sharded: the update reads and keeps this rank's slice only.
	Sharded bool
}

// train is the engine's state for the training step.
type train struct {
	// sc is the loss scaler (nil without); scale is the current step's
	// scale (1 without a scaler).
	sc    *scaler.Scaler
	scale float64
	// flag is the step's overflow flag (one i32; N == 0 without a
	// scaler); overflow is what it said after the last step.
	flag     backend.Span
	overflow bool
	// params[b] is bucket b's parameters (Param.Buf nil if never updated).
	params []ParamMem
	// synced[b] is the end of bucket b's last collective in this step,
	// after its casts back into the tensors that live apart.
	synced []readyMark
	// applied counts the steps whose updates were applied.
	applied int
	// stmts[i] describes flat step statement i if it is an update or an
	// unscale.
	stmts map[int]trainStmt
	// pattern: every backward fills the real pattern (the scaler and the
	// reference need the real values every step).
	pattern    bool
	injections []Injection
}

// trainStmt is what the engine precomputes about an update or unscale.
type trainStmt struct {
	// sharded[k] says that the statement's k-th bucket was reduce-
	// scattered before it in the step: only this rank's slice is read.
	sharded []bool
	// agree: an unscale whose flag the ranks must agree on.
	agree bool
	names []string // "update NAME" per bucket, for the records
}

// setUpTrain allocates the parameters of every updated bucket (initial
// values optim.InitialParam, state zero) and the overflow flag, and works
// out which statements read slices and which unscales agree.
func (e *Engine) setUpTrain(injections []Injection) error {
	p := e.plan
	t := &e.tr
	t.scale = 1
	t.injections = injections
	t.params = make([]ParamMem, len(p.Buckets))
	t.synced = make([]readyMark, len(p.Buckets))
	t.stmts = map[int]trainStmt{}
	if p.Scaler != nil {
		t.sc = scaler.New(*p.Scaler)
		t.scale = t.sc.Scale()
		buf, err := e.be.Alloc(elem.I32, 1)
		if err != nil {
			return fmt.Errorf("the overflow flag: %w", err)
		}
		t.flag = backend.Span{Buf: buf, N: 1, DType: elem.I32}
		if err := e.be.CopyFromHost(t.flag, make([]byte, 4)); err != nil {
			return fmt.Errorf("clearing the overflow flag: %w", err)
		}
	}
	// last[b] is the collective that last touched bucket b so far.
	last := make([]plan.Coll, len(p.Buckets))
	hasUpdate := false
	for i, s := range e.flatStep {
		switch s.Kind {
		case plan.StmtBackward:
			if s.Tensors == nil {
				clear(last)
			}
			for _, t := range s.Tensors { // a piece: its buckets only
				if b := p.Tensors[t].Bucket; b >= 0 {
					last[b] = 0
				}
			}
		case plan.StmtColl:
			if s.Into != nil {
				// Out of place: the source stays as the collective
				// before left it (reduce-scattered or not).
				continue
			}
			for _, b := range s.Buckets {
				last[b] = s.Coll
			}
		case plan.StmtUpdate, plan.StmtUnscale:
			ts := trainStmt{agree: s.Agree}
			for _, b := range s.Buckets {
				ts.sharded = append(ts.sharded, last[b] == plan.CollReduceScatter)
				// Gradients that may differ between ranks: the ranks must
				// agree on whether one overflowed.
				if l := last[b]; l != plan.CollAllReduce && l != plan.CollBroadcast && l != plan.CollAllGather {
					ts.agree = true
				}
				verb := "update "
				if s.Kind == plan.StmtUnscale {
					verb = "unscale "
				}
				ts.names = append(ts.names, verb+p.Buckets[b].Name)
				if s.Kind == plan.StmtUpdate {
					hasUpdate = true
					if err := e.allocParams(b, s.Optim, ts.sharded[len(ts.sharded)-1]); err != nil {
						return err
					}
				}
			}
			t.stmts[i] = ts
		}
	}
	t.pattern = p.Scaler != nil || hasUpdate && e.cfg.CheckEvery > 0
	return nil
}

// allocParams gives bucket b parameters and state for optimizer spec:
// for the whole bucket, or, for a sharded update, for this rank's slice.
func (e *Engine) allocParams(b int, spec optim.Spec, sharded bool) error {
	p := e.plan
	pm := &e.tr.params[b]
	if pm.Param.Buf != nil {
		return nil // the recording refuses two updates of a bucket
	}
	bk := &p.Buckets[b]
	pdt := spec.ParamDType(p.Tensors[bk.Tensors[0]].DType)
	lo, hi := int64(0), bk.Elems
	if sharded {
		lo, hi = e.sliceOf(b)
	}
	n := max(hi-lo, 0)
	alloc := func(what string) (backend.Span, error) {
		buf, err := e.be.Alloc(pdt, max(n, 1))
		if err != nil {
			return backend.Span{}, fmt.Errorf("%s of bucket %q (%d %s): %w", what, bk.Name, n, pdt, err)
		}
		return backend.Span{Buf: buf, N: n, DType: pdt}, nil
	}
	*pm = ParamMem{Spec: spec, DType: pdt, Base: lo, Sharded: sharded}
	var err error
	if pm.Param, err = alloc("the parameters"); err != nil {
		return err
	}
	vals := make([]float64, n)
	for _, ti := range bk.Tensors {
		tn := &p.Tensors[ti]
		a, z := max(lo, tn.Offset), min(hi, tn.Offset+tn.Elems())
		for k := a; k < z; k++ {
			vals[k-lo] = optim.InitialParam(ti, k-tn.Offset)
		}
	}
	host := make([]byte, n*pdt.Size())
	elem.StoreAll(host, pdt, vals)
	if n > 0 {
		if err := e.be.CopyFromHost(pm.Param, host); err != nil {
			return fmt.Errorf("initial parameters of bucket %q: %w", bk.Name, err)
		}
	}
	clear(host)
	for k := range spec.States() {
		if pm.State[k], err = alloc("the optimizer state"); err != nil {
			return err
		}
		if n > 0 {
			if err := e.be.CopyFromHost(pm.State[k], host); err != nil {
				return fmt.Errorf("initial optimizer state of bucket %q: %w", bk.Name, err)
			}
		}
	}
	return nil
}

// sliceOf returns the elements [lo, hi) of bucket b that this rank owns
// after a reducescatter (the padded buffer's slice, within the bucket).
func (e *Engine) sliceOf(b int) (lo, hi int64) {
	per := e.mem.Buckets[b].Elems / int64(e.size)
	return int64(e.rank) * per, min(int64(e.rank+1)*per, e.plan.Buckets[b].Elems)
}

// Params returns bucket b's parameters and state (Param.Buf nil if it
// has none).
func (e *Engine) Params(b int) ParamMem { return e.tr.params[b] }

// Scaling reports the current step's scale and whether the last finished
// step overflowed.
func (e *Engine) Scaling() (scale float64, overflow bool) { return e.tr.scale, e.tr.overflow }

// scaleGradient multiplies tensor t's fresh gradient by the loss scale and
// injects the overflows asked for; backward calls it after each fill.
func (e *Engine) scaleGradient(at plan.Src, st backend.Stream, t int) {
	tr := &e.tr
	store := e.mem.Tensors[t].Store
	if tr.sc != nil && store.DType.IsFloat() && tr.scale != 1 {
		if err := st.Scale(store, tr.scale, backend.Span{}); err != nil {
			e.fatal(at, fmt.Errorf("scaling the gradient of %q: %w", e.plan.Tensors[t].Name, err))
		}
	}
	for _, in := range tr.injections {
		if in.Tensor == t && in.Rank == e.rank && in.Step == e.stepNo && store.N > 0 {
			one := store
			one.N = 1
			if err := st.Set(one, in.Value); err != nil {
				e.fatal(at, fmt.Errorf("injecting %v into %q: %w", in.Value, e.plan.Tensors[t].Name, err))
			}
		}
	}
}

// runsOf returns the spans that bucket b's gradients occupy, restricted to
// this rank's slice when sharded: the whole range at once where every
// tensor lives in the wire buffer, else one span per tensor. off[k] is
// span k's first element in the bucket.
func (e *Engine) runsOf(b int, sharded bool) (grads []backend.Span, offs []int64) {
	p := e.plan
	bk := &p.Buckets[b]
	lo, hi := int64(0), bk.Elems
	if sharded {
		lo, hi = e.sliceOf(b)
	}
	inPlace := true
	for _, t := range bk.Tensors {
		inPlace = inPlace && e.mem.Tensors[t].InPlace
	}
	if inPlace {
		if hi > lo {
			sp := e.mem.Buckets[b].Span
			sp.Off, sp.N = lo, hi-lo
			grads, offs = append(grads, sp), append(offs, lo)
		}
		return grads, offs
	}
	for _, t := range bk.Tensors {
		tn := &p.Tensors[t]
		a, z := max(lo, tn.Offset), min(hi, tn.Offset+tn.Elems())
		if z <= a {
			continue
		}
		sp := e.mem.Tensors[t].Store
		sp.Off += a - tn.Offset
		sp.N = z - a
		grads, offs = append(grads, sp), append(offs, a)
	}
	return grads, offs
}

// waitSynced makes stream wait for the end of bucket b's last collective
// of this step (after synced).
func (e *Engine) waitSynced(at plan.Src, stream, b int) {
	m := e.tr.synced[b]
	if !m.ok || m.step != e.stepNo {
		return
	}
	if err := e.streams[stream].WaitEvent(m.ev); err != nil {
		e.fatal(at, err)
	}
	e.queued(stream)
}

// Update queues an optimizer step of each bucket on stream (see
// runtime.Step.Update).
func (e *Engine) Update(at plan.Src, stream int, opt optim.Spec, after plan.After, buckets []int) {
	if e.skips(plan.StmtUpdate, at) {
		return
	}
	e.expect(plan.StmtUpdate, at)
	idx := e.cursor - 1
	ts := e.tr.stmts[idx]
	e.waitAfter(at, stream, after)
	st := e.streams[stream]
	for k, b := range buckets {
		if after.Kind() == plan.AfterSyncedKind {
			e.waitSynced(at, stream, b)
		}
		pm := &e.tr.params[b]
		h := opt.Hyper(e.tr.applied+1, pm.DType)
		start := e.recordOn(stream, at)
		e.queued(stream)
		grads, offs := e.runsOf(b, ts.sharded[k])
		var bytes int64
		for j, g := range grads {
			u := backend.UpdateOp{Grad: g, Param: pm.Param, Flag: e.tr.flag, Hyper: h}
			u.Param.Off, u.Param.N = offs[j]-pm.Base, g.N
			for s := range pm.State {
				if pm.State[s].Buf != nil {
					u.State[s] = pm.State[s]
					u.State[s].Off, u.State[s].N = offs[j]-pm.Base, g.N
				}
			}
			if ts.sharded[k] {
				// The new parameters of this rank's slice go back where
				// its gradients were, for the allgather that follows (as
				// ZeRO does): the bucket's buffer, or the storage of a
				// tensor of another dtype than the wire, which the
				// allgather casts into the buffer first.
				u.Out = g
			}
			if err := st.Update(u); err != nil {
				e.fatal(at, fmt.Errorf("update of bucket %q: %w", e.plan.Buckets[b].Name, err))
			}
			bytes += g.Bytes() + 2*u.Param.Bytes() + 2*(u.State[0].Bytes()+u.State[1].Bytes()) + u.Out.Bytes()
		}
		end := e.recordOn(stream, at)
		e.addTimed(result.Record{Kind: result.Update, Stream: stream, At: at, Name: ts.names[k], Bucket: b, Index: idx, Bytes: bytes, Start: start, End: end})
	}
	e.flush()
}

// Unscale queues the division of each bucket's gradients by the loss
// scale, which sets the overflow flag on inf or NaN, and, where the ranks
// must agree on the flag, an allreduce of it with max (see
// runtime.Step.Unscale).
func (e *Engine) Unscale(at plan.Src, stream int, agree bool, after plan.After, buckets []int) {
	if e.skips(plan.StmtUnscale, at) {
		return
	}
	e.expect(plan.StmtUnscale, at)
	idx := e.cursor - 1
	ts := e.tr.stmts[idx]
	e.waitAfter(at, stream, after)
	st := e.streams[stream]
	for k, b := range buckets {
		if after.Kind() == plan.AfterSyncedKind {
			e.waitSynced(at, stream, b)
		}
		start := e.recordOn(stream, at)
		e.queued(stream)
		grads, _ := e.runsOf(b, ts.sharded[k])
		var bytes int64
		for _, g := range grads {
			if err := st.Scale(g, 1/e.tr.scale, e.tr.flag); err != nil {
				e.fatal(at, fmt.Errorf("unscale of bucket %q: %w", e.plan.Buckets[b].Name, err))
			}
			bytes += 2 * g.Bytes()
		}
		end := e.recordOn(stream, at)
		e.addTimed(result.Record{Kind: result.Unscale, Stream: stream, At: at, Name: ts.names[k], Bucket: b, Index: idx, Bytes: bytes, Start: start, End: end})
	}
	if ts.agree || agree {
		start := e.startEvent(stream, at)
		op := backend.CollOp{Stream: st, Coll: plan.CollAllReduce, Op: plan.Max, Buf: e.tr.flag, Name: "overflow flag"}
		if err := e.be.Collectives([]backend.CollOp{op}); err != nil {
			e.fatal(at, fmt.Errorf("agreeing on the overflow flag: %w", err))
		}
		e.queued(stream)
		end := e.recordOn(stream, at)
		e.addTimed(result.Record{Kind: result.Flag, Stream: stream, At: at, Name: "overflow flag", Bucket: -1, Index: idx, Bytes: 4, Start: start, End: end})
	}
	e.flush()
}

// endTrainStep runs after step i drained: it reads and clears the
// overflow flag, advances the scaler, and counts the applied updates.
func (e *Engine) endTrainStep(res *result.Results) error {
	tr := &e.tr
	tr.overflow = false
	if tr.sc != nil {
		var b [4]byte
		if err := e.be.CopyToHost(b[:], tr.flag); err != nil {
			return fmt.Errorf("reading the overflow flag: %w", err)
		}
		tr.overflow = b != [4]byte{}
		if tr.overflow {
			if err := e.be.CopyFromHost(tr.flag, make([]byte, 4)); err != nil {
				return fmt.Errorf("clearing the overflow flag: %w", err)
			}
		}
		res.Scaling.Scale = append(res.Scaling.Scale, tr.scale)
		res.Scaling.Skipped = append(res.Scaling.Skipped, tr.overflow)
		tr.sc.Update(tr.overflow)
	}
	return nil
}

// nextTrainStep advances to the next step's scale and update count; it
// runs after the model saw the step.
func (e *Engine) nextTrainStep() {
	tr := &e.tr
	if !tr.overflow {
		tr.applied++
	}
	if tr.sc != nil {
		tr.scale = tr.sc.Scale()
	}
}

// trainModel tells the checker's Model of the training step.
func (e *Engine) trainModel() check.Training {
	tr := check.Training{Params: make([]check.Params, len(e.tr.params)), Reference: e.cfg.CheckEvery > 0}
	for b, pm := range e.tr.params {
		tr.Params[b] = check.Params{Spec: pm.Spec, DType: pm.DType, Param: pm.Param, State: pm.State, Base: pm.Base,
			Sharded: pm.Sharded, Updated: pm.Param.Buf != nil}
	}
	for _, in := range e.tr.injections {
		tr.Injections = append(tr.Injections, check.Injection{Tensor: in.Tensor, Rank: in.Rank, Step: in.Step})
	}
	return tr
}

// trainStep is how the step just run went, for the Model.
func (e *Engine) trainStep() check.StepTrain {
	return check.StepTrain{Step: e.stepNo, Scale: e.tr.scale, Skipped: e.tr.overflow, T: e.tr.applied + 1, Weights: e.wavgWeights()}
}

// checkParams compares every updated bucket's parameters with the
// Model's reference.
func (e *Engine) checkParams(res *result.Results) error {
	for b, pm := range e.tr.params {
		if pm.Param.Buf == nil {
			continue
		}
		r, err := e.model.CheckParams(b)
		if err != nil {
			return err
		}
		res.WrongParams[b] += r.Wrong
		res.UncheckedParam[b] += r.Unchecked
		if r.Wrong > 0 && len(res.FirstBad) < 5 {
			msg := fmt.Sprintf("rank %d: step %s: parameters of bucket %q: %d wrong; first: %s", e.rank, e.stepName(), e.plan.Buckets[b].Name, r.Wrong, r.First)
			res.FirstBad = append(res.FirstBad, msg)
			fmt.Fprintf(os.Stderr, "%s\n", msg)
		}
	}
	return nil
}

// Warnings says what the plan's numbers make likely: a gradient that
// passes its dtype's or its bucket's wire dtype's largest value at the
// loss scaler's first scale, or a bucket whose sum over the ranks can
// (wire headroom), which makes steps overflow where no rank's gradients
// do. It is the same on every rank: the bounds come from every rank's
// fill pattern.
func (e *Engine) Warnings() []string {
	if e.plan.Scaler == nil || e.tr.sc == nil {
		return nil
	}
	out := headroomWarnings(e.plan, e.flatStep, e.shapes, e.size, e.tr.scale)
	return append(out, unfoundInjections(e.plan, e.flatStep, e.tr.injections)...)
}

// unfoundInjections warns of the --overflow values whose tensor no
// unscale reads: nothing sets the overflow flag for them, so their step
// is not skipped.
func unfoundInjections(p *plan.Plan, flat []plan.Stmt, in []Injection) []string {
	unscaled := make([]bool, len(p.Buckets))
	var names []string
	for _, s := range flat {
		if s.Kind != plan.StmtUnscale {
			continue
		}
		for _, b := range s.Buckets {
			if !unscaled[b] {
				names = append(names, fmt.Sprintf("%q", p.Buckets[b].Name))
			}
			unscaled[b] = true
		}
	}
	var out []string
	for _, x := range in {
		tn := &p.Tensors[x.Tensor]
		if tn.Bucket >= 0 && unscaled[tn.Bucket] {
			continue
		}
		where := "is in no bucket"
		if tn.Bucket >= 0 {
			where = fmt.Sprintf("is in bucket %q, which no unscale reads", p.Buckets[tn.Bucket].Name)
		}
		use := "unscale its bucket"
		if len(names) > 0 {
			use = "name a tensor of an unscaled bucket (" + strings.Join(names, ", ") + "), or unscale its bucket"
		}
		out = append(out, fmt.Sprintf("--overflow %q: tensor %q %s, so nothing finds the overflow and step %d is not skipped; %s",
			x.Spec, tn.Name, where, x.Step, use))
	}
	return out
}

// headroomWarnings is Warnings for plan p, whose flat step is flat and
// fill patterns shapes, on size ranks at the first scale.
func headroomWarnings(p *plan.Plan, flat []plan.Stmt, shapes []elem.PatternShape, size int, scale float64) []string {
	summed := make([]bool, len(p.Buckets))
	for _, s := range flat {
		if s.Kind == plan.StmtColl && s.Coll.Reduces() && (s.Op == plan.Sum || s.Op == plan.Avg || s.Op == plan.WAvg) {
			for _, b := range s.Buckets {
				summed[b] = true
			}
		}
	}
	// A gradient is the sum of the step's micro-batches' fills.
	micro := int64(max(p.Accumulate, 1))
	static := p.Scaler.Rule == scaler.Static
	var out []string
	for b, bk := range p.Buckets {
		if !bk.Wire.IsFloat() {
			continue
		}
		// bound is the largest sum over ranks of one element's values;
		// one, the largest value of one rank that passes the smallest
		// largest value on its way (its tensor's dtype, then the wire's)
		// at the scale, and top and dt that value and its dtype.
		var bound, one int64
		top, dt := check.MaxFinite(bk.Wire), bk.Wire
		for _, t := range bk.Tensors {
			tn := &p.Tensors[t]
			if !tn.DType.IsFloat() {
				continue
			}
			tTop, tDT := check.MaxFinite(bk.Wire), bk.Wire
			if m := check.MaxFinite(tn.DType); m < tTop {
				tTop, tDT = m, tn.DType
			}
			var sum int64
			for r := range size {
				fp := shapes[t].Params(r, size, 0, t)
				lo, hi := fp.ValueRange()
				v := micro * max(-lo, hi)
				sum += v
				if float64(v)*scale > tTop && float64(v)*scale/tTop > float64(one)*scale/top {
					one, top, dt = v, tTop, tDT
				}
			}
			bound = max(bound, sum)
		}
		div := 1.0
		if bk.PreDivide {
			div = float64(size)
		}
		wireTop := check.MaxFinite(bk.Wire)
		switch {
		case one > 0:
			fits := fittingScale(top, float64(one))
			what := fmt.Sprintf("a step that reaches it overflows, and is skipped, until the scaler backs off; start it at %s or lower (scaler ... init %s)", text.Num(fits), text.Num(fits))
			if static {
				what = fmt.Sprintf("a step that reaches it overflows and is skipped, and a static scale never backs off; use %s or lower (scaler static %s)", text.Num(fits), text.Num(fits))
			}
			out = append(out, fmt.Sprintf("bucket %q: at the first scale, %s, one rank's gradients can reach %s, past %s's largest value %s: %s",
				bk.Name, text.Num(scale), text.Num(float64(one)*scale), dt, text.Num(top), what))
		case summed[b] && float64(bound)*scale/div > wireTop:
			out = append(out, fmt.Sprintf("bucket %q: its %s sum over %d ranks can reach %s at the first scale, %s, past %s's largest value %s, where no rank's gradients do: steps will overflow; declare the bucket with `divide before` (every rank's share divided before the sum) or start the scaler lower",
				bk.Name, bk.Wire, size, text.Num(float64(bound)*scale), text.Num(scale), bk.Wire, text.Num(wireTop)))
		}
	}
	return out
}

// fittingScale returns the largest power of two, at least 1, by which v
// stays at or below top.
func fittingScale(top, v float64) float64 {
	s := 1.0
	for s*2*v <= top {
		s *= 2
	}
	return s
}

package engine

// Heterogeneous ranks (--speed, --straggler, --jitter, --batch,
// --balance): each rank's simulated compute is stretched by its share of
// the global batch over its speed, and with dynamic balancing the shares
// move, every few steps, to the speeds the ranks showed.

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/ckpt"
	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// heteroState is the engine's part of a heterogeneous run.
type heteroState struct {
	on     bool
	spec   hetero.Spec
	shares []int // the shares in force, the same on every rank
	// factor and delay stretch the current step's timed statements; the
	// delay is added once, to the step's first.
	factor float64
	delay  time.Duration
	// simulated is this rank's simulated compute since the last
	// rebalance, samples the samples it computed in that time.
	simulated time.Duration
	samples   int
	// ones are the weights of a run without shares, one a rank.
	ones []int
}

// setUpHetero starts the shares; res keeps their course.
func (e *Engine) setUpHetero(res *result.Results) {
	h := &e.het
	h.spec, h.on = e.cfg.Hetero, e.cfg.Hetero.Active()
	h.factor = 1
	if !h.on {
		return
	}
	h.shares = h.spec.InitialShares(e.size)
	if b := e.resumedBalance(); b != nil {
		h.shares = slices.Clone(b.Shares)
		h.simulated, h.samples = time.Duration(b.SimulatedNs[e.rank]), b.Samples[e.rank]
	}
	res.Hetero = &result.Hetero{Batch: h.spec.GlobalBatch(e.size), Balance: h.spec.Balance.String(), Every: h.spec.Every, From: h.spec.From}
	for r := 0; r < e.size; r++ {
		res.Hetero.Speeds = append(res.Hetero.Speeds, h.spec.Speed(r))
	}
	res.Hetero.Course = append(res.Hetero.Course, result.ShareSpan{From: e.first, Shares: slices.Clone(h.shares)})
}

// resumedBalance is dynamic balancing's state in the checkpoint the run
// resumed from, when the run goes on as the one that wrote it: balancing
// dynamically with the same period, in the same world, with the same
// batch. Then the shares in force at the checkpoint and each rank's
// compute since the last rebalance carry over, and the resumed run is the
// one that never stopped. Otherwise (nil) the shares start as at step 0.
func (e *Engine) resumedBalance() *ckpt.Balance {
	h := &e.het
	if e.resumedFrom.MD == nil || e.resumedFrom.MD.Balance == nil || h.spec.Balance != hetero.Dynamic {
		return nil
	}
	b := e.resumedFrom.MD.Balance
	if b.Every != h.spec.Every || len(b.Shares) != e.size || len(b.SimulatedNs) != e.size || len(b.Samples) != e.size {
		return nil
	}
	sum := 0
	for _, s := range b.Shares {
		if s < 1 {
			return nil
		}
		sum += s
	}
	if sum != h.spec.GlobalBatch(e.size) {
		return nil
	}
	return b
}

// beginHeteroStep sets the stretch of step i's timed statements.
func (e *Engine) beginHeteroStep(i int) {
	h := &e.het
	if !h.on {
		return
	}
	share := h.shares[e.rank]
	h.factor = h.spec.Factor(e.rank, i, share, e.size)
	h.delay = h.spec.Delay(e.rank, i)
	h.samples += share
}

// stretch is the simulated duration of a timed statement of plan duration
// d on this rank at the current step (init is not stretched).
func (e *Engine) stretch(d time.Duration) time.Duration {
	h := &e.het
	if !h.on || e.stepNo < 0 {
		return d
	}
	// Saturate: a float past int64 converts to an undefined (on amd64
	// negative) duration. The runtime refuses factors that pass an hour a
	// step (hetero.CheckStretch); this keeps the engine's arithmetic sound
	// for any spec.
	out := time.Duration(math.MaxInt64)
	if f := math.Round(float64(d) * h.factor); f < float64(math.MaxInt64-h.delay) {
		out = time.Duration(f) + h.delay
	}
	h.delay = 0
	h.simulated += out
	return out
}

// share is this rank's share at the current step (0 without heterogeneity).
func (e *Engine) share() int {
	if !e.het.on {
		return 0
	}
	return e.het.shares[e.rank]
}

// endHeteroStep rebalances after step i of total when the rule says so:
// every rank gives its simulated compute per sample since the last
// rebalance, and all compute the same new shares from the same gathered
// values. The
// simulated durations are what the rank's speed, straggler and jitter
// made of the plan's, so the shares follow them and not a loaded host's
// noise.
func (e *Engine) endHeteroStep(res *result.Results, i, total int) error {
	h := &e.het
	if !h.on || !h.spec.Rebalances(i) {
		return nil
	}
	rec := make([]byte, 8)
	var per float64
	if h.samples > 0 {
		per = float64(h.simulated) / float64(h.samples)
	}
	binary.LittleEndian.PutUint64(rec, math.Float64bits(per))
	watchStep(e)
	e.hostAt.set(fmt.Sprintf("rebalancing the batch after step %s", e.stepName()))
	all, err := e.h.Allgather(rec)
	e.hostAt.set("")
	watchIdle(e)
	if err != nil {
		return fmt.Errorf("rebalancing the batch after step %s: %w", e.stepName(), err)
	}
	pers := make([]float64, len(all))
	for r, b := range all {
		pers[r] = math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	h.simulated, h.samples = 0, 0
	next := hetero.Rebalance(h.spec.GlobalBatch(e.size), pers)
	if !slices.Equal(next, h.shares) {
		h.shares = next
		// After the last step the shares are state for a checkpoint (a run
		// resumed from it goes on with them), not part of this run's course.
		if i+1 < total {
			res.Hetero.Course = append(res.Hetero.Course, result.ShareSpan{From: i + 1, Shares: slices.Clone(next)})
		}
	}
	return nil
}

// wavgWeights are the weights of a weighted average at the current step:
// the shares of the global batch in force, or 1 a rank without them (the
// init block, or a run without heterogeneity). All ranks hold the same.
func (e *Engine) wavgWeights() []int {
	if e.het.on && e.het.shares != nil {
		return e.het.shares
	}
	if len(e.het.ones) != e.size {
		e.het.ones = slices.Repeat([]int{1}, e.size)
	}
	return e.het.ones
}

// collSpan is the span of item it's bucket that its collective moves.
func (e *Engine) collSpan(it collItem) backend.Span {
	span := e.mem.Buckets[it.bucket].Span
	if it.into >= 0 && it.coll != plan.CollReduceScatter {
		// Out of place only a reducescatter reads the padded source;
		// an allgather sends the source's own elements, even where an
		// in-place collective elsewhere padded it.
		span.N = e.plan.Buckets[it.bucket].Elems
		return span
	}
	span.N = it.coll.Elems(e.plan.Buckets[it.bucket].Elems, span.N)
	return span
}

// wavgPremultiply queues the first part of a weighted average on stream
// st: this rank's input multiplied by its weight, in the wire dtype, so
// that the sum that follows is Σ w_r·x_r. Products of the pattern's small
// integers by whole shares are exact (check.Patterns bounds the values by
// the batch).
func (e *Engine) wavgPremultiply(st backend.Stream, it collItem) {
	w := e.wavgWeights()[e.rank]
	if w == 1 {
		return
	}
	e.queued(it.stream)
	if err := st.Scale(e.collSpan(it), float64(w), backend.Span{}); err != nil {
		e.fatal(it.at, fmt.Errorf("weighting bucket %q by %d: %w", e.plan.Buckets[it.bucket].Name, w, err))
	}
}

// wavgDivide queues the last part of a weighted average: the ranks that
// receive the sum (all for allreduce, the root for reduce, each its own
// slice for reducescatter) multiply it by 1/Σ w_r. The other ranks of a
// reduce keep their weighted inputs, as the checker models.
func (e *Engine) wavgDivide(st backend.Stream, it collItem) {
	span := e.collSpan(it)
	switch it.coll {
	case plan.CollReduce:
		if e.rank != it.root {
			return
		}
	case plan.CollReduceScatter:
		per := span.N / int64(e.size)
		span.Off += int64(e.rank) * per
		span.N = per
	}
	total := 0
	for _, w := range e.wavgWeights() {
		total += w
	}
	e.queued(it.stream)
	if err := st.Scale(span, 1/float64(total), backend.Span{}); err != nil {
		e.fatal(it.at, fmt.Errorf("dividing bucket %q by %d: %w", e.plan.Buckets[it.bucket].Name, total, err))
	}
}

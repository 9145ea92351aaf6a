package engine

// The step loop: init block, warm-up and measured steps, with the drain,
// timing, model update and check that follow every step.

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"time"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// Run runs the init block and every step, filling res; progress, if not
// nil, hears after every step how many of how many are done.
func (e *Engine) Run(res *result.Results, progress func(done, total int)) error {
	// The host runs the queue of the stream it waits for itself (the CPU
	// backend's collectives, see backend/cpu/stream.go): kept on one OS
	// thread, its MPI calls are not moved from thread to thread whenever it
	// yields or parks. That matters to small collectives with as many ranks
	// as cores (bench/results/2026-12-runtime-comments.md, "The locked host
	// thread").
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	// First: the flight record, which a signal can write at any time,
	// names the job by it.
	e.mu.Lock()
	e.origin = res.Origin
	e.mu.Unlock()
	e.setUpHetero(res)
	if e.cfg.Init != nil {
		if err := e.runInit(res); err != nil {
			return err
		}
	}
	total := e.cfg.Warmup + e.cfg.Steps
	res.Resumed, res.ResumeTime = e.first, e.resumeTime
	if res.Scaling != nil {
		res.Scaling.First = e.first // endTrainStep appends from this step on
	}
	e.origin = res.Origin
	res.Steps = result.Preallocated[result.StepStats](e.cfg.Steps)
	for k := range res.Rows {
		res.Rows[k].Times = result.Preallocated[time.Duration](e.cfg.Steps)
		if res.Rows[k].Hier {
			for i := range res.Rows[k].Phases {
				res.Rows[k].Phases[i] = result.Preallocated[time.Duration](e.cfg.Steps)
			}
		}
	}
	for k := range res.TrainRows {
		res.TrainRows[k].Times = result.Preallocated[time.Duration](e.cfg.Steps)
	}
	if res.Hetero != nil {
		res.RankSteps = result.Preallocated[result.RankStep](e.cfg.Steps)
	}
	if len(res.TrainRows) > 0 {
		res.TrainSteps = result.Preallocated[result.TrainStepStats](e.cfg.Steps)
	}
	gc := startQuietGC()
	defer gc.stop()
	for i := e.first; i < total; i++ {
		if err := e.runStep(res, i, total); err != nil {
			return err
		}
		if err := e.saveAfterStep(res, i); err != nil {
			return err
		}
		gc.afterStep()
		if progress != nil {
			progress(i+1, total)
		}
	}
	if e.cfg.Measure != nil && e.cfg.Steps > 0 && e.first <= e.cfg.Warmup {
		watchBetween(e, "the barrier after the measured steps")
		e.hostAt.set("the barrier after the measured steps")
		if err := e.h.Barrier(); err != nil {
			return fmt.Errorf("barrier after the measured steps: %w", err)
		}
		e.hostAt.set("")
		watchIdle(e)
		e.cfg.Measure(false)
	}
	// An async save still being written is committed before the run ends.
	if s, ok, err := e.commitPending(); err != nil {
		return err
	} else if ok {
		res.Saves = append(res.Saves, s)
	}
	if err := e.awaitCommit(); err != nil {
		return err
	}
	e.hooks.reportAllocs(e)
	return nil
}

// saveAfterStep commits an async save of the step before (every rank is
// at the same point) and writes the checkpoint that step i ends with, if
// one is due.
func (e *Engine) saveAfterStep(res *result.Results, i int) error {
	if s, ok, err := e.commitPending(); err != nil {
		return err
	} else if ok {
		res.Saves = append(res.Saves, s)
	}
	c := e.cfg.Checkpoint
	if c.Every <= 0 || (i+1)%c.Every != 0 {
		return nil
	}
	t0 := time.Now()
	n, err := e.saveCheckpoint(i + 1)
	var failed *FailedSave
	if errors.As(err, &failed) {
		return err // it says which checkpoint
	}
	if err != nil {
		return fmt.Errorf("checkpoint after %s (after step %d): %w", stepCount(i+1), i, err)
	}
	if !c.Async {
		res.Saves = append(res.Saves, result.Save{Steps: i + 1, Bytes: n, Time: time.Since(t0), At: t0.Sub(res.Origin)})
	}
	return nil
}

// runInit runs the init block. Its results (a broadcast of the parameters)
// are checked once, before a backward overwrites them.
func (e *Engine) runInit(res *result.Results) error {
	e.seedStep, e.stepNo, e.micro = elem.InitStep, -1, 0
	e.beginStep()
	e.cfg.Init()
	if err := e.drain(); err != nil {
		return err
	}
	if _, err := e.collect(); err != nil {
		return err
	}
	e.model.Apply(plan.Flat(e.prog.Init), elem.InitStep, e.trainStep())
	if e.cfg.CheckEvery > 0 {
		e.hooks.beforeCheck(e, -1)
		if err := e.checkBuckets(res, plan.Flat(e.prog.Init)); err != nil {
			return err
		}
	}
	e.endStep()
	return nil
}

// runStep runs step i of total (warm-up steps first): it issues the step,
// drains the streams, times the records, advances the model, keeps the
// figures of a measured step and the records for the trace, and checks
// when the step is checked.
func (e *Engine) runStep(res *result.Results, i, total int) error {
	e.seedStep, e.stepNo, e.cursor = uint32(i), i, 0
	if i == e.cfg.Warmup {
		if err := e.settleBeforeMeasuring(); err != nil {
			return err
		}
		e.hooks.measuring()
		if e.cfg.Measure != nil {
			e.cfg.Measure(true)
		}
	}
	if err := e.startStep(); err != nil {
		return err
	}
	e.hooks.beforeStep(e, i)
	e.faultAt(FaultCrash, i)
	e.faultAt(FaultHang, i)
	e.faultAt(FaultStop, i)
	e.faultAt(FaultDelay, i)
	e.beginHeteroStep(i)
	for m := range e.micros {
		// Each micro-batch issues the step function again: its backwards
		// and computes run, the other statements only on the last.
		e.micro, e.cursor = m, 0
		e.cfg.Step()
	}
	e.micro = 0
	if err := e.drain(); err != nil {
		return err
	}
	t1 := time.Now()
	watchIdle(e) // what follows is local work: timing, checks
	recs, err := e.collect()
	if err != nil {
		return err
	}
	if err := e.endTrainStep(res); err != nil {
		return err
	}
	e.model.Apply(e.flatStep, e.seedStep, e.trainStep())
	if i >= e.cfg.Warmup {
		e.keepFigures(res, recs, t1.Sub(e.stepStart))
	}
	if e.tracing {
		res.KeepForTrace(recs, i, e.stepStart.Sub(res.Origin), total)
	}
	if e.checks(i) {
		e.hooks.beforeCheck(e, i)
		if err := e.checkStep(res); err != nil {
			return err
		}
	}
	e.nextTrainStep()
	e.endStep()
	return e.endHeteroStep(res, i, total)
}

// keepFigures adds a measured step of length step, whose records are
// recs, to res: the step's figures and each table row's time.
func (e *Engine) keepFigures(res *result.Results, recs []result.Record, step time.Duration) {
	st, train := e.stats.stepStatsOf(recs, step)
	if res.Hetero != nil {
		res.RankSteps = append(res.RankSteps, result.RankStep{FirstColl: firstColl(recs), Share: e.share()})
	}
	res.Steps = append(res.Steps, st)
	if res.TrainSteps != nil {
		res.TrainSteps = append(res.TrainSteps, train)
	}
	for _, r := range recs {
		if r.Kind == result.Update || r.Kind == result.Unscale {
			if k, ok := res.TrainRowOf[[2]int{r.Index, r.Bucket}]; ok {
				row := &res.TrainRows[k]
				row.Times = append(row.Times, r.T1-r.T0)
				row.Bytes = r.Bytes
			}
			continue
		}
		if r.Kind != result.Collective || r.ID < 0 {
			continue
		}
		if k, ok := res.RowOf[[2]int{r.ID, r.Bucket}]; ok {
			row := &res.Rows[k]
			row.Times = append(row.Times, r.T1-r.T0)
			row.Group, row.Bytes = r.Group, r.Bytes
			if r.Phased {
				for i, d := range r.Phases {
					row.Phases[i] = append(row.Phases[i], d)
				}
			}
		}
	}
}

// settleBeforeMeasuring lets every rank's process become quiet before the
// first measured step (settle.go): together, after a barrier, so that no
// rank then waits long for another in the step's own barrier.
func (e *Engine) settleBeforeMeasuring() error {
	if e.cfg.Settle <= 0 || e.cfg.Steps == 0 {
		return nil
	}
	// Watched like a step: a rank that never reaches the barrier would
	// otherwise leave the others in it for good.
	watchStep(e)
	e.hostAt.set("the barrier before the measured steps")
	if err := e.h.Barrier(); err != nil {
		return fmt.Errorf("barrier before the measured steps: %w", err)
	}
	e.hostAt.set("")
	watchIdle(e)
	settle(e.cfg.Settle)
	return nil
}

// checks reports whether step i (warm-up steps counted) ends with a check.
func (e *Engine) checks(i int) bool {
	c := e.cfg.CheckEvery
	return c > 0 && ((i+1)%c == 0 || i == e.cfg.Warmup+e.cfg.Steps-1)
}

// startStep aligns the ranks and begins a step. Steps start together, so
// that a bucket's time measures its collective and not how far the ranks
// drifted apart during the previous step's checks and reports. A backend
// that can queue a barrier on a stream (backend.StepAligner) gets it on the step's
// first collective stream, the other streams wait for it, and the step's
// time starts when it completes: the collective that follows runs on the
// same thread right after it, as in a plain MPI program. Otherwise the host
// joins a barrier. The watchdog covers the barrier either way.
func (e *Engine) startStep() error {
	watchStep(e)
	if al, ok := e.be.(backend.StepAligner); ok {
		e.beginRecords()
		s := e.alignStream
		start := e.recordOn(s, "")
		if err := al.QueueBarrier(e.streams[s]); err != nil {
			return fmt.Errorf("queueing the barrier before step %s: %w", e.stepName(), err)
		}
		e.queued(s)
		e.epoch = e.recordOn(s, "")
		e.epochTimer = al
		for i, st := range e.streams {
			if i != s {
				if err := st.WaitEvent(e.epoch); err != nil {
					return err
				}
				e.queued(i)
			}
		}
		e.addTimed(result.Record{Kind: result.Barrier, Stream: s, Name: "step barrier", Bucket: -1, Start: start, End: e.epoch})
		e.stepStart = time.Now() // until the epoch's own time is known
		e.hostAt.set("")
		e.flush()
		return nil
	}
	e.hostAt.set(fmt.Sprintf("the barrier before step %s", e.stepName()))
	if err := e.h.Barrier(); err != nil {
		return fmt.Errorf("barrier before step %s: %w", e.stepName(), err)
	}
	e.beginStep()
	return nil
}

// beginRecords clears the step's timed records.
func (e *Engine) beginRecords() {
	e.mu.Lock()
	e.recs = e.recs[:0]
	e.mu.Unlock()
	e.epochTimer = nil
	e.hostBlocked()
}

// beginStep records the step's epoch event on the first stream and tells
// the watchdog (again: the step's time starts here).
func (e *Engine) beginStep() {
	e.beginRecords()
	e.stepStart = time.Now()
	e.epoch = e.recordOn(0, "")
	e.hostAt.set("")
	e.flush()
	watchStep(e)
}

// drain waits for every stream at the end of a step.
func (e *Engine) drain() error {
	e.hostAt.set("the end of the step (waiting for every stream)")
	for i, st := range e.streams {
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("step %s, stream %q: %w", e.stepName(), e.plan.Streams[i].Name, err)
		}
	}
	e.hostAt.set("")
	return nil
}

// endStep returns the step's events to the pool.
func (e *Engine) endStep() {
	watchIdle(e)
	e.freeEvents = append(e.freeEvents, e.usedEvents...)
	e.usedEvents = e.usedEvents[:0]
}

// stepName names the current step for messages.
func (e *Engine) stepName() string {
	if e.stepNo < 0 {
		return "init"
	}
	if e.stepNo < e.cfg.Warmup {
		return fmt.Sprintf("%d (warm-up)", e.stepNo)
	}
	return fmt.Sprintf("%d", e.stepNo)
}

// collect resolves the times of the step's records relative to its epoch;
// the slice it returns is reused by the next call.
func (e *Engine) collect() ([]result.Record, error) {
	e.mu.Lock()
	e.collected = append(e.collected[:0], e.recs...)
	recs := e.collected
	e.mu.Unlock()
	if e.epochTimer != nil {
		t, err := e.epochTimer.EventTime(e.epoch)
		if err != nil {
			return nil, fmt.Errorf("timing the step's start: %w", err)
		}
		e.stepStart = t
	}
	for i := range recs {
		r := &recs[i]
		if r.Kind == result.Wait {
			// Waits are host times; the epoch event completed when the
			// step began on the host (every stream was idle then).
			r.T0, r.T1 = max(r.HostStart.Sub(e.stepStart), 0), max(r.HostEnd.Sub(e.stepStart), 0)
			continue
		}
		var err error
		if r.T0, err = e.be.Elapsed(e.epoch, r.Start); err != nil {
			return nil, fmt.Errorf("timing %s: %w", r.Name, err)
		}
		if r.T1, err = e.be.Elapsed(e.epoch, r.End); err != nil {
			return nil, fmt.Errorf("timing %s: %w", r.Name, err)
		}
		// A group's collectives on a stream share one end event, and
		// with it the sum of their phases: no record gets them.
		if pt, ok := e.be.(backend.PhaseTimer); ok && r.Kind == result.Collective && r.Coll == plan.CollAllReduce && !r.Group {
			r.Phases, r.Phased = pt.Phases(r.End)
		}
	}
	return recs, nil
}

// intervalScratch is the memory of stepStatsOf, reused from step to step.
type intervalScratch struct {
	comp, comm, both []costmodel.Interval
	upd, unscale     []costmodel.Interval
	flag             time.Duration
}

// stepStatsOf computes a step's summary figures from its records, and
// those of its training step.
func (sc *intervalScratch) stepStatsOf(recs []result.Record, step time.Duration) (result.StepStats, result.TrainStepStats) {
	comp, comm := sc.comp[:0], sc.comm[:0]
	for _, r := range recs {
		switch r.Kind {
		case result.Backward, result.Compute:
			comp = append(comp, costmodel.Interval{A: r.T0, B: r.T1})
		case result.Collective:
			comm = append(comm, costmodel.Interval{A: r.T0, B: r.T1})
		case result.Update:
			sc.upd = append(sc.upd, costmodel.Interval{A: r.T0, B: r.T1})
		case result.Unscale, result.Flag:
			sc.unscale = append(sc.unscale, costmodel.Interval{A: r.T0, B: r.T1})
			if r.Kind == result.Flag {
				sc.flag += r.T1 - r.T0
			}
		}
	}
	comp, comm = costmodel.Union(comp), costmodel.Union(comm)
	both := costmodel.Intersect(sc.both[:0], comp, comm)
	sc.comp, sc.comm, sc.both = comp, comm, both
	st := result.StepStats{Step: step, Compute: costmodel.Length(comp), Comm: costmodel.Length(comm), Hidden: costmodel.Length(both)}
	var train result.TrainStepStats
	if len(sc.upd) > 0 || len(sc.unscale) > 0 {
		upd := costmodel.Union(sc.upd)
		train.Update, train.Unscale, train.Flag = costmodel.Length(upd), costmodel.Length(costmodel.Union(sc.unscale)), sc.flag
		// The update's share that ran while communication did.
		train.UpdateHidden = costmodel.Length(costmodel.Intersect(sc.both[len(sc.both):], upd, comm))
		sc.upd, sc.unscale, sc.flag = sc.upd[:0], sc.unscale[:0], 0
	}
	return st, train
}

// checkStep verifies every bucket that a collective of the step touched.
func (e *Engine) checkStep(res *result.Results) error {
	if err := e.checkBuckets(res, e.flatStep); err != nil {
		return err
	}
	return e.checkParams(res)
}

// checkBuckets checks every bucket that a collective of stmts touched; a
// block without collectives makes no check.
func (e *Engine) checkBuckets(res *result.Results, stmts []plan.Stmt) error {
	touched := map[int]bool{}
	var order []int
	for _, s := range stmts {
		if s.Kind != plan.StmtColl {
			continue
		}
		for _, b := range slices.Concat(s.Buckets, s.Into) {
			if !touched[b] {
				touched[b] = true
				order = append(order, b)
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	res.Checked++
	for _, b := range order {
		r, err := e.model.CheckBucket(b)
		if err != nil {
			return fmt.Errorf("checking bucket %q: %w", e.plan.Buckets[b].Name, err)
		}
		res.Wrong[b] += r.Wrong
		res.Unchecked[b] += r.Unchecked
		if r.Wrong > 0 && len(res.FirstBad) < 5 {
			msg := fmt.Sprintf("rank %d: step %s: bucket %q: %d wrong; first: %s", e.rank, e.stepName(), e.plan.Buckets[b].Name, r.Wrong, r.First)
			res.FirstBad = append(res.FirstBad, msg)
			fmt.Fprintf(os.Stderr, "%s\n", msg)
		}
	}
	return nil
}

// firstColl is when the step's first collective started (-1: none).
func firstColl(recs []result.Record) time.Duration {
	first := time.Duration(-1)
	for _, r := range recs {
		if r.Kind == result.Collective && (first < 0 || r.T0 < first) {
			first = r.T0
		}
	}
	return first
}

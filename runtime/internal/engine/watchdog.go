package engine

// The watchdog: a step that takes longer than --timeout aborts the job, and
// before it does, every rank prints what it was waiting in, so that the user
// sees which rank diverged (the one whose streams wait for something else
// than the others').

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// watchGrace is how long a rank that timed out waits before it aborts the
// job, so that the other ranks' watchdogs fire and print too.
const watchGrace = 2 * time.Second

// timedOut is set when a watchdog or phase watch of this rank has fired:
// the job is then to end with its abort, even if the late step or phase
// finishes during the grace (see AwaitTimeoutAbort).
var timedOut atomic.Bool

// AwaitTimeoutAbort blocks for good if a timeout has fired on this rank:
// the watchdog that fired aborts the job (exit status 3) at the end of its
// grace. Without this, a step that was late but then finished let the rank
// report and exit 0 before the abort.
func AwaitTimeoutAbort() {
	if timedOut.Load() {
		select {}
	}
}

// watchPoint is a description of where the host is, set and read from
// different goroutines. Waits, set at every wait of every step, keep their
// parts and are described only when read.
type watchPoint struct {
	mu     sync.Mutex
	s      string
	stream string // set by setWait
	at     plan.Src
}

func (w *watchPoint) set(s string) {
	w.mu.Lock()
	w.s, w.stream, w.at = s, "", ""
	w.mu.Unlock()
}

// setWait notes that the host waits for stream at a wait statement.
func (w *watchPoint) setWait(stream string, at plan.Src) {
	w.mu.Lock()
	w.s, w.stream, w.at = "", stream, at
	w.mu.Unlock()
}

func (w *watchPoint) get() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stream != "" {
		return fmt.Sprintf("wait %s at %s", w.stream, w.at)
	}
	return w.s
}

// Watchdog watches the engine's steps.
type Watchdog struct {
	e       *Engine
	timeout time.Duration
	mu      sync.Mutex
	active  bool
	started time.Time
	// what names the part of the run between steps that is watched (a
	// checkpoint's save); "" while a step is.
	what string
	stop chan struct{}
}

// StartWatchdog starts the watchdog goroutine of e: a step that takes
// longer than timeout aborts the job.
func (e *Engine) StartWatchdog(timeout time.Duration) *Watchdog {
	w := &Watchdog{e: e, timeout: timeout, stop: make(chan struct{})}
	e.wd = w
	e.recordOnTerm()
	tick := min(max(timeout/10, 10*time.Millisecond), time.Second)
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			w.mu.Lock()
			late := w.active && time.Since(w.started) > w.timeout
			since, what := time.Since(w.started), w.what
			w.mu.Unlock()
			if late {
				if !timedOut.CompareAndSwap(false, true) {
					return // a phase watch fired first and ends the job
				}
				fmt.Fprint(os.Stderr, w.report(since, what))
				reason := fmt.Sprintf("timeout: step %s ran for %s (--timeout %s)", e.stepName(), since.Round(time.Millisecond), w.timeout)
				if what != "" {
					reason = fmt.Sprintf("timeout: %s took %s (--timeout %s)", what, since.Round(time.Millisecond), w.timeout)
				}
				e.writeFlightRecord(reason, since-w.timeout)
				e.onAbort(reason)
				time.Sleep(watchGrace)
				AbortBackend(e.be)
				e.h.Abort(3)
				os.Exit(3)
			}
		}
	}()
	return w
}

// watchStep tells the watchdog that a step began.
func watchStep(e *Engine) { watchBetween(e, "") }

// watchBetween tells the watchdog that the host began what, a part of the
// run between two steps that waits for the other ranks (what "": a step).
// It is watched as a step is, with the same --timeout: a rank that never
// joins (stopped, or stuck on a file system that no longer answers) would
// otherwise leave the others waiting in it for good. The timeout's
// messages name what instead of the step.
func watchBetween(e *Engine, what string) {
	if e.wd == nil {
		return
	}
	AwaitTimeoutAbort() // a timeout already fired: the job is ending
	e.wd.mu.Lock()
	e.wd.active, e.wd.started, e.wd.what = true, time.Now(), what
	e.wd.mu.Unlock()
}

// watchIdle tells the watchdog that the step ended.
func watchIdle(e *Engine) {
	if e.wd == nil {
		return
	}
	e.wd.mu.Lock()
	e.wd.active = false
	e.wd.mu.Unlock()
}

// Close stops the watchdog.
func (w *Watchdog) Close() { close(w.stop) }

// report describes where this rank is stuck, in a step or in what (see
// watchBetween).
func (w *Watchdog) report(since time.Duration, what string) string {
	e := w.e
	var b strings.Builder
	late := fmt.Sprintf("step %s has run for", e.stepName())
	if what != "" {
		late = what + " has taken"
	}
	fmt.Fprintf(&b, "%s: rank %d (%s): timeout: %s %s (--timeout %s)\n",
		proc.Name(), e.rank, e.h.Name, late, since.Round(time.Millisecond), w.timeout)
	if at := e.hostAt.get(); at != "" {
		fmt.Fprintf(&b, "  rank %d host: waiting at %s\n", e.rank, at)
	}
	e.mu.Lock()
	recs := append([]result.Record(nil), e.recs...)
	e.mu.Unlock()
	for si := range e.streams {
		state := "idle (all its work of the step is done)"
		for _, r := range recs {
			if r.Stream != si || r.Kind == result.Wait || r.Kind == result.Grad {
				continue
			}
			if ok, _ := r.End.Query(); ok {
				continue
			}
			started, _ := r.Start.Query()
			what := describe(&r, e)
			if started {
				state = "in " + what
			} else {
				state = "waiting to start " + what
			}
			break
		}
		fmt.Fprintf(&b, "  rank %d stream %s: %s\n", e.rank, e.plan.Streams[si].Name, state)
	}
	return b.String()
}

// describe names record r for messages.
func describe(r *result.Record, e *Engine) string {
	pos := ""
	if r.At != "" {
		pos = " at " + string(r.At)
	}
	switch r.Kind {
	case result.Collective:
		return fmt.Sprintf("%s of bucket %q, step %s%s", r.Coll, r.Name, e.stepName(), pos)
	default:
		return fmt.Sprintf("%s, step %s%s", r.Name, e.stepName(), pos)
	}
}

// PhaseWatch covers what a rank does outside the steps: comparing plans,
// starting the backend, allocating and filling the buffers, gathering the
// report. A rank stuck there leaves the others waiting inside an MPI call
// for good, so a phase that lasts longer than --timeout makes this rank say
// which phase it is in and abort the job, as the step watchdog does.
type PhaseWatch struct {
	// H is the MPI host of the job to abort; Timeout the longest a phase
	// may last.
	H       *mpihost.Host
	Timeout time.Duration
	mu      sync.Mutex
	name    string
	gen     int // phase number: a timer of an earlier phase does nothing
	timer   *time.Timer
	be      backend.Backend // aborted with the job, once there is one
}

// SetBackend tells the watch which backend to abort.
func (w *PhaseWatch) SetBackend(be backend.Backend) {
	w.mu.Lock()
	w.be = be
	w.mu.Unlock()
}

// Enter starts phase name, ending the current one; "" ends it without
// starting another (the steps have their own watchdog).
func (w *PhaseWatch) Enter(name string) {
	AwaitTimeoutAbort() // a phase already timed out: the job is ending
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.gen++
	w.name = name
	if name == "" {
		return
	}
	gen, start := w.gen, time.Now()
	w.timer = time.AfterFunc(w.Timeout, func() { w.expire(gen, start) })
}

func (w *PhaseWatch) expire(gen int, start time.Time) {
	w.mu.Lock()
	name, current, be := w.name, w.gen == gen, w.be
	w.mu.Unlock()
	// Only the first timeout of a rank speaks and aborts: the host goes on
	// during the grace, into phases that time out as well, and one line
	// says where the rank was stuck (a tiny --timeout printed one per phase).
	if !current || !timedOut.CompareAndSwap(false, true) {
		return
	}
	fmt.Fprintf(os.Stderr, "%s: rank %d (%s): timeout: %s has taken %s (--timeout %s); the other ranks' messages say where they are\n",
		proc.Name(), w.H.Rank, w.H.Name, name, time.Since(start).Round(time.Millisecond), w.Timeout)
	time.Sleep(watchGrace)
	if be != nil {
		AbortBackend(be)
	}
	w.H.Abort(3)
	os.Exit(3)
}

// AbortBackend lets a backend that holds communicators of its own (NCCL,
// a backend.Aborter) abort them before MPI_Abort ends the job, so that no
// rank stays blocked inside a collective whose peer is gone.
func AbortBackend(be backend.Backend) {
	if a, ok := be.(backend.Aborter); ok {
		a.Abort()
	}
}

package runtime

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
	"github.com/syncgen/syncgen/runtime/internal/proc"
)

// watchGrace is how long a rank that timed out waits before it aborts the
// job, so that the other ranks' watchdogs fire and print too.
const watchGrace = 2 * time.Second

// timedOut is set when a watchdog or phase watch of this rank has fired:
// the job is then to end with its abort, even if the late step or phase
// finishes during the grace (see awaitTimeoutAbort).
var timedOut atomic.Bool

// awaitTimeoutAbort blocks for good if a timeout has fired on this rank:
// the watchdog that fired aborts the job (exit status 3) at the end of its
// grace. Without this, a step that was late but then finished let the rank
// report and exit 0 before the abort.
func awaitTimeoutAbort() {
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
	at     Src
}

func (w *watchPoint) set(s string) {
	w.mu.Lock()
	w.s, w.stream, w.at = s, "", ""
	w.mu.Unlock()
}

// setWait notes that the host waits for stream at a wait statement.
func (w *watchPoint) setWait(stream string, at Src) {
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

// watchdog watches the engine's steps.
type watchdog struct {
	e       *engine
	timeout time.Duration
	mu      sync.Mutex
	active  bool
	started time.Time
	stop    chan struct{}
}

// startWatchdog starts the watchdog goroutine for e.
func startWatchdog(e *engine, timeout time.Duration) *watchdog {
	w := &watchdog{e: e, timeout: timeout, stop: make(chan struct{})}
	e.wd = w
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
			since := time.Since(w.started)
			w.mu.Unlock()
			if late {
				if !timedOut.CompareAndSwap(false, true) {
					return // a phase watch fired first and ends the job
				}
				fmt.Fprint(os.Stderr, w.report(since))
				time.Sleep(watchGrace)
				abortBackend(e.be)
				e.h.Abort(3)
				os.Exit(3)
			}
		}
	}()
	return w
}

// watchStep tells the watchdog that a step began.
func watchStep(e *engine) {
	if e.wd == nil {
		return
	}
	awaitTimeoutAbort() // a timeout already fired: the job is ending
	e.wd.mu.Lock()
	e.wd.active, e.wd.started = true, time.Now()
	e.wd.mu.Unlock()
}

// watchIdle tells the watchdog that the step ended.
func watchIdle(e *engine) {
	if e.wd == nil {
		return
	}
	e.wd.mu.Lock()
	e.wd.active = false
	e.wd.mu.Unlock()
}

func (w *watchdog) close() { close(w.stop) }

// report describes where this rank is stuck.
func (w *watchdog) report(since time.Duration) string {
	e := w.e
	var b strings.Builder
	fmt.Fprintf(&b, "%s: rank %d (%s): timeout: step %s has run for %s (--timeout %s)\n",
		proc.Name(), e.rank, e.h.Name, e.stepName(), since.Round(time.Millisecond), w.timeout)
	if at := e.hostAt.get(); at != "" {
		fmt.Fprintf(&b, "  rank %d host: waiting at %s\n", e.rank, at)
	}
	e.mu.Lock()
	recs := append([]timed(nil), e.recs...)
	e.mu.Unlock()
	for si := range e.streams {
		state := "idle (all its work of the step is done)"
		for _, r := range recs {
			if r.stream != si || r.kind == tWait || r.kind == tGrad {
				continue
			}
			if ok, _ := r.end.Query(); ok {
				continue
			}
			started, _ := r.start.Query()
			what := r.describe(e)
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

// describe names a record for messages.
func (r *timed) describe(e *engine) string {
	pos := ""
	if r.at != "" {
		pos = " at " + string(r.at)
	}
	switch r.kind {
	case tColl:
		return fmt.Sprintf("%s of bucket %q, step %s%s", r.coll, r.name, e.stepName(), pos)
	default:
		return fmt.Sprintf("%s, step %s%s", r.name, e.stepName(), pos)
	}
}

// phaseWatch covers what a rank does outside the steps: comparing plans,
// starting the backend, allocating and filling the buffers, gathering the
// report. A rank stuck there leaves the others waiting inside an MPI call
// for good, so a phase that lasts longer than --timeout makes this rank say
// which phase it is in and abort the job, as the step watchdog does.
type phaseWatch struct {
	r       *runner
	timeout time.Duration
	mu      sync.Mutex
	name    string
	gen     int // phase number: a timer of an earlier phase does nothing
	timer   *time.Timer
	be      backend.Backend // aborted with the job, once there is one
}

// setBackend tells the watch which backend to abort.
func (w *phaseWatch) setBackend(be backend.Backend) {
	w.mu.Lock()
	w.be = be
	w.mu.Unlock()
}

// enter starts phase name, ending the current one; "" ends it without
// starting another (the steps have their own watchdog).
func (w *phaseWatch) enter(name string) {
	awaitTimeoutAbort() // a phase already timed out: the job is ending
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
	w.timer = time.AfterFunc(w.timeout, func() { w.expire(gen, start) })
}

func (w *phaseWatch) expire(gen int, start time.Time) {
	w.mu.Lock()
	name, current, be := w.name, w.gen == gen, w.be
	w.mu.Unlock()
	// Only the first timeout of a rank speaks and aborts: the host goes on
	// during the grace, into phases that time out as well, and one line
	// says where the rank was stuck (a tiny --timeout printed one per phase).
	if !current || !timedOut.CompareAndSwap(false, true) {
		return
	}
	r := w.r
	fmt.Fprintf(os.Stderr, "%s: rank %d (%s): timeout: %s has taken %s (--timeout %s); the other ranks' messages say where they are\n",
		proc.Name(), r.h.Rank, r.h.Name, name, time.Since(start).Round(time.Millisecond), w.timeout)
	time.Sleep(watchGrace)
	if be != nil {
		abortBackend(be)
	}
	r.h.Abort(3)
	os.Exit(3)
}

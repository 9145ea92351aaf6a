package engine

// Faults on demand (--fault): a rank that crashes, hangs or is late at a
// chosen step, or crashes in the middle of writing a checkpoint, so that
// users can rehearse failures and tests can prove what the job does.

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
)

// FaultKind is what a fault does.
type FaultKind uint8

// The faults.
const (
	// FaultCrash kills the rank (SIGKILL, as the OOM killer would) at the
	// start of the step.
	FaultCrash FaultKind = iota + 1
	// FaultHang stops the rank's host at the start of the step for good.
	FaultHang
	// FaultDelay makes the rank late by Delay at the start of the step.
	FaultDelay
	// FaultCrashInSave kills the rank in the checkpoint after Step steps,
	// once its shard is written and before the checkpoint is committed.
	FaultCrashInSave
	// FaultStop stops the rank's whole process (SIGSTOP) at the start of
	// the step: it neither runs nor answers, as a rank swapped out or
	// frozen by a debugger.
	FaultStop
)

// FaultNames are the kinds as --fault spells them.
var FaultNames = map[string]FaultKind{"crash": FaultCrash, "hang": FaultHang, "delay": FaultDelay, "crash-in-save": FaultCrashInSave, "stop": FaultStop}

// Fault is one fault on demand: Kind on rank Rank at step Step (counted
// from 0, warm-up included; for FaultCrashInSave, the checkpoint after
// Step steps).
type Fault struct {
	Kind  FaultKind
	Rank  int
	Step  int
	Delay time.Duration
	// Spec is the flag's value, for messages.
	Spec string
}

// faultAt runs the faults of this rank whose kind and step match.
func (e *Engine) faultAt(kind FaultKind, step int) {
	for _, f := range e.cfg.Faults {
		if f.Kind != kind || f.Rank != e.rank || f.Step != step {
			continue
		}
		switch kind {
		case FaultCrash, FaultCrashInSave:
			where := fmt.Sprintf("at the start of step %d", step)
			if kind == FaultCrashInSave {
				where = fmt.Sprintf("while writing the checkpoint after %s (after step %d)", stepCount(step), step-1)
			}
			fmt.Fprintf(os.Stderr, "rank %d: --fault %s: killing itself (SIGKILL) %s\n", e.rank, kindName(kind), where)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			sleepForever()
		case FaultStop:
			fmt.Fprintf(os.Stderr, "rank %d: --fault stop: stopping its process (SIGSTOP) at the start of step %d\n", e.rank, step)
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		case FaultHang:
			fmt.Fprintf(os.Stderr, "rank %d: --fault hang: stopping for good at the start of step %d\n", e.rank, step)
			hangForever(e, fmt.Sprintf("--fault hang: rank %d stopped at the start of step %d on purpose", e.rank, step))
		case FaultDelay:
			// Where the host is, for the watchdog and the flight record:
			// a delay past --timeout is reported as this rank's, on
			// purpose, not as a rank stuck with nothing to say.
			fmt.Fprintf(os.Stderr, "rank %d: --fault delay: starting step %d %s late\n", e.rank, step, f.Delay)
			e.hostAt.set(fmt.Sprintf("--fault delay: rank %d starts step %d %s late on purpose", e.rank, step, f.Delay))
			time.Sleep(f.Delay)
			e.hostAt.set("")
		}
	}
}

// kindName is the kind's --fault spelling.
func kindName(k FaultKind) string {
	for n, v := range FaultNames {
		if v == k {
			return n
		}
	}
	return "fault"
}

// hangForever stops the calling goroutine for good, saying why to the
// watchdog.
func hangForever(e *Engine, why string) {
	e.hostAt.set(why)
	// The work queued before the stop runs, as it would on a GPU whose
	// host thread is stuck.
	e.startQueued()
	sleepForever()
}

// sleepForever stops the calling goroutine for good.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// startQueued makes a backend.Flusher backend run everything queued so far.
func (e *Engine) startQueued() {
	if f, ok := e.be.(backend.Flusher); ok {
		f.Start()
	}
}

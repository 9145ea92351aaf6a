package engine

// Settling Go's scheduler before the measured steps.
//
// Go's system monitor is a thread of each Go process that wakes up
// periodically to take the processor from a thread stuck in a system call
// or cgo call, and to preempt goroutines that have run for 10 ms. After it
// has taken a processor (as it does during set-up, when a rank waits tens
// of milliseconds in MPI_Init or a barrier for the others), or after it
// slept deeply because every processor was idle, it polls every 20 us, and
// doubles the pause only after 50 polls that found nothing, up to 10 ms.
// With the timer slack of a normal Linux thread the polls come further
// apart than 20 us, and the monitor needs some 30 ms to calm down. On a
// machine with as many ranks as cores every one of its wake-ups takes a
// core from a rank inside a collective, and without the settle the first
// measured steps run while it polls, which costs a small collective much
// of its bandwidth (the trace and the paired runs:
// bench/results/2026-12-runtime-comments.md, "The settle").
//
// settle spends the time in short system calls: the thread keeps its
// processor, so the monitor neither sleeps deeply (waking from that starts
// the fast polling again) nor takes it (a call shorter than 10 ms is left
// alone while another processor is idle), and the goroutine yields every
// few milliseconds, so that it is not preempted as long-running either.

import (
	goruntime "runtime"
	"syscall"
	"time"
)

// DefaultSettle is how long the ranks settle before the measured steps:
// the monitor's fast polling and doubling, above, with room to spare.
const DefaultSettle = 50 * time.Millisecond

// settle lets the calling goroutine's process become quiet for d (see the
// file comment).
func settle(d time.Duration) {
	const (
		nap        = time.Millisecond     // one system call
		yieldAfter = 4 * time.Millisecond // well below the 10 ms preemption
	)
	ts := syscall.NsecToTimespec(int64(nap))
	start := time.Now()
	lastYield := start
	for time.Since(start) < d {
		_ = syscall.Nanosleep(&ts, nil) // an interruption only ends a nap early
		if time.Since(lastYield) >= yieldAfter {
			lastYield = time.Now()
			goruntime.Gosched()
		}
	}
}

package engine

// Go's garbage collector during the steps.
//
// A collection runs a mark worker on a thread of its own for a millisecond
// or more; with as many ranks as cores that thread takes a core from a rank
// inside a collective, which then waits up to a scheduler time slice, far
// longer than a small collective takes
// (bench/results/2026-12-runtime-comments.md, "The garbage collector").
// The steps allocate little (on the CPU backend nothing but the goroutines
// that fill or clear large tensors, the checks and the trace:
// TestStepsAllocateNothing), so the runtime turns the collector's pacing
// off for the steps and collects only when the Go memory has grown
// gcHeadroom beyond what it was, through Go's memory limit. The limit
// follows the live heap (twice it, plus gcHeadroom, as GOGC=100 would
// allow), so a run whose live data keeps growing (a long traced run) is
// collected as it grows instead of against a fixed limit. The buffers are
// C memory and do not count. GOGC or GOMEMLIMIT set by the user leave the
// collector as they say.

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// gcHeadroom is how much the Go memory may grow during the steps before a
// collection runs.
const gcHeadroom = 256 << 20

// gcCheckEvery is how many steps pass between two looks at the live heap.
const gcCheckEvery = 64

// quietGC holds the collector's settings to restore after the steps.
type quietGC struct {
	on       bool
	percent  int
	limit    int64 // the limit before the steps
	cur      int64 // the limit now
	steps    int
	samples  []metrics.Sample
	total    *metrics.Sample // Go's mapped memory
	liveHeap *metrics.Sample // the heap marked live by the last collection
}

// startQuietGC turns the collector's pacing off, unless the user set GOGC
// or GOMEMLIMIT.
func startQuietGC() *quietGC {
	q := &quietGC{}
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return q
	}
	q.samples = []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/gc/heap/live:bytes"}}
	q.total, q.liveHeap = &q.samples[0], &q.samples[1]
	metrics.Read(q.samples)
	if q.total.Value.Kind() != metrics.KindUint64 || q.liveHeap.Value.Kind() != metrics.KindUint64 {
		return q // a Go without these metrics: leave the collector alone
	}
	q.on = true
	q.cur = int64(q.total.Value.Uint64()) + gcHeadroom
	q.limit = debug.SetMemoryLimit(q.cur)
	q.percent = debug.SetGCPercent(-1)
	return q
}

// afterStep raises the limit when the live heap has grown.
func (q *quietGC) afterStep() {
	if !q.on {
		return
	}
	q.steps++
	if q.steps%gcCheckEvery != 0 {
		return
	}
	metrics.Read(q.samples)
	if want := 2*int64(q.liveHeap.Value.Uint64()) + gcHeadroom; want > q.cur {
		q.cur = want
		debug.SetMemoryLimit(q.cur)
	}
}

// stop puts the collector's settings back.
func (q *quietGC) stop() {
	if !q.on {
		return
	}
	debug.SetGCPercent(q.percent)
	debug.SetMemoryLimit(q.limit)
}

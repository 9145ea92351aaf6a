package engine

import (
	"os"
	goruntime "runtime"
	"runtime/debug"
	"testing"
)

// During the steps the collector's pacing is off and the memory limit
// follows the live heap; afterwards both are as they were.
func TestQuietGC(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: the runtime leaves the collector alone then, by design")
	}
	percentBefore := debug.SetGCPercent(100)
	limitBefore := debug.SetMemoryLimit(-1)
	defer debug.SetGCPercent(percentBefore)

	q := startQuietGC()
	if !q.on {
		t.Fatal("the collector was left alone")
	}
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Errorf("GC percent during the steps: %d, want -1 (off)", p)
	}
	start := debug.SetMemoryLimit(-1)

	// Live data that grows past the headroom raises the limit, so that
	// the collector does not run against a fixed one (the pages are never
	// touched: no memory is used).
	live := make([]byte, gcHeadroom)
	goruntime.GC()
	for range gcCheckEvery {
		q.afterStep()
	}
	if got := debug.SetMemoryLimit(-1); got < 2*int64(len(live))+gcHeadroom || got <= start {
		t.Errorf("limit %d after the live heap grew to %d (limit at the start %d)", got, len(live), start)
	}
	goruntime.KeepAlive(live)

	q.stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GC percent after the steps: %d, want 100", p)
	}
	if got := debug.SetMemoryLimit(-1); got != limitBefore {
		t.Errorf("limit after the steps: %d, want %d", got, limitBefore)
	}
}

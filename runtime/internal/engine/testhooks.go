//go:build syncgen_testhooks

package engine

// Test hooks, for the runtime's own tests only: they make one rank fail on
// purpose so that tests can see the failure handled. They are compiled only
// with the build tag syncgen_testhooks, which the runtime's tests set when
// they build their test program; a user's program has none of them
// (testhooks_off.go). Each is an environment variable read at start-up:
//
//	SYNCGEN_TEST_CORRUPT=RANK:STEP:BUCKET:ELEM  before the check of STEP (-1:
//	    the check after the init block), rank RANK changes element ELEM of
//	    bucket index BUCKET (counted in the wire buffer, over its tensors; by
//	    one, in the tensor that holds it), so that the check must count one
//	    wrong element where the element is checked.
//	SYNCGEN_TEST_CORRUPT_PARAM=RANK:STEP:BUCKET:ELEM  the same for element
//	    ELEM of bucket BUCKET's parameters (adding one to it).
//	SYNCGEN_TEST_PANIC=RANK:STEP   rank RANK panics at the start of STEP.
//	SYNCGEN_TEST_HANG=RANK:STEP[:STMT]  rank RANK stops (sleeps) at the start
//	    of STEP, or before issuing the step's statement number STMT (0-based,
//	    groups expanded), so the other ranks wait until --timeout. STEP -1
//	    stops it during set-up, before its buffers are allocated.
//	SYNCGEN_TEST_HANG_SAVE=RANK:STEPS  rank RANK's writer of its shard of the
//	    checkpoint after STEPS steps stops for good once the shard is
//	    written, as on a file system that no longer answers, so the other
//	    ranks wait in the save until --timeout.
//	SYNCGEN_TEST_SAVE_FAIL=RANK:STEPS  rank RANK's write of its shard of
//	    the checkpoint after STEPS steps fails as on a full disk: the shard
//	    is cut to half its bytes and the write says ENOSPC. RANK -1: every
//	    rank's, as on a full disk that all ranks share.
//	SYNCGEN_TEST_ALLOCS=1  every rank prints how many heap allocations the
//	    measured steps made (the steps should make none: cpuEvent.record).

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/syncgen/syncgen/runtime/internal/ckpt"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
)

// testHooks holds the parsed hooks; a field is nil when its hook is unset.
type testHooks struct {
	corrupt  []int // rank, step, bucket, elem
	param    []int // rank, step, bucket, parameter element
	panic    []int // rank, step
	hang     []int // rank, step, statement (-1: the start of the step)
	hangSave []int // rank, steps of the checkpoint
	saveFail []int // rank (-1: every rank), steps of the checkpoint
	allocs   bool
	// allocs0 is the count of heap allocations when the measured steps
	// began (measuring).
	allocs0 uint64
}

// testHooksFromEnv parses the hooks from the environment. It is read once:
// both set-up and the step loop use it, and a malformed
// value is reported once.
var testHooksFromEnv = sync.OnceValue(func() *testHooks {
	parse := func(name string, n int) []int {
		v := os.Getenv(name)
		if v == "" {
			return nil
		}
		parts := strings.Split(v, ":")
		if name == "SYNCGEN_TEST_HANG" && len(parts) == 2 {
			parts = append(parts, "-1")
		}
		if len(parts) != n {
			fmt.Fprintf(os.Stderr, "%s: ignoring %s=%q: want %d numbers separated by ':'\n", proc.Name(), name, v, n)
			return nil
		}
		out := make([]int, n)
		for i, p := range parts {
			x, err := strconv.Atoi(p)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: ignoring %s=%q: %v\n", proc.Name(), name, v, err)
				return nil
			}
			out[i] = x
		}
		return out
	}
	h := &testHooks{
		corrupt:  parse("SYNCGEN_TEST_CORRUPT", 4),
		param:    parse("SYNCGEN_TEST_CORRUPT_PARAM", 4),
		panic:    parse("SYNCGEN_TEST_PANIC", 2),
		hang:     parse("SYNCGEN_TEST_HANG", 3),
		hangSave: parse("SYNCGEN_TEST_HANG_SAVE", 2),
		saveFail: parse("SYNCGEN_TEST_SAVE_FAIL", 2),
	}
	h.allocs = os.Getenv("SYNCGEN_TEST_ALLOCS") == "1"
	return h
})

// duringSetup runs before the buffers are allocated: a hang with step -1
// stops this rank there, outside any step.
func (h *testHooks) duringSetup(rank int) {
	if h.hang != nil && h.hang[0] == rank && h.hang[1] == -1 {
		sleepForever()
	}
}

// beforeStep runs at the start of step i.
func (h *testHooks) beforeStep(e *Engine, i int) {
	if h.panic != nil && h.panic[0] == e.rank && h.panic[1] == i {
		panic(fmt.Sprintf("SYNCGEN_TEST_PANIC: rank %d panics in step %d on purpose", e.rank, i))
	}
	if h.hang != nil && h.hang[0] == e.rank && h.hang[1] == i && h.hang[2] < 0 {
		hangForever(e, fmt.Sprintf("SYNCGEN_TEST_HANG: rank %d stopped in step %d on purpose", e.rank, i))
	}
	e.hangAt = -1
	if h.hang != nil && h.hang[0] == e.rank && h.hang[1] == i {
		e.hangAt = h.hang[2]
	}
}

// beforeStatement runs before the step issues statement e.cursor (at).
func (h *testHooks) beforeStatement(e *Engine, at plan.Src) {
	if e.cursor == e.hangAt {
		hangForever(e, fmt.Sprintf("SYNCGEN_TEST_HANG: rank %d stopped before %s in step %d on purpose", e.rank, at, e.stepNo))
	}
}

// inSave runs in this rank's writer of the checkpoint after steps steps,
// once its shard is written.
func (h *testHooks) inSave(e *Engine, steps int) {
	if h.hangSave != nil && h.hangSave[0] == e.rank && h.hangSave[1] == steps {
		sleepForever()
	}
}

// failSave runs in this rank's writer of the checkpoint after steps
// steps, once its shard is written at path: SYNCGEN_TEST_SAVE_FAIL's
// rank leaves half of it, and returns the error that ckpt.WriteShard
// returns on a full disk.
func (h *testHooks) failSave(e *Engine, steps int, path string) error {
	f := h.saveFail
	if f == nil || (f[0] != e.rank && f[0] != -1) || f[1] != steps {
		return nil
	}
	if st, err := os.Stat(path); err == nil {
		os.Truncate(path, st.Size()/2)
	}
	err := &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	return fmt.Errorf("writing %s: %w%s", path, err, ckpt.FullHint(err))
}

// measuring runs when the measured steps begin.
func (h *testHooks) measuring() {
	if h.allocs {
		h.allocs0 = heapAllocs()
	}
}

// beforeCheck runs before the check of step i.
func (h *testHooks) beforeCheck(e *Engine, i int) {
	h.corruptParam(e, i)
	c := h.corrupt
	if c == nil || c[0] != e.rank || c[1] != i || c[2] < 0 || c[2] >= len(e.plan.Buckets) {
		return
	}
	if e.plan.Buckets[c[2]].Out != nil {
		h.corruptOutput(e, c[2], int64(c[3]), i)
		return
	}
	// Element ELEM of the bucket is element ELEM-Offset of the tensor
	// that holds it (it was element ELEM of the bucket's first tensor,
	// and an ELEM past that tensor changed nothing without a word).
	at, t := int64(c[3]), -1
	for _, k := range e.plan.Buckets[c[2]].Tensors {
		if off := e.plan.Tensors[k].Offset; at >= off && at < off+e.mem.Tensors[k].Elems {
			t = k
		}
	}
	if t < 0 {
		fmt.Fprintf(os.Stderr, "SYNCGEN_TEST_CORRUPT: rank %d changed nothing: element %d is in no tensor of bucket %q\n",
			e.rank, at, e.plan.Buckets[c[2]].Name)
		return
	}
	tm := &e.mem.Tensors[t]
	el := tm.Store
	el.Off += at - e.plan.Tensors[t].Offset
	el.N = 1
	b := make([]byte, el.Bytes())
	vals := make([]float64, 1)
	if e.be.CopyToHost(b, el) != nil {
		return
	}
	elem.LoadAll(vals, b, el.DType)
	if vals[0] > 0 {
		vals[0]--
	} else {
		vals[0]++
	}
	elem.StoreAll(b, el.DType, vals)
	_ = e.be.CopyFromHost(el, b)
	fmt.Fprintf(os.Stderr, "SYNCGEN_TEST_CORRUPT: rank %d changed element %d of %q before the check of step %d\n",
		e.rank, at-e.plan.Tensors[t].Offset, e.plan.Tensors[t].Name, i)
}

// corruptOutput changes element at of output bucket b (which holds no
// tensors) by one, before the check of step i.
func (h *testHooks) corruptOutput(e *Engine, b int, at int64, i int) {
	el := e.mem.Buckets[b].Span
	if at >= e.plan.Buckets[b].Elems {
		fmt.Fprintf(os.Stderr, "SYNCGEN_TEST_CORRUPT: rank %d changed nothing: output %q has %d elements\n", e.rank, e.plan.Buckets[b].Name, e.plan.Buckets[b].Elems)
		return
	}
	el.Off, el.N = at, 1
	buf := make([]byte, el.Bytes())
	vals := make([]float64, 1)
	if e.be.CopyToHost(buf, el) != nil {
		return
	}
	elem.LoadAll(vals, buf, el.DType)
	vals[0]++
	elem.StoreAll(buf, el.DType, vals)
	_ = e.be.CopyFromHost(el, buf)
	fmt.Fprintf(os.Stderr, "SYNCGEN_TEST_CORRUPT: rank %d changed element %d of output %q before the check of step %d\n", e.rank, at, e.plan.Buckets[b].Name, i)
}

// heapAllocs returns how many heap objects the process has allocated so
// far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// reportAllocs prints SYNCGEN_TEST_ALLOCS's line.
func (h *testHooks) reportAllocs(e *Engine) {
	if h.allocs {
		fmt.Fprintf(os.Stderr, "rank %d: %d heap allocations in %d measured steps\n", e.rank, heapAllocs()-h.allocs0, e.cfg.Steps)
	}
}

// corruptParam adds one to a parameter element (SYNCGEN_TEST_CORRUPT_PARAM).
func (h *testHooks) corruptParam(e *Engine, i int) {
	c := h.param
	if c == nil || c[0] != e.rank || c[1] != i || c[2] < 0 || c[2] >= len(e.plan.Buckets) {
		return
	}
	el := e.tr.params[c[2]].Param
	if int64(c[3]) >= el.N {
		fmt.Fprintf(os.Stderr, "SYNCGEN_TEST_CORRUPT_PARAM: rank %d changed nothing: bucket %d has %d parameters\n", e.rank, c[2], el.N)
		return
	}
	el.Off, el.N = int64(c[3]), 1
	b := make([]byte, el.Bytes())
	vals := make([]float64, 1)
	if e.be.CopyToHost(b, el) != nil {
		return
	}
	elem.LoadAll(vals, b, el.DType)
	vals[0]++
	elem.StoreAll(b, el.DType, vals)
	_ = e.be.CopyFromHost(el, b)
	fmt.Fprintf(os.Stderr, "SYNCGEN_TEST_CORRUPT_PARAM: rank %d changed parameter %d of bucket %q before the check of step %d\n",
		e.rank, c[3], e.plan.Buckets[c[2]].Name, i)
}

package plan

import (
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// The descriptors say what nccl-tests says of each collective: the bus
// factor, which collectives take a root and which reduce, and which work on
// per-rank slices of the buffer.
func TestCollInfo(t *testing.T) {
	for _, c := range []struct {
		coll     Coll
		name     string
		busAt4   float64
		reduces  bool
		rootWord string
		sliced   bool
	}{
		{CollAllReduce, "allreduce", 1.5, true, "", false},
		{CollBroadcast, "broadcast", 1, false, "from", false},
		{CollReduce, "reduce", 1, true, "to", false},
		{CollAllGather, "allgather", 0.75, false, "", true},
		{CollReduceScatter, "reducescatter", 0.75, true, "", true},
	} {
		info := c.coll.Info()
		if info.Name != c.name || c.coll.String() != c.name {
			t.Errorf("%d: name %q (String %q), want %q", c.coll, info.Name, c.coll.String(), c.name)
		}
		if got := info.BusFactor(4); got != c.busAt4 {
			t.Errorf("%s: bus factor at 4 ranks %v, want %v", c.name, got, c.busAt4)
		}
		if info.Reduces != c.reduces || c.coll.Reduces() != c.reduces {
			t.Errorf("%s: reduces %v, want %v", c.name, info.Reduces, c.reduces)
		}
		if info.RootWord != c.rootWord || info.Sliced != c.sliced {
			t.Errorf("%s: root word %q, sliced %v; want %q, %v", c.name, info.RootWord, info.Sliced, c.rootWord, c.sliced)
		}
		if moved, want := c.coll.Elems(10, 12), map[bool]int64{false: 10, true: 12}[c.sliced]; moved != want {
			t.Errorf("%s moves %d of a bucket of 10 elements padded to 12, want %d", c.name, moved, want)
		}
		if info.Result == "" {
			t.Errorf("%s: no result described", c.name)
		}
	}
	if got := Coll(99).String(); got != "coll(99)" {
		t.Errorf("an unknown collective is %q", got)
	}
}

// A root outside the world is refused with the keyword the plan wrote.
func TestValidateRoot(t *testing.T) {
	p := &Plan{Streams: []Stream{{Name: "comm"}}, Buckets: []Bucket{{Name: "b", Wire: elem.F32, Elems: 1}}}
	prog, err := Record(nil, func(r *Recorder) {
		r.Broadcast("t.sync:1:1", 0, 2, After{}, 0)
		r.Reduce("t.sync:2:1", 0, Sum, 0, After{}, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = prog.Validate(p, 2)
	if err == nil || err.Error() != "t.sync:1:1: broadcast of bucket \"b\" from rank 2: root 2 is outside the world of 2 ranks (ranks 0..1); run with at least 3 ranks (mpirun -np 3), or change `from 2` in the plan" {
		t.Errorf("got %v", err)
	}
}

// A backward or compute waits for one stream at most, and never for ready
// gradients, which only a collective's buckets have.
func TestTimedStatementsAfter(t *testing.T) {
	p := &Plan{Streams: []Stream{{Name: "compute"}, {Name: "comm"}}}
	prog, err := Record(nil, func(r *Recorder) {
		r.Compute("t.sync:1:1", 0, 1, AfterStream(1))
		r.Backward("t.sync:2:1", 0, 1, AfterStream(1))
	})
	if err != nil || prog.Validate(p, 2) != nil || prog.Step[0].After != AfterStream(1) {
		t.Fatalf("compute and backward after comm: %v, %v, %+v", err, prog.Validate(p, 2), prog.Step)
	}
	if _, err := Record(nil, func(r *Recorder) { r.Compute("t.sync:1:1", 0, 1, AfterStream(1), AfterStream(0)) }); err == nil {
		t.Errorf("two dependencies were recorded without an error")
	}
	prog, _ = Record(nil, func(r *Recorder) { r.Compute("t.sync:1:1", 0, 1, AfterReady()) })
	if err := prog.Validate(p, 2); err == nil || !strings.Contains(err.Error(), "compute cannot wait for ready gradients") {
		t.Errorf("compute after ready: %v", err)
	}
	prog, _ = Record(nil, func(r *Recorder) { r.Backward("t.sync:1:1", 0, 1, AfterStream(5)) })
	if err := prog.Validate(p, 2); err == nil || !strings.Contains(err.Error(), "after: stream 5 does not exist") {
		t.Errorf("backward after a stream that does not exist: %v", err)
	}
}

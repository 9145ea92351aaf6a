package plan

import (
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
)

// The state digest is the same for a plan edited only in what does not
// change a checkpoint's state (the run line, durations, streams,
// dependencies, waits, positions, the plan's Hash), and differs for an
// edit that does (an optimizer's setting, a collective's operator, a
// tensor's shape, the micro-batches), and for another plan's name.
func TestStateDigest(t *testing.T) {
	build := func(edit func(p *Plan, prog *Program)) string {
		p := &Plan{Name: "p", Hash: "aaaa",
			Tensors:    []Tensor{{Name: "w", DType: elem.F32, Shape: []int64{4, 3}, Bucket: 0}},
			Buckets:    []Bucket{{Name: "g", Wire: elem.F32, Elems: 12, Tensors: []int{0}}},
			Streams:    []Stream{{Name: "compute"}, {Name: "comm"}},
			Run:        Run{Steps: 20, Warmup: 2, CheckEvery: 1},
			Accumulate: 1,
		}
		prog := &Program{Step: []Stmt{
			{Kind: StmtBackward, At: "p.sync:5:5", Stream: 0, Dur: time.Millisecond},
			{Kind: StmtColl, At: "p.sync:6:5", Stream: 1, Coll: CollAllReduce, Op: Avg, Buckets: []int{0}},
			{Kind: StmtUpdate, At: "p.sync:7:5", Buckets: []int{0}, Optim: optim.Spec{Kind: optim.SGD, LR: 0.01}},
			{Kind: StmtWait, At: "p.sync:8:5", Stream: 0},
		}}
		edit(p, prog)
		return StateDigest(p, prog)
	}
	base := build(func(*Plan, *Program) {})
	for name, edit := range map[string]func(*Plan, *Program){
		"run line":  func(p *Plan, _ *Program) { p.Run = Run{Steps: 200, Warmup: 0, CheckpointEvery: 5} },
		"hash":      func(p *Plan, _ *Program) { p.Hash = "bbbb" },
		"duration":  func(_ *Plan, prog *Program) { prog.Step[0].Dur = 9 * time.Millisecond },
		"stream":    func(_ *Plan, prog *Program) { prog.Step[1].Stream = 0 },
		"position":  func(_ *Plan, prog *Program) { prog.Step[2].At = "p.sync:17:5" },
		"wait gone": func(_ *Plan, prog *Program) { prog.Step = prog.Step[:3] },
	} {
		if got := build(edit); got != base {
			t.Errorf("%s: digest %s, want %s as before the edit", name, got, base)
		}
	}
	for name, edit := range map[string]func(*Plan, *Program){
		"learning rate": func(_ *Plan, prog *Program) { prog.Step[2].Optim.LR = 0.02 },
		"operator":      func(_ *Plan, prog *Program) { prog.Step[1].Op = Sum },
		"shape":         func(p *Plan, _ *Program) { p.Tensors[0].Shape = []int64{3, 4} },
		"accumulate":    func(p *Plan, _ *Program) { p.Accumulate = 2 },
		"name":          func(p *Plan, _ *Program) { p.Name = "q" },
	} {
		if got := build(edit); got == base {
			t.Errorf("%s: digest unchanged (%s)", name, got)
		}
	}
}

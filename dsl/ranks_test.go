package dsl

import (
	"reflect"
	"testing"

	"github.com/syncgen/syncgen/ir"
)

// TestRanksDeclaration: the entries, batch and balance of a ranks
// declaration reach the program, with dynamic balancing's default period.
func TestRanksDeclaration(t *testing.T) {
	p := mustCheck(t, "tensor a f32[4]\nbucket b { a }\nranks batch 256 balance dynamic {\n    0..2 speed 1.0\n    3 speed 0.5\n}\nstep { backward 1ms; allreduce b op wavg after ready }\n")
	r := p.Ranks
	if r == nil {
		t.Fatal("no Ranks in the program")
	}
	got := []ir.RankSpeed{}
	for _, s := range r.Speeds {
		if s.Pos.Line == 0 {
			t.Errorf("entry %d..%d has no position", s.First, s.Last)
		}
		s.Pos = ir.Pos{}
		got = append(got, s)
	}
	want := []ir.RankSpeed{{First: 0, Last: 2, Speed: 1}, {First: 3, Last: 3, Speed: 0.5}}
	if !reflect.DeepEqual(got, want) || r.Batch != 256 || r.Balance != ir.BalanceDynamic || r.Every != defaultBalanceEvery || r.Pos.Line != 3 {
		t.Errorf("Ranks = %+v, want speeds %+v, batch 256, dynamic every %d, on line 3", r, want, defaultBalanceEvery)
	}
	if p := mustCheck(t, "tensor a f32[4]\nbucket b { a }\nstep { backward 1ms; allreduce b after ready }\n"); p.Ranks != nil {
		t.Errorf("a plan without ranks has Ranks %+v", p.Ranks)
	}
}

// TestRanksAsName: `ranks` is only a declaration where one starts: a
// tensor, stream and pattern called so, and a scaler on the line before
// the declaration, keep working.
func TestRanksAsName(t *testing.T) {
	p := mustCheck(t, "tensor ranks f32[4]\nstream ranks\nbucket b { ranks }\nscaler static 1024\nranks { 0 speed 2 }\nstep { backward 1ms on ranks; allreduce b on ranks; allreduce ranks on ranks }\n")
	if p.Tensors[0].Name != "ranks" || p.Streams[0].Name != "ranks" || p.Ranks == nil || p.Ranks.Speeds[0].Speed != 2 || p.Scaler == nil {
		t.Errorf("tensor %q, stream %q, ranks %+v, scaler %+v", p.Tensors[0].Name, p.Streams[0].Name, p.Ranks, p.Scaler)
	}
}

// TestFormatRanks: options in canonical order, one entry a line.
func TestFormatRanks(t *testing.T) {
	got := mustFormat(t, "ranks every 3 balance dynamic  batch 64 {0..3 speed 1.0;4 speed 0.5}\n")
	want := "ranks batch 64 balance dynamic every 3 {\n    0..3 speed 1.0\n    4 speed 0.5\n}\n"
	if got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}

package dsl

import (
	"slices"
	"testing"

	"github.com/syncgen/syncgen/ir"
)

// TestIntoDeclaresOutputs checks the plan of out-of-place collectives:
// each first `into` declares an output bucket of the source's wire dtype
// whose length derives from its source's, a later write reuses it, and a
// later statement may name it as a source or in place.
func TestIntoDeclaresOutputs(t *testing.T) {
	p := mustCheck(t, `tensor a f32[10]
tensor b f16[7]
stream compute
stream comm
bucket grads { a }
bucket half { b } wire f32
step {
    backward 1ms on compute
    allreduce grads op avg into sums on comm after ready
    reducescatter grads op avg into shard on comm
    allgather shard into full on comm
    allgather grads into all on comm
    reduce half to 1 into hr on comm after ready
    broadcast grads from 0 into sums on comm
    allreduce sums on comm
    wait comm
}
`)
	byName := map[string]int{}
	for i, b := range p.Buckets {
		byName[b.Name] = i
	}
	want := []struct {
		name string
		of   string
		size ir.OutSize
		wire ir.DType
	}{
		{"sums", "grads", ir.OutSame, ir.F32},
		{"shard", "grads", ir.OutShard, ir.F32},
		{"full", "shard", ir.OutGather, ir.F32},
		{"all", "grads", ir.OutGather, ir.F32},
		{"hr", "half", ir.OutSame, ir.F32},
	}
	if len(p.Buckets) != 2+len(want) {
		t.Fatalf("%d buckets, want %d: %+v", len(p.Buckets), 2+len(want), p.Buckets)
	}
	for _, w := range want {
		i, ok := byName[w.name]
		if !ok {
			t.Fatalf("no bucket %s", w.name)
		}
		b := p.Buckets[i]
		if b.Output == nil || p.Buckets[b.Output.Of].Name != w.of || b.Output.Size != w.size || b.Wire != w.wire || len(b.Tensors) != 0 {
			t.Errorf("bucket %s = %+v (output %+v), want an output of %s, size %d, %s", w.name, b, b.Output, w.of, w.size, w.wire)
		}
	}
	for _, b := range []string{"grads", "half"} {
		if p.Buckets[byName[b]].Output != nil {
			t.Errorf("declared bucket %s is an output", b)
		}
	}
	// The statements: source in Buckets, output in Into.
	type io struct{ src, out string }
	var got []io
	for _, s := range p.Step {
		if s.Kind != ir.StmtCollective {
			continue
		}
		x := io{src: p.Buckets[s.Buckets[0]].Name}
		if s.Into != nil {
			x.out = p.Buckets[s.Into[0]].Name
		}
		got = append(got, x)
	}
	wantIO := []io{{"grads", "sums"}, {"grads", "shard"}, {"shard", "full"}, {"grads", "all"}, {"half", "hr"}, {"grads", "sums"}, {"sums", ""}}
	if !slices.Equal(got, wantIO) {
		t.Errorf("collectives %v, want %v", got, wantIO)
	}
}

// TestIntoRaces checks that an output buffer is raced like a bucket: a
// write on one stream and a read on another need an order, and a read of
// the source on two streams needs none.
func TestIntoRaces(t *testing.T) {
	const decls = "tensor a f32[4]\nstream compute\nstream comm\nstream comm2\nbucket g { a }\n"
	for _, tc := range []struct{ body, want string }{
		{"backward 1ms on compute\nallreduce g into s on comm after ready\nallreduce s on comm2\n",
			"data race on bucket `s`: this allreduce on stream `comm2` is not ordered after the allreduce on stream `comm` (line 8)"},
		{"backward 1ms on compute\nallreduce g into s on comm after ready\nbroadcast g from 0 into s on comm2 after compute\n",
			"data race on bucket `s`: this broadcast on stream `comm2` is not ordered after the allreduce on stream `comm` (line 8)"},
		{"backward 1ms on compute\nallreduce g into s on comm after ready\nreduce g to 0 into r on comm2 after compute\nwait comm\nwait comm2\n", ""},
		// In a group, two reads of a source are no race; a read and a
		// write are.
		{"backward 1ms on compute\ngroup {\nallreduce g into s on comm after ready\nallgather g into gs on comm2 after ready\n}\n", ""},
		{"backward 1ms on compute\ngroup {\nallreduce g into s on comm after ready\nallreduce g on comm2 after ready\n}\n",
			"data race on bucket `g`: it is in two collectives of one group (this one and line 9)"},
	} {
		src := decls + "step {\n" + tc.body + "}\n"
		_, diags := Check("t.sync", []byte(src))
		var errs []string
		for _, d := range diags {
			if d.Severity == Error {
				errs = append(errs, d.Message)
			}
		}
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%q: unexpected errors %q", src, errs)
		case tc.want != "" && !slices.Contains(errs, tc.want):
			t.Errorf("%q: errors %q, want %q", src, errs, tc.want)
		}
	}
}

// `divide before` changes only `op avg`, dividing each rank's input in
// place before the sum: only that is refused with `into`, which leaves
// the source as it was. The other ops and collectives of such a bucket
// are out of place as of any other (the runtime checks them exactly).
func TestIntoDivideBefore(t *testing.T) {
	const decls = "tensor a f32[8]\nbucket g { a } divide before\n"
	for _, stmt := range []string{
		"allreduce g op sum into o", "allreduce g op max into o", "allgather g into o", "reducescatter g op sum into o",
		"reduce g to 0 op sum into o", "broadcast g from 0 into o", "allreduce g op avg",
	} {
		src := decls + "step {\n    backward 1ms\n    " + stmt + " after ready\n}\n"
		if _, diags := Check("plan.sync", []byte(src)); diags.HasErrors() {
			t.Errorf("%s on a bucket with divide before: %v, want no error", stmt, diags)
		}
	}
	src := decls + "step {\n    backward 1ms\n    allreduce g op avg into o after ready\n}\n"
	if _, diags := Check("plan.sync", []byte(src)); len(diags) != 1 || diags[0].Message != "`into` with `divide before`" {
		t.Errorf("op avg into on a bucket with divide before: %v, want one error", diags)
	}
}

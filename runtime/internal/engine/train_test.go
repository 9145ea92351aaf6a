package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/check"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/scaler"
)

// The headroom warnings look at every place a scaled gradient can pass its
// dtype's largest value: f16 gradients on an f32 wire overflow in their
// own dtype when the backward scales them; a static scale never backs off,
// so the warning says so and names the scale that fits; with gradient
// accumulation a gradient is the sum of the micro-batches' fills.
func TestHeadroomWarnings(t *testing.T) {
	for _, c := range []struct {
		dt, wire elem.DType
		micro    int
		rule     scaler.Rule
		scale    float64
		want     string // "" for no warning
	}{
		{elem.F16, elem.F32, 1, scaler.Torch, 64, `bucket "g": at the first scale, 64, one rank's gradients can reach 65536, past f16's largest value 65504: a step that reaches it overflows, and is skipped, until the scaler backs off; start it at 32 or lower (scaler ... init 32)`},
		{elem.F16, elem.F16, 1, scaler.Static, 1024, `bucket "g": at the first scale, 1024, one rank's gradients can reach 1048576, past f16's largest value 65504: a step that reaches it overflows and is skipped, and a static scale never backs off; use 32 or lower (scaler static 32)`},
		{elem.F16, elem.F32, 1, scaler.Torch, 32, ""},
		{elem.F16, elem.F16, 4, scaler.Torch, 64, `bucket "g": at the first scale, 64, one rank's gradients can reach 65536, past f16's largest value 65504: a step that reaches it overflows, and is skipped, until the scaler backs off; start it at 32 or lower (scaler ... init 32)`},
		{elem.F32, elem.F16, 1, scaler.Torch, 32, "bucket \"g\": its f16 sum over 2 ranks can reach 65536 at the first scale, 32, past f16's largest value 65504, where no rank's gradients do: steps will overflow; declare the bucket with `divide before` (every rank's share divided before the sum) or start the scaler lower"},
	} {
		p := &plan.Plan{
			Name: "w", Source: "w.sync",
			Tensors:    []plan.Tensor{{Name: "x", DType: c.dt, Shape: []int64{64}, Bucket: 0}},
			Streams:    []plan.Stream{{Name: "compute"}, {Name: "comm"}},
			Buckets:    []plan.Bucket{{Name: "g", Wire: c.wire, Elems: 64, Tensors: []int{0}}},
			Scaler:     &scaler.Spec{Rule: c.rule},
			Accumulate: c.micro,
		}
		prog, err := plan.Record(nil, func(s *plan.Recorder) {
			s.Backward("w.sync:1:1", 0, time.Millisecond)
			s.AllReduce("w.sync:2:1", 1, plan.Avg, plan.AfterReady(), 0)
		})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(headroomWarnings(p, plan.Flat(prog.Step), check.Patterns(p, prog, 2, 0), 2, c.scale), "\n")
		if got != c.want {
			t.Errorf("%s gradients, %s wire, accumulate %d, %s at %v:\ngot  %q\nwant %q", c.dt, c.wire, c.micro, c.rule, c.scale, got, c.want)
		}
	}
}

// An --overflow into a tensor whose bucket no unscale reads is found by
// nothing: the header warns of it, naming the buckets that are unscaled.
func TestUnfoundInjections(t *testing.T) {
	p := &plan.Plan{
		Name: "u", Source: "u.sync",
		Tensors: []plan.Tensor{{Name: "a", DType: elem.F32, Shape: []int64{8}, Bucket: 0}, {Name: "b", DType: elem.F32, Shape: []int64{8}, Bucket: 1}},
		Streams: []plan.Stream{{Name: "compute"}, {Name: "comm"}},
		Buckets: []plan.Bucket{{Name: "ga", Wire: elem.F32, Elems: 8, Tensors: []int{0}}, {Name: "gb", Wire: elem.F32, Elems: 8, Tensors: []int{1}}},
		Scaler:  &scaler.Spec{Rule: scaler.Torch},
	}
	prog, err := plan.Record(nil, func(s *plan.Recorder) {
		s.Backward("u.sync:1:1", 0, time.Millisecond)
		s.AllReduce("u.sync:2:1", 1, plan.Avg, plan.AfterReady(), 0, 1)
		s.Unscale("u.sync:3:1", 0, false, plan.AfterSynced(), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	in := []Injection{{Tensor: 0, Rank: 0, Step: 1, Spec: "1:0:a"}, {Tensor: 1, Rank: 1, Step: 2, Spec: "2:1:b"}}
	got := strings.Join(unfoundInjections(p, plan.Flat(prog.Step), in), "\n")
	want := `--overflow "2:1:b": tensor "b" is in bucket "gb", which no unscale reads, so nothing finds the overflow and step 2 is not skipped; name a tensor of an unscaled bucket ("ga"), or unscale its bucket`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

package predict

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

func check(t *testing.T, src string) *ir.Program {
	t.Helper()
	prog, diags := dsl.Check("p.sync", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("%v", diags)
	}
	return prog
}

// prof is a profile whose costs are easy to compute by hand: one segment
// per collective, alphas of 10 and 20 and a bus bandwidth of 1, in the
// profile's units (Segment's AlphaUs and BusGBs).
var prof = &costmodel.Profile{Format: costmodel.Format, Ranks: 2, MemGBs: 1, Curves: []costmodel.Curve{
	{Collective: "allreduce", Segments: []costmodel.Segment{{AlphaUs: 10, BusGBs: 1}}},
	{Collective: "allgather", Segments: []costmodel.Segment{{AlphaUs: 20, BusGBs: 1}}},
}}

const twoBuckets = `
tensor a f32[250000]
tensor b f16[250000]
tensor c f32[3]
stream compute
stream comm
bucket lead { a } wire f16
bucket rest { * } wire f32
step {
    backward 4ms on compute
    allreduce lead op avg on comm after ready
    group {
        allgather rest on comm after ready
    }
    wait comm
}
`

func TestSchedule(t *testing.T) {
	prog := check(t, twoBuckets)
	s := Schedule(prog, 2)
	if len(s.Streams) != 2 || len(s.Tensors) != 3 || len(s.Buckets) != 2 {
		t.Fatalf("schedule %+v", s)
	}
	// Bucket lead: a (f32, 1 MB) cast to f16 (0.5 MB): 1.5 MB each way.
	if s.Buckets[0].Bytes != 500_000 || s.Buckets[0].CastBytes != 1_500_000 || s.Buckets[0].DType != "f16" {
		t.Errorf("bucket lead %+v", s.Buckets[0])
	}
	g := s.Step[2]
	if g.Kind != costmodel.OpGroup || len(g.Body) != 1 || g.Body[0].ID != 1 || s.Step[1].ID != 0 {
		t.Fatalf("group %+v", g)
	}
	// allgather pads to a multiple of the ranks: 250003 elements -> 250004.
	want := int64(250004) * prog.Buckets[1].Wire.Size()
	if g.Body[0].Bytes[0] != want {
		t.Errorf("allgather bytes %d, want %d", g.Body[0].Bytes[0], want)
	}
}

func TestPredictByHand(t *testing.T) {
	src := `
tensor x f32[250000]
tensor y f32[250000]
stream compute
stream comm
bucket bx { x }
bucket by { y }
step {
    backward 10ms on compute
    allreduce by on comm after ready
    allreduce bx on comm after ready
    wait comm
}
`
	res, err := Predict(check(t, src), 2, prof)
	if err != nil {
		t.Fatal(err)
	}
	// y is ready at 5 ms, x at 10 ms; each 1 MB allreduce takes
	// 10 us + 1000 us. by (issued first on the stream) runs 5 .. 6.01 ms,
	// hidden; bx 10 .. 11.01 ms.
	ms := func(v float64) time.Duration { return time.Duration(v * 1e6) }
	if len(res.Rows) != 2 || res.Rows[1].Start != ms(10) || res.Rows[0].Start != ms(5) || res.Rows[0].End != ms(6.01) {
		t.Fatalf("rows %+v", res.Rows)
	}
	if res.Step != ms(11.01) || res.Exposed != ms(1.01) || res.Hidden != ms(1.01) {
		t.Errorf("step %v exposed %v hidden %v", res.Step, res.Exposed, res.Hidden)
	}
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bx", "1010.0", "step time 11.010 ms", "exposed communication (step - compute) 1.010 ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := Predict(check(t, twoBuckets), 2, &costmodel.Profile{Format: costmodel.Format, Curves: prof.Curves[:1]}); err == nil ||
		!strings.Contains(err.Error(), "no curve for allgather") {
		t.Errorf("a missing curve: %v", err)
	}
}

// TestScheduleInto checks the bytes of out-of-place collectives as the
// runtime counts them (the larger buffer, a reducescatter's source
// padded) and the lengths of output buffers at the world size.
func TestScheduleInto(t *testing.T) {
	prog := check(t, `
tensor a f32[10]
stream compute
stream comm
bucket g { a }
step {
    backward 1ms on compute
    reducescatter g into shard on comm after ready
    allgather shard into full on comm
    allgather g into all on comm
    allreduce g into sums on comm
    allreduce full on comm
    wait comm
}
`)
	s := Schedule(prog, 4)
	var got []int64
	for _, o := range s.Step {
		if o.Kind == costmodel.OpCollective {
			got = append(got, o.Bytes[0])
		}
	}
	// g: 10 f32; padded 12; shard 3; full 12; all 40.
	want := []int64{48, 48, 160, 40, 48}
	if !slices.Equal(got, want) {
		t.Errorf("bytes %v, want %v", got, want)
	}
	lengths := map[string]int64{"g": 40, "shard": 12, "full": 48, "all": 160, "sums": 40}
	for _, b := range s.Buckets {
		if b.Bytes != lengths[b.Name] {
			t.Errorf("bucket %s: %d bytes at 4 ranks, want %d", b.Name, b.Bytes, lengths[b.Name])
		}
	}
}

// TestProfileNamesAreTheIRs: a profile's valid collective, op and dtype
// names are the language's, so every plan's collective finds its curve
// by name and a profile names nothing a plan cannot use.
func TestProfileNamesAreTheIRs(t *testing.T) {
	var colls, ops, dtypes []string
	for c := ir.AllReduce; c <= ir.ReduceScatter; c++ {
		colls = append(colls, c.String())
	}
	for o := ir.Sum; o <= ir.WAvg; o++ {
		ops = append(ops, o.String())
	}
	for d := ir.F64; d <= ir.U8; d++ {
		dtypes = append(dtypes, d.String())
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"collectives", costmodel.Collectives, colls}, {"ops", costmodel.Ops, ops}, {"dtypes", costmodel.DTypes, dtypes}} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("costmodel's %s %v, the IR's %v", c.what, c.got, c.want)
		}
	}
}

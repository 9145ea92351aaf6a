package forecast

import (
	"math"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// A plan of two tensors: a (f32, 250000) in bucket b0 (f32), c (f16, 6)
// in bucket b1 with wire f32; backward 10 ms, a grouped allreduce avg of
// b0 and an allgather of b1 on stream comm, a wait.
func testPlan() (*plan.Plan, *plan.Program) {
	p := &plan.Plan{
		Tensors: []plan.Tensor{{Name: "a", DType: elem.F32, Shape: []int64{250000}, Bucket: 0}, {Name: "c", DType: elem.F16, Shape: []int64{6}, Bucket: 1}},
		Streams: []plan.Stream{{Name: "compute"}, {Name: "comm"}},
		Buckets: []plan.Bucket{{Name: "b0", Wire: elem.F32, Elems: 250000, Tensors: []int{0}}, {Name: "b1", Wire: elem.F32, Elems: 6, Tensors: []int{1}}},
	}
	prog := &plan.Program{Step: []plan.Stmt{
		{Kind: plan.StmtBackward, Stream: 0, Dur: 10 * time.Millisecond},
		{Kind: plan.StmtGroup, Body: []plan.Stmt{
			{Kind: plan.StmtColl, Stream: 1, Coll: plan.CollAllReduce, Op: plan.Avg, After: plan.AfterReady(), Buckets: []int{0}, ID: 0},
			{Kind: plan.StmtColl, Stream: 1, Coll: plan.CollAllGather, After: plan.AfterStream(0), Buckets: []int{1}, ID: 1},
		}},
		{Kind: plan.StmtWait, Stream: 1},
	}, Colls: 2}
	return p, prog
}

// Byte counts past int64 saturate rather than wrap negative.
func TestScheduleSaturates(t *testing.T) {
	const huge = int64(1) << 61
	p := &plan.Plan{
		Tensors: []plan.Tensor{{Name: "a", DType: elem.F16, Shape: []int64{huge}, Bucket: 0}, {Name: "b", DType: elem.F16, Shape: []int64{huge}, Bucket: 0}},
		Streams: []plan.Stream{{Name: "compute"}},
		Buckets: []plan.Bucket{{Name: "b0", Wire: elem.F32, Elems: 2 * huge, Tensors: []int{0, 1}}},
	}
	s := Schedule(p, &plan.Program{}, 2)
	if s.Tensors[0].Bytes != huge*2 || s.Buckets[0].Bytes != math.MaxInt64 || s.Buckets[0].CastBytes != math.MaxInt64 {
		t.Errorf("tensor %d bytes, bucket %d bytes and %d cast bytes; want %d, %d and %d",
			s.Tensors[0].Bytes, s.Buckets[0].Bytes, s.Buckets[0].CastBytes, huge*2, int64(math.MaxInt64), int64(math.MaxInt64))
	}
}

func TestSchedule(t *testing.T) {
	p, prog := testPlan()
	s := Schedule(p, prog, 4)
	if s.Ranks != 4 || len(s.Tensors) != 2 || s.Tensors[0].Bytes != 1_000_000 || s.Tensors[1].Bytes != 12 {
		t.Fatalf("tensors %+v", s.Tensors)
	}
	// c is cast: 12 bytes of f16 read, 24 of f32 written.
	if s.Buckets[0].CastBytes != 0 || s.Buckets[1].CastBytes != 36 || s.Buckets[1].DType != "f32" {
		t.Errorf("buckets %+v", s.Buckets)
	}
	g := s.Step[1]
	if g.Kind != costmodel.OpGroup || len(g.Body) != 2 {
		t.Fatalf("group %+v", g)
	}
	ar, ag := g.Body[0], g.Body[1]
	if ar.Collective != "allreduce" || ar.Op != "avg" || ar.After != costmodel.AfterReady || ar.Bytes[0] != 1_000_000 {
		t.Errorf("allreduce %+v", ar)
	}
	// The allgather moves the buffer padded to 4 ranks: 8 elements.
	if ag.Collective != "allgather" || ag.Op != "" || ag.After != costmodel.AfterStream || ag.AfterStream != 0 || ag.Bytes[0] != 32 || ag.ID != 1 {
		t.Errorf("allgather %+v", ag)
	}
}

func TestPredict(t *testing.T) {
	p, prog := testPlan()
	prof := &costmodel.Profile{Format: costmodel.Format, Curves: []costmodel.Curve{
		{Collective: "allreduce", Segments: []costmodel.Segment{{AlphaUs: 10, BusGBs: 1}}},
		{Collective: "allgather", Segments: []costmodel.Segment{{AlphaUs: 20}}},
	}}
	pr, err := Predict(p, prog, 2, prof)
	if err != nil {
		t.Fatal(err)
	}
	// Both wait for the backward (10 ms); then a group of an allreduce
	// (10 us + 1000 us) and an allgather (20 us, no bandwidth term): the
	// larger latency once, then the bytes: both rows 10 .. 11.02 ms.
	want := 11020 * time.Microsecond
	if len(pr.Rows) != 2 || pr.Rows[0].End != want || pr.Rows[1].End != want || pr.Step != want {
		t.Errorf("rows %+v, step %v", pr.Rows, pr.Step)
	}
}

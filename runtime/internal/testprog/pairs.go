package main

import (
	"time"

	rt "github.com/syncgen/syncgen/runtime"
)

// The pairs plan registers itself here, beside main.go's table.
func init() { plans["pairs"] = pairsPlan }

// pairsPlan: on every float dtype, reductions of fractions, which the
// checker predicts at two ranks (one rounding, whatever the order): a
// weighted average (run it with a --batch whose shares make fractions,
// such as 9) summed again, a weighted average multiplied across the ranks,
// a reduce's weighted inputs and result summed, and an average divided
// before the sum whose reduce leaves halves on the other rank, averaged
// again; and a weighted average of f32 tensors on a bf16 wire, averaged
// again. Bucket 0 is f64's first.
func pairsPlan(string) (*rt.Plan, error) {
	b := newBuilder("pairs")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	type job struct {
		first, second rt.RedOp
		reduce        bool // the first is a reduce to rank 0
		b             int
	}
	var jobs []job
	add := func(name string, dt, wire rt.DType, pre bool, j job) {
		j.b = b.bucket(name, wire, b.tensor(name+".grad", dt, 7, 11), b.tensor(name+".bias", dt, 6))
		b.p.Buckets[j.b].PreDivide = pre
		jobs = append(jobs, j)
	}
	for _, dt := range []rt.DType{rt.F64, rt.F32, rt.F16, rt.BF16} {
		n := dtypeNames[dt]
		add(n+".wavg.sum", dt, dt, false, job{first: rt.WAvg, second: rt.Sum})
		add(n+".wavg.prod", dt, dt, false, job{first: rt.WAvg, second: rt.Prod})
		add(n+".reduce.wavg.sum", dt, dt, false, job{first: rt.WAvg, second: rt.Sum, reduce: true})
		add(n+".pre.avg", dt, dt, true, job{first: rt.Avg, second: rt.Avg, reduce: true})
	}
	add("f32_on_bf16.wavg.avg", rt.F32, rt.BF16, false, job{first: rt.WAvg, second: rt.Avg})
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 2*time.Millisecond)
		for i, j := range jobs {
			at := src(100 + 2*i)
			if j.reduce {
				s.Reduce(at, comm, j.first, 0, rt.AfterReady(), j.b)
			} else {
				s.AllReduce(at, comm, j.first, rt.AfterReady(), j.b)
			}
			s.AllReduce(src(101+2*i), comm, j.second, rt.After{}, j.b)
		}
		s.Wait(src(20), comm)
	}
	return b.p, nil
}

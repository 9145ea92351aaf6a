// Command rtbench measures what one allreduce costs through the whole
// runtime, as a generated program issues it: a plan of one f32 bucket of
// SYNCGEN_BENCH_BYTES bytes whose step is SYNCGEN_BENCH_K allreduces of it
// in a row on one stream, then a wait. The step time divided by K is the
// time per collective including everything the runtime does around it
// (events for timing and dependencies, bookkeeping), to set beside
// bench/gpu/nccl_allreduce.c calling ncclAllReduce directly. No backward
// pass, no checks: only the collectives are timed.
//
//	SYNCGEN_BENCH_BYTES=1048576 SYNCGEN_BENCH_K=100 mpirun -np 1 rtbench --backend nccl --check off
package main

import (
	"fmt"
	"os"
	"strconv"

	rt "github.com/syncgen/syncgen/runtime"
)

func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 0, 64); err == nil && v > 0 {
		return v
	}
	return def
}

func main() {
	bytes := envInt("SYNCGEN_BENCH_BYTES", 1<<20)
	k := int(envInt("SYNCGEN_BENCH_K", 100))
	elems := max(bytes/4, 1)
	p := &rt.Plan{
		Name:    fmt.Sprintf("rtbench-%d-x%d", bytes, k),
		Source:  "bench/gpu/rtbench/main.go",
		Hash:    fmt.Sprintf("rtbench-%d-%d", bytes, k),
		Tensors: []rt.Tensor{{Name: "w", DType: rt.F32, Shape: []int64{elems}, Bucket: 0}},
		Streams: []rt.Stream{{Name: "comm", Priority: rt.PriorityHigh}},
		Buckets: []rt.Bucket{{Name: "b", Wire: rt.F32, Elems: elems, Tensors: []int{0}}},
		Run:     rt.Run{Steps: 50, Warmup: 5, CheckEvery: 0},
	}
	srcs := make([]rt.Src, k)
	for i := range srcs {
		srcs[i] = rt.Src(fmt.Sprintf("rtbench:%d:1", i+1))
	}
	p.Step = func(s *rt.Step) {
		for _, at := range srcs {
			s.AllReduce(at, 0, rt.Sum, rt.After{}, 0)
		}
		s.Wait("rtbench:0:1", 0)
	}
	rt.Main(p)
}

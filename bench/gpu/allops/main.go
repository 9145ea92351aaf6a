// Command allops runs every collective with every reduction operator on
// every dtype through runtime.Main, checking each step, so that one run
// (`mpirun -np N allops --backend nccl --check 1`) covers what the NCCL
// backend must get exactly right. It is written as generated code would be:
// a Plan of tensors, buckets and streams, and a step function.
//
// Each (collective, operator, dtype) gets a bucket of its own, so that the
// checker predicts each result from fresh gradients; a few more buckets
// hold several tensors, tensors whose dtype differs from the bucket's wire
// dtype (cast before and after the collective), and a group.
package main

import (
	"fmt"
	"time"

	rt "github.com/syncgen/syncgen/runtime"
)

// coll names the collective of a job.
type coll int

const (
	allReduce coll = iota
	reduce
	reduceScatter
	broadcast
	allGather
)

func (c coll) String() string {
	return [...]string{"allreduce", "reduce", "reducescatter", "broadcast", "allgather"}[c]
}

type job struct {
	coll   coll
	op     rt.RedOp
	bucket int
	at     rt.Src
}

func main() {
	p := &rt.Plan{
		Name:    "allops",
		Source:  "bench/gpu/allops/main.go",
		Hash:    "allops-1",
		Streams: []rt.Stream{{Name: "compute"}, {Name: "comm", Priority: rt.PriorityHigh}},
		Run:     rt.Run{Steps: 4, Warmup: 1, CheckEvery: 1},
	}
	// bucket adds a bucket of wire dtype holding one tensor of each of
	// dtypes, elems elements each.
	bucket := func(name string, wire rt.DType, elems int64, dtypes ...rt.DType) int {
		b := len(p.Buckets)
		bk := rt.Bucket{Name: name, Wire: wire}
		for i, dt := range dtypes {
			t := len(p.Tensors)
			p.Tensors = append(p.Tensors, rt.Tensor{Name: fmt.Sprintf("%s.t%d", name, i), DType: dt, Shape: []int64{elems}, Bucket: b, Offset: bk.Elems})
			bk.Tensors = append(bk.Tensors, t)
			bk.Elems += elems
		}
		p.Buckets = append(p.Buckets, bk)
		return b
	}
	dtypes := []rt.DType{rt.F64, rt.F32, rt.F16, rt.BF16, rt.I64, rt.I32, rt.I8, rt.U8}
	ops := []rt.RedOp{rt.Sum, rt.Avg, rt.Min, rt.Max, rt.Prod}
	var jobs []job
	line := 1
	add := func(c coll, op rt.RedOp, b int) {
		jobs = append(jobs, job{c, op, b, rt.Src(fmt.Sprintf("allops:%d:1", line))})
		line++
	}
	for di, dt := range dtypes {
		// Sizes that are not multiples of common world sizes, so that
		// allgather and reducescatter pad.
		n := int64(1000 + 37*di)
		for _, c := range []coll{allReduce, reduce, reduceScatter} {
			for _, op := range ops {
				add(c, op, bucket(fmt.Sprintf("%s.%s.%s", dt, c, op), dt, n, dt))
			}
		}
		add(broadcast, rt.NoOp, bucket(fmt.Sprintf("%s.broadcast", dt), dt, n, dt))
		add(allGather, rt.NoOp, bucket(fmt.Sprintf("%s.allgather", dt), dt, n, dt))
	}
	// Several tensors in one bucket, as views, and a large bucket.
	add(allReduce, rt.Avg, bucket("views", rt.F32, 4099, rt.F32, rt.F32, rt.F32))
	add(allReduce, rt.Sum, bucket("large", rt.F32, 16<<20, rt.F32))
	// Wire dtypes that differ from the tensors': casts before and after.
	add(allReduce, rt.Avg, bucket("wire.f32>bf16", rt.BF16, 3001, rt.F32, rt.F32))
	add(allReduce, rt.Sum, bucket("wire.f32>f16", rt.F16, 3001, rt.F32))
	add(allReduce, rt.Max, bucket("wire.f64>f32", rt.F32, 3001, rt.F64))
	add(allReduce, rt.Sum, bucket("wire.bf16>f32", rt.F32, 3001, rt.BF16, rt.F16))
	add(reduceScatter, rt.Avg, bucket("wire.f32>bf16.rs", rt.BF16, 3001, rt.F32))
	add(allGather, rt.NoOp, bucket("wire.f32>f16.ag", rt.F16, 3001, rt.F32))
	grouped := []int{
		bucket("group.a", rt.F32, 2048, rt.F32),
		bucket("group.b", rt.BF16, 2048, rt.BF16),
		bucket("group.c", rt.I32, 2048, rt.I32),
	}

	p.Step = func(s *rt.Step) {
		s.Backward("allops:0:1", 0, 5*time.Millisecond)
		// Backward makes the last buckets' gradients ready first, so their
		// allreduces are issued first, each starting as soon as its
		// gradients are ready, on the comm stream, overlapping the backward
		// pass. The other collectives then wait for the whole backward pass.
		for i := len(jobs) - 1; i >= 0; i-- {
			if j := jobs[i]; j.coll == allReduce {
				s.AllReduce(j.at, 1, j.op, rt.AfterReady(), j.bucket)
			}
		}
		for _, j := range jobs {
			switch j.coll {
			case reduce:
				s.Reduce(j.at, 1, j.op, 0, rt.AfterStream(0), j.bucket)
			case reduceScatter:
				s.ReduceScatter(j.at, 1, j.op, rt.AfterStream(0), j.bucket)
			case broadcast:
				s.Broadcast(j.at, 1, 0, rt.AfterStream(0), j.bucket)
			case allGather:
				s.AllGather(j.at, 1, rt.AfterStream(0), j.bucket)
			}
		}
		s.Group("allops:900:1", func() {
			s.AllReduce("allops:901:1", 1, rt.Sum, rt.AfterStream(0), grouped[0])
			s.AllReduce("allops:902:1", 1, rt.Avg, rt.AfterStream(0), grouped[1])
			s.AllReduce("allops:903:1", 0, rt.Max, rt.After{}, grouped[2])
		})
		s.Wait("allops:999:1", 1)
	}
	rt.Main(p)
}

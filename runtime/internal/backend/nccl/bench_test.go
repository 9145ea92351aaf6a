package nccl

// The GPU benchmark (scripts/gpu-check.sh runs it on the GPU machine next to
// bench/gpu/nccl_allreduce.c): per-collective time of an in-place allreduce
// through the backend, 4 B to 1 GiB, in the C baseline's format; and the
// bandwidth of the fill and the casts against the device's copy bandwidth
// (cudaMemcpy device to device and a copy kernel), measured in the same run.
// It is a test that runs only with SYNCGEN_GPU_BENCH=1, not a timed test.

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/cuda"
	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	ncclapi "github.com/syncgen/syncgen/runtime/nccl"
)

// benchIters is the C baseline's rule: enough calls that small sizes
// measure the per-call overhead, few enough that 1 GiB stays quick.
func benchIters(bytes int64) int {
	n := (int64(1) << 32) / max(bytes, 1)
	return int(min(max(n, 20), 2000))
}

func TestGPUBench(t *testing.T) {
	if os.Getenv("SYNCGEN_GPU_BENCH") == "" {
		t.Skip("set SYNCGEN_GPU_BENCH=1 to run the GPU benchmark")
	}
	b, compute, comm := newTestGPU(t)
	maxBytes := int64(1) << 30
	if v, err := strconv.ParseInt(os.Getenv("SYNCGEN_GPU_BENCH_MAX"), 0, 64); err == nil {
		maxBytes = v
	}
	buf := mustAlloc(t, b, elem.F32, maxBytes/4)
	e0, _ := b.NewEvent()
	e1, _ := b.NewEvent()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	p0 := elem.FillParams{Kind: elem.FillUniform, SeedA: 1, Lo: 0, Hi: 9}
	fmt.Printf("# syncgen runtime allreduce: NCCL %d, %d GPU(s), dtype f32, in place\n", ncclapi.Version(), b.env.Size)
	fmt.Printf("# %-12s %8s %12s %12s %10s %10s\n", "bytes", "iters", "host_us", "dev_us", "algbw", "busbw")
	for bytes := int64(4); bytes <= maxBytes; bytes *= 2 {
		op := []backend.CollOp{{Stream: comm, Coll: plan.CollAllReduce, Op: plan.Sum, Buf: backend.Span{Buf: buf, N: bytes / 4, DType: elem.F32}, Name: "bench"}}
		for w := 0; w < 5; w++ {
			must(b.Collectives(op))
		}
		must(comm.Synchronize())
		n := benchIters(bytes)
		t0 := time.Now()
		must(comm.Record(e0))
		for i := 0; i < n; i++ {
			must(b.Collectives(op))
		}
		must(comm.Record(e1))
		must(comm.Synchronize())
		host := time.Since(t0).Seconds() / float64(n)
		d, err := b.Elapsed(e0, e1)
		must(err)
		dev := d.Seconds() / float64(n)
		algbw := float64(bytes) / dev / 1e9
		busbw := algbw * 2 * float64(b.env.Size-1) / float64(b.env.Size)
		fmt.Printf("%-14d %8d %12.2f %12.2f %10.2f %10.2f\n", bytes, n, host*1e6, dev*1e6, algbw, busbw)
	}

	// What each backend call costs the host, which is what a generated
	// program pays around every collective (events for timing and
	// dependencies) on top of NCCL's own call.
	const calls = 20000
	tiny := []backend.CollOp{{Stream: comm, Coll: plan.CollAllReduce, Op: plan.Sum, Buf: backend.Span{Buf: buf, N: 1, DType: elem.F32}, Name: "bench"}}
	one := backend.Span{Buf: buf, N: 1, DType: elem.F32}
	fmt.Printf("# host time per call, us (%d calls each, then one synchronisation)\n", calls)
	cost := func(name string, st *gpuStream, f func() error) {
		for i := 0; i < 100; i++ {
			must(f())
		}
		must(st.Synchronize())
		t0 := time.Now()
		for i := 0; i < calls; i++ {
			must(f())
		}
		host := time.Since(t0)
		must(st.Synchronize())
		fmt.Printf("%-52s %8.3f\n", name, host.Seconds()/calls*1e6)
	}
	cost("ncclAllReduce 4 B through package nccl", comm, func() error {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		return comm.comm.AllReduce(mustAddr(t, tiny[0].Buf), mustAddr(t, tiny[0].Buf), 1, ncclapi.Float32, ncclapi.Sum, comm.s)
	})
	cost("Collectives: one allreduce of 4 B", comm, func() error { return b.Collectives(tiny) })
	cost("Record (cudaEventRecord)", comm, func() error { return comm.Record(e0) })
	cost("WaitEvent (cudaStreamWaitEvent)", comm, func() error { return comm.WaitEvent(e0) })
	cost("Event.Query (cudaEventQuery)", comm, func() (err error) { _, err = e0.Query(); return })
	cost("Busy(0) (a spin kernel launch)", compute, func() error { return compute.Busy(0) })
	cost("Fill of 1 element (fill kernel launch)", compute, func() error { return compute.Fill(one, p0) })
	cost("as the runtime issues one: Record, Collectives, Record", comm, func() error {
		must(comm.Record(e0))
		must(b.Collectives(tiny))
		return comm.Record(e1)
	})

	// Bandwidth of the element-wise kernels on 1 GiB of float32 (or the
	// 16-bit half of it), counting bytes read plus bytes written.
	const elems = 1 << 28
	f32 := backend.Span{Buf: buf, N: min(elems, maxBytes/4), DType: elem.F32}
	half := mustAlloc(t, b, elem.BF16, f32.N)
	h16 := backend.Span{Buf: half, N: f32.N, DType: elem.BF16}
	f16 := backend.Span{Buf: half, N: f32.N, DType: elem.F16}
	dst := mustAlloc(t, b, elem.F32, f32.N)
	d32 := backend.Span{Buf: dst, N: f32.N, DType: elem.F32}
	p := elem.FillParams{Kind: elem.FillAvg, SeedA: 1, SeedB: 2, Lo: -100, Hi: 100, Dev: 7, Sign: 1}
	timeIt := func(name string, bytesMoved int64, work func() error) float64 {
		for w := 0; w < 2; w++ {
			must(work())
		}
		const reps = 10
		must(compute.Record(e0))
		for i := 0; i < reps; i++ {
			must(work())
		}
		must(compute.Record(e1))
		must(compute.Synchronize())
		d, err := b.Elapsed(e0, e1)
		must(err)
		gbs := float64(bytesMoved) * reps / d.Seconds() / 1e9
		fmt.Printf("%-28s %10.1f GB/s  %8.1f us\n", name, gbs, d.Seconds()/reps*1e6)
		return gbs
	}
	fmt.Printf("# element-wise kernels on %d elements; GB/s counts bytes read + written\n", f32.N)
	srcP, _ := addr(f32)
	dstP, _ := addr(d32)
	memcpy := timeIt("cudaMemcpy D2D f32", 8*f32.N, func() error {
		must(b.enter())
		defer goruntime.UnlockOSThread()
		return cuda.MemcpyAsync(uintptr(dstP), uintptr(srcP), 4*f32.N, cuda.DeviceToDevice, compute.s)
	})
	timeIt("copy kernel f32", 8*f32.N, func() error {
		must(b.enter())
		defer goruntime.UnlockOSThread()
		return b.kernels.Copy(compute.s, dstP, srcP, 4*f32.N)
	})
	rows := []struct {
		name  string
		bytes int64
		work  func() error
	}{
		{"fill f32 (avg pattern)", 4 * f32.N, func() error { return compute.Fill(f32, p) }},
		{"fill bf16 (avg pattern)", 2 * f32.N, func() error { return compute.Fill(h16, p) }},
		{"cast f32 -> bf16", 6 * f32.N, func() error { return compute.Cast(h16, f32) }},
		{"cast bf16 -> f32", 6 * f32.N, func() error { return compute.Cast(d32, h16) }},
		{"cast f32 -> f16", 6 * f32.N, func() error { return compute.Cast(f16, f32) }},
		{"cast f16 -> f32", 6 * f32.N, func() error { return compute.Cast(d32, f16) }},
		{"cast f16 -> bf16 (generic)", 4 * f32.N, func() error { return compute.Cast(backend.Span{Buf: dst, N: f32.N, DType: elem.BF16}, f16) }},
	}
	// The training step's kernels: unscale with its overflow check, and
	// the optimizer updates (gradients in f32, or bf16 with f32 master
	// parameters). The flag stays clear: the values are finite.
	m := backend.Span{Buf: mustAlloc(t, b, elem.F32, f32.N), N: f32.N, DType: elem.F32}
	v := backend.Span{Buf: mustAlloc(t, b, elem.F32, f32.N), N: f32.N, DType: elem.F32}
	flag := backend.Span{Buf: mustAlloc(t, b, elem.I32, 1), N: 1, DType: elem.I32}
	must(b.CopyFromHost(flag, make([]byte, 4)))
	must(compute.Fill(f32, p))
	must(compute.Fill(h16, p))
	must(compute.Fill(d32, p))
	must(compute.Set(m, 0))
	must(compute.Set(v, 0))
	sgd := optim.Spec{Kind: optim.SGD, LR: 1e-3, Momentum: 0.9}.Hyper(1, elem.F32)
	adamw := optim.Spec{Kind: optim.AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}.Hyper(1, elem.F32)
	rows = append(rows, []struct {
		name  string
		bytes int64
		work  func() error
	}{
		{"unscale f32 (x1, checked)", 8 * f32.N, func() error { return compute.Scale(f32, 1, flag) }},
		{"update sgd momentum f32", 20 * f32.N, func() error {
			return compute.Update(backend.UpdateOp{Grad: f32, Param: d32, State: [2]backend.Span{m}, Flag: flag, Hyper: sgd})
		}},
		{"update adamw f32", 28 * f32.N, func() error {
			return compute.Update(backend.UpdateOp{Grad: f32, Param: d32, State: [2]backend.Span{m, v}, Flag: flag, Hyper: adamw})
		}},
		{"update adamw bf16 -> f32 master", 26 * f32.N, func() error {
			return compute.Update(backend.UpdateOp{Grad: h16, Param: d32, State: [2]backend.Span{m, v}, Flag: flag, Hyper: adamw})
		}},
	}...)
	for _, r := range rows {
		gbs := timeIt(r.name, r.bytes, r.work)
		fmt.Printf("%-28s %10.0f%% of cudaMemcpy\n", "", 100*gbs/memcpy)
	}
}

func mustAddr(t testing.TB, s backend.Span) cuda.Ptr {
	p, err := addr(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

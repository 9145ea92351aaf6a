// Command gompi is the third contender of bench/allreduce.sh: a plain Go
// program that calls MPI_Allreduce in place through package runtime/mpi,
// exactly as bench/mpi_allreduce.c does in C (a barrier, then one timed
// allreduce, per iteration), with none of the runtime around it. Comparing
// the three separates what calling MPI from a Go process costs from what
// the runtime adds.
//
//	mpirun -np 2 gompi -b 65536 -n 500 [-w 2]
//
// With -batch it makes each iteration one call into C through the
// runtime's batch (mpi.Batch: the step's two barriers, a clock read, the
// allreduce, a clock read), as the runtime's CPU backend does, and nothing
// else: the floor of what the runtime can reach from Go.
//
// It prints the same columns as mpi_allreduce: bytes, mean time (us), algbw,
// busbw (GB/s) and median time (us); times are the maximum over ranks.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/mpi"
)

func main() {
	bytes := flag.Int64("b", 65536, "buffer size in bytes")
	iters := flag.Int("n", 500, "timed iterations")
	warm := flag.Int("w", 2, "warm-up iterations")
	batched := flag.Bool("batch", false, "one call into C per iteration, through the runtime's batch")
	flag.Parse()
	runtime.LockOSThread()                                // MPI_Init's thread makes every call
	if _, err := mpi.Init(mpi.ThreadSingle); err != nil { // as the C program's MPI_Init
		fail(err)
	}
	w := mpi.World()
	rank, _ := w.Rank()
	size, _ := w.Size()
	c, err := w.Dup()
	if err != nil {
		fail(err)
	}
	p, err := mpi.Malloc(*bytes)
	if err != nil {
		fail(err)
	}
	var ts []float64
	if *batched {
		ts = runBatched(c, p, *bytes, *warm, *iters, rank, size)
	} else {
		ts = runCalls(c, p, *bytes, *warm, *iters)
	}
	var sum float64
	for _, t := range ts {
		sum += t
	}
	sort.Float64s(ts)
	stats := []float64{sum / float64(len(ts)), ts[len(ts)/2]}
	// The maximum over ranks, as the other contenders report.
	rec := make([]byte, 16)
	*(*[2]float64)(unsafe.Pointer(&rec[0])) = [2]float64{stats[0], stats[1]}
	all, err := w.AllgatherBytes(rec)
	if err != nil {
		fail(err)
	}
	mean, med := 0.0, 0.0
	for _, r := range all {
		v := *(*[2]float64)(unsafe.Pointer(&r[0]))
		mean, med = max(mean, v[0]), max(med, v[1])
	}
	if rank == 0 {
		alg := float64(*bytes) / mean / 1e9
		bus := alg * 2 * float64(size-1) / float64(size)
		fmt.Printf("# gompi ranks=%d\n  %12d %12.1f %10.3f %10.3f %12.1f\n", size, *bytes, mean*1e6, alg, bus, med*1e6)
	}
	mpi.Free(p)
	_ = c.Free()
	_ = mpi.Finalize()
}

// runCalls times the iterations without -batch: a barrier, then one
// allreduce timed in Go, each its own call into C.
func runCalls(c mpi.Comm, p unsafe.Pointer, bytes int64, warm, iters int) []float64 {
	ts := make([]float64, 0, iters)
	for it := -warm; it < iters; it++ {
		if err := c.Barrier(); err != nil {
			fail(err)
		}
		t0 := time.Now()
		if err := c.Allreduce(p, int(bytes/4), 2 /* f32 */, 1 /* sum */); err != nil {
			fail(err)
		}
		if it >= 0 {
			ts = append(ts, time.Since(t0).Seconds())
		}
	}
	return ts
}

// runBatched times the iterations of -batch: each is one mpi.Batch run,
// timed by the batch's own clock reads around the allreduce.
func runBatched(c mpi.Comm, p unsafe.Pointer, bytes int64, warm, iters, rank, size int) []float64 {
	var b mpi.Batch
	defer b.Free()
	b.Barrier(c)
	b.Barrier(c)
	b.Stamp()
	b.Allreduce(mpi.Coll{Comm: c, Buf: p, Count: bytes / 4, Chunk: bytes / 4, DType: 2 /* f32 */, Op: 1 /* sum */, Rank: rank, Size: size})
	b.Stamp()
	ts := make([]float64, 0, iters)
	for it := -warm; it < iters; it++ {
		if _, err := b.Run(); err != nil {
			fail(err)
		}
		if it >= 0 {
			ts = append(ts, float64(b.Time(4)-b.Time(2))/1e9)
		}
	}
	return ts
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gompi:", err)
	mpi.Abort(1)
	os.Exit(1)
}

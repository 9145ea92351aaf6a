package mpi

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// BenchmarkAvgDivide measures the C division of an average (avg_divide) on
// buffers of the sizes bench/avg.sh uses, at a power-of-two world size (a
// multiply by the reciprocal) and at 3 (a division); the throughput counts
// the buffer's bytes once (b.SetBytes).
func BenchmarkAvgDivide(b *testing.B) {
	for _, c := range []struct {
		name string
		dt   elem.DType
		esz  int64
	}{{"f32", elem.F32, 4}, {"f16", elem.F16, 2}, {"bf16", elem.BF16, 2}} {
		for _, bytes := range []int64{1 << 20, 25 << 20} {
			for _, size := range []int{2, 3} {
				b.Run(fmt.Sprintf("%s/%dMiB/size%d", c.name, bytes>>20, size), func(b *testing.B) {
					p, err := Malloc(bytes)
					if err != nil {
						b.Fatal(err)
					}
					defer Free(p)
					// Normal numbers in every dtype, put back before each
					// division: divided over and over they would become
					// subnormals, which some processors divide far slower.
					buf := unsafe.Slice((*byte)(p), bytes)
					b.SetBytes(bytes)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						for k := range buf {
							buf[k] = 0x3c
						}
						b.StartTimer()
						AvgDivide(p, c.dt, bytes/c.esz, size)
					}
				})
			}
		}
	}
}

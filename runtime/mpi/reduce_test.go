package mpi

import (
	"testing"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// BenchmarkReduceHalf measures the user-defined 16-bit reduction operators
// (the vector ones where the CPU has their instructions) on 2Mi elements,
// per element and in bytes a second of one input.
func BenchmarkReduceHalf(b *testing.B) {
	const n = 2 << 20
	for _, c := range []struct {
		name string
		dt   elem.DType
		op   Op
	}{{"bf16/sum", elem.BF16, 1}, {"f16/sum", elem.F16, 1}, {"bf16/max", elem.BF16, 4}, {"f16/prod", elem.F16, 5}} {
		b.Run(c.name, func(b *testing.B) {
			in, err := Malloc(2 * n)
			if err != nil {
				b.Fatal(err)
			}
			defer Free(in)
			io, err := Malloc(2 * n)
			if err != nil {
				b.Fatal(err)
			}
			defer Free(io)
			a, x := unsafe.Slice((*uint16)(in), n), unsafe.Slice((*uint16)(io), n)
			for i := range a {
				// Small integers, as the fill pattern makes: 1..8 (bf16 0x3f80.., f16 0x3c00..).
				v := float32(i%8 + 1)
				if c.dt == 4 {
					a[i] = F32ToBF16(v)
				} else {
					a[i] = F32ToF16(v)
				}
				x[i] = 0
			}
			b.SetBytes(2 * n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := ReduceHalf(c.dt, c.op, in, io, n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*n), "ns/elem")
		})
	}
}

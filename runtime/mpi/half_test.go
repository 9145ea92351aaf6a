package mpi

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// The reduction codes of Op, named as the runtime names them.
const (
	opSum Op = iota + 1
	opAvg
	opMin
	opMax
	opProd
)

// The C conversions of the MPI reduction operators round exactly as the
// Go ones, so that the CPU backend's sums and the checker agree.
func TestHalfMatchesC(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	check := func(f float32) {
		if math.IsNaN(float64(f)) {
			return
		}
		if g, c := elem.F16Bits(float64(f)), F32ToF16(f); g != c {
			t.Fatalf("f16(%v): Go %#04x, C %#04x", f, g, c)
		}
		if g, c := elem.BF16Bits(float64(f)), F32ToBF16(f); g != c {
			t.Fatalf("bf16(%v): Go %#04x, C %#04x", f, g, c)
		}
	}
	for i := 0; i < 200000; i++ {
		check(math.Float32frombits(rng.Uint32()))
		check(float32(rng.NormFloat64() * 1000))
	}
	for b := 0; b < 1<<16; b++ {
		h := uint16(b)
		if v := elem.F16Value(h); !math.IsNaN(v) {
			if c := F16ToF32(h); float64(c) != v {
				t.Fatalf("f16 %#04x: Go %v, C %v", h, v, c)
			}
			// Midpoints between neighbours exercise ties.
			check(float32(v) + float32(math.Abs(elem.F16Value(h+1)-v)/2))
		}
		if v := elem.BF16Value(h); !math.IsNaN(v) && float64(BF16ToF32(h)) != v {
			t.Fatalf("bf16 %#04x: Go %v, C %v", h, v, BF16ToF32(h))
		}
	}
}

// The vectorised C reduction operators compute in float32 and round once,
// exactly as Go does it, for every operator and a spread of operands
// (every 16-bit value against a few partners, then random pairs).
func TestReduceHalfMatchesGo(t *testing.T) {
	const n = 1 << 16
	in, err := Malloc(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(in)
	io, err := Malloc(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(io)
	a, b := unsafe.Slice((*uint16)(in), n), unsafe.Slice((*uint16)(io), n)
	rng := rand.New(rand.NewSource(3))
	for _, dt := range []elem.DType{elem.F16, elem.BF16} {
		load, store := elem.F16ToF32, elem.F32ToF16
		if dt == elem.BF16 {
			load, store = elem.BF16ToF32, elem.F32ToBF16
		}
		for op := opSum; op <= opProd; op++ {
			for round := 0; round < 6; round++ {
				var partner uint16
				switch round {
				case 0, 1, 2:
					partner = store([]float32{1, -3.5, 1e-6}[round]) // normal, negative, tiny
				}
				for i := range a {
					a[i] = uint16(i)
					b[i] = partner
					if round >= 3 {
						a[i], b[i] = uint16(rng.Uint32()), uint16(rng.Uint32())
					}
				}
				want := make([]uint16, n)
				for i := range want {
					x, y := load(a[i]), load(b[i])
					var r float32
					switch op {
					case opSum, opAvg:
						r = x + y
					case opProd:
						r = x * y
					case opMin:
						r = y
						if x < y || x != x {
							r = x
						}
					case opMax:
						r = y
						if x > y || x != x {
							r = x
						}
					}
					want[i] = store(r)
				}
				x, y := append([]uint16(nil), a...), append([]uint16(nil), b...)
				if err := ReduceHalf(dt, op, in, io, n); err != nil {
					t.Fatal(err)
				}
				for i, got := range b {
					nan := math.IsNaN(float64(load(got))) && math.IsNaN(float64(load(want[i])))
					if got != want[i] && !nan {
						t.Fatalf("%s op %d of %#04x and %#04x: C gives %#04x, Go %#04x", dt, op, x[i], y[i], got, want[i])
					}
				}
			}
		}
	}
	if err := ReduceHalf(elem.F32, opSum, in, io, 1); err == nil {
		t.Errorf("ReduceHalf accepted f32")
	}
}

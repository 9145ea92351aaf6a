package runtime

import (
	"math"
	"math/rand"
	"testing"

	"github.com/syncgen/syncgen/runtime/mpi"
)

func TestHalfKnownValues(t *testing.T) {
	cases := []struct {
		x    float64
		f16  uint16
		bf16 uint16
	}{
		{0, 0x0000, 0x0000},
		{math.Copysign(0, -1), 0x8000, 0x8000},
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{65504, 0x7bff, 0x4780},
		{65520, 0x7c00, 0x4780},           // f16 overflows to infinity at 65520
		{2048 + 1, 0x6800, 0x4500},        // 2049 ties to even 2048 in f16; bf16 2048
		{2048 + 3, 0x6802, 0x4500},        // 2051 ties to even 2052
		{1.0 / (1 << 24), 0x0001, 0x3380}, // the smallest f16 subnormal
		{1.0 / (1 << 25), 0x0000, 0x3300}, // half of it ties to zero
		{math.Inf(1), 0x7c00, 0x7f80},
		{257, 0x5c04, 0x4380}, // bf16: 257 ties to even 256
		{259, 0x5c0c, 0x4382}, // bf16: 259 ties to even 260
	}
	for _, c := range cases {
		if got := F16Bits(c.x); got != c.f16 {
			t.Errorf("F16Bits(%v) = %#04x, want %#04x", c.x, got, c.f16)
		}
		if got := BF16Bits(c.x); got != c.bf16 {
			t.Errorf("BF16Bits(%v) = %#04x, want %#04x", c.x, got, c.bf16)
		}
	}
	if !math.IsNaN(F16Value(F16Bits(math.NaN()))) || !math.IsNaN(BF16Value(BF16Bits(math.NaN()))) {
		t.Errorf("NaN does not survive a round trip")
	}
}

// Every 16-bit pattern decodes and encodes back to itself.
func TestHalfRoundTrip(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := uint16(b)
		if v := F16Value(h); !math.IsNaN(v) && F16Bits(v) != h {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, v, F16Bits(v))
		}
		if v := BF16Value(h); !math.IsNaN(v) && BF16Bits(v) != h {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, v, BF16Bits(v))
		}
	}
}

// The C conversions of the MPI reduction operators round exactly as the
// Go ones, so that the CPU backend's sums and the checker agree.
func TestHalfMatchesC(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	check := func(f float32) {
		if math.IsNaN(float64(f)) {
			return
		}
		if g, c := F16Bits(float64(f)), mpi.F32ToF16(f); g != c {
			t.Fatalf("f16(%v): Go %#04x, C %#04x", f, g, c)
		}
		if g, c := BF16Bits(float64(f)), mpi.F32ToBF16(f); g != c {
			t.Fatalf("bf16(%v): Go %#04x, C %#04x", f, g, c)
		}
	}
	for i := 0; i < 200000; i++ {
		check(math.Float32frombits(rng.Uint32()))
		check(float32(rng.NormFloat64() * 1000))
	}
	for b := 0; b < 1<<16; b++ {
		h := uint16(b)
		if v := F16Value(h); !math.IsNaN(v) {
			if c := mpi.F16ToF32(h); float64(c) != v {
				t.Fatalf("f16 %#04x: Go %v, C %v", h, v, c)
			}
			// Midpoints between neighbours exercise ties.
			check(float32(v) + float32(math.Abs(F16Value(h+1)-v)/2))
		}
		if v := BF16Value(h); !math.IsNaN(v) && float64(mpi.BF16ToF32(h)) != v {
			t.Fatalf("bf16 %#04x: Go %v, C %v", h, v, mpi.BF16ToF32(h))
		}
	}
}

func TestRoundToIntegers(t *testing.T) {
	cases := []struct {
		x    float64
		d    DType
		want float64
	}{
		{2.5, I32, 2}, {3.5, I32, 4}, {-2.5, I8, -2}, {300, I8, 127}, {-300, I8, -128},
		{-1, U8, 0}, {256, U8, 255}, {math.NaN(), I64, 0}, {1e300, I32, math.MaxInt32},
	}
	for _, c := range cases {
		if got := RoundTo(c.x, c.d); got != c.want {
			t.Errorf("RoundTo(%v, %s) = %v, want %v", c.x, c.d, got, c.want)
		}
	}
}

func TestCastBytes(t *testing.T) {
	src := []float64{0, 1, -2, 3.5, 1000, 2049, -70000}
	for _, sdt := range []DType{F64, F32, F16, BF16, I64, I32, I8, U8} {
		for _, ddt := range []DType{F64, F32, F16, BF16, I64, I32, I8, U8} {
			sb := make([]byte, int64(len(src))*sdt.Size())
			storeAll(sb, sdt, src)
			db := make([]byte, int64(len(src))*ddt.Size())
			castBytes(db, ddt, sb, sdt)
			got := make([]float64, len(src))
			loadAll(got, db, ddt)
			for i, v := range src {
				want := RoundTo(RoundTo(v, sdt), ddt)
				if got[i] != want {
					t.Errorf("cast %v %s -> %s: got %v, want %v", v, sdt, ddt, got[i], want)
				}
			}
		}
	}
}

func TestAvgDivideMatchesAvgOf(t *testing.T) {
	for _, dt := range []DType{F64, F32, F16, BF16, I64, I32, I8, U8} {
		for size := 1; size <= 7; size++ {
			sums := []float64{0, 1, 2, 3, 7, 100, 121}
			if !dt.Unsigned() {
				sums = append(sums, -1, -7, -100)
			}
			b := make([]byte, int64(len(sums))*dt.Size())
			storeAll(b, dt, sums)
			avgDivide(b, dt, size)
			got := make([]float64, len(sums))
			loadAll(got, b, dt)
			for i, s := range sums {
				if want := AvgOf(RoundTo(s, dt), dt, size); got[i] != want {
					t.Errorf("%s avg of %v over %d: got %v, AvgOf says %v", dt, s, size, got[i], want)
				}
			}
		}
	}
}

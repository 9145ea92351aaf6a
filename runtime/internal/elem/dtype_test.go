package elem

import (
	"math"
	"testing"
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
			StoreAll(sb, sdt, src)
			db := make([]byte, int64(len(src))*ddt.Size())
			CastBytes(db, ddt, sb, sdt)
			got := make([]float64, len(src))
			LoadAll(got, db, ddt)
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
			StoreAll(b, dt, sums)
			AvgDivide(b, dt, size)
			got := make([]float64, len(sums))
			LoadAll(got, b, dt)
			for i, s := range sums {
				if want := AvgOf(RoundTo(s, dt), dt, size); got[i] != want {
					t.Errorf("%s avg of %v over %d: got %v, AvgOf says %v", dt, s, size, got[i], want)
				}
			}
		}
	}
}

// The hot-loop conversions give exactly what the general ones give.
func TestHalfFastConversions(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := uint16(b)
		if g, w := float64(F16ToF32(h)), F16Value(h); g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Fatalf("F16ToF32(%#04x) = %v, F16Value says %v", h, g, w)
		}
		if g, w := float64(BF16ToF32(h)), BF16Value(h); g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Fatalf("BF16ToF32(%#04x) = %v, BF16Value says %v", h, g, w)
		}
	}
	check := func(f float32) {
		if g, w := F32ToF16(f), F16Bits(float64(f)); g != w {
			t.Fatalf("F32ToF16(%v = %#08x) = %#04x, F16Bits says %#04x", f, math.Float32bits(f), g, w)
		}
		if g, w := F32ToBF16(f), BF16Bits(float64(f)); g != w {
			t.Fatalf("F32ToBF16(%v = %#08x) = %#04x, BF16Bits says %#04x", f, math.Float32bits(f), g, w)
		}
	}
	// A spread of every exponent and sign, then every half value and its
	// neighbourhood, where the rounding decisions are: ties, and one float32
	// ulp either side of them.
	for x := uint64(0); x < 1<<32; x += 4093 {
		check(math.Float32frombits(uint32(x)))
	}
	for b := 0; b < 1<<16; b++ {
		for _, v := range []float64{F16Value(uint16(b)), BF16Value(uint16(b))} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			f := float32(v)
			for _, g := range []float32{f, math.Nextafter32(f, float32(math.Inf(1))), math.Nextafter32(f, float32(math.Inf(-1)))} {
				check(g)
			}
		}
		for _, tie := range []float64{F16Value(uint16(b)) + math.Abs(F16Value(uint16(b)+1)-F16Value(uint16(b)))/2,
			BF16Value(uint16(b)) + math.Abs(BF16Value(uint16(b)+1)-BF16Value(uint16(b)))/2} {
			if f := float32(tie); !math.IsNaN(tie) && !math.IsInf(tie, 0) {
				check(f)
				check(math.Nextafter32(f, 0))
				check(math.Nextafter32(f, float32(math.Inf(1))))
			}
		}
	}
}

package elem

import (
	"math/rand"
	"testing"
)

// Pinned values of the pattern: a device kernel that reproduces the formula
// must give exactly these.
func TestPatternPinned(t *testing.T) {
	if got := Mix(0); got != 0 {
		t.Errorf("Mix(0) = %#x", got)
	}
	mix := []uint32{Mix(1), Mix(2), Mix(0xdeadbeef)}
	seeds := []uint32{Seed(), Seed(1, 0, 0, 0), Seed(2, 5, 7), Seed(3, 1, 5, 7)}
	t.Logf("Mix(1,2,0xdeadbeef) = %#x, seeds %#x", mix, seeds)
	// Checked against an independent Python implementation of the formula.
	want := []uint32{0x688990c0, 0xd1132181, 0xe628c683}
	for i := range want {
		if mix[i] != want[i] {
			t.Errorf("Mix #%d = %#x, want %#x", i, mix[i], want[i])
		}
	}
	p := FillParams{Kind: FillUniform, SeedA: Seed(1, 2, 3, 4), Lo: -100, Hi: 100}
	var vals []int32
	for i := int64(0); i < 6; i++ {
		vals = append(vals, FillValue(&p, i))
	}
	vals = append(vals, FillValue(&p, 1<<33+5))
	t.Logf("uniform values: %v", vals)
	wantVals := []int32{-38, 35, 69, -71, 98, -75, -70}
	for i := range wantVals {
		if vals[i] != wantVals[i] {
			t.Fatalf("FillValue = %v, want %v (a change here breaks the GPU kernel's port)", vals, wantVals)
		}
	}
}

// The avg pattern sums to exactly size times its base over any world size.
func TestPatternAvgExact(t *testing.T) {
	shape := PatternShape{Kind: FillAvg, Lo: -7, Hi: 7, Dev: 7}
	for size := 1; size <= 9; size++ {
		for e := int64(0); e < 500; e++ {
			var sum int64
			var base int32
			for r := 0; r < size; r++ {
				p := shape.Params(r, size, 3, 11)
				sum += int64(FillValue(&p, e))
				base = p.Lo + int32(ElemHash(p.SeedA, e)%uint32(p.Hi-p.Lo+1))
			}
			if sum != int64(size)*int64(base) {
				t.Fatalf("size %d element %d: sum %d, want %d*%d", size, e, sum, size, base)
			}
		}
	}
}

func TestPatternRanges(t *testing.T) {
	for _, s := range []PatternShape{
		{Kind: FillUniform, Lo: 0, Hi: 63},
		{Kind: FillUniform, Lo: -5, Hi: 5},
		{Kind: FillAvg, Lo: 3, Hi: 6, Dev: 3},
		{Kind: FillProd, Two: true, Neg: true},
		{Kind: FillProd},
	} {
		seen := map[int32]bool{}
		for r := 0; r < 4; r++ {
			p := s.Params(r, 4, 9, 2)
			for e := int64(0); e < 2000; e++ {
				v := FillValue(&p, e)
				seen[v] = true
				switch s.Kind {
				case FillUniform:
					if v < s.Lo || v > s.Hi {
						t.Fatalf("%+v: %d out of range", s, v)
					}
				case FillAvg:
					if v < s.Lo-s.Dev || v > s.Hi+s.Dev {
						t.Fatalf("%+v: %d out of range", s, v)
					}
				case FillProd:
					if v == 0 || v > 2 || v < -2 || (!s.Two && (v == 2 || v == -2)) || (!s.Neg && v < 0) {
						t.Fatalf("%+v: %d not allowed", s, v)
					}
				}
			}
		}
		if len(seen) < 2 && (s.Kind != FillProd || s.Two || s.Neg) {
			t.Errorf("%+v: only %d distinct values", s, len(seen))
		}
	}
}

// The division-free remainder is exact for every divisor, including 1, the
// largest, and 0 (which stands for 2^32).
func TestModulus(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	ds := []uint32{0, 1, 2, 3, 7, 201, 2001, 1 << 16, 1<<31 + 1, 1<<32 - 1}
	for i := 0; i < 200; i++ {
		ds = append(ds, rng.Uint32()>>(rng.Intn(32)))
	}
	for _, d := range ds {
		q := newModulus(d)
		hs := []uint32{0, 1, d - 1, d, d + 1, 1<<32 - 1, 1<<32 - 2}
		for i := 0; i < 2000; i++ {
			hs = append(hs, rng.Uint32())
		}
		for _, h := range hs {
			if got, want := q.of(h), modOf(h, d); got != want {
				t.Fatalf("%d %% %d = %d, want %d", h, d, got, want)
			}
		}
	}
}

// FillBytes, split over goroutines and converted straight to each dtype,
// writes exactly FillValue's values rounded to the dtype, everywhere in
// the buffer, for every pattern kind.
func TestFillBytesMatchesFillValue(t *testing.T) {
	shapes := []PatternShape{
		{Kind: FillUniform, Lo: -1000, Hi: 1000},
		{Kind: FillUniform, Lo: 0, Hi: 255},
		{Kind: FillAvg, Lo: -64, Hi: 64, Dev: 64},
		{Kind: FillProd, Two: true, Neg: true},
		{Kind: FillUniform, Lo: -1 << 30, Hi: 1 << 30}, // beyond every 16-bit range: rounding and saturation
	}
	n := int64(3*parallelGrain + 77) // several goroutines and a ragged end
	for _, dt := range []DType{F64, F32, F16, BF16, I64, I32, I8, U8} {
		for _, shape := range shapes {
			p := shape.Params(3, 5, 7, 11)
			b := make([]byte, n*dt.Size())
			FillBytes(b, dt, &p)
			got := make([]float64, n)
			LoadAll(got, b, dt)
			for i := int64(0); i < n; i++ {
				if want := RoundTo(float64(FillValue(&p, i)), dt); got[i] != want {
					t.Fatalf("%s %+v element %d: fill wrote %v, want %v", dt, shape, i, got[i], want)
				}
			}
		}
	}
	// Element indices past 2^32 (the hash mixes in their high word).
	for _, shape := range shapes[:4] {
		p := shape.Params(1, 4, 2, 3)
		out := make([]int32, 300)
		i0 := int64(1)<<32 - 150
		FillInts(out, &p, i0)
		for j, v := range out {
			if want := FillValue(&p, i0+int64(j)); v != want {
				t.Fatalf("%+v element %d: %d, want %d", shape, i0+int64(j), v, want)
			}
		}
	}
}

// TestAddBytes adds a pattern to a filled buffer in every dtype: each
// element becomes the sum of both patterns' values, rounded to the dtype as
// StoreAll rounds (integers saturating), across the chunk boundaries.
func TestAddBytes(t *testing.T) {
	const n = castChunk*2 + 5
	base := FillParams{Kind: FillUniform, SeedA: Seed(1, 0, 3, 1), Lo: -100, Hi: 100}
	add := FillParams{Kind: FillAvg, SeedA: Seed(2, 3, 1), SeedB: Seed(3, 0, 3, 1), Lo: -50, Hi: 90, Dev: 20, Sign: -1, Add: true}
	for _, dt := range []DType{F64, F32, F16, BF16, I64, I32, I8, U8} {
		b := make([]byte, n*dt.Size())
		FillBytes(b, dt, &base)
		AddBytes(b, dt, &add)
		got := make([]float64, n)
		LoadAll(got, b, dt)
		for i := range int64(n) {
			want := RoundTo(RoundTo(float64(FillValue(&base, i)), dt)+float64(FillValue(&add, i)), dt)
			if got[i] != want {
				t.Fatalf("%s element %d: %v, want %v", dt, i, got[i], want)
			}
		}
	}
}

func TestMicroStep(t *testing.T) {
	if MicroStep(7, 0) != 7 {
		t.Errorf("MicroStep(7, 0) = %d, want 7: a step of one micro-batch fills what it did", MicroStep(7, 0))
	}
	seen := map[uint32]bool{7: true}
	for m := 1; m < 8; m++ {
		s := MicroStep(7, m)
		if seen[s] || s == MicroStep(8, m) {
			t.Errorf("MicroStep(7, %d) = %d repeats another micro-batch's or step's", m, s)
		}
		seen[s] = true
	}
}

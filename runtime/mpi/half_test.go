package mpi

import (
	"encoding/binary"
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
			// A NaN is stored as Go stores it: the quiet NaN, with its sign.
			if g, c := elem.F32ToF16(f), F32ToF16(f); g != c {
				t.Fatalf("f16(%#08x): Go %#04x, C %#04x", math.Float32bits(f), g, c)
			}
			if g, c := elem.F32ToBF16(f), F32ToBF16(f); g != c {
				t.Fatalf("bf16(%#08x): Go %#04x, C %#04x", math.Float32bits(f), g, c)
			}
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
	const n = 1<<16 + 3 // every 16-bit value, and a tail shorter than a vector
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

// The C division of an average's pieces (sg_mpi.c: a reciprocal for powers
// of two, F16C conversions where the CPU has them) gives exactly what the
// checker's elem.AvgDivide gives, on every 16-bit value, infinities and
// subnormals included, and on float32 and float64 values of every
// magnitude, and on random integers of every width (truncated toward
// zero), for world sizes that are and are not powers of two. A NaN
// must stay a NaN; its sign and payload are not the checker's concern
// (the C and Go conversions already differ there).
func TestAvgDivideMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	every16 := make([]uint16, 1<<16+5) // not a multiple of the vector width
	for i := range every16 {
		every16[i] = uint16(i)
	}
	// The same values shuffled: vector blocks that mix normal numbers with
	// zeros, subnormals, infinities and NaNs.
	shuffled16 := append([]uint16(nil), every16...)
	rng.Shuffle(len(shuffled16), func(i, j int) { shuffled16[i], shuffled16[j] = shuffled16[j], shuffled16[i] })
	f32 := make([]float32, 100003)
	f64 := make([]float64, 100003)
	for i := range f32 {
		f32[i] = math.Float32frombits(rng.Uint32())
		f64[i] = math.Float64frombits(rng.Uint64())
	}
	f32[0], f32[1], f64[0] = math.SmallestNonzeroFloat32, -1e-45, math.SmallestNonzeroFloat64
	ints := make([]byte, 8*100003) // random bits for the integer dtypes, truncating division
	rng.Read(ints)
	bytesOf := func(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }
	for _, size := range []int{1, 2, 3, 4, 5, 7, 8, 64, 1000} {
		for _, c := range []struct {
			dt  elem.DType
			buf []byte
		}{
			{elem.F16, bytesOf(unsafe.Pointer(&every16[0]), 2*len(every16))},
			{elem.BF16, bytesOf(unsafe.Pointer(&every16[0]), 2*len(every16))},
			{elem.F16, bytesOf(unsafe.Pointer(&shuffled16[0]), 2*len(shuffled16))},
			{elem.BF16, bytesOf(unsafe.Pointer(&shuffled16[0]), 2*len(shuffled16))},
			{elem.F32, bytesOf(unsafe.Pointer(&f32[0]), 4*len(f32))},
			{elem.F64, bytesOf(unsafe.Pointer(&f64[0]), 8*len(f64))},
			{elem.I64, ints},
			{elem.I32, ints},
			{elem.I8, ints},
			{elem.U8, ints},
		} {
			want := append([]byte(nil), c.buf...)
			elem.AvgDivide(want, c.dt, size)
			got := append([]byte(nil), c.buf...)
			AvgDivide(unsafe.Pointer(&got[0]), c.dt, int64(len(got))/c.dt.Size(), size)
			for i := 0; i < len(got); i += int(c.dt.Size()) {
				w, g := want[i:i+int(c.dt.Size())], got[i:i+int(c.dt.Size())]
				if string(w) != string(g) && !(isNaN(c.dt, w) && isNaN(c.dt, g)) {
					t.Fatalf("%v / %d, element %d (bits %x): C %x, Go %x", c.dt, size, i/int(c.dt.Size()), c.buf[i:i+int(c.dt.Size())], g, w)
				}
			}
		}
	}
}

// The operator that averages two ranks inside MPI's call gives exactly
// MPI's sum divided by two as the checker computes it (elem.AvgDivide), for
// every float dtype: every 16-bit value against random partners, random
// bits (infinities, NaNs, subnormals, sums that overflow), and lengths that
// are not a multiple of the vector width.
func TestAvgOfTwoMatchesSumThenDivide(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	const n = 1<<16 + 5
	for _, dt := range []elem.DType{elem.F16, elem.BF16, elem.F32, elem.F64} {
		size := int(dt.Size())
		in, inout := make([]byte, n*size), make([]byte, n*size)
		rng.Read(in)
		rng.Read(inout)
		if size == 2 {
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint16(in[2*i:], uint16(i))
			}
		}
		want := append([]byte(nil), inout...)
		for i := 0; i < len(want); i += size {
			a, b := in[i:i+size], want[i:i+size]
			switch dt {
			case elem.F16, elem.BF16:
				load, store := elem.F16ToF32, elem.F32ToF16
				if dt == elem.BF16 {
					load, store = elem.BF16ToF32, elem.F32ToBF16
				}
				binary.LittleEndian.PutUint16(b, store(load(binary.LittleEndian.Uint16(a))+load(binary.LittleEndian.Uint16(b))))
			case elem.F32:
				x := math.Float32frombits(binary.LittleEndian.Uint32(a)) + math.Float32frombits(binary.LittleEndian.Uint32(b))
				binary.LittleEndian.PutUint32(b, math.Float32bits(x))
			case elem.F64:
				x := math.Float64frombits(binary.LittleEndian.Uint64(a)) + math.Float64frombits(binary.LittleEndian.Uint64(b))
				binary.LittleEndian.PutUint64(b, math.Float64bits(x))
			}
		}
		elem.AvgDivide(want, dt, 2)
		got := append([]byte(nil), inout...)
		if err := AvgOfTwo(dt, unsafe.Pointer(&in[0]), unsafe.Pointer(&got[0]), n); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(got); i += size {
			w, g := want[i:i+size], got[i:i+size]
			if string(w) != string(g) && !(isNaN(dt, w) && isNaN(dt, g)) {
				t.Fatalf("%v element %d: (%x + %x) / 2: C %x, Go %x", dt, i/size, in[i:i+size], inout[i:i+size], g, w)
			}
		}
	}
	var x int32
	if err := AvgOfTwo(elem.I32, unsafe.Pointer(&x), unsafe.Pointer(&x), 1); err == nil {
		t.Errorf("AvgOfTwo accepted i32")
	}
}

// The casts between f32 and the 16-bit floats (a bucket's wire) give what
// package elem's CastBytes gives: every 16-bit value widened, and narrowed
// from random bits, every 16-bit value, and the midpoints between
// neighbours (ties), with a tail shorter than a vector; a NaN stays a NaN.
func TestCastMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const n16 = 1<<16 + 3
	halves := make([]byte, 2*n16)
	for i := 0; i < n16; i++ {
		binary.LittleEndian.PutUint16(halves[2*i:], uint16(i))
	}
	for _, dt := range []elem.DType{elem.F16, elem.BF16} {
		load := elem.F16ToF32
		if dt == elem.BF16 {
			load = elem.BF16ToF32
		}
		var f32 []float32
		for i := 0; i < 1<<16; i++ {
			v, next := load(uint16(i)), load(uint16(i+1))
			f32 = append(f32, v, v+(next-v)/2, math.Float32frombits(rng.Uint32()))
		}
		f32 = append(f32, 1, 2, 3) // the tail
		wide := unsafe.Slice((*byte)(unsafe.Pointer(&f32[0])), 4*len(f32))
		for _, c := range []struct {
			name     string
			src      []byte
			sdt, ddt elem.DType
		}{
			{dt.String() + "->f32", halves, dt, elem.F32},
			{"f32->" + dt.String(), wide, elem.F32, dt},
		} {
			n := len(c.src) / int(c.sdt.Size())
			want := make([]byte, n*int(c.ddt.Size()))
			got := make([]byte, len(want))
			elem.CastBytes(want, c.ddt, c.src, c.sdt)
			if !Cast(unsafe.Pointer(&got[0]), c.ddt, unsafe.Pointer(&c.src[0]), c.sdt, int64(n)) {
				t.Fatalf("%s: no cast", c.name)
			}
			size := int(c.ddt.Size())
			for i := 0; i < len(got); i += size {
				w, g := want[i:i+size], got[i:i+size]
				if string(w) != string(g) && !(isNaN(c.ddt, w) && isNaN(c.ddt, g)) {
					t.Fatalf("%s element %d (bits %x): C %x, Go %x", c.name, i/size, c.src[i/size*int(c.sdt.Size()):][:c.sdt.Size()], g, w)
				}
			}
		}
	}
	var x [8]byte
	if Cast(unsafe.Pointer(&x[0]), elem.F64, unsafe.Pointer(&x[0]), elem.F32, 1) {
		t.Errorf("Cast accepted f32 to f64")
	}
}

// isNaN says whether the element b of dtype dt is a NaN.
func isNaN(dt elem.DType, b []byte) bool {
	switch dt {
	case elem.F16:
		return math.IsNaN(elem.F16Value(uint16(b[0]) | uint16(b[1])<<8))
	case elem.BF16:
		return math.IsNaN(elem.BF16Value(uint16(b[0]) | uint16(b[1])<<8))
	case elem.F32:
		return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case elem.F64:
		return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return false
}

package runtime

// Element-wise work on raw memory, shared by the CPU backend (on C memory)
// and the checker (on host copies) so that both compute exactly the same
// thing. Memory is little-endian, as on every platform Go and MPI run on
// here.

import (
	"math"
	"unsafe"
)

// view reinterprets b as a slice of T. b must be aligned for T (C memory
// and element offsets of it are).
func view[T any](b []byte) []T {
	var z T
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// fillBytes writes pattern p into b, which holds elements of dt.
func fillBytes(b []byte, dt DType, p *FillParams) {
	var ints [castChunk]int32
	var vals [castChunk]float64
	n := int64(len(b)) / dt.Size()
	for i0 := int64(0); i0 < n; i0 += castChunk {
		m := min(n-i0, castChunk)
		v := ints[:m]
		fillInts(v, p, i0)
		part := b[i0*dt.Size() : (i0+m)*dt.Size()]
		switch dt {
		case F32:
			s := view[float32](part)
			for j := range s {
				s[j] = float32(v[j])
			}
		case I32:
			copy(view[int32](part), v)
		default:
			f := vals[:m]
			for j := range f {
				f[j] = float64(v[j])
			}
			storeAll(part, dt, f)
		}
	}
}

// loadAll decodes every element of b (elements of dt) into out, which must
// have room for them. i64 values beyond 2^53 lose precision; the checker
// never expects such values.
func loadAll(out []float64, b []byte, dt DType) {
	switch dt {
	case F64:
		copy(out, view[float64](b))
	case F32:
		for i, v := range view[float32](b) {
			out[i] = float64(v)
		}
	case F16:
		for i, v := range view[uint16](b) {
			out[i] = F16Value(v)
		}
	case BF16:
		for i, v := range view[uint16](b) {
			out[i] = BF16Value(v)
		}
	case I64:
		for i, v := range view[int64](b) {
			out[i] = float64(v)
		}
	case I32:
		for i, v := range view[int32](b) {
			out[i] = float64(v)
		}
	case I8:
		for i, v := range view[int8](b) {
			out[i] = float64(v)
		}
	case U8:
		for i, v := range b {
			out[i] = float64(v)
		}
	}
}

// storeAll encodes vals into b as elements of dt, rounding like RoundTo.
func storeAll(b []byte, dt DType, vals []float64) {
	switch dt {
	case F64:
		copy(view[float64](b), vals)
	case F32:
		s := view[float32](b)
		for i := range s {
			s[i] = float32(vals[i])
		}
	case F16:
		s := view[uint16](b)
		for i := range s {
			s[i] = F16Bits(vals[i])
		}
	case BF16:
		s := view[uint16](b)
		for i := range s {
			s[i] = BF16Bits(vals[i])
		}
	case I64:
		s := view[int64](b)
		for i := range s {
			s[i] = toInt(vals[i], math.MinInt64, math.MaxInt64)
		}
	case I32:
		s := view[int32](b)
		for i := range s {
			s[i] = int32(toInt(vals[i], math.MinInt32, math.MaxInt32))
		}
	case I8:
		s := view[int8](b)
		for i := range s {
			s[i] = int8(toInt(vals[i], math.MinInt8, math.MaxInt8))
		}
	case U8:
		for i := range b {
			b[i] = uint8(toInt(vals[i], 0, math.MaxUint8))
		}
	}
}

// castChunk is how many elements castBytes converts at a time.
const castChunk = 4096

// castBytes converts src (elements of sdt) into dst (elements of ddt), the
// same number of elements, with the rounding of RoundTo. Integer to integer
// casts go through int64 so that no precision is lost on the way.
func castBytes(dst []byte, ddt DType, src []byte, sdt DType) {
	if ddt == sdt {
		copy(dst, src)
		return
	}
	n := int64(len(src)) / sdt.Size()
	if !ddt.IsFloat() && !sdt.IsFloat() {
		for i := int64(0); i < n; i++ {
			storeInt(dst, ddt, i, loadInt(src, sdt, i))
		}
		return
	}
	var buf [castChunk]float64
	for i := int64(0); i < n; i += castChunk {
		m := min(n-i, castChunk)
		loadAll(buf[:m], src[i*sdt.Size():(i+m)*sdt.Size()], sdt)
		storeAll(dst[i*ddt.Size():(i+m)*ddt.Size()], ddt, buf[:m])
	}
}

// loadInt reads integer element i of b.
func loadInt(b []byte, dt DType, i int64) int64 {
	switch dt {
	case I64:
		return view[int64](b)[i]
	case I32:
		return int64(view[int32](b)[i])
	case I8:
		return int64(int8(b[i]))
	case U8:
		return int64(b[i])
	}
	return 0
}

// storeInt writes v, saturated to dt's range, as integer element i of b.
func storeInt(b []byte, dt DType, i int64, v int64) {
	switch dt {
	case I64:
		view[int64](b)[i] = v
	case I32:
		view[int32](b)[i] = int32(max(min(v, math.MaxInt32), math.MinInt32))
	case I8:
		b[i] = byte(int8(max(min(v, math.MaxInt8), math.MinInt8)))
	case U8:
		b[i] = byte(max(min(v, math.MaxUint8), 0))
	}
}

// avgDivide turns sums into averages in place: every element of b is
// divided by size in dt's arithmetic (see AvgOf).
func avgDivide(b []byte, dt DType, size int) {
	switch dt {
	case F64:
		s := view[float64](b)
		for i := range s {
			s[i] /= float64(size)
		}
	case F32:
		s := view[float32](b)
		for i := range s {
			s[i] /= float32(size)
		}
	case F16:
		s := view[uint16](b)
		for i := range s {
			s[i] = F16Bits(float64(float32(F16Value(s[i])) / float32(size)))
		}
	case BF16:
		s := view[uint16](b)
		for i := range s {
			s[i] = BF16Bits(float64(float32(BF16Value(s[i])) / float32(size)))
		}
	case I64:
		s := view[int64](b)
		for i := range s {
			s[i] /= int64(size)
		}
	case I32:
		s := view[int32](b)
		for i := range s {
			s[i] /= int32(size)
		}
	case I8:
		s := view[int8](b)
		for i := range s {
			s[i] = int8(int(s[i]) / size)
		}
	case U8:
		for i := range b {
			b[i] = uint8(int(b[i]) / size)
		}
	}
}

// AvgOf is what the CPU backend's avg makes of a sum (already in dt) over
// size ranks: the quotient in float32 arithmetic for f16, bf16 and f32,
// float64 for f64, rounded to dt; truncated toward zero for the integers.
func AvgOf(sum float64, dt DType, size int) float64 {
	switch dt {
	case F64:
		return sum / float64(size)
	case F32, F16, BF16:
		return RoundTo(float64(float32(sum)/float32(size)), dt)
	default:
		return math.Trunc(sum / float64(size))
	}
}

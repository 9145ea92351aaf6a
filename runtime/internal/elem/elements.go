package elem

// Element-wise work on raw memory, shared by the CPU backend (on C memory)
// and the checker (on host copies) so that both compute exactly the same
// thing. Memory is little-endian, as on every platform Go and MPI run on
// here.

import (
	"math"
	goruntime "runtime"
	"sync"
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

// ClearBytes zeroes b, large buffers on all of the rank's cores.
func ClearBytes(b []byte) {
	if parallelWorkers(int64(len(b))) == 1 {
		clear(b) // without parallelFor's closure, which is allocated
		return
	}
	parallelFor(int64(len(b)), func(lo, hi int64) { clear(b[lo:hi]) })
}

// FillBytes writes pattern p into b, which holds elements of dt. Large
// buffers are split between goroutines (parallelFor): the fill runs where
// the simulated backward pass would compute, and a single core is too
// slow for a model of a gigabyte or more
// (bench/results/2026-12-runtime-comments.md, "Fill and conversions").
func FillBytes(b []byte, dt DType, p *FillParams) {
	n := int64(len(b)) / dt.Size()
	if parallelWorkers(n) == 1 {
		fillRange(b, dt, p, 0) // without parallelFor's closure, which is allocated
		return
	}
	parallelFor(n, func(lo, hi int64) {
		fillRange(b[lo*dt.Size():hi*dt.Size()], dt, p, lo)
	})
}

// fillRange writes elements i0.. of pattern p into b (elements of dt),
// converting each chunk of integers straight to dt without the general
// float64 rounding code; the results are RoundTo's (the patterns make only
// values exact in dt, but larger ones round and saturate the same way).
func fillRange(b []byte, dt DType, p *FillParams, i0 int64) {
	var ints [castChunk]int32
	n := int64(len(b)) / dt.Size()
	for off := int64(0); off < n; off += castChunk {
		m := min(n-off, castChunk)
		v := ints[:m]
		FillInts(v, p, i0+off)
		part := b[off*dt.Size() : (off+m)*dt.Size()]
		switch dt {
		case F64:
			s := view[float64](part)
			for j := range s {
				s[j] = float64(v[j])
			}
		case F32:
			s := view[float32](part)
			for j := range s {
				s[j] = float32(v[j])
			}
		case F16:
			// float32(v) may round beyond 2^24, but f16 is infinite from
			// 65520 on, so the result is F16Bits(v) for every int32.
			s := view[uint16](part)
			for j := range s {
				s[j] = F32ToF16(float32(v[j]))
			}
		case BF16:
			s := view[uint16](part)
			for j := range s {
				if x := v[j]; x >= -1<<24 && x <= 1<<24 {
					s[j] = F32ToBF16(float32(x))
				} else {
					s[j] = BF16Bits(float64(x)) // one rounding, not two
				}
			}
		case I64:
			s := view[int64](part)
			for j := range s {
				s[j] = int64(v[j])
			}
		case I32:
			copy(view[int32](part), v)
		case I8:
			s := view[int8](part)
			for j := range s {
				s[j] = int8(max(min(v[j], math.MaxInt8), math.MinInt8))
			}
		case U8:
			for j := range part {
				part[j] = uint8(max(min(v[j], math.MaxUint8), 0))
			}
		}
	}
}

// AddBytes adds pattern p to the elements of dt that b holds: each sum
// is computed in float64 (exact for the pattern's values and the dtypes'
// exact ranges) and stored rounded as StoreAll rounds, integers
// saturating. A micro-batch's backward accumulates its gradient with it.
func AddBytes(b []byte, dt DType, p *FillParams) {
	n := int64(len(b)) / dt.Size()
	if parallelWorkers(n) == 1 {
		addRange(b, dt, p, 0)
		return
	}
	parallelFor(n, func(lo, hi int64) {
		addRange(b[lo*dt.Size():hi*dt.Size()], dt, p, lo)
	})
}

// addRange adds elements i0.. of pattern p to b (elements of dt).
func addRange(b []byte, dt DType, p *FillParams, i0 int64) {
	var ints [castChunk]int32
	var vals [castChunk]float64
	n := int64(len(b)) / dt.Size()
	for off := int64(0); off < n; off += castChunk {
		m := min(n-off, castChunk)
		v, x := ints[:m], vals[:m]
		FillInts(v, p, i0+off)
		part := b[off*dt.Size() : (off+m)*dt.Size()]
		LoadAll(x, part, dt)
		for j := range x {
			x[j] += float64(v[j])
		}
		StoreAll(part, dt, x)
	}
}

// parallelGrain is the fewest elements worth a goroutine of their own.
const parallelGrain = 1 << 16

// parallelWorkers is how many goroutines parallelFor splits n elements
// between: one per usable core (GOMAXPROCS, at most the CPUs the process
// may run on), each with at least parallelGrain elements.
func parallelWorkers(n int64) int64 {
	workers := int64(min(goruntime.GOMAXPROCS(0), goruntime.NumCPU()))
	return max(min(workers, n/parallelGrain), 1)
}

// ParallelFor is parallelFor for the other element loops of the runtime
// (optim's updates): the same split, or fn(0, n) on this goroutine when
// one worker is enough.
func ParallelFor(n int64, fn func(lo, hi int64)) {
	if parallelWorkers(n) == 1 {
		fn(0, n)
		return
	}
	parallelFor(n, fn)
}

// parallelFor runs fn over [0, n) split into contiguous ranges, one per
// usable core (GOMAXPROCS, at most the CPUs the process may run on), and
// returns when all are done. Range boundaries are multiples of 64
// elements, so that no two goroutines write the same cache line.
func parallelFor(n int64, fn func(lo, hi int64)) {
	workers := parallelWorkers(n)
	if workers == 1 {
		fn(0, n)
		return
	}
	per := (n/workers + 63) &^ 63
	var wg sync.WaitGroup
	for lo := per; lo < n; lo += per {
		wg.Add(1)
		go func(lo, hi int64) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+per, n))
	}
	fn(0, min(per, n))
	wg.Wait()
}

// LoadAll decodes every element of b (elements of dt) into out, which must
// have room for them. i64 values beyond 2^53 lose precision; the checker
// never expects such values.
func LoadAll(out []float64, b []byte, dt DType) {
	switch dt {
	case F64:
		copy(out, view[float64](b))
	case F32:
		for i, v := range view[float32](b) {
			out[i] = float64(v)
		}
	case F16:
		for i, v := range view[uint16](b) {
			out[i] = float64(F16ToF32(v))
		}
	case BF16:
		for i, v := range view[uint16](b) {
			out[i] = float64(BF16ToF32(v))
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

// StoreAll encodes vals into b as elements of dt, rounding like RoundTo.
func StoreAll(b []byte, dt DType, vals []float64) {
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
		for i, x := range vals[:len(s)] {
			if f := float32(x); float64(f) == x {
				s[i] = F32ToF16(f) // exact in float32: one rounding either way
			} else {
				s[i] = F16Bits(x)
			}
		}
	case BF16:
		s := view[uint16](b)
		for i, x := range vals[:len(s)] {
			if f := float32(x); float64(f) == x {
				s[i] = F32ToBF16(f)
			} else {
				s[i] = BF16Bits(x)
			}
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

// castChunk is how many elements CastBytes converts at a time.
const castChunk = 4096

// CastBytes converts src (elements of sdt) into dst (elements of ddt), the
// same number of elements, with the rounding of RoundTo. Integer to integer
// casts go through int64 so that no precision is lost on the way.
func CastBytes(dst []byte, ddt DType, src []byte, sdt DType) {
	if ddt == sdt {
		copy(dst, src)
		return
	}
	if castFloat32(dst, ddt, src, sdt) {
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
		LoadAll(buf[:m], src[i*sdt.Size():(i+m)*sdt.Size()], sdt)
		StoreAll(dst[i*ddt.Size():(i+m)*ddt.Size()], ddt, buf[:m])
	}
}

// castFloat32 does the casts between f32 and the 16-bit floats (f32
// gradients on a bf16 wire) directly, and reports whether it did: they
// run around every such collective, on the whole bucket.
func castFloat32(dst []byte, ddt DType, src []byte, sdt DType) bool {
	switch {
	case sdt == F32 && ddt == BF16:
		d := view[uint16](dst)
		for i, f := range view[float32](src)[:len(d)] {
			d[i] = F32ToBF16(f)
		}
	case sdt == F32 && ddt == F16:
		d := view[uint16](dst)
		for i, f := range view[float32](src)[:len(d)] {
			d[i] = F32ToF16(f)
		}
	case sdt == BF16 && ddt == F32:
		d := view[float32](dst)
		for i, h := range view[uint16](src)[:len(d)] {
			d[i] = BF16ToF32(h)
		}
	case sdt == F16 && ddt == F32:
		d := view[float32](dst)
		for i, h := range view[uint16](src)[:len(d)] {
			d[i] = F16ToF32(h)
		}
	default:
		return false
	}
	return true
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

// AvgDivide turns sums into averages in place: every element of b is
// divided by size in dt's arithmetic (see AvgOf).
func AvgDivide(b []byte, dt DType, size int) {
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
			s[i] = F32ToF16(F16ToF32(s[i]) / float32(size))
		}
	case BF16:
		s := view[uint16](b)
		for i := range s {
			s[i] = F32ToBF16(BF16ToF32(s[i]) / float32(size))
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

package elem

import (
	"fmt"
	"math"
)

// DType is an element type. The values match package ir's.
type DType uint8

// The element types.
const (
	InvalidDType DType = iota
	F64
	F32
	F16
	BF16
	I64
	I32
	I8
	U8
)

var dtypeNames = [...]string{"invalid", "f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"}
var dtypeSizes = [...]int64{0, 8, 4, 2, 2, 8, 4, 1, 1}

// String returns the dtype's name as .sync source writes it ("f32").
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// Size returns the size of one element in bytes (0 for an invalid dtype).
func (d DType) Size() int64 {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F64 || d == F32 || d == F16 || d == BF16 }

// Valid reports whether d is one of the eight element types.
func (d DType) Valid() bool { return d >= F64 && d <= U8 }

// ExactLimit is the largest magnitude up to which every integer is exactly
// representable in d (for i64 it is 2^53, the limit of the float64 values
// the checker computes with). The fill pattern keeps every partial result
// within it.
func (d DType) ExactLimit() int64 {
	switch d {
	case F64, I64:
		return 1 << 53
	case F32:
		return 1 << 24
	case F16:
		return 1 << 11
	case BF16:
		return 1 << 8
	case I32:
		return math.MaxInt32
	case I8:
		return math.MaxInt8
	case U8:
		return math.MaxUint8
	}
	return 0
}

// Unsigned reports whether d has no negative values.
func (d DType) Unsigned() bool { return d == U8 }

// The 16-bit float formats: mantissa bits and exponent bias.
const (
	f16Mant, f16Bias   = 10, 15
	bf16Mant, bf16Bias = 7, 127
)

// F16Bits converts x to IEEE half precision, rounding to nearest even
// (overflow gives infinity, NaN a quiet NaN).
func F16Bits(x float64) uint16 { return toHalf(x, f16Mant, f16Bias) }

// BF16Bits converts x to bfloat16, rounding to nearest even.
func BF16Bits(x float64) uint16 { return toHalf(x, bf16Mant, bf16Bias) }

// F16Value converts half-precision bits to a float64 (exactly).
func F16Value(b uint16) float64 { return fromHalf(b, f16Mant, f16Bias) }

// BF16Value converts bfloat16 bits to a float64 (exactly).
func BF16Value(b uint16) float64 { return fromHalf(b, bf16Mant, bf16Bias) }

// toHalf rounds x to a 16-bit float format with mant mantissa bits and the
// given exponent bias, directly from float64 so that there is one rounding.
func toHalf(x float64, mant uint, bias int) uint16 {
	bits := math.Float64bits(x)
	sign := uint16(bits>>63) << 15
	exp := int(bits>>52) & 0x7ff
	frac := bits & (1<<52 - 1)
	expBits := uint(15 - mant)
	inf := uint16((1<<expBits)-1) << mant
	if exp == 0x7ff {
		if frac != 0 {
			return sign | inf | 1<<(mant-1)
		}
		return sign | inf
	}
	if exp == 0 {
		return sign // float64 subnormals are far below every half's range
	}
	e := exp - 1023
	m := frac | 1<<52 // 53 significant bits: 1.frac * 2^e
	emin := 1 - bias
	var shift uint
	if e >= emin {
		shift = 52 - mant
	} else {
		// Subnormal: the result counts units of 2^(emin-mant).
		s := 52 - int(mant) + (emin - e)
		if s > 54 {
			return sign
		}
		shift = uint(s)
	}
	keep := m >> shift
	rem := m & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || (rem == half && keep&1 == 1) {
		keep++
	}
	if e < emin {
		// keep may have rounded up to the smallest normal, whose bits are
		// exactly keep: the format makes that carry work.
		return sign | uint16(keep)
	}
	if keep == 1<<(mant+1) {
		keep >>= 1
		e++
	}
	if e > bias {
		return sign | inf
	}
	return sign | uint16(e+bias)<<mant | uint16(keep&(1<<mant-1))
}

// fromHalf decodes a 16-bit float format.
func fromHalf(b uint16, mant uint, bias int) float64 {
	neg := b&0x8000 != 0
	expBits := uint(15 - mant)
	exp := int(b>>mant) & (1<<expBits - 1)
	frac := float64(b & (1<<mant - 1))
	var v float64
	switch exp {
	case 0:
		v = math.Ldexp(frac, 1-bias-int(mant))
	case 1<<expBits - 1:
		if frac != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	default:
		v = math.Ldexp(1+frac/float64(uint64(1)<<mant), exp-bias)
	}
	if neg {
		return -v
	}
	return v
}

// The conversions below are the hot-loop versions of F16Bits, BF16Bits,
// F16Value and BF16Value for float32 values: the same results (the tests
// compare them), without the float64 detour and its general rounding
// code, too slow for the per-element loops of fills, casts and checks
// (bench/results/2026-12-runtime-comments.md, "Fill and conversions"). NaN
// becomes a positive quiet NaN when read, as F16Value and BF16Value give,
// and a quiet NaN of the same sign when written, as F16Bits and BF16Bits
// give.

// F32ToF16 returns F16Bits(float64(f)).
func F32ToF16(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	a := x & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return sign | 0x7e00
	case a >= 0x477ff000: // 65520 and up round to infinity
		return sign | 0x7c00
	case a < 0x38800000: // below 2^-14: subnormal or zero
		if a < 0x33000000 { // up to 2^-25 rounds to zero
			return sign
		}
		m := a&0x7fffff | 0x800000
		shift := 126 - a>>23
		keep, rem, half := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && keep&1 == 1) {
			keep++
		}
		return sign | uint16(keep)
	}
	keep, rem := a>>13-112<<10, a&0x1fff
	if rem > 0x1000 || (rem == 0x1000 && keep&1 == 1) {
		keep++ // a carry into the exponent is the right result
	}
	return sign | uint16(keep)
}

// F32ToBF16 returns BF16Bits(float64(f)).
func F32ToBF16(f float32) uint16 {
	x := math.Float32bits(f)
	if x&0x7fffffff > 0x7f800000 {
		return uint16(x>>16)&0x8000 | 0x7fc0
	}
	return uint16((x + 0x7fff + (x>>16)&1) >> 16)
}

// F16ToF32 returns F16Value(h) as a float32 (exact).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e, m := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch e {
	case 0:
		return math.Float32frombits(sign | math.Float32bits(float32(m)*0x1p-24))
	case 31:
		if m != 0 {
			return float32(math.NaN())
		}
		return math.Float32frombits(sign | 0x7f800000)
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}

// BF16ToF32 returns BF16Value(h) as a float32 (exact).
func BF16ToF32(h uint16) float32 {
	if h&0x7fff > 0x7f80 {
		return float32(math.NaN())
	}
	return math.Float32frombits(uint32(h) << 16)
}

// RoundTo returns x as dtype d would store it: rounded to nearest even for
// the floats, rounded to nearest even and saturated for the integers (NaN
// becomes 0). CastValue and the CPU backend's casts use it, and the checker
// uses it to predict them.
func RoundTo(x float64, d DType) float64 {
	switch d {
	case F64:
		return x
	case F32:
		return float64(float32(x))
	case F16:
		if f := float32(x); float64(f) == x {
			return float64(F16ToF32(F32ToF16(f))) // the checker's common case
		}
		return F16Value(F16Bits(x))
	case BF16:
		if f := float32(x); float64(f) == x {
			return float64(BF16ToF32(F32ToBF16(f)))
		}
		return BF16Value(BF16Bits(x))
	case I64:
		return float64(toInt(x, math.MinInt64, math.MaxInt64))
	case I32:
		return float64(toInt(x, math.MinInt32, math.MaxInt32))
	case I8:
		return float64(toInt(x, math.MinInt8, math.MaxInt8))
	case U8:
		return float64(toInt(x, 0, math.MaxUint8))
	}
	return math.NaN()
}

// toInt rounds x to nearest even and saturates it to [lo, hi].
func toInt(x float64, lo, hi int64) int64 {
	if math.IsNaN(x) {
		return 0
	}
	r := math.RoundToEven(x)
	if r <= float64(lo) {
		return lo
	}
	if r >= float64(hi) {
		return hi
	}
	return int64(r)
}

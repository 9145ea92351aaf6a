// syncgen's device kernels: the gradient fill, dtype casts, the average's
// division, loss scaling, setting values, the optimizer update, and the
// spin that stands for compute time.
//
// They are compiled to PTX on a machine with nvcc (see regen.sh), and the
// PTX is committed at runtime/cuda/syncgen.ptx, embedded in every syncgen
// program and loaded with cuModuleLoadData; the driver compiles it for the
// GPU it runs on. So that one PTX file runs on Volta and newer and on older
// drivers, the code uses no header (no cuda_fp16.h: the 16-bit formats are
// converted by hand, bit-exactly as runtime/internal/elem/dtype.go does) and no
// instruction newer than sm_70.
//
// Every kernel takes only 64-bit parameters: package cuda launches them
// with one array of uint64 values.
//
// Bit-exactness: each conversion reproduces the Go runtime's (RoundTo in
// runtime/internal/elem/dtype.go: through float64, round to nearest even, integers
// saturate, NaN becomes 0), the fill reproduces FillValue in
// runtime/internal/elem/pattern.go, and the scaling and the optimizer update
// reproduce runtime/internal/optim/optim.go (Scaled, Hyper.Apply) operation
// by operation. The CPU backend and the checker rely on all of them. Float
// arithmetic that must match Go is written with the _rn intrinsics
// (__fmul_rn, __fadd_rn, ...), which nvcc never contracts into a fused
// multiply-add, where Go rounds every product.

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
typedef unsigned short u16;

// runtime.DType values.
enum { F64 = 1, F32, F16, BF16, I64, I32, I8, U8 };

// runtime.FillKind values.
enum { FILL_UNIFORM = 0, FILL_AVG = 1, FILL_PROD = 2 };

// ---- the pattern (runtime/internal/elem/pattern.go) ----

__device__ __forceinline__ u32 mix(u32 x) {
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

__device__ __forceinline__ u32 elemHash(u32 seed, i64 i) {
	u64 u = (u64)i;
	return mix(seed ^ mix((u32)u + 0x9e3779b9u * (u32)(u >> 32)));
}

// ---- conversions (runtime/internal/elem/dtype.go) ----

__device__ __forceinline__ double bitsToDouble(u64 b) { return __longlong_as_double((long long)b); }

// toHalf is dtype.go's toHalf: float64 to a 16-bit float format with mant
// mantissa bits, one rounding to nearest even.
__device__ u16 toHalf(double x, int mant, int bias) {
	u64 bits = (u64)__double_as_longlong(x);
	u16 sign = (u16)((bits >> 63) << 15);
	int exp = (int)((bits >> 52) & 0x7ff);
	u64 frac = bits & ((1ULL << 52) - 1);
	int expBits = 15 - mant;
	u16 inf = (u16)(((1u << expBits) - 1) << mant);
	if (exp == 0x7ff) {
		if (frac != 0) return sign | inf | (u16)(1u << (mant - 1));
		return sign | inf;
	}
	if (exp == 0) return sign;
	int e = exp - 1023;
	u64 m = frac | (1ULL << 52);
	int emin = 1 - bias;
	int shift;
	if (e >= emin) {
		shift = 52 - mant;
	} else {
		shift = 52 - mant + (emin - e);
		if (shift > 54) return sign;
	}
	u64 keep = m >> shift;
	u64 rem = m & ((1ULL << shift) - 1);
	u64 half = 1ULL << (shift - 1);
	if (rem > half || (rem == half && (keep & 1))) keep++;
	if (e < emin) return sign | (u16)keep;
	if (keep == (1ULL << (mant + 1))) {
		keep >>= 1;
		e++;
	}
	if (e > bias) return sign | inf;
	return sign | (u16)((e + bias) << mant) | (u16)(keep & ((1ULL << mant) - 1));
}

// fromHalf is dtype.go's fromHalf: exact decoding to float64.
__device__ double fromHalf(u16 b, int mant, int bias) {
	int expBits = 15 - mant;
	int exp = (b >> mant) & ((1 << expBits) - 1);
	u32 frac = b & ((1u << mant) - 1);
	double v;
	if (exp == 0) {
		// frac * 2^(1-bias-mant); the scale is a normal float64.
		v = (double)frac * bitsToDouble((u64)(1 - bias - mant + 1023) << 52);
	} else if (exp == (1 << expBits) - 1) {
		if (frac != 0) return bitsToDouble(0x7FF8000000000001ULL); // Go's math.NaN()
		v = bitsToDouble(0x7FF0000000000000ULL);
	} else {
		v = bitsToDouble(((u64)(exp - bias + 1023) << 52) | ((u64)frac << (52 - mant)));
	}
	return (b & 0x8000) ? -v : v;
}

// toInt is dtype.go's toInt: round to nearest even, saturate, NaN to 0.
__device__ __forceinline__ i64 toInt(double x, i64 lo, i64 hi) {
	if (x != x) return 0;
	double r = rint(x);
	if (r <= (double)lo) return lo;
	if (r >= (double)hi) return hi;
	return (i64)r;
}

__device__ __forceinline__ float f16ToF32(u16 h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}

// f32ToF16 equals toHalf((double)f, 10, 15): the hardware conversion rounds
// to nearest even once; only NaN needs Go's encoding.
__device__ __forceinline__ u16 f32ToF16(float f) {
	u32 u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) & 0x8000) | 0x7e00;
	u16 h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}

__device__ __forceinline__ float bf16ToF32(u16 h) { return __uint_as_float((u32)h << 16); }

// f32ToBF16 equals toHalf((double)f, 7, 127): bfloat16 is float32's top
// half, so rounding the low 16 bits to nearest even is the whole job, for
// subnormals and overflow too.
__device__ __forceinline__ u16 f32ToBF16(float f) {
	u32 u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) & 0x8000) | 0x7fc0;
	return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ double load(const void *p, i64 i, int dt) {
	switch (dt) {
	case F64: return ((const double *)p)[i];
	case F32: return (double)((const float *)p)[i];
	case F16: return fromHalf(((const u16 *)p)[i], 10, 15);
	case BF16: return fromHalf(((const u16 *)p)[i], 7, 127);
	case I64: return (double)((const i64 *)p)[i];
	case I32: return (double)((const int *)p)[i];
	case I8: return (double)((const signed char *)p)[i];
	default: return (double)((const unsigned char *)p)[i];
	}
}

__device__ __forceinline__ void store(void *p, i64 i, int dt, double x) {
	switch (dt) {
	case F64: ((double *)p)[i] = x; break;
	case F32: ((float *)p)[i] = __double2float_rn(x); break;
	case F16: ((u16 *)p)[i] = toHalf(x, 10, 15); break;
	case BF16: ((u16 *)p)[i] = toHalf(x, 7, 127); break;
	case I64: ((i64 *)p)[i] = toInt(x, (i64)0x8000000000000000ULL, 0x7fffffffffffffffLL); break;
	case I32: ((int *)p)[i] = (int)toInt(x, -2147483648LL, 2147483647LL); break;
	case I8: ((signed char *)p)[i] = (signed char)toInt(x, -128, 127); break;
	default: ((unsigned char *)p)[i] = (unsigned char)toInt(x, 0, 255); break;
	}
}

// storeInt stores a pattern value as the CPU backend's fillBytes does:
// exactly for the floats, with Go's wrapping conversions for the integers
// (pattern values are always in range).
__device__ __forceinline__ void storeInt(void *p, i64 i, int dt, int v) {
	switch (dt) {
	case F64: ((double *)p)[i] = (double)v; break;
	case F32: ((float *)p)[i] = (float)v; break; // one rounding from int32
	case F16: ((u16 *)p)[i] = f32ToF16((float)v); break; // past 2^24 it is infinite anyway
	case BF16:
		if (v > -(1 << 24) && v < (1 << 24)) ((u16 *)p)[i] = f32ToBF16((float)v);
		else ((u16 *)p)[i] = toHalf((double)v, 7, 127); // avoid double rounding
		break;
	case I64: ((i64 *)p)[i] = v; break;
	case I32: ((int *)p)[i] = v; break;
	case I8: ((signed char *)p)[i] = (signed char)v; break;
	default: ((unsigned char *)p)[i] = (unsigned char)v; break;
	}
}

// Fast exact remainder by a divisor fixed for the whole kernel (Lemire,
// Kaser and Kurz, "Faster remainder by direct computation", 2019): with
// M = 2^64 / d + 1 (computed once per thread), a % d is the high 64 bits of
// (M * a mod 2^64) * d, for every 32-bit a and d. A 32-bit % by a run-time
// divisor costs about twenty instructions; this costs three multiplies.
__device__ __forceinline__ u64 fastmodM(u32 d) { return 0xFFFFFFFFFFFFFFFFULL / d + 1; }
__device__ __forceinline__ u32 fastmod(u32 a, u64 M, u32 d) { return (u32)__umul64hi(M * a, d); }

#define GRID_STRIDE(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// ---- kernels ----

// put writes pattern value v at element i of p: stored as storeInt does,
// or, with add, added to what the element holds through float64 and
// stored rounded (the CPU backend's elem.AddBytes: LoadAll, +, StoreAll).
__device__ __forceinline__ void put(void *p, i64 i, int dt, int v, bool add) {
	if (add) store(p, i, dt, load(p, i, dt) + (double)v);
	else storeInt(p, i, dt, v);
}

// fillBody is syncgen_fill and syncgen_fill_add: FillValue(p, i) for i in
// [0, n) written into dst (add: added to it), in dtype. flags: bit 0 Two,
// bit 1 Neg.
__device__ __forceinline__ void fillBody(u64 dst, i64 n, u64 dtype, u64 kind, u64 seedA, u64 seedB,
                                         i64 lo, i64 hi, i64 dev, i64 sign, u64 flags, bool add) {
	void *p = (void *)dst;
	int dt = (int)dtype;
	u32 sa = (u32)seedA, sb = (u32)seedB;
	int ilo = (int)lo;
	u32 span = (u32)((int)hi - ilo + 1);
	u32 dspan = (u32)((int)dev + 1);
	int isign = (int)sign;
	bool two = flags & 1, neg = flags & 2;
	u64 mspan = fastmodM(span), mdspan = fastmodM(dspan);
	if (kind == FILL_PROD) {
		GRID_STRIDE(i, n) {
			u32 h = elemHash(sa, i);
			int v = two ? 1 + (int)(h & 1) : 1;
			if (neg && ((h >> 1) & 1)) v = -v;
			put(p, i, dt, v, add);
		}
	} else if (kind == FILL_AVG) {
		GRID_STRIDE(i, n) {
			int a = ilo + (int)fastmod(elemHash(sa, i), mspan, span);
			int d = (int)fastmod(elemHash(sb, i), mdspan, dspan);
			put(p, i, dt, a + isign * d, add);
		}
	} else {
		GRID_STRIDE(i, n) { put(p, i, dt, ilo + (int)fastmod(elemHash(sa, i), mspan, span), add); }
	}
}

// syncgen_fill writes FillValue(p, i) for i in [0, n) into dst, converted to
// dtype. flags: bit 0 Two, bit 1 Neg.
extern "C" __global__ void syncgen_fill(u64 dst, i64 n, u64 dtype, u64 kind, u64 seedA, u64 seedB,
                                        i64 lo, i64 hi, i64 dev, i64 sign, u64 flags) {
	fillBody(dst, n, dtype, kind, seedA, seedB, lo, hi, dev, sign, flags, false);
}

// syncgen_fill_add adds FillValue(p, i) to element i of dst (gradient
// accumulation: a micro-batch's backward after the first). Its parameters
// are syncgen_fill's.
extern "C" __global__ void syncgen_fill_add(u64 dst, i64 n, u64 dtype, u64 kind, u64 seedA, u64 seedB,
                                            i64 lo, i64 hi, i64 dev, i64 sign, u64 flags) {
	fillBody(dst, n, dtype, kind, seedA, seedB, lo, hi, dev, sign, flags, true);
}

__device__ __forceinline__ i64 loadI(const void *p, i64 i, int dt) {
	switch (dt) {
	case I64: return ((const i64 *)p)[i];
	case I32: return ((const int *)p)[i];
	case I8: return ((const signed char *)p)[i];
	default: return ((const unsigned char *)p)[i];
	}
}

__device__ __forceinline__ void storeI(void *p, i64 i, int dt, i64 v) {
	switch (dt) {
	case I64: ((i64 *)p)[i] = v; break;
	case I32: ((int *)p)[i] = (int)(v < -2147483648LL ? -2147483648LL : v > 2147483647LL ? 2147483647LL : v); break;
	case I8: ((signed char *)p)[i] = (signed char)(v < -128 ? -128 : v > 127 ? 127 : v); break;
	default: ((unsigned char *)p)[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v); break;
	}
}

// syncgen_cast converts n elements of srcType at src to dstType at dst as
// the CPU backend's castBytes does: integers to integers through int64,
// saturating; everything else through float64 with RoundTo's rounding.
extern "C" __global__ void syncgen_cast(u64 dst, u64 src, i64 n, u64 dstType, u64 srcType) {
	void *d = (void *)dst;
	const void *s = (const void *)src;
	int dt = (int)dstType, st = (int)srcType;
	if (dt >= I64 && st >= I64) {
		GRID_STRIDE(i, n) { storeI(d, i, dt, loadI(s, i, st)); }
	} else if ((st == F16 || st == BF16) && (dt == F16 || dt == BF16)) {
		// float32 holds every f16 and bf16 exactly, so going through it
		// rounds once, as the direct conversion does.
		GRID_STRIDE(i, n) {
			u16 h = ((const u16 *)s)[i];
			float f = st == F16 ? f16ToF32(h) : bf16ToF32(h);
			((u16 *)d)[i] = dt == F16 ? f32ToF16(f) : f32ToBF16(f);
		}
	} else {
		GRID_STRIDE(i, n) { store(d, i, dt, load(s, i, st)); }
	}
}

// syncgen_cast_f32_16 converts float32 to float16 (bf == 0) or bfloat16
// (bf == 1), four elements a thread when vec is set (src 16-byte and dst
// 8-byte aligned), the casts a bucket with a 16-bit wire does every step.
extern "C" __global__ void syncgen_cast_f32_16(u64 dst, u64 src, i64 n, u64 bf, u64 vec) {
	u16 *d = (u16 *)dst;
	const float *s = (const float *)src;
	i64 n4 = vec ? n / 4 : 0;
	GRID_STRIDE(j, n4) {
		float4 f = ((const float4 *)s)[j];
		u64 w;
		if (bf) w = (u64)f32ToBF16(f.x) | (u64)f32ToBF16(f.y) << 16 | (u64)f32ToBF16(f.z) << 32 | (u64)f32ToBF16(f.w) << 48;
		else w = (u64)f32ToF16(f.x) | (u64)f32ToF16(f.y) << 16 | (u64)f32ToF16(f.z) << 32 | (u64)f32ToF16(f.w) << 48;
		((u64 *)d)[j] = w;
	}
	GRID_STRIDE(k, n - n4 * 4) {
		i64 i = n4 * 4 + k;
		d[i] = bf ? f32ToBF16(s[i]) : f32ToF16(s[i]);
	}
}

// syncgen_cast_16_f32 converts float16 (bf == 0) or bfloat16 (bf == 1) to
// float32, exactly, four elements a thread when vec is set.
extern "C" __global__ void syncgen_cast_16_f32(u64 dst, u64 src, i64 n, u64 bf, u64 vec) {
	float *d = (float *)dst;
	const u16 *s = (const u16 *)src;
	i64 n4 = vec ? n / 4 : 0;
	GRID_STRIDE(j, n4) {
		u64 w = ((const u64 *)s)[j];
		float4 f;
		if (bf) f = make_float4(bf16ToF32((u16)w), bf16ToF32((u16)(w >> 16)), bf16ToF32((u16)(w >> 32)), bf16ToF32((u16)(w >> 48)));
		else f = make_float4(f16ToF32((u16)w), f16ToF32((u16)(w >> 16)), f16ToF32((u16)(w >> 32)), f16ToF32((u16)(w >> 48)));
		((float4 *)d)[j] = f;
	}
	GRID_STRIDE(k, n - n4 * 4) {
		i64 i = n4 * 4 + k;
		d[i] = bf ? bf16ToF32(s[i]) : f16ToF32(s[i]);
	}
}

// syncgen_div divides n elements of dtype at buf by div in place, as the CPU
// backend finishes an average: float32 arithmetic for f16, bf16 and f32,
// float64 for f64, integers truncated toward zero. The GPU backend uses it
// after an ncclSum where ncclAvg would round differently (NCCL multiplies
// each input by 1/n first, which is exact only when n is a power of two).
extern "C" __global__ void syncgen_div(u64 buf, i64 n, u64 dtype, i64 div) {
	void *p = (void *)buf;
	int dt = (int)dtype;
	float fd = (float)div;
	GRID_STRIDE(i, n) {
		switch (dt) {
		case F64: ((double *)p)[i] = ((double *)p)[i] / (double)div; break;
		case F32: ((float *)p)[i] = __fdiv_rn(((float *)p)[i], fd); break;
		case F16: ((u16 *)p)[i] = f32ToF16(__fdiv_rn(f16ToF32(((u16 *)p)[i]), fd)); break;
		case BF16: ((u16 *)p)[i] = f32ToBF16(__fdiv_rn(bf16ToF32(((u16 *)p)[i]), fd)); break;
		case I64: ((i64 *)p)[i] = ((i64 *)p)[i] / div; break;
		case I32: ((int *)p)[i] = ((int *)p)[i] / (int)div; break;
		case I8: ((signed char *)p)[i] = (signed char)(((signed char *)p)[i] / (int)div); break;
		default: ((unsigned char *)p)[i] = (unsigned char)(((unsigned char *)p)[i] / (int)div); break;
		}
	}
}

// ---- loss scaling, setting values, the optimizer update (runtime/internal/optim) ----

// isFinite reports whether element i of dtype dt at p, as stored, is
// neither infinite nor NaN: its exponent bits are not all ones.
__device__ __forceinline__ bool isFinite(const void *p, i64 i, int dt) {
	switch (dt) {
	case F64: return ((((const u64 *)p)[i] >> 52) & 0x7ff) != 0x7ff;
	case F32: return (((const u32 *)p)[i] & 0x7f800000u) != 0x7f800000u;
	case F16: return (((const u16 *)p)[i] & 0x7c00) != 0x7c00;
	case BF16: return (((const u16 *)p)[i] & 0x7f80) != 0x7f80;
	default: return true;
	}
}

// aligned4 says whether four elements of dt at p can be moved at once: a
// null pointer (an absent operand) is.
__device__ __forceinline__ bool aligned4(u64 p, int dt) {
	return (p & (u64)(4 * (dt == F32 ? 4 : 2) - 1)) == 0;
}

// load4 loads elements 4j..4j+3 of dt (f32, f16 or bf16) as float32, with
// one 16-byte (f32) or 8-byte (16-bit) load.
__device__ __forceinline__ void load4(const void *p, i64 j, int dt, float *v) {
	if (dt == F32) {
		float4 f = ((const float4 *)p)[j];
		v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
		return;
	}
	u64 w = ((const u64 *)p)[j];
	for (int k = 0; k < 4; k++) {
		u16 h = (u16)(w >> (16 * k));
		v[k] = dt == F16 ? f16ToF32(h) : bf16ToF32(h);
	}
}

// store4 stores four float32 values into elements 4j..4j+3 of dt, rounded
// once to dt as storeF32 does.
__device__ __forceinline__ void store4(void *p, i64 j, int dt, const float *v) {
	if (dt == F32) {
		((float4 *)p)[j] = make_float4(v[0], v[1], v[2], v[3]);
		return;
	}
	u64 w = 0;
	for (int k = 0; k < 4; k++) w |= (u64)(dt == F16 ? f32ToF16(v[k]) : f32ToBF16(v[k])) << (16 * k);
	((u64 *)p)[j] = w;
}

// syncgen_scale multiplies n elements of dtype at buf by the double whose
// bits are factorBits (a power of two) in place, as optim.Scaled does:
// float32 arithmetic for f32, f16 and bf16, float64 for f64, rounded to
// dtype. Where flag is not 0 (the address of an int32), a thread whose
// result is infinite or NaN stores 1 there; nothing clears it.
extern "C" __global__ void syncgen_scale(u64 buf, i64 n, u64 dtype, u64 factorBits, u64 flag) {
	void *p = (void *)buf;
	int dt = (int)dtype;
	double fd = bitsToDouble(factorBits);
	float ff = __double2float_rn(fd);
	bool nonFinite = false;
	// Four elements a thread where they are aligned for one load, as the
	// update's fast path; the same arithmetic.
	i64 done = 0;
	if ((dt == F32 || dt == F16 || dt == BF16) && aligned4(buf, dt)) {
		i64 n4 = n / 4;
		GRID_STRIDE(j, n4) {
			float v[4];
			load4(p, j, dt, v);
			for (int k = 0; k < 4; k++) {
				v[k] = __fmul_rn(v[k], ff);
				// The value as stored (rounded to 16 bits), finite or not.
				float r = dt == F32 ? v[k] : dt == F16 ? f16ToF32(f32ToF16(v[k])) : bf16ToF32(f32ToBF16(v[k]));
				nonFinite |= !(fabsf(r) <= 3.402823466e38f);
			}
			store4(p, j, dt, v);
		}
		done = n4 * 4;
	}
	GRID_STRIDE(k, n - done) {
		i64 i = done + k;
		switch (dt) {
		case F64: ((double *)p)[i] = __dmul_rn(((double *)p)[i], fd); break;
		case F32: ((float *)p)[i] = __fmul_rn(((float *)p)[i], ff); break;
		case F16: ((u16 *)p)[i] = f32ToF16(__fmul_rn(f16ToF32(((u16 *)p)[i]), ff)); break;
		case BF16: ((u16 *)p)[i] = f32ToBF16(__fmul_rn(bf16ToF32(((u16 *)p)[i]), ff)); break;
		default: break; // not a float: the host refuses it
		}
		if (!isFinite(p, i, dt)) nonFinite = true;
	}
	// A plain store: every writer writes the same 1.
	if (nonFinite && flag != 0) *(volatile int *)flag = 1;
}

// syncgen_set writes the double whose bits are valueBits into n elements of
// dtype at dst, rounded as the cast rounds (store, RoundTo's rounding).
extern "C" __global__ void syncgen_set(u64 dst, i64 n, u64 dtype, u64 valueBits) {
	void *p = (void *)dst;
	int dt = (int)dtype;
	double v = bitsToDouble(valueBits);
	GRID_STRIDE(i, n) { store(p, i, dt, v); }
}

// runtime/internal/optim's Kind values.
enum { OPT_SGD = 1, OPT_ADAMW = 2 };

// loadF32 loads float element i of dtype dt as optim.Apply sees it in
// float32: the float64 value rounded once to float32 (exact but for f64).
__device__ __forceinline__ float loadF32(const void *p, i64 i, int dt) {
	switch (dt) {
	case F64: return __double2float_rn(((const double *)p)[i]);
	case F32: return ((const float *)p)[i];
	case F16: return f16ToF32(((const u16 *)p)[i]);
	default: return bf16ToF32(((const u16 *)p)[i]);
	}
}

// storeF32 stores a float32 result into float element i of dtype dt,
// rounded once to dt (exact for f64 and f32).
__device__ __forceinline__ void storeF32(void *p, i64 i, int dt, float x) {
	switch (dt) {
	case F64: ((double *)p)[i] = (double)x; break;
	case F32: ((float *)p)[i] = x; break;
	case F16: ((u16 *)p)[i] = f32ToF16(x); break;
	default: ((u16 *)p)[i] = f32ToBF16(x); break;
	}
}

// apply32 is optim's apply32: the same operations in the same order, each
// rounded to float32 (a - b written __fadd_rn(a, -b), which is the same
// IEEE operation).
__device__ __forceinline__ void apply32(int kind, const float *c, float g, float &p, float &s0, float &s1) {
	if (kind == OPT_SGD) {
		if (c[1] != 0) g = __fadd_rn(g, __fmul_rn(c[1], p));
		if (c[2] != 0) {
			s0 = __fadd_rn(__fmul_rn(c[2], s0), g);
			g = s0;
		}
		p = __fadd_rn(p, -__fmul_rn(c[0], g));
	} else if (kind == OPT_ADAMW) {
		p = __fmul_rn(p, c[0]);
		s0 = __fadd_rn(__fmul_rn(c[1], s0), __fmul_rn(c[2], g));
		s1 = __fadd_rn(__fmul_rn(c[3], s1), __fmul_rn(__fmul_rn(c[4], g), g));
		// Go takes the square root in float64 and rounds it to float32,
		// which equals the correctly rounded float32 square root.
		float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(s1), c[6]), c[7]);
		p = __fadd_rn(p, -__fmul_rn(c[5], __fdiv_rn(s0, denom)));
	}
}

// apply64 is optim's apply64, in float64 and in the same order.
__device__ __forceinline__ void apply64(int kind, const double *c, double g, double &p, double &s0, double &s1) {
	if (kind == OPT_SGD) {
		if (c[1] != 0) g = __dadd_rn(g, __dmul_rn(c[1], p));
		if (c[2] != 0) {
			s0 = __dadd_rn(__dmul_rn(c[2], s0), g);
			g = s0;
		}
		p = __dadd_rn(p, -__dmul_rn(c[0], g));
	} else if (kind == OPT_ADAMW) {
		p = __dmul_rn(p, c[0]);
		s0 = __dadd_rn(__dmul_rn(c[1], s0), __dmul_rn(c[2], g));
		s1 = __dadd_rn(__dmul_rn(c[3], s1), __dmul_rn(__dmul_rn(c[4], g), g));
		double denom = __dadd_rn(__ddiv_rn(__dsqrt_rn(s1), c[6]), c[7]);
		p = __dadd_rn(p, -__dmul_rn(c[5], __ddiv_rn(s0, denom)));
	}
}

// syncgen_update applies one optimizer step to n elements, as
// optim.UpdateBytes does: the gradient from grad, the parameter from param
// and the state from state0 and state1 (0: none, taken as 0 and not
// stored), all but the gradient of the parameter dtype; the new parameter
// and state stored back rounded to the parameter dtype, and the parameter
// also into out (0: none) rounded to the out dtype. Where flag is not 0
// and the int32 there is not, nothing changes (a step that overflowed).
//
// types packs the small operands: bits 0-7 the gradient dtype, 8-15 the
// parameter dtype, 16-23 the out dtype, 24-31 the optimizer (optim.Kind),
// bit 32 float64 arithmetic (Hyper.F64). c0..c7 are the bits of the
// doubles Hyper.C, which the float32 arithmetic rounds to float32.
extern "C" __global__ void syncgen_update(u64 grad, u64 param, u64 state0, u64 state1, u64 out, u64 flag,
                                          i64 n, u64 types, u64 c0, u64 c1, u64 c2, u64 c3, u64 c4, u64 c5, u64 c6, u64 c7) {
	if (flag != 0 && *(const volatile int *)flag != 0) return;
	const void *gp = (const void *)grad;
	void *pp = (void *)param, *s0p = (void *)state0, *s1p = (void *)state1, *op = (void *)out;
	int gdt = (int)(types & 0xff), pdt = (int)((types >> 8) & 0xff), odt = (int)((types >> 16) & 0xff);
	int kind = (int)((types >> 24) & 0xff);
	bool f64 = (types >> 32) & 1;
	double cd[8] = {bitsToDouble(c0), bitsToDouble(c1), bitsToDouble(c2), bitsToDouble(c3),
	                bitsToDouble(c4), bitsToDouble(c5), bitsToDouble(c6), bitsToDouble(c7)};
	if (f64) {
		GRID_STRIDE(i, n) {
			double g = load(gp, i, gdt), p = load(pp, i, pdt);
			double s0 = s0p ? load(s0p, i, pdt) : 0, s1 = s1p ? load(s1p, i, pdt) : 0;
			apply64(kind, cd, g, p, s0, s1);
			store(pp, i, pdt, p);
			if (s0p) store(s0p, i, pdt, s0);
			if (s1p) store(s1p, i, pdt, s1);
			if (op) store(op, i, odt, p);
		}
		return;
	}
	float cf[8];
	for (int k = 0; k < 8; k++) cf[k] = __double2float_rn(cd[k]);
	// Four elements a thread, with 16-byte loads and stores, where the
	// parameters and state are f32 and every operand is aligned for it:
	// the same arithmetic, at nearer the copy bandwidth. The remainder
	// and every other case take the element loop below.
	i64 done = 0;
	if (pdt == F32 && (gdt == F32 || gdt == F16 || gdt == BF16) && (!op || odt == F32 || odt == F16 || odt == BF16) &&
	    aligned4(grad, gdt) && aligned4(param, F32) && aligned4(state0, F32) && aligned4(state1, F32) && aligned4(out, odt)) {
		i64 n4 = n / 4;
		GRID_STRIDE(j, n4) {
			float g[4], p[4], a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
			load4(gp, j, gdt, g);
			load4(pp, j, F32, p);
			if (s0p) load4(s0p, j, F32, a);
			if (s1p) load4(s1p, j, F32, b);
			for (int k = 0; k < 4; k++) apply32(kind, cf, g[k], p[k], a[k], b[k]);
			store4(pp, j, F32, p);
			if (s0p) store4(s0p, j, F32, a);
			if (s1p) store4(s1p, j, F32, b);
			if (op) store4(op, j, odt, p);
		}
		done = n4 * 4;
	}
	GRID_STRIDE(k, n - done) {
		i64 i = done + k;
		float g = loadF32(gp, i, gdt), p = loadF32(pp, i, pdt);
		float s0 = s0p ? loadF32(s0p, i, pdt) : 0.0f, s1 = s1p ? loadF32(s1p, i, pdt) : 0.0f;
		apply32(kind, cf, g, p, s0, s1);
		storeF32(pp, i, pdt, p);
		if (s0p) storeF32(s0p, i, pdt, s0);
		if (s1p) storeF32(s1p, i, pdt, s1);
		if (op) storeF32(op, i, odt, p);
	}
}

__device__ __forceinline__ u64 globaltimer() {
	u64 t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// syncgen_stamp stores the device clock (ns) at *stamp: the start of a run
// of fills that no spin precedes, whose time the next spin subtracts.
extern "C" __global__ void syncgen_stamp(u64 stamp) { *(u64 *)stamp = globaltimer(); }

// syncgen_spin keeps one warp busy until the device clock reaches a target:
// ns nanoseconds after *stamp when useStamp is set, else after its own
// start; and it leaves the target at *stamp. A spin that follows fills that
// followed another spin therefore ends ns after the previous spin's target:
// the spins keep a schedule, the fills and the gaps between kernels run
// inside it, and a fill that overruns its tensor's share is made up by the
// next spins. So a backward pass of many tensors lasts what the plan says.
// One block of one warp leaves the other multiprocessors free for NCCL's
// kernels, as a real backward pass's gaps would.
extern "C" __global__ void syncgen_spin(u64 ns, u64 stamp, u64 useStamp) {
	u64 now = globaltimer();
	u64 start = now;
	if (useStamp) {
		u64 s = *(volatile u64 *)stamp;
		if (s < start) start = s;
	}
	u64 target = start + ns;
	while (now < target) now = globaltimer();
	if (threadIdx.x == 0) *(volatile u64 *)stamp = target;
}

// syncgen_copy copies n 16-byte words: the copy-bandwidth reference the GPU
// benchmark measures next to cudaMemcpy.
extern "C" __global__ void syncgen_copy(u64 dst, u64 src, i64 n) {
	GRID_STRIDE(i, n) { ((float4 *)dst)[i] = ((const float4 *)src)[i]; }
}

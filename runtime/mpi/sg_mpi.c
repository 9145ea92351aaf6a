#include "sg_mpi.h"
#include "sg_half.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <pthread.h>

MPI_Comm sg_comm_world(void) { return MPI_COMM_WORLD; }
MPI_Comm sg_comm_null(void) { return MPI_COMM_NULL; }
MPI_Request sg_request_null(void) { return MPI_REQUEST_NULL; }
void *sg_in_place(void) { return MPI_IN_PLACE; }
MPI_Info sg_info_null(void) { return MPI_INFO_NULL; }

int sg_set_errors_return(MPI_Comm c) { return MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN); }

MPI_Datatype sg_datatype(int dtype) {
	switch (dtype) {
	case SG_F64: return MPI_DOUBLE;
	case SG_F32: return MPI_FLOAT;
	case SG_F16: return MPI_UINT16_T;
	case SG_BF16: return MPI_UINT16_T;
	case SG_I64: return MPI_INT64_T;
	case SG_I32: return MPI_INT32_T;
	case SG_I8: return MPI_INT8_T;
	case SG_U8: return MPI_UINT8_T;
	}
	return MPI_DATATYPE_NULL;
}

float sg_f16_to_f32(uint16_t h) { return f16_to_f32(h); }
uint16_t sg_f32_to_f16(float f) { return f32_to_f16(f); }
float sg_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }
uint16_t sg_f32_to_bf16(float f) { return f32_to_bf16(f); }

// SG_CLONES compiles a function twice on x86-64 with GCC, for the baseline
// ISA (SSE2) and for x86-64-v3 (AVX2), and picks one when the program
// starts: the wider vectors halve the time of the 16-bit operators, and the
// binaries still run on any x86-64. The results are the same either way:
// the loops do single float additions or multiplications (nothing to fuse
// into an FMA) and integer bit work.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define SG_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SG_CLONES
#endif

// The user-defined operators compute in float32 and round once to the
// 16-bit format, as CPU half-precision kernels commonly do. min and max
// propagate NaN. Each is one loop of branchless code that the compiler
// vectorises (see the CFLAGS in mpi.go).
#define SG_HALF_OP(name, load, store, expr)                                          \
	SG_CLONES static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {  \
		(void)dt;                                                                    \
		const uint16_t *restrict a = (const uint16_t *)in;                           \
		uint16_t *restrict b = (uint16_t *)inout;                                    \
		int n = *len;                                                                \
		for (int i = 0; i < n; i++) {                                                \
			float x = load(a[i]), y = load(b[i]);                                    \
			b[i] = store(expr);                                                      \
		}                                                                            \
	}

SG_HALF_OP(sg_f16_sum, f16_to_f32, f32_to_f16, x + y)
SG_HALF_OP(sg_f16_prod, f16_to_f32, f32_to_f16, x * y)
SG_HALF_OP(sg_f16_min, f16_to_f32, f32_to_f16, (x < y || x != x) ? x : y)
SG_HALF_OP(sg_f16_max, f16_to_f32, f32_to_f16, (x > y || x != x) ? x : y)
SG_HALF_OP(sg_bf16_sum, bf16_to_f32, f32_to_bf16, x + y)
SG_HALF_OP(sg_bf16_prod, bf16_to_f32, f32_to_bf16, x * y)
SG_HALF_OP(sg_bf16_min, bf16_to_f32, f32_to_bf16, (x < y || x != x) ? x : y)
SG_HALF_OP(sg_bf16_max, bf16_to_f32, f32_to_bf16, (x > y || x != x) ? x : y)

#ifdef SG_X86
// The 16-bit sum and product with vector conversions instead of the
// software ones, which cost several times more than the arithmetic (F16C's
// for f16, AVX2's integer lanes for bf16): the same values (f16_round_ps,
// bf16_round_ps), the tail of fewer than 8 by the software operator.
#define SG_X86_OP(name, isa, load, round, soft, vop)                                                  \
	__attribute__((target(isa))) static void name(void *in, void *inout, int *len, MPI_Datatype *dt) { \
		const uint16_t *a = (const uint16_t *)in;                                                     \
		uint16_t *b = (uint16_t *)inout;                                                              \
		int n = *len, i = 0;                                                                          \
		for (; i + 8 <= n; i += 8) {                                                                  \
			_mm_storeu_si128((__m128i *)(b + i), round(vop(load(a + i), load(b + i))));               \
		}                                                                                             \
		int rest = n - i;                                                                             \
		soft((void *)(a + i), b + i, &rest, dt);                                                      \
	}

SG_X86_OP(sg_f16_sum_f16c, "avx2,f16c", f16_load_ps, f16_round_ps, sg_f16_sum, _mm256_add_ps)
SG_X86_OP(sg_f16_prod_f16c, "avx2,f16c", f16_load_ps, f16_round_ps, sg_f16_prod, _mm256_mul_ps)
SG_X86_OP(sg_bf16_sum_avx2, "avx2", bf16_load_ps, bf16_round_ps, sg_bf16_sum, _mm256_add_ps)
SG_X86_OP(sg_bf16_prod_avx2, "avx2", bf16_load_ps, bf16_round_ps, sg_bf16_prod, _mm256_mul_ps)

// The vector casts between float32 and the 16-bit floats convert the
// elements below n rounded down to 8 and return that count (sg_cast does
// the rest).
#define SG_NARROW(name, isa, round)                                                            \
	__attribute__((target(isa))) static int64_t name(uint16_t *d, const float *s, int64_t n) { \
		int64_t i = 0;                                                                         \
		for (; i + 8 <= n; i += 8) {                                                           \
			_mm_storeu_si128((__m128i *)(d + i), round(_mm256_loadu_ps(s + i)));               \
		}                                                                                      \
		return i;                                                                              \
	}
#define SG_WIDEN(name, isa, load)                                                              \
	__attribute__((target(isa))) static int64_t name(float *d, const uint16_t *s, int64_t n) { \
		int64_t i = 0;                                                                         \
		for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, load(s + i));                       \
		return i;                                                                              \
	}

SG_NARROW(cast_f32_f16, "avx2,f16c", f16_round_ps)
SG_NARROW(cast_f32_bf16, "avx2", bf16_round_ps)
SG_WIDEN(cast_f16_f32, "avx2,f16c", f16_load_ps)
SG_WIDEN(cast_bf16_f32, "avx2", bf16_load_ps)
#endif

// half_fns lists the operators by [dtype is bf16][op] (avg is a sum).
static MPI_User_function *half_fns[2][6] = {
	{0, sg_f16_sum, sg_f16_sum, sg_f16_min, sg_f16_max, sg_f16_prod},
	{0, sg_bf16_sum, sg_bf16_sum, sg_bf16_min, sg_bf16_max, sg_bf16_prod},
};

// half_fn returns the operator of (bf16?, op): the vector ones for sum,
// avg and prod where the CPU has their instructions, else half_fns'.
static MPI_User_function *half_fn(int bf16, int op) {
#ifdef SG_X86
	int sum = op == SG_SUM || op == SG_AVG;
	if (!bf16 && cpu_f16c() && (sum || op == SG_PROD)) return sum ? sg_f16_sum_f16c : sg_f16_prod_f16c;
	if (bf16 && cpu_avx2() && (sum || op == SG_PROD)) return sum ? sg_bf16_sum_avx2 : sg_bf16_prod_avx2;
#endif
	return half_fns[bf16][op];
}

// user_op is a user-defined operator created on first use.
typedef struct {
	MPI_Op op;
	int made;
} user_op;

// user_op_get returns u's operator, creating it from fn (commutative) the
// first time; MPI_OP_NULL with *rc set when MPI refuses.
static MPI_Op user_op_get(user_op *u, MPI_User_function *fn, int *rc) {
	*rc = MPI_SUCCESS;
	if (!u->made) {
		*rc = MPI_Op_create(fn, 1, &u->op);
		if (*rc != MPI_SUCCESS) return MPI_OP_NULL;
		u->made = 1;
	}
	return u->op;
}

static user_op half_ops[2][6]; // [bf16?][op]

MPI_Op sg_op(int dtype, int op, int *rc) {
	*rc = MPI_SUCCESS;
	if (dtype != SG_F16 && dtype != SG_BF16) {
		switch (op) {
		case SG_SUM: case SG_AVG: return MPI_SUM;
		case SG_MIN: return MPI_MIN;
		case SG_MAX: return MPI_MAX;
		case SG_PROD: return MPI_PROD;
		}
		*rc = MPI_ERR_OP;
		return MPI_OP_NULL;
	}
	int b = dtype == SG_BF16;
	if (op < SG_SUM || op > SG_PROD) {
		*rc = MPI_ERR_OP;
		return MPI_OP_NULL;
	}
	return user_op_get(&half_ops[b][op], half_fn(b, op), rc);
}

sg_op_result sg_op_value(int dtype, int op) {
	sg_op_result r;
	r.op = sg_op(dtype, op, &r.rc);
	return r;
}

int sg_allgather_strided(void *buf, int count, int64_t stride, int dtype, MPI_Comm comm) {
	MPI_Datatype t = sg_datatype(dtype), block, strided;
	if (t == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
	MPI_Aint lb, extent;
	int rc = MPI_Type_get_extent(t, &lb, &extent);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_contiguous(count, t, &block);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_create_resized(block, 0, (MPI_Aint)stride * extent, &strided);
	MPI_Type_free(&block);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_commit(&strided);
	if (rc == MPI_SUCCESS) rc = MPI_Allgather(MPI_IN_PLACE, 0, strided, buf, 1, strided, comm);
	MPI_Type_free(&strided);
	return rc;
}

int sg_half_reduce(int dtype, int op, const void *in, void *inout, int n) {
	if ((dtype != SG_F16 && dtype != SG_BF16) || op < SG_SUM || op > SG_PROD) return -1;
	MPI_Datatype dt = MPI_UINT16_T;
	half_fn(dtype == SG_BF16, op)((void *)in, inout, &n, &dt);
	return 0;
}

// Casts between float32 and the 16-bit floats (a bucket's wire dtype):
// vector conversions where the CPU has them (F16C for f16, AVX2 integer
// lanes for bf16), else the software ones; the same values either way, and
// the same as package elem's CastBytes (TestCastMatchesGo).
#define SG_CAST_LOOP(D, S, conv) \
	for (int64_t i = start; i < n; i++) ((D *)dst)[i] = conv(((const S *)src)[i])
// SG_VECTOR runs a vector cast where the CPU can and says how far it got.
#ifdef SG_X86
#define SG_VECTOR(can, cast) ((can) ? (cast) : 0)
#else
#define SG_VECTOR(can, cast) 0
#endif

int sg_cast(void *dst, int ddt, const void *src, int sdt, int64_t n) {
	int64_t start;
	if (sdt == SG_F32 && ddt == SG_F16) {
		start = SG_VECTOR(cpu_f16c(), cast_f32_f16(dst, src, n));
		SG_CAST_LOOP(uint16_t, float, f32_to_f16);
	} else if (sdt == SG_F16 && ddt == SG_F32) {
		start = SG_VECTOR(cpu_f16c(), cast_f16_f32(dst, src, n));
		SG_CAST_LOOP(float, uint16_t, f16_to_f32);
	} else if (sdt == SG_F32 && ddt == SG_BF16) {
		start = SG_VECTOR(cpu_avx2(), cast_f32_bf16(dst, src, n));
		SG_CAST_LOOP(uint16_t, float, f32_to_bf16);
	} else if (sdt == SG_BF16 && ddt == SG_F32) {
		start = SG_VECTOR(cpu_avx2(), cast_bf16_f32(dst, src, n));
		SG_CAST_LOOP(float, uint16_t, bf16_to_f32);
	} else {
		return -1;
	}
	return 0;
}

// The batch executor. Each call from Go into C costs a Go process more than
// the call itself (the scheduler's bookkeeping, and a wake-up of Go's
// system monitor when it sleeps), and on a machine with as many ranks as
// cores that shows in every small collective: so a stream hands the
// barrier, the clock reads and the collective of a statement to C at once,
// and they run back to back as in a plain C program.

int64_t sg_monotonic_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The float divisions of avg_divide. When size is a power of two they
// multiply by its reciprocal instead: x * 2^-k and x / 2^k are the same
// real number, both correctly rounded, so the results are bit-identical
// (subnormals included), and a multiplication is several times cheaper.
// The 16-bit ones go through float32 with one rounding, as package elem's
// AvgDivide does.
#define SG_DIVIDE_LOOP(T, load, store)                                  \
	if (pow2) {                                                         \
		for (int64_t i = 0; i < n; i++) p[i] = store(load(p[i]) * r);  \
	} else {                                                            \
		for (int64_t i = 0; i < n; i++) p[i] = store(load(p[i]) / d);  \
	}
#define SG_SAME(x) (x)

SG_CLONES static void divide_f64(double *p, int64_t n, int size) {
	double d = size, r = 1.0 / d;
	int pow2 = (size & (size - 1)) == 0;
	SG_DIVIDE_LOOP(double, SG_SAME, SG_SAME)
}

SG_CLONES static void divide_f32(float *p, int64_t n, int size) {
	float d = (float)size, r = 1.0f / d;
	int pow2 = (size & (size - 1)) == 0;
	SG_DIVIDE_LOOP(float, SG_SAME, SG_SAME)
}

SG_CLONES static void divide_bf16_soft(uint16_t *p, int64_t n, int size) {
	float d = (float)size, r = 1.0f / d;
	int pow2 = (size & (size - 1)) == 0;
	SG_DIVIDE_LOOP(uint16_t, bf16_to_f32, f32_to_bf16)
}

static void divide_f16_soft(uint16_t *p, int64_t n, int size) {
	float d = (float)size, r = 1.0f / d;
	int pow2 = (size & (size - 1)) == 0;
	SG_DIVIDE_LOOP(uint16_t, f16_to_f32, f32_to_f16)
}

#ifdef SG_X86
// divide_f16_f16c and divide_bf16_avx2 are divide_f16_soft and
// divide_bf16_soft with vector conversions: the same values (f16_round_ps,
// bf16_round_ps).
__attribute__((target("avx2,f16c"))) static void divide_f16_f16c(uint16_t *p, int64_t n, int size) {
	float d = (float)size, r = 1.0f / d;
	int pow2 = (size & (size - 1)) == 0;
	__m256 vd = _mm256_set1_ps(d), vr = _mm256_set1_ps(r);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = f16_load_ps(p + i);
		_mm_storeu_si128((__m128i *)(p + i), f16_round_ps(pow2 ? _mm256_mul_ps(x, vr) : _mm256_div_ps(x, vd)));
	}
	divide_f16_soft(p + i, n - i, size);
}

__attribute__((target("avx2"))) static void divide_bf16_avx2(uint16_t *p, int64_t n, int size) {
	float d = (float)size, r = 1.0f / d;
	int pow2 = (size & (size - 1)) == 0;
	__m256 vd = _mm256_set1_ps(d), vr = _mm256_set1_ps(r);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = bf16_load_ps(p + i);
		_mm_storeu_si128((__m128i *)(p + i), bf16_round_ps(pow2 ? _mm256_mul_ps(x, vr) : _mm256_div_ps(x, vd)));
	}
	divide_bf16_soft(p + i, n - i, size);
}

// divide_half_pow2 divides 16-bit floats with mbits mantissa bits by
// size = 2^k by lowering each exponent by k. Where the quotient is a
// normal number that is exact, so it is the correctly rounded quotient
// the float path gives; zeros stay. A block of 16 holding anything else
// (a subnormal quotient or input, an infinity, a NaN) goes to the float
// path, slow. Integer lanes of 16 bits halve the float path's conversions.
__attribute__((target("avx2"))) static void divide_half_pow2(uint16_t *p, int64_t n, int size, int mbits,
                                                             void (*slow)(uint16_t *, int64_t, int)) {
	int k = __builtin_ctz((unsigned)size);
	int emax = mbits == 7 ? 0xff : 0x1f;
	const __m256i kv = _mm256_set1_epi16((short)k), emaxv = _mm256_set1_epi16((short)emax);
	const __m256i dk = _mm256_set1_epi16((short)(k << mbits)), abs = _mm256_set1_epi16(0x7fff);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(p + i));
		__m256i e = _mm256_and_si256(_mm256_srli_epi16(x, mbits), emaxv);
		__m256i normal = _mm256_and_si256(_mm256_cmpgt_epi16(e, kv), _mm256_cmpgt_epi16(emaxv, e));
		__m256i zero = _mm256_cmpeq_epi16(_mm256_and_si256(x, abs), _mm256_setzero_si256());
		if (_mm256_movemask_epi8(_mm256_or_si256(normal, zero)) != -1) {
			slow(p + i, 16, size);
			continue;
		}
		_mm256_storeu_si256((__m256i *)(p + i), _mm256_sub_epi16(x, _mm256_and_si256(normal, dk)));
	}
	slow(p + i, n - i, size);
}

static int pow2_above_1(int size) { return size > 1 && (size & (size - 1)) == 0; }

static void divide_f16(uint16_t *p, int64_t n, int size) {
	if (cpu_f16c() && pow2_above_1(size)) divide_half_pow2(p, n, size, 10, divide_f16_f16c);
	else if (cpu_f16c()) divide_f16_f16c(p, n, size);
	else divide_f16_soft(p, n, size);
}

static void divide_bf16(uint16_t *p, int64_t n, int size) {
	if (cpu_avx2() && pow2_above_1(size)) divide_half_pow2(p, n, size, 7, divide_bf16_avx2);
	else if (cpu_avx2()) divide_bf16_avx2(p, n, size);
	else divide_bf16_soft(p, n, size);
}
#else
static void divide_f16(uint16_t *p, int64_t n, int size) { divide_f16_soft(p, n, size); }
static void divide_bf16(uint16_t *p, int64_t n, int size) { divide_bf16_soft(p, n, size); }
#endif

// avg_divide divides n elements by size, exactly as package elem's
// AvgDivide does: in the element type, the 16-bit floats through float32
// with one rounding, the integers truncating.
static void avg_divide(void *buf, int dtype, int64_t n, int size) {
	switch (dtype) {
	case SG_F64: divide_f64(buf, n, size); break;
	case SG_F32: divide_f32(buf, n, size); break;
	case SG_F16: divide_f16(buf, n, size); break;
	case SG_BF16: divide_bf16(buf, n, size); break;
	case SG_I64: { int64_t *p = buf; for (int64_t i = 0; i < n; i++) p[i] /= size; break; }
	case SG_I32: { int32_t *p = buf; for (int64_t i = 0; i < n; i++) p[i] /= size; break; }
	case SG_I8: { int8_t *p = buf; for (int64_t i = 0; i < n; i++) p[i] = (int8_t)(p[i] / size); break; }
	case SG_U8: { uint8_t *p = buf; for (int64_t i = 0; i < n; i++) p[i] = (uint8_t)(p[i] / size); break; }
	}
}

void sg_avg_divide(void *buf, int dtype, int64_t n, int size) { avg_divide(buf, dtype, n, size); }

// Averages of two ranks: the division inside MPI's operator.
//
// An allreduce or reduce of two ranks applies its operator exactly once
// to each element, whatever algorithm MPI picks: an MPI operator has no
// identity, so two operands take one application. So an average of two
// ranks can divide inside the operator (SG_AVG_OP), on the block MPI has
// just reduced and still holds in cache, instead of in a pass over the
// whole buffer after the call, whose first touch reads it back from
// memory: package cpu asks for it where no divider thread can overlap
// that pass with the next piece, a collective of one piece. The
// values are the same: MPI's sum (the same float addition, or the same
// 16-bit operator), then avg_divide by 2. Integers keep the pass after
// the call: C's signed overflow is not MPI's.
SG_CLONES static void sum_f64(const double *restrict a, double *restrict b, int n) {
	for (int i = 0; i < n; i++) b[i] = a[i] + b[i];
}

SG_CLONES static void sum_f32(const float *restrict a, float *restrict b, int n) {
	for (int i = 0; i < n; i++) b[i] = a[i] + b[i];
}

static void sg_avg2_f64(void *in, void *inout, int *len, MPI_Datatype *dt) {
	(void)dt;
	sum_f64(in, inout, *len);
	divide_f64(inout, *len, 2);
}

static void sg_avg2_f32(void *in, void *inout, int *len, MPI_Datatype *dt) {
	(void)dt;
	sum_f32(in, inout, *len);
	divide_f32(inout, *len, 2);
}

static void sg_avg2_f16(void *in, void *inout, int *len, MPI_Datatype *dt) {
	half_fn(0, SG_SUM)(in, inout, len, dt);
	divide_f16(inout, *len, 2);
}

static void sg_avg2_bf16(void *in, void *inout, int *len, MPI_Datatype *dt) {
	half_fn(1, SG_SUM)(in, inout, len, dt);
	divide_bf16(inout, *len, 2);
}

// avg2_fns lists the two-rank average operators by dtype (SG_F64 to SG_BF16).
static MPI_User_function *avg2_fns[] = {0, sg_avg2_f64, sg_avg2_f32, sg_avg2_f16, sg_avg2_bf16};
static user_op avg2_ops[5]; // by dtype

static int has_avg2(int dtype) { return dtype >= SG_F64 && dtype <= SG_BF16; }

// avg2_op returns the two-rank average operator of dtype (has_avg2).
static MPI_Op avg2_op(int dtype, int *rc) { return user_op_get(&avg2_ops[dtype], avg2_fns[dtype], rc); }

int sg_avg2_reduce(int dtype, const void *in, void *inout, int n) {
	if (!has_avg2(dtype)) return -1;
	MPI_Datatype dt = sg_datatype(dtype);
	avg2_fns[dtype]((void *)in, inout, &n, &dt);
	return 0;
}

static int elem_size(int dtype) {
	switch (dtype) {
	case SG_F64: case SG_I64: return 8;
	case SG_F32: case SG_I32: return 4;
	case SG_F16: case SG_BF16: return 2;
	}
	return 1;
}

// The divider: a thread of its own that divides the pieces of an average
// while the MPI thread goes on with the next piece's collective. The
// division is a pass over memory as long as the collective's own last
// pass, and on a host with a core to spare per rank it then costs nothing
// but the last piece's share (which the two threads split). Jobs are taken
// in order; sg_divide_wait returns once every job posted so far is done.
//
// Waking a thread that sleeps on a condition variable takes longer than
// dividing a small piece, so neither side sleeps at once: the divider
// looks for work for spin_ns after its last job (and is woken, by
// div_wake, when an average's collective starts), and the waiter looks
// for the divider's end for spin_ns before it sleeps. That spends the
// spare core, which is what the divider is for (ahead is chosen only where
// there is one).
//
// len, busy and awake change under mu but are read without it by the
// spinners: busy is set before len drops (so len == 0 && busy == 0 is
// never seen while a job runs), and busy's release store after a job
// orders the job's writes before the waiter's acquire load.
enum { div_queue_len = 64, split_bytes = 256 << 10 };
static const int64_t spin_ns = 2000000;

typedef struct {
	void *buf;
	int dtype, size;
	int64_t n;
} div_job;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv; // a job posted, done, or a kick
	pthread_t thread;
	int started, failed;
	div_job q[div_queue_len];
	int head, len, busy;
	int awake, kick; // the divider is not asleep on cv; wake it up
} divider = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline int div_load(int *v) { return __atomic_load_n(v, __ATOMIC_ACQUIRE); }
static inline void div_store(int *v, int x) { __atomic_store_n(v, x, __ATOMIC_RELEASE); }

static void *div_loop(void *arg) {
	(void)arg;
	pthread_mutex_lock(&divider.mu);
	for (;;) {
		while (divider.len == 0) {
			pthread_mutex_unlock(&divider.mu);
			int64_t until = sg_monotonic_ns() + spin_ns;
			while (div_load(&divider.len) == 0 && sg_monotonic_ns() < until) cpu_relax();
			pthread_mutex_lock(&divider.mu);
			if (divider.len > 0) break;
			div_store(&divider.awake, 0);
			while (divider.len == 0 && !divider.kick) pthread_cond_wait(&divider.cv, &divider.mu);
			divider.kick = 0;
			div_store(&divider.awake, 1);
		}
		div_job j = divider.q[divider.head];
		divider.head = (divider.head + 1) % div_queue_len;
		div_store(&divider.busy, 1);
		div_store(&divider.len, divider.len - 1);
		pthread_mutex_unlock(&divider.mu);
		avg_divide(j.buf, j.dtype, j.n, j.size);
		pthread_mutex_lock(&divider.mu);
		div_store(&divider.busy, 0);
		pthread_cond_broadcast(&divider.cv);
	}
	return NULL;
}

// div_start starts the divider once; it says whether it runs. Call with
// mu held.
static int div_start(void) {
	if (!divider.started && !divider.failed) {
		divider.awake = 1;
		if (pthread_create(&divider.thread, NULL, div_loop, NULL) == 0) divider.started = 1;
		else divider.failed = 1;
	}
	return divider.started;
}

// div_wake has the divider look for work, ahead of an average's pieces.
static void div_wake(void) {
	if (div_load(&divider.awake)) return;
	pthread_mutex_lock(&divider.mu);
	if (div_start()) {
		divider.kick = 1;
		pthread_cond_broadcast(&divider.cv);
	}
	pthread_mutex_unlock(&divider.mu);
}

// div_post hands a division to the divider, or does it here when the
// thread cannot be started.
static void div_post(void *buf, int dtype, int64_t n, int size) {
	if (n == 0) return;
	pthread_mutex_lock(&divider.mu);
	if (!div_start()) {
		pthread_mutex_unlock(&divider.mu);
		avg_divide(buf, dtype, n, size);
		return;
	}
	while (divider.len == div_queue_len) pthread_cond_wait(&divider.cv, &divider.mu);
	divider.q[(divider.head + divider.len) % div_queue_len] = (div_job){buf, dtype, size, n};
	div_store(&divider.len, divider.len + 1);
	pthread_cond_broadcast(&divider.cv);
	pthread_mutex_unlock(&divider.mu);
}

static int div_idle(void) { return div_load(&divider.len) == 0 && div_load(&divider.busy) == 0; }

void sg_divide_wait(void) {
	int64_t until = sg_monotonic_ns() + spin_ns;
	while (!div_idle() && sg_monotonic_ns() < until) cpu_relax();
	if (div_idle()) return;
	pthread_mutex_lock(&divider.mu);
	while (divider.len > 0 || divider.busy) pthread_cond_wait(&divider.cv, &divider.mu);
	pthread_mutex_unlock(&divider.mu);
}

// divide_piece divides one piece of an average as c->avg says: here
// (SG_AVG_INLINE), on the divider (SG_AVG_POST), or, for the last piece of
// a collective (SG_AVG_LAST), split between the two, and then waits for
// every division posted before it.
static void divide_piece(sg_cmd *c, void *p, int64_t n, int final) {
	int how = c->avg == SG_AVG_LAST && !final ? SG_AVG_POST : c->avg;
	switch (how) {
	case SG_AVG_INLINE:
	case SG_AVG_OP: // where the operator could not divide
		avg_divide(p, c->dtype, n, c->size);
		break;
	case SG_AVG_POST: div_post(p, c->dtype, n, c->size); break;
	case SG_AVG_LAST: {
		// Split only with the divider awake, and above split_bytes: below,
		// handing over takes longer than the half it would save.
		int split = div_load(&divider.awake) && n * elem_size(c->dtype) >= split_bytes;
		int64_t half = split ? n / 2 : 0;
		div_post(p, c->dtype, half, c->size);
		avg_divide((char *)p + half * elem_size(c->dtype), c->dtype, n - half, c->size);
		sg_divide_wait();
		break;
	}
	}
}

// allreduce_hier allreduces n elements at p in Horovod's hierarchical form:
// a reduce-scatter inside the host (local rank i gets block i, the n
// elements split as evenly as they go, the first n % lsize blocks one
// larger), an allreduce of this rank's block across hosts, and an
// allgather of the blocks inside the host. Every element is the same
// reduction of every rank's inputs as a flat allreduce.
static int allreduce_hier(sg_cmd *c, char *p, int n, MPI_Datatype t, MPI_Op op) {
	int ls = c->lsize, lr = c->lrank, esz = elem_size(c->dtype);
	int *counts = malloc(2 * (size_t)ls * sizeof(int));
	if (counts == NULL) return MPI_ERR_NO_MEM;
	int *displs = counts + ls;
	for (int i = 0, d = 0; i < ls; i++) {
		counts[i] = n / ls + (i < n % ls);
		displs[i] = d;
		d += counts[i];
	}
	// In place, the reduced block lands at the start of the buffer; its
	// move to the block's place counts in the reduce-scatter's time. Each
	// phase is timed around its MPI call, for the report's phase figures.
	int64_t t0 = sg_monotonic_ns();
	int rc = MPI_Reduce_scatter(MPI_IN_PLACE, p, counts, t, op, c->intra);
	if (rc == MPI_SUCCESS && displs[lr] > 0) memmove(p + (int64_t)displs[lr] * esz, p, (size_t)counts[lr] * esz);
	int64_t t1 = sg_monotonic_ns();
	if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, p + (int64_t)displs[lr] * esz, counts[lr], t, op, c->inter);
	int64_t t2 = sg_monotonic_ns();
	if (rc == MPI_SUCCESS) rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, counts, displs, t, c->intra);
	int64_t t3 = sg_monotonic_ns();
	c->phase_ns[0] += t1 - t0;
	c->phase_ns[1] += t2 - t1;
	c->phase_ns[2] += t3 - t2;
	free(counts);
	return rc;
}

// run_coll runs one allreduce, broadcast or reduce in pieces of c->chunk
// elements.
static int run_coll(sg_cmd *c) {
	MPI_Datatype t = sg_datatype(c->dtype);
	if (t == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
	int rc = MPI_SUCCESS;
	MPI_Op op = MPI_OP_NULL;
	// SG_AVG_OP divides inside the operator (avg2_op) where that is
	// exact, a float average by two over a comm of two ranks, else inline.
	int divided = c->avg == SG_AVG_OP && c->size == 2 && (c->kind == SG_CMD_ALLREDUCE || c->kind == SG_CMD_REDUCE) &&
	              has_avg2(c->dtype);
	if (divided) {
		int comm_size = 0;
		divided = MPI_Comm_size(c->comm, &comm_size) == MPI_SUCCESS && comm_size == 2;
	}
	if (c->kind != SG_CMD_BCAST) {
		op = divided ? avg2_op(c->dtype, &rc) : sg_op(c->dtype, c->op, &rc);
		if (rc != MPI_SUCCESS) return rc;
	}
	int64_t chunk = c->chunk > 0 && c->chunk <= 0x7fffffff ? c->chunk : 0x7fffffff;
	int esz = elem_size(c->dtype);
	if (!divided && (c->avg == SG_AVG_POST || c->avg == SG_AVG_LAST)) div_wake(); // awake by the time the piece is done
	c->phase_ns[0] = c->phase_ns[1] = c->phase_ns[2] = 0;
	for (int64_t off = 0; off < c->count; off += chunk) {
		int n = (int)(c->count - off < chunk ? c->count - off : chunk);
		char *p = (char *)c->buf + off * esz;
		c->at = off;
		switch (c->kind) {
		case SG_CMD_ALLREDUCE:
			rc = MPI_Allreduce(MPI_IN_PLACE, p, n, t, op, c->comm);
			break;
		case SG_CMD_ALLREDUCE_HIER:
			rc = allreduce_hier(c, p, n, t, op);
			break;
		case SG_CMD_BCAST:
			rc = MPI_Bcast(p, n, t, c->root, c->comm);
			break;
		case SG_CMD_REDUCE:
			if (c->rank == c->root) rc = MPI_Reduce(MPI_IN_PLACE, p, n, t, op, c->root, c->comm);
			else rc = MPI_Reduce(p, NULL, n, t, op, c->root, c->comm);
			break;
		}
		if (rc != MPI_SUCCESS) return rc;
		if (c->avg && !divided && (c->kind == SG_CMD_ALLREDUCE || c->kind == SG_CMD_ALLREDUCE_HIER || c->rank == c->root)) divide_piece(c, p, n, off + n >= c->count);
	}
	return MPI_SUCCESS;
}

// warm_bytes: a batch that starts with a barrier (the step's) first reads
// the buffer of its collective when that is at most this large, so that
// the collective finds it in the core's cache as it would in a loop of
// MPI calls. Between two steps the runtime's own Go code (the step's
// bookkeeping, timing, reports) runs on the same core and can evict it.
// The read runs before the barrier, where the rank waits for the others
// anyway, and outside the timed span. It pays off for small buffers only,
// so larger ones are left alone (the paired runs: bench/results/
// 2026-12-runtime-comments.md, "Warming a small buffer").
enum { warm_bytes = 64 << 10 };

static void warm_buffer(sg_cmd *cmds, int n) {
	if (n == 0 || cmds[0].kind != SG_CMD_BARRIER) return;
	for (int i = 1; i < n; i++) {
		sg_cmd *c = &cmds[i];
		if (c->kind == SG_CMD_BARRIER || c->kind == SG_CMD_STAMP) continue;
		int64_t bytes = c->count * elem_size(c->dtype);
		if (bytes <= warm_bytes) {
			const volatile char *p = c->buf;
			char sum = 0;
			for (int64_t k = 0; k < bytes; k += 64) sum += p[k];
			(void)sum;
		}
		return;
	}
}

int sg_run(sg_cmd *cmds, int n) {
	warm_buffer(cmds, n);
	for (int i = 0; i < n; i++) {
		sg_cmd *c = &cmds[i];
		int rc = MPI_SUCCESS;
		switch (c->kind) {
		case SG_CMD_BARRIER: rc = MPI_Barrier(c->comm); break;
		case SG_CMD_STAMP: __atomic_store_n(&c->t, sg_monotonic_ns(), __ATOMIC_RELEASE); break;
		case SG_CMD_ALLREDUCE: case SG_CMD_ALLREDUCE_HIER: case SG_CMD_BCAST: case SG_CMD_REDUCE: rc = run_coll(c); break;
		default: rc = MPI_ERR_OTHER;
		}
		c->rc = rc;
		if (rc != MPI_SUCCESS) {
			sg_divide_wait(); // no division left running on a failed collective's buffer
			return i;
		}
	}
	return n;
}

// sg_control_var reads the MPI_T control variable name as text into out
// (NUL-terminated, at most outlen bytes). It returns MPI_SUCCESS, -1 when
// the library has no such variable or its type is not one read here, or
// the MPI error code of the call that failed.
int sg_control_var(const char *name, char *out, int outlen) {
	int provided, idx, count, rc;
	out[0] = 0;
	rc = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_T_cvar_get_index(name, &idx);
	if (rc != MPI_SUCCESS) {
		MPI_T_finalize();
		return rc == MPI_T_ERR_INVALID_NAME ? -1 : rc;
	}
	char vname[256], desc[1024];
	int nlen = sizeof vname, dlen = sizeof desc, verbosity, bind, scope;
	MPI_Datatype dt;
	MPI_T_enum enumtype;
	rc = MPI_T_cvar_get_info(idx, vname, &nlen, &verbosity, &dt, &enumtype, desc, &dlen, &bind, &scope);
	if (rc != MPI_SUCCESS) {
		MPI_T_finalize();
		return rc;
	}
	MPI_T_cvar_handle h;
	rc = MPI_T_cvar_handle_alloc(idx, NULL, &h, &count);
	if (rc != MPI_SUCCESS) {
		MPI_T_finalize();
		return rc;
	}
	// Numbers are one element; a string up to its count of chars.
	union {
		int i;
		unsigned u;
		unsigned long ul;
		unsigned long long ull;
		long long ll;
		double d;
		_Bool b;
		char s[4096];
	} v;
	memset(&v, 0, sizeof v);
	if (dt == MPI_CHAR && count >= (int)sizeof v.s) {
		rc = -1;
	} else {
		rc = MPI_T_cvar_read(h, &v);
	}
	if (rc == MPI_SUCCESS) {
		if (dt == MPI_INT) snprintf(out, outlen, "%d", v.i);
		else if (dt == MPI_UNSIGNED) snprintf(out, outlen, "%u", v.u);
		else if (dt == MPI_UNSIGNED_LONG) snprintf(out, outlen, "%lu", v.ul);
		else if (dt == MPI_UNSIGNED_LONG_LONG) snprintf(out, outlen, "%llu", v.ull);
		else if (dt == MPI_LONG_LONG) snprintf(out, outlen, "%lld", v.ll);
		else if (dt == MPI_DOUBLE) snprintf(out, outlen, "%g", v.d);
		else if (dt == MPI_C_BOOL) snprintf(out, outlen, "%s", v.b ? "true" : "false");
		else if (dt == MPI_CHAR) snprintf(out, outlen, "%s", v.s);
		else rc = -1;
	}
	MPI_T_cvar_handle_free(&h);
	MPI_T_finalize();
	return rc;
}

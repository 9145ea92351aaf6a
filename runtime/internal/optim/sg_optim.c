//go:build cgo

// The optimizer update and loss scaling on 8 elements at a time, with AVX2
// (and F16C for f16). They compute what the Go loops of bytes.go compute,
// bit for bit: the same IEEE float32 operations in the same order (apply32,
// Scaled), or float64 ones for f64 parameters (apply64), each rounded to
// nearest even, and the same conversions to and
// from the 16-bit floats (sg_half.h; go_nan makes its loads' NaNs Go's).
// What makes that hold:
//
//   - No multiply-add: the functions' targets name avx2 and f16c, not fma,
//     so the compiler has no fused instruction to contract a product and a
//     sum into; and cgo.go compiles with -std=c11, whose default is
//     -ffp-contract=off (cgo does not accept that flag itself). No
//     -ffast-math (checked below), which would reorder and approximate.
//   - Division and square root are the correctly rounded vdivps and
//     vsqrtps (vdivpd and vsqrtpd in float64, as Go's division and
//     math.Sqrt). Go's float32(math.Sqrt(float64(x))) is the correctly
//     rounded float32 square root as well (a double's 53 bits are more than
//     the 2*24+2 that make the double rounding innocuous).
//   - Subnormals are computed, not flushed: the code leaves MXCSR as it
//     finds it, with flush-to-zero and denormals-are-zero off, as Go's own
//     code has it.
//   - NaNs: an operation with one NaN operand gives that NaN, made quiet,
//     in AVX as in Go's SSE code, and an invalid operation the same
//     default NaN (0xffc00000). Where two NaNs meet, the result is the
//     first operand's; the compiler may swap the operands of an addition,
//     so the additions of two computed values say which comes first
//     (add_nan_first), as the Go source writes them. Every multiplication
//     has a finite constant operand (sg_update leaves other constants to
//     Go) but (c4*g)*g, whose operands are the same NaN if any.

// The elements below n rounded down to 8 are done here; package optim
// does the rest in Go. Each operand is read before the same element of
// any other operand is written, 8 elements at a time, so that Out may be
// the gradient's own memory.

#include "sg_optim.h"
#include "sg_half.h"
#include <math.h>

#ifdef __FAST_MATH__
#error "sg_optim.c must be compiled without -ffast-math: its results must be Go's bit for bit"
#endif

#ifdef SG_X86

#define SG_ISA __attribute__((target("avx2,f16c")))

// go_nan returns v with every NaN replaced by the positive quiet NaN
// 0x7fc00000, which is what Go's F16ToF32 and BF16ToF32 (and so LoadAll)
// give for any 16-bit NaN.
SG_ISA static inline __m256 go_nan(__m256 v) {
	return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

// load8 returns elements i..i+7 of base (elements of dtype dt: f32, f16 or
// bf16) as float32, as LoadAll and a conversion to float32 give them.
SG_ISA static inline __m256 load8(const void *base, int dt, int64_t i) {
	switch (dt) {
	case SG_OPT_F16: return go_nan(f16_load_ps((const uint16_t *)base + i));
	case SG_OPT_BF16: return go_nan(bf16_load_ps((const uint16_t *)base + i));
	default: return _mm256_loadu_ps((const float *)base + i);
	}
}

// store8 stores v as elements i..i+7 of base (elements of dt), rounded as
// StoreAll rounds.
SG_ISA static inline void store8(void *base, int dt, int64_t i, __m256 v) {
	switch (dt) {
	case SG_OPT_F16: _mm_storeu_si128((__m128i *)((uint16_t *)base + i), f16_round_ps(v)); break;
	case SG_OPT_BF16: _mm_storeu_si128((__m128i *)((uint16_t *)base + i), bf16_round_ps(v)); break;
	default: _mm256_storeu_ps((float *)base + i, v);
	}
}

// add_nan_first is a + b, with a's NaN (made quiet) when both are NaNs:
// what the Go compiler's code for apply32 gives, a before b as the source
// writes them (the tests compare).
SG_ISA static inline __m256 add_nan_first(__m256 a, __m256 b) {
	__m256 quiet = _mm256_or_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000)));
	return _mm256_blendv_ps(_mm256_add_ps(a, b), quiet, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

// The constants of an update, one vector each.
typedef struct {
	__m256 c[8];
	int wd, momentum; // SGD: the weight decay's and the momentum's are not zero
} consts8;

// sgd8 is apply32's SGD on 8 elements, in the same order: every product is
// rounded before the sum it enters.
SG_ISA static inline void sgd8(const consts8 *k, __m256 g, __m256 *p, __m256 *s0) {
	if (k->wd) g = add_nan_first(g, _mm256_mul_ps(k->c[1], *p));
	if (k->momentum) {
		*s0 = add_nan_first(_mm256_mul_ps(k->c[2], *s0), g);
		g = *s0;
	}
	*p = _mm256_sub_ps(*p, _mm256_mul_ps(k->c[0], g));
}

// adamw8 is apply32's AdamW on 8 elements, in the same order.
SG_ISA static inline void adamw8(const consts8 *k, __m256 g, __m256 *p, __m256 *s0, __m256 *s1) {
	*p = _mm256_mul_ps(*p, k->c[0]);
	*s0 = add_nan_first(_mm256_mul_ps(k->c[1], *s0), _mm256_mul_ps(k->c[2], g));
	*s1 = add_nan_first(_mm256_mul_ps(k->c[3], *s1), _mm256_mul_ps(_mm256_mul_ps(k->c[4], g), g));
	__m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(*s1), k->c[6]), k->c[7]);
	*p = _mm256_sub_ps(*p, _mm256_mul_ps(k->c[5], _mm256_div_ps(*s0, denom)));
}

// update_loop applies the update to the elements below n rounded down to
// 8 and returns how many it did. update_avx2 calls it with the dtypes as
// constants for the common cases, so that the compiler drops the other
// cases of load8 and store8 from the loop.
SG_ISA static inline __attribute__((always_inline)) int64_t update_loop(const consts8 *k, int kind, int gdt, int pdt,
                                                                        int odt, const void *grad, void *param,
                                                                        void *state0, void *state1, void *out,
                                                                        int64_t n) {
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 g = load8(grad, gdt, i), p = load8(param, pdt, i);
		__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
		if (state0) s0 = load8(state0, pdt, i);
		if (state1) s1 = load8(state1, pdt, i);
		if (kind == SG_OPT_SGD) sgd8(k, g, &p, &s0);
		else adamw8(k, g, &p, &s0, &s1);
		store8(param, pdt, i, p);
		if (state0) store8(state0, pdt, i, s0);
		if (state1) store8(state1, pdt, i, s1);
		if (out) store8(out, odt, i, p);
	}
	return i;
}

SG_ISA static int64_t update_avx2(const sg_update_args *a, const void *grad, void *param, void *state0, void *state1,
                                  void *out, int64_t n) {
	consts8 k;
	for (int j = 0; j < 8; j++) k.c[j] = _mm256_set1_ps(a->c[j]);
	k.wd = a->c[1] != 0;
	k.momentum = a->c[2] != 0;
	int kind = a->kind, gdt = a->grad_dt, pdt = a->param_dt, odt = a->out_dt;
	enum { F32 = SG_OPT_F32, F16 = SG_OPT_F16, BF16 = SG_OPT_BF16 };
	if (gdt == F32 && pdt == F32) return update_loop(&k, kind, F32, F32, odt, grad, param, state0, state1, out, n);
	if (gdt == BF16 && pdt == F32) return update_loop(&k, kind, BF16, F32, odt, grad, param, state0, state1, out, n);
	if (gdt == F16 && pdt == F32) return update_loop(&k, kind, F16, F32, odt, grad, param, state0, state1, out, n);
	if (gdt == BF16 && pdt == BF16) return update_loop(&k, kind, BF16, BF16, odt, grad, param, state0, state1, out, n);
	if (gdt == F16 && pdt == F16) return update_loop(&k, kind, F16, F16, odt, grad, param, state0, state1, out, n);
	return update_loop(&k, kind, gdt, pdt, odt, grad, param, state0, state1, out, n);
}

// The float64 update (Hyper.F64: parameters of f64), 4 elements a vector:
// apply64's operations in the same order, as sgd8 and adamw8 are apply32's.

// add_nan_first_pd is add_nan_first on doubles.
SG_ISA static inline __m256d add_nan_first_pd(__m256d a, __m256d b) {
	__m256d quiet = _mm256_or_pd(a, _mm256_castsi256_pd(_mm256_set1_epi64x(0x0008000000000000LL)));
	return _mm256_blendv_pd(_mm256_add_pd(a, b), quiet, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}

// The constants of a float64 update, one vector each.
typedef struct {
	__m256d c[8];
	int wd, momentum; // SGD: the weight decay's and the momentum's are not zero
} consts4d;

// sgd4d is apply64's SGD on 4 elements, in the same order.
SG_ISA static inline void sgd4d(const consts4d *k, __m256d g, __m256d *p, __m256d *s0) {
	if (k->wd) g = add_nan_first_pd(g, _mm256_mul_pd(k->c[1], *p));
	if (k->momentum) {
		*s0 = add_nan_first_pd(_mm256_mul_pd(k->c[2], *s0), g);
		g = *s0;
	}
	*p = _mm256_sub_pd(*p, _mm256_mul_pd(k->c[0], g));
}

// adamw4d is apply64's AdamW on 4 elements, in the same order.
SG_ISA static inline void adamw4d(const consts4d *k, __m256d g, __m256d *p, __m256d *s0, __m256d *s1) {
	*p = _mm256_mul_pd(*p, k->c[0]);
	*s0 = add_nan_first_pd(_mm256_mul_pd(k->c[1], *s0), _mm256_mul_pd(k->c[2], g));
	*s1 = add_nan_first_pd(_mm256_mul_pd(k->c[3], *s1), _mm256_mul_pd(_mm256_mul_pd(k->c[4], g), g));
	__m256d denom = _mm256_add_pd(_mm256_div_pd(_mm256_sqrt_pd(*s1), k->c[6]), k->c[7]);
	*p = _mm256_sub_pd(*p, _mm256_mul_pd(k->c[5], _mm256_div_pd(*s0, denom)));
}

// update_f64_avx2 applies the float64 update to the elements below n
// rounded down to 8 (as the float32 kernels, so that the callers split the
// same way) and returns how many it did.
SG_ISA static int64_t update_f64_avx2(const sg_update_args *a, const double *grad, double *param, double *state0,
                                      double *state1, double *out, int64_t n) {
	consts4d k;
	for (int j = 0; j < 8; j++) k.c[j] = _mm256_set1_pd(a->d[j]);
	k.wd = a->d[1] != 0;
	k.momentum = a->d[2] != 0;
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		for (int64_t h = i; h < i + 8; h += 4) {
			__m256d g = _mm256_loadu_pd(grad + h), p = _mm256_loadu_pd(param + h);
			__m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
			if (state0) s0 = _mm256_loadu_pd(state0 + h);
			if (state1) s1 = _mm256_loadu_pd(state1 + h);
			if (a->kind == SG_OPT_SGD) sgd4d(&k, g, &p, &s0);
			else adamw4d(&k, g, &p, &s0, &s1);
			_mm256_storeu_pd(param + h, p);
			if (state0) _mm256_storeu_pd(state0 + h, s0);
			if (state1) _mm256_storeu_pd(state1 + h, s1);
			if (out) _mm256_storeu_pd(out + h, p);
		}
	}
	return i;
}

// scale_avx2 is scaleRange's arithmetic: the product in float32, rounded to
// the dtype; a NaN stored in f16 or bf16 is the positive quiet NaN, as
// Scaled's RoundTo makes it. non_finite collects whether any result stored
// is infinite or NaN.
SG_ISA static sg_scale_result scale_avx2(void *buf, int dt, float factor, int64_t n) {
	const __m256 f = _mm256_set1_ps(factor);
	const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256 inf = _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000));
	__m256i bad = _mm256_setzero_si256(); // f32: a lane set where a result is not finite
	__m128i bad16 = _mm_setzero_si128();   // f16, bf16: the same
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 y = _mm256_mul_ps(load8(buf, dt, i), f);
		if (dt == SG_OPT_F32) {
			_mm256_storeu_ps((float *)buf + i, y);
			bad = _mm256_or_si256(bad, _mm256_castps_si256(_mm256_cmp_ps(_mm256_and_ps(y, abs), inf, _CMP_NLT_UQ)));
			continue;
		}
		y = go_nan(y);
		__m128i h, limit;
		if (dt == SG_OPT_F16) {
			h = f16_round_ps(y);
			limit = _mm_set1_epi16(0x7bff); // above: infinity or NaN
		} else {
			h = bf16_round_ps(y);
			limit = _mm_set1_epi16(0x7f7f);
		}
		_mm_storeu_si128((__m128i *)((uint16_t *)buf + i), h);
		__m128i big = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), limit);
		bad16 = _mm_or_si128(bad16, big);
	}
	sg_scale_result r = {i, !_mm256_testz_si256(bad, bad) || !_mm_testz_si128(bad16, bad16)};
	return r;
}

#endif // SG_X86

// valid says whether dt is one of the dtypes the kernels load and store.
static int valid(int dt) { return dt == SG_OPT_F32 || dt == SG_OPT_F16 || dt == SG_OPT_BF16; }

int sg_kernels(void) {
#ifdef SG_X86
	return cpu_f16c();
#else
	return 0;
#endif
}

int64_t sg_update(sg_update_args a, const void *grad, void *param, void *state0, void *state1, void *out, int64_t n) {
	// The kernels take the optimizers' own states only (SGD's momentum
	// buffer with a momentum, both of AdamW's moments) and finite
	// constants, so that no NaN of a constant meets another NaN (see
	// add_nan_first). Other combinations never come from the runtime; the
	// Go loop does them.
	int momentum = a.f64 ? a.d[2] != 0 : a.c[2] != 0;
	int states_ok = a.kind == SG_OPT_SGD ? state1 == NULL && (state0 != NULL) == momentum
	                                     : a.kind == SG_OPT_ADAMW && state0 != NULL && state1 != NULL;
	int finite = 1;
	for (int j = 0; j < 8; j++) finite &= (a.f64 ? isfinite(a.d[j]) : isfinite(a.c[j])) != 0;
	if (!finite || !states_ok) return 0;
	if (a.f64) {
		// Every operand of f64: the arithmetic is float64 from memory to
		// memory, with no conversion.
		if (a.grad_dt != SG_OPT_F64 || a.param_dt != SG_OPT_F64 || (out != NULL && a.out_dt != SG_OPT_F64)) return 0;
#ifdef SG_X86
		if (cpu_f16c()) return update_f64_avx2(&a, grad, param, state0, state1, out, n);
#endif
		return 0;
	}
	if (!valid(a.grad_dt) || !valid(a.param_dt) || (out != NULL && !valid(a.out_dt))) return 0;
#ifdef SG_X86
	if (cpu_f16c()) return update_avx2(&a, grad, param, state0, state1, out, n);
#endif
	(void)grad, (void)param, (void)n;
	return 0;
}

sg_scale_result sg_scale(void *buf, int32_t dtype, float factor, int64_t n) {
#ifdef SG_X86
	// A NaN factor (not a power of two) is left to the Go loop: its NaN
	// would meet the elements' NaNs in a multiplication.
	if (valid(dtype) && factor == factor && cpu_f16c()) return scale_avx2(buf, dtype, factor, n);
#endif
	(void)buf, (void)dtype, (void)factor, (void)n;
	sg_scale_result none = {0, 0};
	return none;
}

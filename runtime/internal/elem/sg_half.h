// sg_half.h: package elem's 16-bit float conversions in C, for the
// packages whose element loops run in C (package mpi's reduction operators,
// divisions and casts; package optim's updates and loss scaling), which
// include it with #cgo CFLAGS: -I${SRCDIR}/<path to this folder>.
//
// Everything here is static inline: each including file gets its own copy.
// The go command does not see that a file of another folder includes this
// one, so a change here does not rebuild those packages: build them with
// -a (or go clean -cache) after editing it.
#ifndef SG_HALF_H
#define SG_HALF_H

#include <stdint.h>
#include <string.h>

// The 16-bit conversions, round to nearest even. They are branchless (every
// case is computed and the right one selected) so that the compiler can
// vectorise the loops that use them, such as package mpi's reduction
// operators, which run inside MPI's collectives (branchy ones are several
// times slower: bench/results/2026-12-runtime-comments.md). The results are
// bit-identical to this package's Go conversions (package mpi's
// half_test.go compares them on every 16-bit value and on ties), but for
// the loads of a NaN: they keep its sign and payload, where F16ToF32 and
// BF16ToF32 give 0x7fc00000. A NaN is stored as Go stores it, the quiet
// NaN 0x7e00 or 0x7fc0 with the NaN's sign.

static inline uint32_t as_bits(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	return x;
}

static inline float as_float(uint32_t x) {
	float f;
	memcpy(&f, &x, 4);
	return f;
}

// sel returns a where c holds and b elsewhere, with a mask rather than a
// branch: a compiler that sees a branch may move the floating-point work of
// one case into it and then not vectorise the loop.
static inline uint32_t sel(int c, uint32_t a, uint32_t b) {
	uint32_t m = -(uint32_t)(c != 0);
	return (a & m) | (b & ~m);
}

static inline float f16_to_f32(uint16_t h) {
	uint32_t o = (uint32_t)(h & 0x7fff) << 13; // exponent and mantissa
	uint32_t e = o & 0x0f800000u;
	uint32_t normal = o + (112u << 23);         // rebias 15 -> 127
	uint32_t special = o + (224u << 23);        // infinity and NaN keep their payload
	// Subnormal (and zero): m * 2^-24, computed exactly as (2^-14 + m * 2^-24) - 2^-14.
	uint32_t sub = as_bits(as_float(o + (113u << 23)) - 6.103515625e-05f);
	uint32_t x = sel(e == 0, sub, sel(e == 0x0f800000u, special, normal));
	return as_float(x | (uint32_t)(h & 0x8000) << 16);
}

static inline uint16_t f32_to_f16(float f) {
	uint32_t x = as_bits(f);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t a = x & 0x7fffffffu;
	// 2^16 and up (65520 and up round up to it in the normal case below):
	// infinity, or a quiet NaN.
	uint32_t big = sel(a > 0x7f800000u, 0x7e00, 0x7c00);
	// Below 2^-14, the result counts units of 2^-24: adding 0.5, whose ulp
	// is 2^-24, rounds to nearest even in the FPU.
	uint32_t sub = as_bits(as_float(a) + 0.5f) - 0x3f000000u;
	// Normal: rebias, add just under half an ulp plus the low kept bit.
	uint32_t norm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1)) >> 13;
	uint32_t o = sel(a >= 0x47800000u, big, sel(a < 0x38800000u, sub, norm));
	return (uint16_t)(o | sign);
}

static inline float bf16_to_f32(uint16_t h) { return as_float((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f) {
	uint32_t x = as_bits(f);
	uint32_t nan = ((x >> 16) & 0x8000) | 0x7fc0; // F32ToBF16's quiet NaN
	uint32_t rne = (x + 0x7fffu + ((x >> 16) & 1)) >> 16;
	return (uint16_t)sel((x & 0x7fffffffu) > 0x7f800000u, nan, rne);
}

// SG_X86 is defined where the vector helpers below exist: GCC on x86-64,
// with target attributes, intrinsics and CPU checks. Callers check
// cpu_avx2 or cpu_f16c before they use them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#include <immintrin.h>
#define SG_X86 1

// cpu_avx2 and cpu_f16c say whether the CPU has AVX2, and AVX2 and F16C;
// the answer is cached (a benign race: every thread stores the same value).
static int have_avx2 = -1, have_f16c = -1;

static inline int cpu_avx2(void) {
	if (have_avx2 < 0) have_avx2 = __builtin_cpu_supports("avx2");
	return have_avx2;
}

static inline int cpu_f16c(void) {
	if (have_f16c < 0) have_f16c = cpu_avx2() && __builtin_cpu_supports("f16c");
	return have_f16c;
}

// f16_load_ps and bf16_load_ps widen 8 16-bit floats to float32 (exact).
__attribute__((target("avx2,f16c"))) static inline __m256 f16_load_ps(const uint16_t *p) {
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

__attribute__((target("avx2"))) static inline __m256 bf16_load_ps(const uint16_t *p) {
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

// f16_round_ps rounds 8 floats to f16 with F16C's conversion, which
// f32_to_f16 matches bit for bit (both round to nearest even, handle
// subnormals and infinities alike) except for NaN: a NaN becomes the
// software's quiet NaN, 0x7e00 with its sign.
__attribute__((target("avx2,f16c"))) static inline __m128i f16_round_ps(__m256 y) {
	__m128i h = _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(y, y, _CMP_UNORD_Q));
	__m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
	__m128i canon = _mm_or_si128(_mm_set1_epi16(0x7e00), _mm_and_si128(h, _mm_set1_epi16((short)0x8000)));
	return _mm_blendv_epi8(h, canon, nan16);
}

// bf16_round_ps is f32_to_bf16 on 8 floats in AVX2's integer lanes (which
// the compiler does not find on its own): the same rounding to nearest
// even and the same quiet NaN.
__attribute__((target("avx2"))) static inline __m128i bf16_round_ps(__m256 f) {
	__m256i y = _mm256_castps_si256(f);
	__m256i hi = _mm256_srli_epi32(y, 16);
	__m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
	__m256i rne = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(y, _mm256_set1_epi32(0x7fff)), odd), 16);
	__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(y, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
	__m256i quiet = _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi32(0x8000)), _mm256_set1_epi32(0x7fc0));
	__m256i o = _mm256_blendv_epi8(rne, quiet, nan);
	return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(o, o), 0x08));
}
#endif // SG_X86

#endif // SG_HALF_H

#include "sg_mpi.h"
#include <string.h>

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

float sg_f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
	float f;
	if (e == 0) {
		f = (float)m * 5.9604644775390625e-8f; // m * 2^-24, exact
		memcpy(&x, &f, 4);
		x |= sign;
	} else if (e == 31) {
		x = sign | 0x7f800000u | (m << 13);
	} else {
		x = sign | ((e + 112) << 23) | (m << 13);
	}
	memcpy(&f, &x, 4);
	return f;
}

uint16_t sg_f32_to_f16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint16_t sign = (x >> 16) & 0x8000;
	uint32_t a = x & 0x7fffffffu;
	if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00 : 0x7c00);
	if (a >= 0x477ff000u) return sign | 0x7c00; // 65520 and up round to infinity
	if (a < 0x38800000u) {                      // below 2^-14: subnormal or zero
		if (a < 0x33000000u) return sign;       // up to 2^-25 rounds to zero
		uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - e, keep = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (keep & 1))) keep++;
		return sign | (uint16_t)keep;
	}
	uint32_t keep = (a >> 13) - (112u << 10), rem = a & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (keep & 1))) keep++;
	return sign | (uint16_t)keep;
}

float sg_bf16_to_f32(uint16_t h) {
	uint32_t x = (uint32_t)h << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

uint16_t sg_f32_to_bf16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

// The user-defined operators compute in float32 and round once to the
// 16-bit format, as CPU half-precision kernels commonly do.
#define SG_HALF_OP(name, load, store, expr)                                          \
	static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {            \
		(void)dt;                                                                    \
		const uint16_t *a = (const uint16_t *)in;                                    \
		uint16_t *b = (uint16_t *)inout;                                             \
		for (int i = 0; i < *len; i++) {                                             \
			float x = load(a[i]), y = load(b[i]);                                    \
			b[i] = store(expr);                                                      \
		}                                                                            \
	}

SG_HALF_OP(sg_f16_sum, sg_f16_to_f32, sg_f32_to_f16, x + y)
SG_HALF_OP(sg_f16_prod, sg_f16_to_f32, sg_f32_to_f16, x * y)
SG_HALF_OP(sg_f16_min, sg_f16_to_f32, sg_f32_to_f16, (x < y || x != x) ? x : y)
SG_HALF_OP(sg_f16_max, sg_f16_to_f32, sg_f32_to_f16, (x > y || x != x) ? x : y)
SG_HALF_OP(sg_bf16_sum, sg_bf16_to_f32, sg_f32_to_bf16, x + y)
SG_HALF_OP(sg_bf16_prod, sg_bf16_to_f32, sg_f32_to_bf16, x * y)
SG_HALF_OP(sg_bf16_min, sg_bf16_to_f32, sg_f32_to_bf16, (x < y || x != x) ? x : y)
SG_HALF_OP(sg_bf16_max, sg_bf16_to_f32, sg_f32_to_bf16, (x > y || x != x) ? x : y)

static MPI_Op half_ops[2][6]; // [bf16?][op], created on first use
static int half_ops_made[2][6];

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
	if (!half_ops_made[b][op]) {
		static MPI_User_function *fns[2][6] = {
			{0, sg_f16_sum, sg_f16_sum, sg_f16_min, sg_f16_max, sg_f16_prod},
			{0, sg_bf16_sum, sg_bf16_sum, sg_bf16_min, sg_bf16_max, sg_bf16_prod},
		};
		*rc = MPI_Op_create(fns[b][op], 1, &half_ops[b][op]);
		if (*rc != MPI_SUCCESS) return MPI_OP_NULL;
		half_ops_made[b][op] = 1;
	}
	return half_ops[b][op];
}

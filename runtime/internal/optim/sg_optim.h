// The C kernels of package optim (sg_optim.c): UpdateBytes and ScaleBytes
// on AVX2 and F16C, computing exactly what the Go loops compute.
#ifndef SG_OPTIM_H
#define SG_OPTIM_H

#include <stdint.h>

// Dtype and optimizer codes, the same numbers as package elem's DType and
// package optim's Kind (cgo.go checks them at compile time).
enum { SG_OPT_F64 = 1, SG_OPT_F32, SG_OPT_F16, SG_OPT_BF16 };
enum { SG_OPT_SGD = 1, SG_OPT_ADAMW };

// sg_update_args is an update's constants and dtypes, as package optim's
// Hyper and Memory give them: f64 says the update computes in float64
// (Hyper.F64), with the constants d, else in float32 with c. It holds no
// pointers, so that Go can pass it by value whatever memory the operands
// are in.
typedef struct {
	float c[8];
	double d[8];
	int32_t kind, f64;
	int32_t grad_dt, param_dt, out_dt;
} sg_update_args;

// sg_update applies the update to elements [0, done) of the operands and
// returns done: n rounded down to a multiple of 8, or 0 where the CPU lacks
// AVX2 and F16C or the kernels do not take the case (see sg_optim.c). The
// caller does the rest. state0, state1 and out are NULL when absent. The
// float32 update takes operands of f32, f16 and bf16, the float64 one of
// f64 only.
int64_t sg_update(sg_update_args a, const void *grad, void *param, void *state0, void *state1, void *out, int64_t n);

// sg_scale_result is what sg_scale returns: how many elements it scaled,
// and whether any result is infinite or NaN.
typedef struct {
	int64_t done;
	int32_t non_finite;
} sg_scale_result;

// sg_scale multiplies elements [0, done) of buf (elements of dtype, f32,
// f16 or bf16) by factor in place, done as sg_update's.
sg_scale_result sg_scale(void *buf, int32_t dtype, float factor, int64_t n);

// sg_kernels says whether this CPU runs the kernels (1) or they do
// nothing (0): no AVX2 and F16C, or not GCC on x86-64.
int sg_kernels(void);

#endif

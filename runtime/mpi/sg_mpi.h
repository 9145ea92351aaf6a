// C helpers for package mpi: Open MPI's handles are macros over global
// structs that cgo cannot name, and user-defined reduction operators for
// the 16-bit floats must be C functions.
#ifndef SG_MPI_H
#define SG_MPI_H

#include <mpi.h>
#include <stdint.h>

// Dtype codes, the same numbers as package runtime's DType.
enum { SG_F64 = 1, SG_F32, SG_F16, SG_BF16, SG_I64, SG_I32, SG_I8, SG_U8 };
// Reduction codes, the same numbers as package runtime's RedOp (avg is a
// sum here; the runtime divides afterwards).
enum { SG_SUM = 1, SG_AVG, SG_MIN, SG_MAX, SG_PROD };

MPI_Comm sg_comm_world(void);
MPI_Comm sg_comm_null(void);
MPI_Request sg_request_null(void);
void *sg_in_place(void);
MPI_Info sg_info_null(void);
MPI_Datatype sg_datatype(int dtype);
// sg_op returns the operator for (dtype, op), creating the user-defined
// ones for f16 and bf16 on first use; NULL with *rc set on failure.
MPI_Op sg_op(int dtype, int op, int *rc);
int sg_set_errors_return(MPI_Comm c);

// Half-precision conversions of the operators, round to nearest even;
// exported for tests.
float sg_f16_to_f32(uint16_t h);
uint16_t sg_f32_to_f16(float f);
float sg_bf16_to_f32(uint16_t h);
uint16_t sg_f32_to_bf16(float f);

// sg_half_reduce runs the user-defined operator of (dtype, op) on n
// elements, inout[i] = in[i] op inout[i], as MPI would; -1 if there is none.
int sg_half_reduce(int dtype, int op, const void *in, void *inout, int n);

#endif

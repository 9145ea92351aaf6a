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
// sum here; the runtime divides afterwards, or inside the operator:
// SG_AVG_OP).
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

// The calls that Go makes in every step return their results by value:
// a Go variable whose address is passed to C is moved to the heap, one
// allocation per call (and the CPU backend's steps allocate nothing).
typedef struct {
	MPI_Op op;
	int rc;
} sg_op_result;
sg_op_result sg_op_value(int dtype, int op);

// sg_allgather_strided is mpi.Comm.AllgatherStrided.
int sg_allgather_strided(void *buf, int count, int64_t stride, int dtype, MPI_Comm comm);
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

// sg_cast converts n elements of dtype sdt at src into dtype ddt at dst,
// rounding to nearest even, for f32 to and from f16 and bf16; -1 for any
// other pair.
int sg_cast(void *dst, int ddt, const void *src, int sdt, int64_t n);

// sg_avg_divide divides n elements by size as an average's pieces are
// divided; for package cpu's other divisions and for tests.
void sg_avg_divide(void *buf, int dtype, int64_t n, int size);

// sg_avg2_reduce runs the operator of a two-rank average of dtype on n
// elements, inout[i] = (in[i] + inout[i]) / 2, as MPI would; -1 if dtype
// has none (integers); exported for tests.
int sg_avg2_reduce(int dtype, const void *in, void *inout, int n);

// A batch (batch.go): MPI calls and clock reads that run in one call from
// Go, in order, stopping at the first failure.
enum { SG_CMD_BARRIER = 1, SG_CMD_STAMP, SG_CMD_ALLREDUCE, SG_CMD_BCAST, SG_CMD_REDUCE, SG_CMD_ALLREDUCE_HIER };

// How a command divides an average's pieces: on the MPI thread; on the
// divider thread, overlapped with what follows; or, the last piece of a
// collective, split between the two, waiting for every division posted;
// or inside MPI's operator (floats over two ranks; else inline).
enum { SG_AVG_INLINE = 1, SG_AVG_POST, SG_AVG_LAST, SG_AVG_OP };

typedef struct {
	int32_t kind, dtype, op, root;
	int32_t rank, size; // of comm: reduce picks its buffers by rank; avg divides by size
	int32_t avg;        // divide the result by size (allreduce; reduce at the root): SG_AVG_*
	int32_t rc;         // out: the MPI error code of the failed command
	MPI_Comm comm;
	// SG_CMD_ALLREDUCE_HIER: the ranks of comm on this host (intra, where
	// this rank is lrank of lsize) and the ranks of comm with the same
	// local rank on every host (inter).
	MPI_Comm intra, inter;
	int32_t lrank, lsize;
	void *buf;
	int64_t count; // elements
	int64_t chunk; // elements per MPI call
	int64_t t;     // out: CLOCK_MONOTONIC nanoseconds (SG_CMD_STAMP), stored atomically
	int64_t at;    // out: element offset of the piece that failed
	// out, SG_CMD_ALLREDUCE_HIER: CLOCK_MONOTONIC nanoseconds spent in the
	// reduce-scatter inside the host, the allreduce across hosts and the
	// allgather inside the host, summed over the command's pieces.
	int64_t phase_ns[3];
} sg_cmd;

// sg_run runs cmds[0..n) and returns the index of the one that failed, or n.
int sg_run(sg_cmd *cmds, int n);
int64_t sg_monotonic_ns(void);
// sg_divide_wait returns once every division handed to the divider thread
// is done.
void sg_divide_wait(void);

// sg_control_var is mpi.ControlVar.
int sg_control_var(const char *name, char *out, int outlen);

#endif

// Declarations shared by package nccl's Go files and sgnc_nccl.c. The types
// are declared here from the public nccl.h so that no NCCL headers are
// needed to build.
#ifndef SG_NCCL_H
#define SG_NCCL_H

#include <stdint.h>
#include <stddef.h>

typedef int ncclResult_t; // ncclSuccess = 0 ... ncclInProgress = 7

// NCCL_UNIQUE_ID_BYTES; ncclUniqueId is passed by value, so its size must
// be exact.
#define SG_NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[SG_NCCL_UNIQUE_ID_BYTES]; } sgnc_ncclUniqueId;

// Indices into sgnc_fn; the Go table syms names each one.
enum {
	SG_ncclGetVersion,
	SG_ncclGetErrorString,
	SG_ncclGetUniqueId,
	SG_ncclCommInitRank,
	SG_ncclCommDestroy,
	SG_ncclCommAbort,
	SG_ncclCommGetAsyncError,
	SG_ncclCommCount,
	SG_ncclCommCuDevice,
	SG_ncclCommUserRank,
	SG_ncclAllReduce,
	SG_ncclBroadcast,
	SG_ncclReduce,
	SG_ncclAllGather,
	SG_ncclReduceScatter,
	SG_ncclGroupStart,
	SG_ncclGroupEnd,
	// Optional: newer than the oldest NCCL we accept (2.10).
	SG_ncclGetLastError,        // 2.13
	SG_ncclCommFinalize,        // 2.14
	SG_ncclRedOpCreatePreMulSum, // 2.11
	SG_ncclRedOpDestroy,        // 2.11
	SG_ncclMemAlloc,            // 2.19
	SG_ncclMemFree,             // 2.19
	SG_ncclCommRegister,        // 2.19
	SG_ncclCommDeregister,      // 2.19
	SG_N
};

void sgnc_set(int i, uintptr_t p);
int sgnc_has(int i);

ncclResult_t sgnc_ncclGetVersion(int *v);
const char *sgnc_ncclGetErrorString(ncclResult_t r);
const char *sgnc_ncclGetLastError(uintptr_t comm);
ncclResult_t sgnc_ncclGetUniqueId(void *id);
ncclResult_t sgnc_ncclCommInitRank(uintptr_t *comm, int nranks, const void *id, int rank);
ncclResult_t sgnc_ncclCommDestroy(uintptr_t comm);
ncclResult_t sgnc_ncclCommAbort(uintptr_t comm);
ncclResult_t sgnc_ncclCommFinalize(uintptr_t comm);
ncclResult_t sgnc_ncclCommGetAsyncError(uintptr_t comm, ncclResult_t *err);
ncclResult_t sgnc_ncclCommCount(uintptr_t comm, int *n);
ncclResult_t sgnc_ncclCommCuDevice(uintptr_t comm, int *dev);
ncclResult_t sgnc_ncclCommUserRank(uintptr_t comm, int *rank);
ncclResult_t sgnc_ncclAllReduce(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, uintptr_t comm, uintptr_t stream);
ncclResult_t sgnc_ncclBroadcast(uintptr_t send, uintptr_t recv, size_t count, int dtype, int root, uintptr_t comm, uintptr_t stream);
ncclResult_t sgnc_ncclReduce(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, int root, uintptr_t comm, uintptr_t stream);
ncclResult_t sgnc_ncclAllGather(uintptr_t send, uintptr_t recv, size_t sendcount, int dtype, uintptr_t comm, uintptr_t stream);
ncclResult_t sgnc_ncclReduceScatter(uintptr_t send, uintptr_t recv, size_t recvcount, int dtype, int op, uintptr_t comm, uintptr_t stream);
ncclResult_t sgnc_ncclGroupStart(void);
ncclResult_t sgnc_ncclGroupEnd(void);
ncclResult_t sgnc_ncclRedOpCreatePreMulSum(int *op, void *scalar, int dtype, int residence, uintptr_t comm);
ncclResult_t sgnc_ncclRedOpDestroy(int op, uintptr_t comm);
ncclResult_t sgnc_ncclMemAlloc(uintptr_t *ptr, size_t size);
ncclResult_t sgnc_ncclMemFree(uintptr_t ptr);
ncclResult_t sgnc_ncclCommRegister(uintptr_t comm, uintptr_t buf, size_t size, uintptr_t *handle);
ncclResult_t sgnc_ncclCommDeregister(uintptr_t comm, uintptr_t handle);

#endif

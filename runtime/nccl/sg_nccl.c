// The function table and the C wrappers of package nccl. See nccl.go.
// Each wrapper casts its table entry to the function's type from nccl.h;
// communicators, streams and buffers arrive as uintptr_t and become
// pointers only here.

#include <string.h>
#include "sg_nccl.h"

static void *sgnc_fn[SG_N];

void sgnc_set(int i, uintptr_t p) { sgnc_fn[i] = (void *)p; }
int sgnc_has(int i) { return sgnc_fn[i] != NULL; }

#define FN(name, ret, ...) ((ret (*)(__VA_ARGS__))sgnc_fn[SG_##name])
#define P(x) ((void *)(x))

ncclResult_t sgnc_ncclGetVersion(int *v) { return FN(ncclGetVersion, ncclResult_t, int *)(v); }
const char *sgnc_ncclGetErrorString(ncclResult_t r) { return FN(ncclGetErrorString, const char *, ncclResult_t)(r); }

const char *sgnc_ncclGetLastError(uintptr_t comm) {
	if (!sgnc_fn[SG_ncclGetLastError]) return "";
	return FN(ncclGetLastError, const char *, void *)(P(comm));
}

ncclResult_t sgnc_ncclGetUniqueId(void *id) { return FN(ncclGetUniqueId, ncclResult_t, sgnc_ncclUniqueId *)((sgnc_ncclUniqueId *)id); }

// ncclCommInitRank takes the unique id by value: copy the 128 bytes into a
// struct of the same layout and pass that.
ncclResult_t sgnc_ncclCommInitRank(uintptr_t *comm, int nranks, const void *id, int rank) {
	sgnc_ncclUniqueId u;
	memcpy(u.internal, id, sizeof u.internal);
	return FN(ncclCommInitRank, ncclResult_t, void **, int, sgnc_ncclUniqueId, int)((void **)comm, nranks, u, rank);
}

ncclResult_t sgnc_ncclCommDestroy(uintptr_t comm) { return FN(ncclCommDestroy, ncclResult_t, void *)(P(comm)); }
ncclResult_t sgnc_ncclCommAbort(uintptr_t comm) { return FN(ncclCommAbort, ncclResult_t, void *)(P(comm)); }
ncclResult_t sgnc_ncclCommFinalize(uintptr_t comm) { return FN(ncclCommFinalize, ncclResult_t, void *)(P(comm)); }
ncclResult_t sgnc_ncclCommGetAsyncError(uintptr_t comm, ncclResult_t *err) { return FN(ncclCommGetAsyncError, ncclResult_t, void *, ncclResult_t *)(P(comm), err); }
ncclResult_t sgnc_ncclCommCount(uintptr_t comm, int *n) { return FN(ncclCommCount, ncclResult_t, void *, int *)(P(comm), n); }
ncclResult_t sgnc_ncclCommCuDevice(uintptr_t comm, int *dev) { return FN(ncclCommCuDevice, ncclResult_t, void *, int *)(P(comm), dev); }
ncclResult_t sgnc_ncclCommUserRank(uintptr_t comm, int *rank) { return FN(ncclCommUserRank, ncclResult_t, void *, int *)(P(comm), rank); }

ncclResult_t sgnc_ncclAllReduce(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, uintptr_t comm, uintptr_t stream) {
	return FN(ncclAllReduce, ncclResult_t, const void *, void *, size_t, int, int, void *, void *)(P(send), P(recv), count, dtype, op, P(comm), P(stream));
}
ncclResult_t sgnc_ncclBroadcast(uintptr_t send, uintptr_t recv, size_t count, int dtype, int root, uintptr_t comm, uintptr_t stream) {
	return FN(ncclBroadcast, ncclResult_t, const void *, void *, size_t, int, int, void *, void *)(P(send), P(recv), count, dtype, root, P(comm), P(stream));
}
ncclResult_t sgnc_ncclReduce(uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, int root, uintptr_t comm, uintptr_t stream) {
	return FN(ncclReduce, ncclResult_t, const void *, void *, size_t, int, int, int, void *, void *)(P(send), P(recv), count, dtype, op, root, P(comm), P(stream));
}
ncclResult_t sgnc_ncclAllGather(uintptr_t send, uintptr_t recv, size_t sendcount, int dtype, uintptr_t comm, uintptr_t stream) {
	return FN(ncclAllGather, ncclResult_t, const void *, void *, size_t, int, void *, void *)(P(send), P(recv), sendcount, dtype, P(comm), P(stream));
}
ncclResult_t sgnc_ncclReduceScatter(uintptr_t send, uintptr_t recv, size_t recvcount, int dtype, int op, uintptr_t comm, uintptr_t stream) {
	return FN(ncclReduceScatter, ncclResult_t, const void *, void *, size_t, int, int, void *, void *)(P(send), P(recv), recvcount, dtype, op, P(comm), P(stream));
}
ncclResult_t sgnc_ncclGroupStart(void) { return FN(ncclGroupStart, ncclResult_t, void)(); }
ncclResult_t sgnc_ncclGroupEnd(void) { return FN(ncclGroupEnd, ncclResult_t, void)(); }

ncclResult_t sgnc_ncclRedOpCreatePreMulSum(int *op, void *scalar, int dtype, int residence, uintptr_t comm) {
	return FN(ncclRedOpCreatePreMulSum, ncclResult_t, int *, void *, int, int, void *)(op, scalar, dtype, residence, P(comm));
}
ncclResult_t sgnc_ncclRedOpDestroy(int op, uintptr_t comm) { return FN(ncclRedOpDestroy, ncclResult_t, int, void *)(op, P(comm)); }
ncclResult_t sgnc_ncclMemAlloc(uintptr_t *ptr, size_t size) { return FN(ncclMemAlloc, ncclResult_t, void **, size_t)((void **)ptr, size); }
ncclResult_t sgnc_ncclMemFree(uintptr_t ptr) { return FN(ncclMemFree, ncclResult_t, void *)(P(ptr)); }
ncclResult_t sgnc_ncclCommRegister(uintptr_t comm, uintptr_t buf, size_t size, uintptr_t *handle) {
	return FN(ncclCommRegister, ncclResult_t, void *, void *, size_t, void **)(P(comm), P(buf), size, (void **)handle);
}
ncclResult_t sgnc_ncclCommDeregister(uintptr_t comm, uintptr_t handle) { return FN(ncclCommDeregister, ncclResult_t, void *, void *)(P(comm), P(handle)); }

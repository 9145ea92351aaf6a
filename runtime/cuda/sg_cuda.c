// The function table and the C wrappers of package cuda. See lib.go.

#include "sg_cuda.h"

static void *sgcu_fn[SG_N];

void sgcu_set(int i, uintptr_t p) { sgcu_fn[i] = (void *)p; }

// The wrappers: one per function, each casting its table entry to the
// function's type from cuda_runtime_api.h or cuda.h. Handles arrive as
// uintptr_t and are cast back here, the only place they are pointers.

#define FN(name, ret, ...) ((ret (*)(__VA_ARGS__))sgcu_fn[SG_##name])

const char *sgcu_cudaGetErrorString(cudaError_t e) { return FN(cudaGetErrorString, const char *, cudaError_t)(e); }
const char *sgcu_cudaGetErrorName(cudaError_t e) { return FN(cudaGetErrorName, const char *, cudaError_t)(e); }
cudaError_t sgcu_cudaGetLastError(void) { return FN(cudaGetLastError, cudaError_t, void)(); }
cudaError_t sgcu_cudaRuntimeGetVersion(int *v) { return FN(cudaRuntimeGetVersion, cudaError_t, int *)(v); }
cudaError_t sgcu_cudaDriverGetVersion(int *v) { return FN(cudaDriverGetVersion, cudaError_t, int *)(v); }
cudaError_t sgcu_cudaGetDeviceCount(int *n) { return FN(cudaGetDeviceCount, cudaError_t, int *)(n); }
// sgcu_cur caches the device this thread last made current through us, so
// that sgcu_useDevice (called before every queued operation) costs no
// cudaSetDevice when nothing changed.
static __thread int sgcu_cur = -1;

cudaError_t sgcu_cudaSetDevice(int d) {
	cudaError_t e = FN(cudaSetDevice, cudaError_t, int)(d);
	sgcu_cur = e == 0 ? d : -1;
	return e;
}

cudaError_t sgcu_useDevice(int d) { return sgcu_cur == d ? 0 : sgcu_cudaSetDevice(d); }
cudaError_t sgcu_cudaGetDevice(int *d) { return FN(cudaGetDevice, cudaError_t, int *)(d); }
cudaError_t sgcu_cudaDeviceGetPCIBusId(char *buf, int len, int d) { return FN(cudaDeviceGetPCIBusId, cudaError_t, char *, int, int)(buf, len, d); }
cudaError_t sgcu_cudaDeviceGetAttribute(int *v, int attr, int d) { return FN(cudaDeviceGetAttribute, cudaError_t, int *, int, int)(v, attr, d); }
cudaError_t sgcu_cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { return FN(cudaDeviceGetStreamPriorityRange, cudaError_t, int *, int *)(least, greatest); }
cudaError_t sgcu_cudaDeviceSynchronize(void) { return FN(cudaDeviceSynchronize, cudaError_t, void)(); }
cudaError_t sgcu_cudaMemGetInfo(size_t *free, size_t *total) { return FN(cudaMemGetInfo, cudaError_t, size_t *, size_t *)(free, total); }
cudaError_t sgcu_cudaStreamCreateWithPriority(uintptr_t *s, unsigned flags, int prio) { return FN(cudaStreamCreateWithPriority, cudaError_t, void **, unsigned, int)((void **)s, flags, prio); }
cudaError_t sgcu_cudaStreamDestroy(uintptr_t s) { return FN(cudaStreamDestroy, cudaError_t, void *)((void *)s); }
cudaError_t sgcu_cudaStreamSynchronize(uintptr_t s) { return FN(cudaStreamSynchronize, cudaError_t, void *)((void *)s); }
cudaError_t sgcu_cudaStreamQuery(uintptr_t s) { return FN(cudaStreamQuery, cudaError_t, void *)((void *)s); }
cudaError_t sgcu_cudaStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned flags) { return FN(cudaStreamWaitEvent, cudaError_t, void *, void *, unsigned)((void *)s, (void *)e, flags); }
cudaError_t sgcu_cudaEventCreateWithFlags(uintptr_t *e, unsigned flags) { return FN(cudaEventCreateWithFlags, cudaError_t, void **, unsigned)((void **)e, flags); }
cudaError_t sgcu_cudaEventRecord(uintptr_t e, uintptr_t s) { return FN(cudaEventRecord, cudaError_t, void *, void *)((void *)e, (void *)s); }
cudaError_t sgcu_cudaEventSynchronize(uintptr_t e) { return FN(cudaEventSynchronize, cudaError_t, void *)((void *)e); }
cudaError_t sgcu_cudaEventQuery(uintptr_t e) { return FN(cudaEventQuery, cudaError_t, void *)((void *)e); }
cudaError_t sgcu_cudaEventElapsedTime(float *ms, uintptr_t a, uintptr_t b) { return FN(cudaEventElapsedTime, cudaError_t, float *, void *, void *)(ms, (void *)a, (void *)b); }
cudaError_t sgcu_cudaEventDestroy(uintptr_t e) { return FN(cudaEventDestroy, cudaError_t, void *)((void *)e); }
cudaError_t sgcu_cudaMalloc(uintptr_t *p, size_t n) { return FN(cudaMalloc, cudaError_t, void **, size_t)((void **)p, n); }
cudaError_t sgcu_cudaFree(uintptr_t p) { return FN(cudaFree, cudaError_t, void *)((void *)p); }
cudaError_t sgcu_cudaMallocHost(void **p, size_t n) { return FN(cudaMallocHost, cudaError_t, void **, size_t)(p, n); }
cudaError_t sgcu_cudaFreeHost(void *p) { return FN(cudaFreeHost, cudaError_t, void *)(p); }
cudaError_t sgcu_cudaMemcpy(uintptr_t dst, uintptr_t src, size_t n, int kind) { return FN(cudaMemcpy, cudaError_t, void *, const void *, size_t, int)((void *)dst, (const void *)src, n, kind); }
// Copies from and to Go memory: the host pointer arrives as a real pointer,
// so cgo keeps the Go memory in place, and the copy is queued on stream s
// and waited for inside the one C call. (A plain cudaMemcpy from pageable
// memory may return before the data reaches the device, and it is ordered
// only against the legacy default stream, not our non-blocking streams.)
cudaError_t sgcu_copyToHost(void *dst, uintptr_t src, size_t n, uintptr_t s) {
	cudaError_t e = FN(cudaMemcpyAsync, cudaError_t, void *, const void *, size_t, int, void *)(dst, (const void *)src, n, 2, (void *)s);
	return e ? e : FN(cudaStreamSynchronize, cudaError_t, void *)((void *)s);
}
cudaError_t sgcu_copyFromHost(uintptr_t dst, const void *src, size_t n, uintptr_t s) {
	cudaError_t e = FN(cudaMemcpyAsync, cudaError_t, void *, const void *, size_t, int, void *)((void *)dst, src, n, 1, (void *)s);
	return e ? e : FN(cudaStreamSynchronize, cudaError_t, void *)((void *)s);
}
cudaError_t sgcu_cudaMemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s) { return FN(cudaMemcpyAsync, cudaError_t, void *, const void *, size_t, int, void *)((void *)dst, (const void *)src, n, kind, (void *)s); }
cudaError_t sgcu_cudaMemsetAsync(uintptr_t p, int v, size_t n, uintptr_t s) { return FN(cudaMemsetAsync, cudaError_t, void *, int, size_t, void *)((void *)p, v, n, (void *)s); }

CUresult sgcu_cuInit(unsigned flags) { return FN(cuInit, CUresult, unsigned)(flags); }
CUresult sgcu_cuGetErrorString(CUresult r, const char **s) { return FN(cuGetErrorString, CUresult, CUresult, const char **)(r, s); }
CUresult sgcu_cuGetErrorName(CUresult r, const char **s) { return FN(cuGetErrorName, CUresult, CUresult, const char **)(r, s); }
CUresult sgcu_cuDeviceGet(int *dev, int ordinal) { return FN(cuDeviceGet, CUresult, int *, int)(dev, ordinal); }
CUresult sgcu_cuDeviceGetName(char *buf, int len, int dev) { return FN(cuDeviceGetName, CUresult, char *, int, int)(buf, len, dev); }

// CUjit_option values from cuda.h.
enum { SG_CU_JIT_ERROR_LOG_BUFFER = 5, SG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

// sgcu_cuModuleLoadData loads a PTX image and, if the JIT fails, leaves its
// error log in log (the driver's error code alone rarely says which line).
CUresult sgcu_cuModuleLoadData(uintptr_t *mod, const void *image, char *log, size_t logSize) {
	int opts[2] = {SG_CU_JIT_ERROR_LOG_BUFFER, SG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)logSize};
	return FN(cuModuleLoadDataEx, CUresult, void **, const void *, unsigned, int *, void **)((void **)mod, image, 2, opts, vals);
}
CUresult sgcu_cuModuleGetFunction(uintptr_t *f, uintptr_t mod, const char *name) { return FN(cuModuleGetFunction, CUresult, void **, void *, const char *)((void **)f, (void *)mod, name); }
CUresult sgcu_cuModuleUnload(uintptr_t mod) { return FN(cuModuleUnload, CUresult, void *)((void *)mod); }

// sgcu_launch launches f with nargs parameters. Every kernel in syncgen.cu
// takes only 64-bit parameters, so the arguments travel as one uint64_t
// array and the pointer array cuLaunchKernel wants is built here.
CUresult sgcu_launch(uintptr_t f, unsigned grid, unsigned block, uintptr_t stream, uint64_t *args, int nargs) {
	void *params[16];
	for (int i = 0; i < nargs && i < 16; i++) params[i] = &args[i];
	return FN(cuLaunchKernel, CUresult, void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **)(
		(void *)f, grid, 1, 1, block, 1, 1, 0, (void *)stream, params, NULL);
}

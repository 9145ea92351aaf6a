// The function table and the C wrappers of package cuda. See lib.go.

#include "sg_cuda.h"

static void *sg_fn[SG_N];

void sg_set(int i, uintptr_t p) { sg_fn[i] = (void *)p; }

// The wrappers: one per function, each casting its table entry to the
// function's type from cuda_runtime_api.h or cuda.h. Handles arrive as
// uintptr_t and are cast back here, the only place they are pointers.

#define FN(name, ret, ...) ((ret (*)(__VA_ARGS__))sg_fn[SG_##name])

const char *sg_cudaGetErrorString(cudaError_t e) { return FN(cudaGetErrorString, const char *, cudaError_t)(e); }
const char *sg_cudaGetErrorName(cudaError_t e) { return FN(cudaGetErrorName, const char *, cudaError_t)(e); }
cudaError_t sg_cudaGetLastError(void) { return FN(cudaGetLastError, cudaError_t, void)(); }
cudaError_t sg_cudaRuntimeGetVersion(int *v) { return FN(cudaRuntimeGetVersion, cudaError_t, int *)(v); }
cudaError_t sg_cudaDriverGetVersion(int *v) { return FN(cudaDriverGetVersion, cudaError_t, int *)(v); }
cudaError_t sg_cudaGetDeviceCount(int *n) { return FN(cudaGetDeviceCount, cudaError_t, int *)(n); }
cudaError_t sg_cudaSetDevice(int d) { return FN(cudaSetDevice, cudaError_t, int)(d); }
cudaError_t sg_cudaGetDevice(int *d) { return FN(cudaGetDevice, cudaError_t, int *)(d); }
cudaError_t sg_cudaDeviceGetPCIBusId(char *buf, int len, int d) { return FN(cudaDeviceGetPCIBusId, cudaError_t, char *, int, int)(buf, len, d); }
cudaError_t sg_cudaDeviceGetAttribute(int *v, int attr, int d) { return FN(cudaDeviceGetAttribute, cudaError_t, int *, int, int)(v, attr, d); }
cudaError_t sg_cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { return FN(cudaDeviceGetStreamPriorityRange, cudaError_t, int *, int *)(least, greatest); }
cudaError_t sg_cudaDeviceSynchronize(void) { return FN(cudaDeviceSynchronize, cudaError_t, void)(); }
cudaError_t sg_cudaMemGetInfo(size_t *free, size_t *total) { return FN(cudaMemGetInfo, cudaError_t, size_t *, size_t *)(free, total); }
cudaError_t sg_cudaStreamCreateWithPriority(uintptr_t *s, unsigned flags, int prio) { return FN(cudaStreamCreateWithPriority, cudaError_t, void **, unsigned, int)((void **)s, flags, prio); }
cudaError_t sg_cudaStreamDestroy(uintptr_t s) { return FN(cudaStreamDestroy, cudaError_t, void *)((void *)s); }
cudaError_t sg_cudaStreamSynchronize(uintptr_t s) { return FN(cudaStreamSynchronize, cudaError_t, void *)((void *)s); }
cudaError_t sg_cudaStreamQuery(uintptr_t s) { return FN(cudaStreamQuery, cudaError_t, void *)((void *)s); }
cudaError_t sg_cudaStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned flags) { return FN(cudaStreamWaitEvent, cudaError_t, void *, void *, unsigned)((void *)s, (void *)e, flags); }
cudaError_t sg_cudaEventCreateWithFlags(uintptr_t *e, unsigned flags) { return FN(cudaEventCreateWithFlags, cudaError_t, void **, unsigned)((void **)e, flags); }
cudaError_t sg_cudaEventRecord(uintptr_t e, uintptr_t s) { return FN(cudaEventRecord, cudaError_t, void *, void *)((void *)e, (void *)s); }
cudaError_t sg_cudaEventSynchronize(uintptr_t e) { return FN(cudaEventSynchronize, cudaError_t, void *)((void *)e); }
cudaError_t sg_cudaEventQuery(uintptr_t e) { return FN(cudaEventQuery, cudaError_t, void *)((void *)e); }
cudaError_t sg_cudaEventElapsedTime(float *ms, uintptr_t a, uintptr_t b) { return FN(cudaEventElapsedTime, cudaError_t, float *, void *, void *)(ms, (void *)a, (void *)b); }
cudaError_t sg_cudaEventDestroy(uintptr_t e) { return FN(cudaEventDestroy, cudaError_t, void *)((void *)e); }
cudaError_t sg_cudaMalloc(uintptr_t *p, size_t n) { return FN(cudaMalloc, cudaError_t, void **, size_t)((void **)p, n); }
cudaError_t sg_cudaFree(uintptr_t p) { return FN(cudaFree, cudaError_t, void *)((void *)p); }
cudaError_t sg_cudaMallocHost(void **p, size_t n) { return FN(cudaMallocHost, cudaError_t, void **, size_t)(p, n); }
cudaError_t sg_cudaFreeHost(void *p) { return FN(cudaFreeHost, cudaError_t, void *)(p); }
cudaError_t sg_cudaMemcpy(uintptr_t dst, uintptr_t src, size_t n, int kind) { return FN(cudaMemcpy, cudaError_t, void *, const void *, size_t, int)((void *)dst, (const void *)src, n, kind); }
cudaError_t sg_cudaMemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s) { return FN(cudaMemcpyAsync, cudaError_t, void *, const void *, size_t, int, void *)((void *)dst, (const void *)src, n, kind, (void *)s); }
cudaError_t sg_cudaMemsetAsync(uintptr_t p, int v, size_t n, uintptr_t s) { return FN(cudaMemsetAsync, cudaError_t, void *, int, size_t, void *)((void *)p, v, n, (void *)s); }

CUresult sg_cuInit(unsigned flags) { return FN(cuInit, CUresult, unsigned)(flags); }
CUresult sg_cuGetErrorString(CUresult r, const char **s) { return FN(cuGetErrorString, CUresult, CUresult, const char **)(r, s); }
CUresult sg_cuGetErrorName(CUresult r, const char **s) { return FN(cuGetErrorName, CUresult, CUresult, const char **)(r, s); }
CUresult sg_cuDeviceGet(int *dev, int ordinal) { return FN(cuDeviceGet, CUresult, int *, int)(dev, ordinal); }
CUresult sg_cuDeviceGetName(char *buf, int len, int dev) { return FN(cuDeviceGetName, CUresult, char *, int, int)(buf, len, dev); }

// CUjit_option values from cuda.h.
enum { SG_CU_JIT_ERROR_LOG_BUFFER = 5, SG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

// sg_cuModuleLoadData loads a PTX image and, if the JIT fails, leaves its
// error log in log (the driver's error code alone rarely says which line).
CUresult sg_cuModuleLoadData(uintptr_t *mod, const void *image, char *log, size_t logSize) {
	int opts[2] = {SG_CU_JIT_ERROR_LOG_BUFFER, SG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)logSize};
	return FN(cuModuleLoadDataEx, CUresult, void **, const void *, unsigned, int *, void **)((void **)mod, image, 2, opts, vals);
}
CUresult sg_cuModuleGetFunction(uintptr_t *f, uintptr_t mod, const char *name) { return FN(cuModuleGetFunction, CUresult, void **, void *, const char *)((void **)f, (void *)mod, name); }
CUresult sg_cuModuleUnload(uintptr_t mod) { return FN(cuModuleUnload, CUresult, void *)((void *)mod); }

// sg_launch launches f with nargs parameters. Every kernel in syncgen.cu
// takes only 64-bit parameters, so the arguments travel as one uint64_t
// array and the pointer array cuLaunchKernel wants is built here.
CUresult sg_launch(uintptr_t f, unsigned grid, unsigned block, uintptr_t stream, uint64_t *args, int nargs) {
	void *params[16];
	for (int i = 0; i < nargs && i < 16; i++) params[i] = &args[i];
	return FN(cuLaunchKernel, CUresult, void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **)(
		(void *)f, grid, 1, 1, block, 1, 1, 0, (void *)stream, params, NULL);
}

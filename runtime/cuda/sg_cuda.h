// Declarations shared by package cuda's Go files and sgcu_cuda.c. The types
// are declared here from the public CUDA headers (cuda_runtime_api.h,
// driver_types.h, cuda.h) so that no CUDA toolkit is needed to build.
#ifndef SG_CUDA_H
#define SG_CUDA_H

#include <stdint.h>
#include <stddef.h>

typedef int cudaError_t; // enum cudaError in driver_types.h
typedef int CUresult;    // enum cudaError_enum in cuda.h

// Indices into sgcu_fn. The Go table cudartSyms/driverSyms names each one.
enum {
	SG_cudaGetErrorString,
	SG_cudaGetErrorName,
	SG_cudaGetLastError,
	SG_cudaRuntimeGetVersion,
	SG_cudaDriverGetVersion,
	SG_cudaGetDeviceCount,
	SG_cudaSetDevice,
	SG_cudaGetDevice,
	SG_cudaDeviceGetPCIBusId,
	SG_cudaDeviceGetAttribute,
	SG_cudaDeviceGetStreamPriorityRange,
	SG_cudaDeviceSynchronize,
	SG_cudaMemGetInfo,
	SG_cudaStreamCreateWithPriority,
	SG_cudaStreamDestroy,
	SG_cudaStreamSynchronize,
	SG_cudaStreamQuery,
	SG_cudaStreamWaitEvent,
	SG_cudaEventCreateWithFlags,
	SG_cudaEventRecord,
	SG_cudaEventSynchronize,
	SG_cudaEventQuery,
	SG_cudaEventElapsedTime,
	SG_cudaEventDestroy,
	SG_cudaMalloc,
	SG_cudaFree,
	SG_cudaMallocHost,
	SG_cudaFreeHost,
	SG_cudaMemcpy,
	SG_cudaMemcpyAsync,
	SG_cudaMemsetAsync,
	SG_cuInit,
	SG_cuGetErrorString,
	SG_cuGetErrorName,
	SG_cuDeviceGet,
	SG_cuDeviceGetName,
	SG_cuModuleLoadDataEx,
	SG_cuModuleGetFunction,
	SG_cuModuleUnload,
	SG_cuLaunchKernel,
	SG_N
};

void sgcu_set(int i, uintptr_t p);
const char *sgcu_cudaGetErrorString(cudaError_t e);
const char *sgcu_cudaGetErrorName(cudaError_t e);
cudaError_t sgcu_cudaGetLastError(void);
cudaError_t sgcu_cudaRuntimeGetVersion(int *v);
cudaError_t sgcu_cudaDriverGetVersion(int *v);
cudaError_t sgcu_cudaGetDeviceCount(int *n);
cudaError_t sgcu_cudaSetDevice(int d);
cudaError_t sgcu_useDevice(int d);
cudaError_t sgcu_cudaGetDevice(int *d);
cudaError_t sgcu_cudaDeviceGetPCIBusId(char *buf, int len, int d);
cudaError_t sgcu_cudaDeviceGetAttribute(int *v, int attr, int d);
cudaError_t sgcu_cudaDeviceGetStreamPriorityRange(int *least, int *greatest);
cudaError_t sgcu_cudaDeviceSynchronize(void);
cudaError_t sgcu_cudaMemGetInfo(size_t *free, size_t *total);
cudaError_t sgcu_cudaStreamCreateWithPriority(uintptr_t *s, unsigned flags, int prio);
cudaError_t sgcu_cudaStreamDestroy(uintptr_t s);
cudaError_t sgcu_cudaStreamSynchronize(uintptr_t s);
cudaError_t sgcu_cudaStreamQuery(uintptr_t s);
cudaError_t sgcu_cudaStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned flags);
cudaError_t sgcu_cudaEventCreateWithFlags(uintptr_t *e, unsigned flags);
cudaError_t sgcu_cudaEventRecord(uintptr_t e, uintptr_t s);
cudaError_t sgcu_cudaEventSynchronize(uintptr_t e);
cudaError_t sgcu_cudaEventQuery(uintptr_t e);
cudaError_t sgcu_cudaEventElapsedTime(float *ms, uintptr_t a, uintptr_t b);
cudaError_t sgcu_cudaEventDestroy(uintptr_t e);
cudaError_t sgcu_cudaMalloc(uintptr_t *p, size_t n);
cudaError_t sgcu_cudaFree(uintptr_t p);
cudaError_t sgcu_cudaMallocHost(void **p, size_t n);
cudaError_t sgcu_cudaFreeHost(void *p);
cudaError_t sgcu_cudaMemcpy(uintptr_t dst, uintptr_t src, size_t n, int kind);
cudaError_t sgcu_copyToHost(void *dst, uintptr_t src, size_t n, uintptr_t s);
cudaError_t sgcu_copyFromHost(uintptr_t dst, const void *src, size_t n, uintptr_t s);
cudaError_t sgcu_cudaMemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s);
cudaError_t sgcu_cudaMemsetAsync(uintptr_t p, int v, size_t n, uintptr_t s);
CUresult sgcu_cuInit(unsigned flags);
CUresult sgcu_cuGetErrorString(CUresult r, const char **s);
CUresult sgcu_cuGetErrorName(CUresult r, const char **s);
CUresult sgcu_cuDeviceGet(int *dev, int ordinal);
CUresult sgcu_cuDeviceGetName(char *buf, int len, int dev);
CUresult sgcu_cuModuleLoadData(uintptr_t *mod, const void *image, char *log, size_t logSize);
CUresult sgcu_cuModuleGetFunction(uintptr_t *f, uintptr_t mod, const char *name);
CUresult sgcu_cuModuleUnload(uintptr_t mod);
CUresult sgcu_launch(uintptr_t f, unsigned grid, unsigned block, uintptr_t stream, uint64_t *args, int nargs);

#endif

// Declarations shared by package cuda's Go files and sg_cuda.c. The types
// are declared here from the public CUDA headers (cuda_runtime_api.h,
// driver_types.h, cuda.h) so that no CUDA toolkit is needed to build.
#ifndef SG_CUDA_H
#define SG_CUDA_H

#include <stdint.h>
#include <stddef.h>

typedef int cudaError_t; // enum cudaError in driver_types.h
typedef int CUresult;    // enum cudaError_enum in cuda.h

// Indices into sg_fn. The Go table cudartSyms/driverSyms names each one.
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

void sg_set(int i, uintptr_t p);
const char *sg_cudaGetErrorString(cudaError_t e);
const char *sg_cudaGetErrorName(cudaError_t e);
cudaError_t sg_cudaGetLastError(void);
cudaError_t sg_cudaRuntimeGetVersion(int *v);
cudaError_t sg_cudaDriverGetVersion(int *v);
cudaError_t sg_cudaGetDeviceCount(int *n);
cudaError_t sg_cudaSetDevice(int d);
cudaError_t sg_cudaGetDevice(int *d);
cudaError_t sg_cudaDeviceGetPCIBusId(char *buf, int len, int d);
cudaError_t sg_cudaDeviceGetAttribute(int *v, int attr, int d);
cudaError_t sg_cudaDeviceGetStreamPriorityRange(int *least, int *greatest);
cudaError_t sg_cudaDeviceSynchronize(void);
cudaError_t sg_cudaMemGetInfo(size_t *free, size_t *total);
cudaError_t sg_cudaStreamCreateWithPriority(uintptr_t *s, unsigned flags, int prio);
cudaError_t sg_cudaStreamDestroy(uintptr_t s);
cudaError_t sg_cudaStreamSynchronize(uintptr_t s);
cudaError_t sg_cudaStreamQuery(uintptr_t s);
cudaError_t sg_cudaStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned flags);
cudaError_t sg_cudaEventCreateWithFlags(uintptr_t *e, unsigned flags);
cudaError_t sg_cudaEventRecord(uintptr_t e, uintptr_t s);
cudaError_t sg_cudaEventSynchronize(uintptr_t e);
cudaError_t sg_cudaEventQuery(uintptr_t e);
cudaError_t sg_cudaEventElapsedTime(float *ms, uintptr_t a, uintptr_t b);
cudaError_t sg_cudaEventDestroy(uintptr_t e);
cudaError_t sg_cudaMalloc(uintptr_t *p, size_t n);
cudaError_t sg_cudaFree(uintptr_t p);
cudaError_t sg_cudaMallocHost(void **p, size_t n);
cudaError_t sg_cudaFreeHost(void *p);
cudaError_t sg_cudaMemcpy(uintptr_t dst, uintptr_t src, size_t n, int kind);
cudaError_t sg_cudaMemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s);
cudaError_t sg_cudaMemsetAsync(uintptr_t p, int v, size_t n, uintptr_t s);
CUresult sg_cuInit(unsigned flags);
CUresult sg_cuGetErrorString(CUresult r, const char **s);
CUresult sg_cuGetErrorName(CUresult r, const char **s);
CUresult sg_cuDeviceGet(int *dev, int ordinal);
CUresult sg_cuDeviceGetName(char *buf, int len, int dev);
CUresult sg_cuModuleLoadData(uintptr_t *mod, const void *image, char *log, size_t logSize);
CUresult sg_cuModuleGetFunction(uintptr_t *f, uintptr_t mod, const char *name);
CUresult sg_cuModuleUnload(uintptr_t mod);
CUresult sg_launch(uintptr_t f, unsigned grid, unsigned block, uintptr_t stream, uint64_t *args, int nargs);

#endif

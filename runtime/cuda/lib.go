// Package cuda is the small part of the CUDA runtime and driver APIs that
// syncgen's GPU backend uses, loaded at run time with dlopen.
//
// Nothing here needs the CUDA toolkit to build: the types and constants are
// declared in the cgo preamble from the public headers, the functions are
// resolved with dlsym into a table, and each is called through a small C
// wrapper (cgo cannot call a C function pointer itself). Handles (streams,
// events, device pointers, functions) travel through Go as uintptr so that
// the garbage collector and the cgo pointer checks never mistake them for Go
// pointers.
//
// The CUDA current device is a property of the OS thread: callers that use
// more than one device, or that must not inherit another goroutine's device,
// lock their goroutine to its thread and call SetDevice first.
package cuda

/*
#include <stdint.h>
#include <stddef.h>

typedef int cudaError_t;      // enum cudaError in driver_types.h
typedef int CUresult;         // enum cudaError_enum in cuda.h

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

static void *sg_fn[SG_N];

static void sg_set(int i, uintptr_t p) { sg_fn[i] = (void *)p; }

// The wrappers: one per function, each casting its table entry to the
// function's type from cuda_runtime_api.h or cuda.h. Handles arrive as
// uintptr_t and are cast back here, the only place they are pointers.

#define FN(name, ret, ...) ((ret (*)(__VA_ARGS__))sg_fn[SG_##name])

static const char *sg_cudaGetErrorString(cudaError_t e) { return FN(cudaGetErrorString, const char *, cudaError_t)(e); }
static const char *sg_cudaGetErrorName(cudaError_t e) { return FN(cudaGetErrorName, const char *, cudaError_t)(e); }
static cudaError_t sg_cudaGetLastError(void) { return FN(cudaGetLastError, cudaError_t, void)(); }
static cudaError_t sg_cudaRuntimeGetVersion(int *v) { return FN(cudaRuntimeGetVersion, cudaError_t, int *)(v); }
static cudaError_t sg_cudaDriverGetVersion(int *v) { return FN(cudaDriverGetVersion, cudaError_t, int *)(v); }
static cudaError_t sg_cudaGetDeviceCount(int *n) { return FN(cudaGetDeviceCount, cudaError_t, int *)(n); }
static cudaError_t sg_cudaSetDevice(int d) { return FN(cudaSetDevice, cudaError_t, int)(d); }
static cudaError_t sg_cudaGetDevice(int *d) { return FN(cudaGetDevice, cudaError_t, int *)(d); }
static cudaError_t sg_cudaDeviceGetPCIBusId(char *buf, int len, int d) { return FN(cudaDeviceGetPCIBusId, cudaError_t, char *, int, int)(buf, len, d); }
static cudaError_t sg_cudaDeviceGetAttribute(int *v, int attr, int d) { return FN(cudaDeviceGetAttribute, cudaError_t, int *, int, int)(v, attr, d); }
static cudaError_t sg_cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { return FN(cudaDeviceGetStreamPriorityRange, cudaError_t, int *, int *)(least, greatest); }
static cudaError_t sg_cudaDeviceSynchronize(void) { return FN(cudaDeviceSynchronize, cudaError_t, void)(); }
static cudaError_t sg_cudaMemGetInfo(size_t *free, size_t *total) { return FN(cudaMemGetInfo, cudaError_t, size_t *, size_t *)(free, total); }
static cudaError_t sg_cudaStreamCreateWithPriority(uintptr_t *s, unsigned flags, int prio) { return FN(cudaStreamCreateWithPriority, cudaError_t, void **, unsigned, int)((void **)s, flags, prio); }
static cudaError_t sg_cudaStreamDestroy(uintptr_t s) { return FN(cudaStreamDestroy, cudaError_t, void *)((void *)s); }
static cudaError_t sg_cudaStreamSynchronize(uintptr_t s) { return FN(cudaStreamSynchronize, cudaError_t, void *)((void *)s); }
static cudaError_t sg_cudaStreamQuery(uintptr_t s) { return FN(cudaStreamQuery, cudaError_t, void *)((void *)s); }
static cudaError_t sg_cudaStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned flags) { return FN(cudaStreamWaitEvent, cudaError_t, void *, void *, unsigned)((void *)s, (void *)e, flags); }
static cudaError_t sg_cudaEventCreateWithFlags(uintptr_t *e, unsigned flags) { return FN(cudaEventCreateWithFlags, cudaError_t, void **, unsigned)((void **)e, flags); }
static cudaError_t sg_cudaEventRecord(uintptr_t e, uintptr_t s) { return FN(cudaEventRecord, cudaError_t, void *, void *)((void *)e, (void *)s); }
static cudaError_t sg_cudaEventSynchronize(uintptr_t e) { return FN(cudaEventSynchronize, cudaError_t, void *)((void *)e); }
static cudaError_t sg_cudaEventQuery(uintptr_t e) { return FN(cudaEventQuery, cudaError_t, void *)((void *)e); }
static cudaError_t sg_cudaEventElapsedTime(float *ms, uintptr_t a, uintptr_t b) { return FN(cudaEventElapsedTime, cudaError_t, float *, void *, void *)(ms, (void *)a, (void *)b); }
static cudaError_t sg_cudaEventDestroy(uintptr_t e) { return FN(cudaEventDestroy, cudaError_t, void *)((void *)e); }
static cudaError_t sg_cudaMalloc(uintptr_t *p, size_t n) { return FN(cudaMalloc, cudaError_t, void **, size_t)((void **)p, n); }
static cudaError_t sg_cudaFree(uintptr_t p) { return FN(cudaFree, cudaError_t, void *)((void *)p); }
static cudaError_t sg_cudaMallocHost(uintptr_t *p, size_t n) { return FN(cudaMallocHost, cudaError_t, void **, size_t)((void **)p, n); }
static cudaError_t sg_cudaFreeHost(uintptr_t p) { return FN(cudaFreeHost, cudaError_t, void *)((void *)p); }
static cudaError_t sg_cudaMemcpy(uintptr_t dst, uintptr_t src, size_t n, int kind) { return FN(cudaMemcpy, cudaError_t, void *, const void *, size_t, int)((void *)dst, (const void *)src, n, kind); }
static cudaError_t sg_cudaMemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s) { return FN(cudaMemcpyAsync, cudaError_t, void *, const void *, size_t, int, void *)((void *)dst, (const void *)src, n, kind, (void *)s); }
static cudaError_t sg_cudaMemsetAsync(uintptr_t p, int v, size_t n, uintptr_t s) { return FN(cudaMemsetAsync, cudaError_t, void *, int, size_t, void *)((void *)p, v, n, (void *)s); }

static CUresult sg_cuInit(unsigned flags) { return FN(cuInit, CUresult, unsigned)(flags); }
static CUresult sg_cuGetErrorString(CUresult r, const char **s) { return FN(cuGetErrorString, CUresult, CUresult, const char **)(r, s); }
static CUresult sg_cuGetErrorName(CUresult r, const char **s) { return FN(cuGetErrorName, CUresult, CUresult, const char **)(r, s); }
static CUresult sg_cuDeviceGet(int *dev, int ordinal) { return FN(cuDeviceGet, CUresult, int *, int)(dev, ordinal); }
static CUresult sg_cuDeviceGetName(char *buf, int len, int dev) { return FN(cuDeviceGetName, CUresult, char *, int, int)(buf, len, dev); }

// CUjit_option values from cuda.h.
enum { SG_CU_JIT_ERROR_LOG_BUFFER = 5, SG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

// sg_cuModuleLoadData loads a PTX image and, if the JIT fails, leaves its
// error log in log (the driver's error code alone rarely says which line).
static CUresult sg_cuModuleLoadData(uintptr_t *mod, const void *image, char *log, size_t logSize) {
	int opts[2] = {SG_CU_JIT_ERROR_LOG_BUFFER, SG_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)logSize};
	return FN(cuModuleLoadDataEx, CUresult, void **, const void *, unsigned, int *, void **)((void **)mod, image, 2, opts, vals);
}
static CUresult sg_cuModuleGetFunction(uintptr_t *f, uintptr_t mod, const char *name) { return FN(cuModuleGetFunction, CUresult, void **, void *, const char *)((void **)f, (void *)mod, name); }
static CUresult sg_cuModuleUnload(uintptr_t mod) { return FN(cuModuleUnload, CUresult, void *)((void *)mod); }

// sg_launch launches f with nargs parameters. Every kernel in syncgen.cu
// takes only 64-bit parameters, so the arguments travel as one uint64_t
// array and the pointer array cuLaunchKernel wants is built here.
static CUresult sg_launch(uintptr_t f, unsigned grid, unsigned block, uintptr_t stream, uint64_t *args, int nargs) {
	void *params[16];
	for (int i = 0; i < nargs && i < 16; i++) params[i] = &args[i];
	return FN(cuLaunchKernel, CUresult, void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **)(
		(void *)f, grid, 1, 1, block, 1, 1, 0, (void *)stream, params, NULL);
}
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"

	"github.com/syncgen/syncgen/runtime/cuda/dl"
)

// Environment variables that name the libraries' paths.
const (
	EnvCudart = "SYNCGEN_CUDART_LIB"
	EnvDriver = "SYNCGEN_CUDA_LIB"
)

// sym is one entry of the function table: its index in sg_fn and the names
// to look for, the first found wins (CUDA versions rename a few functions
// with a _v2 suffix while keeping the signature).
type sym struct {
	index C.int
	names []string
}

var cudartSyms = []sym{
	{C.SG_cudaGetErrorString, []string{"cudaGetErrorString"}},
	{C.SG_cudaGetErrorName, []string{"cudaGetErrorName"}},
	{C.SG_cudaGetLastError, []string{"cudaGetLastError"}},
	{C.SG_cudaRuntimeGetVersion, []string{"cudaRuntimeGetVersion"}},
	{C.SG_cudaDriverGetVersion, []string{"cudaDriverGetVersion"}},
	{C.SG_cudaGetDeviceCount, []string{"cudaGetDeviceCount"}},
	{C.SG_cudaSetDevice, []string{"cudaSetDevice"}},
	{C.SG_cudaGetDevice, []string{"cudaGetDevice"}},
	{C.SG_cudaDeviceGetPCIBusId, []string{"cudaDeviceGetPCIBusId"}},
	{C.SG_cudaDeviceGetAttribute, []string{"cudaDeviceGetAttribute"}},
	{C.SG_cudaDeviceGetStreamPriorityRange, []string{"cudaDeviceGetStreamPriorityRange"}},
	{C.SG_cudaDeviceSynchronize, []string{"cudaDeviceSynchronize"}},
	{C.SG_cudaMemGetInfo, []string{"cudaMemGetInfo"}},
	{C.SG_cudaStreamCreateWithPriority, []string{"cudaStreamCreateWithPriority"}},
	{C.SG_cudaStreamDestroy, []string{"cudaStreamDestroy"}},
	{C.SG_cudaStreamSynchronize, []string{"cudaStreamSynchronize"}},
	{C.SG_cudaStreamQuery, []string{"cudaStreamQuery"}},
	{C.SG_cudaStreamWaitEvent, []string{"cudaStreamWaitEvent"}},
	{C.SG_cudaEventCreateWithFlags, []string{"cudaEventCreateWithFlags"}},
	{C.SG_cudaEventRecord, []string{"cudaEventRecord"}},
	{C.SG_cudaEventSynchronize, []string{"cudaEventSynchronize"}},
	{C.SG_cudaEventQuery, []string{"cudaEventQuery"}},
	{C.SG_cudaEventElapsedTime, []string{"cudaEventElapsedTime", "cudaEventElapsedTime_v2"}},
	{C.SG_cudaEventDestroy, []string{"cudaEventDestroy"}},
	{C.SG_cudaMalloc, []string{"cudaMalloc"}},
	{C.SG_cudaFree, []string{"cudaFree"}},
	{C.SG_cudaMallocHost, []string{"cudaMallocHost"}},
	{C.SG_cudaFreeHost, []string{"cudaFreeHost"}},
	{C.SG_cudaMemcpy, []string{"cudaMemcpy"}},
	{C.SG_cudaMemcpyAsync, []string{"cudaMemcpyAsync"}},
	{C.SG_cudaMemsetAsync, []string{"cudaMemsetAsync"}},
}

var driverSyms = []sym{
	{C.SG_cuInit, []string{"cuInit"}},
	{C.SG_cuGetErrorString, []string{"cuGetErrorString"}},
	{C.SG_cuGetErrorName, []string{"cuGetErrorName"}},
	{C.SG_cuDeviceGet, []string{"cuDeviceGet"}},
	{C.SG_cuDeviceGetName, []string{"cuDeviceGetName"}},
	{C.SG_cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}},
	{C.SG_cuModuleGetFunction, []string{"cuModuleGetFunction"}},
	{C.SG_cuModuleUnload, []string{"cuModuleUnload"}},
	{C.SG_cuLaunchKernel, []string{"cuLaunchKernel"}},
}

var (
	loadOnce sync.Once
	loadErr  error
	cudart   *dl.Library
	driver   *dl.Library
)

// Load opens the CUDA runtime (libcudart.so.13, else .so.12, or the path in
// SYNCGEN_CUDART_LIB) and the driver (libcuda.so.1, or SYNCGEN_CUDA_LIB),
// resolves every function this package uses, and initialises the driver.
// It is safe to call many times; only the first call does the work and
// every call returns its result.
func Load() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

func load() error {
	var err error
	cudart, err = dl.Open("CUDA runtime", EnvCudart, "libcudart.so.13", "libcudart.so.12")
	if err != nil {
		return err
	}
	if err := resolve(cudart, cudartSyms); err != nil {
		return err
	}
	driver, err = dl.Open("CUDA driver", EnvDriver, "libcuda.so.1")
	if err != nil {
		return err
	}
	if err := resolve(driver, driverSyms); err != nil {
		return err
	}
	if r := C.sg_cuInit(0); r != 0 {
		return driverError("cuInit", r)
	}
	return nil
}

// resolve fills sg_fn with the addresses of syms from lib.
func resolve(lib *dl.Library, syms []sym) error {
	for _, s := range syms {
		var err error
		for _, n := range s.names {
			var p uintptr
			if p, err = lib.Sym(n); err == nil {
				C.sg_set(s.index, C.uintptr_t(p))
				break
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Libraries returns the paths of the loaded runtime and driver libraries,
// for the report's header. Both are empty before a successful Load.
func Libraries() (runtimePath, driverPath string) {
	if cudart != nil {
		runtimePath = cudart.Path
	}
	if driver != nil {
		driverPath = driver.Path
	}
	return
}

// Error is a failed CUDA call: the operation, the code and the library's own
// name and description of it.
type Error struct {
	// Op is the operation that failed, with its arguments where they help
	// ("cudaMalloc(64 MiB)").
	Op string
	// Code is the cudaError_t or CUresult value.
	Code int
	// Name and Msg are the library's name and text for Code.
	Name, Msg string
	// Log is the JIT compiler's error log, for a failed module load.
	Log string
}

// Error formats the error as "op: name (code): message".
func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d): %s", e.Op, e.Name, e.Code, e.Msg)
	if e.Log != "" {
		s += "\n" + strings.TrimSpace(e.Log)
	}
	return s
}

// Error codes the callers test for (cudaError_t values from driver_types.h).
const (
	ErrNotReady = 600 // cudaErrorNotReady: a stream or event query found work pending
)

// check turns a cudaError_t into an *Error, or nil for cudaSuccess.
func check(op string, e C.cudaError_t) error {
	if e == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(e), Name: C.GoString(C.sg_cudaGetErrorName(e)), Msg: C.GoString(C.sg_cudaGetErrorString(e))}
}

// driverError turns a failed CUresult into an *Error.
func driverError(op string, r C.CUresult) error {
	var name, msg *C.char
	e := &Error{Op: op, Code: int(r), Name: "CUresult", Msg: "unknown error"}
	if C.sg_cuGetErrorName(r, &name) == 0 && name != nil {
		e.Name = C.GoString(name)
	}
	if C.sg_cuGetErrorString(r, &msg) == 0 && msg != nil {
		e.Msg = C.GoString(msg)
	}
	return e
}

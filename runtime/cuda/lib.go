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
#cgo LDFLAGS: -ldl
#include "sg_cuda.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"

	"github.com/syncgen/syncgen/runtime/internal/dl"
)

// Environment variables that name the libraries' paths.
const (
	EnvCudart = "SYNCGEN_CUDART_LIB"
	EnvDriver = "SYNCGEN_CUDA_LIB"
)

// sym is one entry of the function table: its index in sgcu_fn and the names
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
	if r := C.sgcu_cuInit(0); r != 0 {
		return driverError("cuInit", r)
	}
	return nil
}

// resolve fills sgcu_fn with the addresses of syms from lib.
func resolve(lib *dl.Library, syms []sym) error {
	for _, s := range syms {
		var err error
		for _, n := range s.names {
			var p uintptr
			if p, err = lib.Sym(n); err == nil {
				C.sgcu_set(s.index, C.uintptr_t(p))
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
	return &Error{Op: op, Code: int(e), Name: C.GoString(C.sgcu_cudaGetErrorName(e)), Msg: C.GoString(C.sgcu_cudaGetErrorString(e))}
}

// driverError turns a failed CUresult into an *Error.
func driverError(op string, r C.CUresult) error {
	var name, msg *C.char
	e := &Error{Op: op, Code: int(r), Name: "CUresult", Msg: "unknown error"}
	if C.sgcu_cuGetErrorName(r, &name) == 0 && name != nil {
		e.Name = C.GoString(name)
	}
	if C.sgcu_cuGetErrorString(r, &msg) == 0 && msg != nil {
		e.Msg = C.GoString(msg)
	}
	return e
}

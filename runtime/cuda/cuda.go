package cuda

// #include "sg_cuda.h"
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Versions returns the CUDA runtime's and the driver's versions as
// 1000*major + 10*minor (13000 is CUDA 13.0).
func Versions() (runtimeVersion, driverVersion int, err error) {
	var r, d C.int
	if err := check("cudaRuntimeGetVersion", C.sgcu_cudaRuntimeGetVersion(&r)); err != nil {
		return 0, 0, err
	}
	if err := check("cudaDriverGetVersion", C.sgcu_cudaDriverGetVersion(&d)); err != nil {
		return 0, 0, err
	}
	return int(r), int(d), nil
}

// VersionString formats a CUDA version number ("13.0").
func VersionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// DeviceCount returns the number of devices this process may use, after
// CUDA_VISIBLE_DEVICES. No device is not an error: it returns 0.
func DeviceCount() (int, error) {
	var n C.int
	e := C.sgcu_cudaGetDeviceCount(&n)
	// cudaErrorNoDevice (100): the driver is there but sees no GPU.
	if e == 100 {
		return 0, nil
	}
	if err := check("cudaGetDeviceCount", e); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SetDevice makes device d current on the calling OS thread.
func SetDevice(d int) error {
	return check(fmt.Sprintf("cudaSetDevice(%d)", d), C.sgcu_cudaSetDevice(C.int(d)))
}

// UseDevice makes device d current on the calling OS thread unless this
// package already made it current there. It is SetDevice for the hot path:
// code that locks its goroutine to a thread and queues work calls it before
// every operation, and it costs a thread-local comparison.
func UseDevice(d int) error {
	if e := C.sgcu_useDevice(C.int(d)); e != 0 {
		return check(fmt.Sprintf("cudaSetDevice(%d)", d), e)
	}
	return nil
}

// Device returns the device current on the calling OS thread.
func Device() (int, error) {
	var d C.int
	err := check("cudaGetDevice", C.sgcu_cudaGetDevice(&d))
	return int(d), err
}

// PCIBusID returns device d's PCI address ("0000:3B:00.0"). Two ranks on one
// host that report the same address share a GPU.
func PCIBusID(d int) (string, error) {
	var buf [64]C.char
	if err := check(fmt.Sprintf("cudaDeviceGetPCIBusId(%d)", d), C.sgcu_cudaDeviceGetPCIBusId(&buf[0], C.int(len(buf)), C.int(d))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// Device attributes (enum cudaDeviceAttr in driver_types.h).
const (
	AttrMultiProcessorCount  = 16
	AttrComputeCapabilityMaj = 75
	AttrComputeCapabilityMin = 76
)

// Attribute returns a device attribute.
func Attribute(attr, d int) (int, error) {
	var v C.int
	err := check(fmt.Sprintf("cudaDeviceGetAttribute(%d, device %d)", attr, d), C.sgcu_cudaDeviceGetAttribute(&v, C.int(attr), C.int(d)))
	return int(v), err
}

// DeviceName returns device d's marketing name ("NVIDIA H200").
func DeviceName(d int) (string, error) {
	var dev C.int
	if r := C.sgcu_cuDeviceGet(&dev, C.int(d)); r != 0 {
		return "", driverError(fmt.Sprintf("cuDeviceGet(%d)", d), r)
	}
	var buf [256]C.char
	if r := C.sgcu_cuDeviceGetName(&buf[0], C.int(len(buf)), dev); r != 0 {
		return "", driverError(fmt.Sprintf("cuDeviceGetName(%d)", d), r)
	}
	return C.GoString(&buf[0]), nil
}

// MemInfo returns the current device's free and total memory in bytes.
func MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = check("cudaMemGetInfo", C.sgcu_cudaMemGetInfo(&f, &t))
	return int64(f), int64(t), err
}

// Synchronize waits for all work on the current device.
func Synchronize() error { return check("cudaDeviceSynchronize", C.sgcu_cudaDeviceSynchronize()) }

// LastError returns and clears the last error of a runtime call on this
// thread, such as a kernel launch failure seen late.
func LastError() error { return check("cudaGetLastError", C.sgcu_cudaGetLastError()) }

// StreamPriorityRange returns the current device's least (numerically
// greatest) and greatest (numerically least) stream priorities.
func StreamPriorityRange() (least, greatest int, err error) {
	var l, g C.int
	err = check("cudaDeviceGetStreamPriorityRange", C.sgcu_cudaDeviceGetStreamPriorityRange(&l, &g))
	return int(l), int(g), err
}

// Stream is a CUDA stream (cudaStream_t). The zero Stream is the legacy
// default stream.
type Stream uintptr

// cudaStreamNonBlocking: the stream does not synchronise with the legacy
// default stream, which NCCL and our kernels never use.
const streamNonBlocking = 1

// NewStream creates a non-blocking stream with the given priority (from
// StreamPriorityRange; lower numbers are higher priorities).
func NewStream(priority int) (Stream, error) {
	var s C.uintptr_t
	err := check(fmt.Sprintf("cudaStreamCreateWithPriority(priority %d)", priority), C.sgcu_cudaStreamCreateWithPriority(&s, streamNonBlocking, C.int(priority)))
	return Stream(s), err
}

// Destroy destroys the stream once its work is done.
func (s Stream) Destroy() error {
	return check("cudaStreamDestroy", C.sgcu_cudaStreamDestroy(C.uintptr_t(s)))
}

// Synchronize blocks until the stream's work is done.
func (s Stream) Synchronize() error {
	return check("cudaStreamSynchronize", C.sgcu_cudaStreamSynchronize(C.uintptr_t(s)))
}

// Done reports whether all work queued on the stream has finished.
func (s Stream) Done() (bool, error) {
	e := C.sgcu_cudaStreamQuery(C.uintptr_t(s))
	if e == ErrNotReady {
		return false, nil
	}
	return e == 0, check("cudaStreamQuery", e)
}

// Wait makes all future work on s wait until ev has completed.
func (s Stream) Wait(ev Event) error {
	return check("cudaStreamWaitEvent", C.sgcu_cudaStreamWaitEvent(C.uintptr_t(s), C.uintptr_t(ev), 0))
}

// Event is a CUDA event (cudaEvent_t).
type Event uintptr

// Event creation flags (cudaEventDisableTiming): an event used only for
// ordering is cheaper to record and wait for without timing.
const (
	EventDefault       = 0
	EventDisableTiming = 2
)

// NewEvent creates an event with the given flags.
func NewEvent(flags int) (Event, error) {
	var e C.uintptr_t
	err := check("cudaEventCreateWithFlags", C.sgcu_cudaEventCreateWithFlags(&e, C.uint(flags)))
	return Event(e), err
}

// Record captures the work queued on s so far.
func (e Event) Record(s Stream) error {
	return check("cudaEventRecord", C.sgcu_cudaEventRecord(C.uintptr_t(e), C.uintptr_t(s)))
}

// Synchronize blocks until the captured work is done.
func (e Event) Synchronize() error {
	return check("cudaEventSynchronize", C.sgcu_cudaEventSynchronize(C.uintptr_t(e)))
}

// Done reports whether the captured work has finished.
func (e Event) Done() (bool, error) {
	r := C.sgcu_cudaEventQuery(C.uintptr_t(e))
	if r == ErrNotReady {
		return false, nil
	}
	return r == 0, check("cudaEventQuery", r)
}

// Elapsed returns the time in milliseconds between two completed events.
func Elapsed(start, end Event) (float64, error) {
	var ms C.float
	err := check("cudaEventElapsedTime", C.sgcu_cudaEventElapsedTime(&ms, C.uintptr_t(start), C.uintptr_t(end)))
	return float64(ms), err
}

// Destroy releases the event.
func (e Event) Destroy() error {
	return check("cudaEventDestroy", C.sgcu_cudaEventDestroy(C.uintptr_t(e)))
}

// Ptr is a device address.
type Ptr uintptr

// Malloc allocates n bytes on the current device.
func Malloc(n int64) (Ptr, error) {
	var p C.uintptr_t
	err := check(fmt.Sprintf("cudaMalloc(%d bytes)", n), C.sgcu_cudaMalloc(&p, C.size_t(n)))
	return Ptr(p), err
}

// Free releases memory from Malloc.
func Free(p Ptr) error { return check("cudaFree", C.sgcu_cudaFree(C.uintptr_t(p))) }

// HostBuffer is page-locked host memory from cudaMallocHost, which copies
// from and to the device run at full speed and asynchronously.
type HostBuffer struct {
	p unsafe.Pointer // C memory, never moved or collected by Go
	n int64
}

// MallocHost allocates n bytes of page-locked host memory.
func MallocHost(n int64) (*HostBuffer, error) {
	var p unsafe.Pointer
	if err := check(fmt.Sprintf("cudaMallocHost(%d bytes)", n), C.sgcu_cudaMallocHost(&p, C.size_t(n))); err != nil {
		return nil, err
	}
	return &HostBuffer{p: p, n: n}, nil
}

// Bytes returns the buffer as a slice. The memory is C memory: the slice
// must not be used after Free.
func (h *HostBuffer) Bytes() []byte {
	if h.n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(h.p), h.n)
}

// Addr returns the buffer's address, for copies.
func (h *HostBuffer) Addr() uintptr { return uintptr(h.p) }

// Len returns the buffer's size in bytes.
func (h *HostBuffer) Len() int64 { return h.n }

// Free releases the buffer.
func (h *HostBuffer) Free() error {
	if h.p == nil {
		return nil
	}
	err := check("cudaFreeHost", C.sgcu_cudaFreeHost(h.p))
	h.p, h.n = nil, 0
	return err
}

// Copy directions (enum cudaMemcpyKind).
const (
	HostToDevice   = 1
	DeviceToHost   = 2
	DeviceToDevice = 3
)

// Memcpy copies n bytes and waits for the copy.
func Memcpy(dst, src uintptr, n int64, kind int) error {
	return check(fmt.Sprintf("cudaMemcpy(%d bytes)", n), C.sgcu_cudaMemcpy(C.uintptr_t(dst), C.uintptr_t(src), C.size_t(n), C.int(kind)))
}

// CopyToHost copies len(dst) bytes from device address src into dst through
// stream s and waits for the copy (and for the work queued on s before it).
func CopyToHost(dst []byte, src Ptr, s Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return check(fmt.Sprintf("cudaMemcpyAsync(device to host, %d bytes)", len(dst)), C.sgcu_copyToHost(unsafe.Pointer(&dst[0]), C.uintptr_t(src), C.size_t(len(dst)), C.uintptr_t(s)))
}

// CopyFromHost copies src to device address dst through stream s and waits
// for the copy.
func CopyFromHost(dst Ptr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	return check(fmt.Sprintf("cudaMemcpyAsync(host to device, %d bytes)", len(src)), C.sgcu_copyFromHost(C.uintptr_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), C.uintptr_t(s)))
}

// MemcpyAsync queues a copy of n bytes on s.
func MemcpyAsync(dst, src uintptr, n int64, kind int, s Stream) error {
	return check(fmt.Sprintf("cudaMemcpyAsync(%d bytes)", n), C.sgcu_cudaMemcpyAsync(C.uintptr_t(dst), C.uintptr_t(src), C.size_t(n), C.int(kind), C.uintptr_t(s)))
}

// MemsetAsync queues setting n bytes at p to the byte v on s.
func MemsetAsync(p Ptr, v byte, n int64, s Stream) error {
	return check(fmt.Sprintf("cudaMemsetAsync(%d bytes)", n), C.sgcu_cudaMemsetAsync(C.uintptr_t(p), C.int(v), C.size_t(n), C.uintptr_t(s)))
}

// The training step's kernels (kernels/syncgen.cu): loss scaling, setting
// values and the optimizer update. Doubles travel as their bits, since
// every kernel parameter is a uint64.

// Scale queues multiplying n elements of dtype (a float) at p by factor, a
// power of two, in place: float32 arithmetic for F32, F16 and BF16, float64
// for F64, rounded to dtype. When flag is not 0 it is the address of an
// int32 that the kernel sets to 1 if any result is infinite or NaN; it
// never clears it.
func (k *Kernels) Scale(s Stream, p Ptr, dtype int, n int64, factor float64, flag Ptr) error {
	return k.launch("syncgen_scale", k.scale, n, s, uint64(p), uint64(n), uint64(dtype), math.Float64bits(factor), uint64(flag))
}

// Set queues writing v, rounded to dtype as Cast rounds, into n elements
// of dtype at p.
func (k *Kernels) Set(s Stream, p Ptr, dtype int, n int64, v float64) error {
	return k.launch("syncgen_set", k.set, n, s, uint64(p), uint64(n), uint64(dtype), math.Float64bits(v))
}

// UpdateArgs are the operands of one optimizer step over N elements (see
// Kernels.Update). A zero address means the operand is absent.
type UpdateArgs struct {
	// Grad holds N gradients of GradType.
	Grad     Ptr
	GradType int
	// Param holds N parameters of ParamType; State0 and State1 the
	// optimizer's state, of ParamType as well.
	Param          Ptr
	ParamType      int
	State0, State1 Ptr
	// Out, when not 0, receives the new parameters rounded to OutType.
	Out     Ptr
	OutType int
	// Flag, when not 0, is the address of an int32: when it is not zero
	// the kernel changes nothing.
	Flag Ptr
	N    int64
	// Kind is optim.Kind's value (1 SGD, 2 AdamW); F64 computes in
	// float64, else float32; C are optim.Hyper's constants.
	Kind int
	F64  bool
	C    [8]float64
}

// Update queues one optimizer step, element by element as optim's
// Hyper.Apply computes it, with the operands of a.
func (k *Kernels) Update(s Stream, a *UpdateArgs) error {
	// The kernel takes the dtypes, the optimizer and the precision packed
	// in one parameter: with the eight constants it has sixteen, the most
	// a launch passes.
	types := uint64(a.GradType&0xff) | uint64(a.ParamType&0xff)<<8 | uint64(a.OutType&0xff)<<16 | uint64(a.Kind&0xff)<<24 | b2u(a.F64)<<32
	return k.launch("syncgen_update", k.update, a.N, s, uint64(a.Grad), uint64(a.Param), uint64(a.State0), uint64(a.State1),
		uint64(a.Out), uint64(a.Flag), uint64(a.N), types,
		math.Float64bits(a.C[0]), math.Float64bits(a.C[1]), math.Float64bits(a.C[2]), math.Float64bits(a.C[3]),
		math.Float64bits(a.C[4]), math.Float64bits(a.C[5]), math.Float64bits(a.C[6]), math.Float64bits(a.C[7]))
}

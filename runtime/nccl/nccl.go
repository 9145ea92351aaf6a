// Package nccl is the part of NCCL that syncgen's GPU backend uses, loaded
// at run time with dlopen (libnccl.so.2, or the path in SYNCGEN_NCCL_LIB).
//
// As in package cuda, nothing here needs NCCL's headers to build: the types
// and enum values are copied from the public nccl.h into the cgo preamble,
// the functions are resolved with dlsym into a table and called through C
// wrappers, and handles travel through Go as uintptr.
//
// The collectives take the CUDA stream to queue on and return as soon as the
// work is queued, like NCCL's own functions. NCCL uses the calling thread's
// current CUDA device: callers lock their goroutine to its OS thread and
// select the device (cuda.SetDevice) first.
package nccl

/*
#cgo LDFLAGS: -ldl
#include "sg_nccl.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/cuda"
	"github.com/syncgen/syncgen/runtime/internal/dl"
)

// EnvLib is the environment variable that names libnccl's path.
const EnvLib = "SYNCGEN_NCCL_LIB"

// MinVersion is the oldest NCCL accepted: 2.10 brought ncclAvg and bfloat16.
const MinVersion = 21000

type sym struct {
	index    C.int
	name     string
	optional bool
}

var syms = []sym{
	{C.SG_ncclGetVersion, "ncclGetVersion", false},
	{C.SG_ncclGetErrorString, "ncclGetErrorString", false},
	{C.SG_ncclGetUniqueId, "ncclGetUniqueId", false},
	{C.SG_ncclCommInitRank, "ncclCommInitRank", false},
	{C.SG_ncclCommDestroy, "ncclCommDestroy", false},
	{C.SG_ncclCommAbort, "ncclCommAbort", false},
	{C.SG_ncclCommGetAsyncError, "ncclCommGetAsyncError", false},
	{C.SG_ncclCommCount, "ncclCommCount", false},
	{C.SG_ncclCommCuDevice, "ncclCommCuDevice", false},
	{C.SG_ncclCommUserRank, "ncclCommUserRank", false},
	{C.SG_ncclAllReduce, "ncclAllReduce", false},
	{C.SG_ncclBroadcast, "ncclBroadcast", false},
	{C.SG_ncclReduce, "ncclReduce", false},
	{C.SG_ncclAllGather, "ncclAllGather", false},
	{C.SG_ncclReduceScatter, "ncclReduceScatter", false},
	{C.SG_ncclGroupStart, "ncclGroupStart", false},
	{C.SG_ncclGroupEnd, "ncclGroupEnd", false},
	{C.SG_ncclGetLastError, "ncclGetLastError", true},
	{C.SG_ncclCommFinalize, "ncclCommFinalize", true},
	{C.SG_ncclRedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum", true},
	{C.SG_ncclRedOpDestroy, "ncclRedOpDestroy", true},
	{C.SG_ncclMemAlloc, "ncclMemAlloc", true},
	{C.SG_ncclMemFree, "ncclMemFree", true},
	{C.SG_ncclCommRegister, "ncclCommRegister", true},
	{C.SG_ncclCommDeregister, "ncclCommDeregister", true},
}

var (
	loadOnce sync.Once
	loadErr  error
	lib      *dl.Library
	version  int
	missing  []string
)

// Load opens libnccl, resolves its functions and checks its version. It is
// safe to call many times; only the first call does the work.
func Load() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

func load() error {
	var err error
	lib, err = dl.Open("NCCL", EnvLib, "libnccl.so.2")
	if err != nil {
		return err
	}
	for _, s := range syms {
		p, err := lib.Sym(s.name)
		if err != nil {
			if s.optional {
				missing = append(missing, s.name)
				continue
			}
			return err
		}
		C.sgnc_set(s.index, C.uintptr_t(p))
	}
	var v C.int
	if r := C.sgnc_ncclGetVersion(&v); r != 0 {
		return newError("ncclGetVersion", r, 0)
	}
	version = int(v)
	if version < MinVersion {
		return fmt.Errorf("%s is NCCL %s; syncgen needs NCCL %s or newer (for ncclAvg and bfloat16)",
			lib.Path, VersionString(version), VersionString(MinVersion))
	}
	return nil
}

// Version returns the loaded library's version code (22708 is 2.27.8).
func Version() int { return version }

// Path returns the file the library was loaded from.
func Path() string {
	if lib == nil {
		return ""
	}
	return lib.Path
}

// Missing lists the optional functions the loaded library lacks, so that
// the caller can say what it does without them.
func Missing() []string { return missing }

// VersionString formats a version code from ncclGetVersion ("2.27.8"). Codes
// before 2.9 used 1000*major, later ones 10000*major.
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// Result codes (ncclResult_t).
const (
	Success            = 0
	UnhandledCudaError = 1
	SystemError        = 2
	InternalError      = 3
	InvalidArgument    = 4
	InvalidUsage       = 5
	RemoteError        = 6
	InProgress         = 7
)

var resultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}

// Error is a failed NCCL call with the library's own explanation.
type Error struct {
	// Op is the NCCL function that failed.
	Op string
	// Code is the ncclResult_t.
	Code int
	// Msg is ncclGetErrorString's text; Last is ncclGetLastError's, which
	// usually says what actually went wrong.
	Msg, Last string
}

// Error formats the error as "op: name (code): message: last error".
func (e *Error) Error() string {
	name := fmt.Sprintf("ncclResult %d", e.Code)
	if e.Code >= 0 && e.Code < len(resultNames) {
		name = resultNames[e.Code]
	}
	s := fmt.Sprintf("%s: %s (%d): %s", e.Op, name, e.Code, e.Msg)
	if last := strings.TrimSpace(e.Last); last != "" {
		s += ": " + last
	}
	return s
}

func newError(op string, r C.ncclResult_t, comm Comm) error {
	if r == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(r), Msg: C.GoString(C.sgnc_ncclGetErrorString(r)), Last: C.GoString(C.sgnc_ncclGetLastError(C.uintptr_t(comm)))}
}

// DataType is an ncclDataType_t.
type DataType int

// The data types (ncclDataType_t in nccl.h).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
)

// RedOp is an ncclRedOp_t: a built-in operator or one made by
// NewPreMulSum.
type RedOp int

// The built-in operators (ncclRedOp_t in nccl.h).
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// UniqueIDBytes is the size of an ncclUniqueId.
const UniqueIDBytes = C.SG_NCCL_UNIQUE_ID_BYTES

// UniqueID identifies a communicator being created; rank 0 makes it and
// sends it to the others (over MPI).
type UniqueID [UniqueIDBytes]byte

// NewUniqueID returns a fresh unique id (ncclGetUniqueId).
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	err := newError("ncclGetUniqueId", C.sgnc_ncclGetUniqueId(unsafe.Pointer(&id[0])), 0)
	return id, err
}

// Comm is an NCCL communicator (ncclComm_t).
type Comm uintptr

// InitRank joins the communicator id as rank of nranks on the calling
// thread's current device. It blocks until all ranks have joined.
func InitRank(nranks int, id UniqueID, rank int) (Comm, error) {
	var c C.uintptr_t
	r := C.sgnc_ncclCommInitRank(&c, C.int(nranks), unsafe.Pointer(&id[0]), C.int(rank))
	if r != 0 {
		return 0, newError(fmt.Sprintf("ncclCommInitRank(rank %d of %d)", rank, nranks), r, 0)
	}
	return Comm(c), nil
}

// Destroy frees the communicator after its work is done. Where the library
// has ncclCommFinalize it is called first, so that pending work completes
// and destroying cannot hang another rank.
func (c Comm) Destroy() error {
	if C.sgnc_has(C.SG_ncclCommFinalize) != 0 {
		if err := newError("ncclCommFinalize", C.sgnc_ncclCommFinalize(C.uintptr_t(c)), c); err != nil {
			return err
		}
	}
	return newError("ncclCommDestroy", C.sgnc_ncclCommDestroy(C.uintptr_t(c)), c)
}

// Abort stops the communicator's pending work and frees it; used when a
// rank failed and the job is ending.
func (c Comm) Abort() error {
	return newError("ncclCommAbort", C.sgnc_ncclCommAbort(C.uintptr_t(c)), c)
}

// AsyncError returns the error a communicator's background work has hit, if
// any (ncclCommGetAsyncError): a remote rank that died, a network failure.
// ncclInProgress (still initialising) is not an error.
func (c Comm) AsyncError() error {
	var a C.ncclResult_t
	if err := newError("ncclCommGetAsyncError", C.sgnc_ncclCommGetAsyncError(C.uintptr_t(c), &a), c); err != nil {
		return err
	}
	if a == 0 || a == InProgress {
		return nil
	}
	return newError("NCCL asynchronous error", a, c)
}

// Count returns the number of ranks in the communicator.
func (c Comm) Count() (int, error) {
	var n C.int
	err := newError("ncclCommCount", C.sgnc_ncclCommCount(C.uintptr_t(c), &n), c)
	return int(n), err
}

// Device returns the CUDA device the communicator runs on.
func (c Comm) Device() (int, error) {
	var d C.int
	err := newError("ncclCommCuDevice", C.sgnc_ncclCommCuDevice(C.uintptr_t(c), &d), c)
	return int(d), err
}

// Rank returns the caller's rank in the communicator.
func (c Comm) Rank() (int, error) {
	var r C.int
	err := newError("ncclCommUserRank", C.sgnc_ncclCommUserRank(C.uintptr_t(c), &r), c)
	return int(r), err
}

// AllReduce queues ncclAllReduce of count elements on s. send == recv is
// the in-place form.
func (c Comm) AllReduce(send, recv cuda.Ptr, count int64, dt DataType, op RedOp, s cuda.Stream) error {
	return newError("ncclAllReduce", C.sgnc_ncclAllReduce(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op), C.uintptr_t(c), C.uintptr_t(s)), c)
}

// Broadcast queues ncclBroadcast of count elements from root on s.
func (c Comm) Broadcast(send, recv cuda.Ptr, count int64, dt DataType, root int, s cuda.Stream) error {
	return newError("ncclBroadcast", C.sgnc_ncclBroadcast(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(root), C.uintptr_t(c), C.uintptr_t(s)), c)
}

// Reduce queues ncclReduce of count elements to root on s.
func (c Comm) Reduce(send, recv cuda.Ptr, count int64, dt DataType, op RedOp, root int, s cuda.Stream) error {
	return newError("ncclReduce", C.sgnc_ncclReduce(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op), C.int(root), C.uintptr_t(c), C.uintptr_t(s)), c)
}

// AllGather queues ncclAllGather of sendcount elements from each rank on s.
// The in-place form has send = recv + rank*sendcount elements.
func (c Comm) AllGather(send, recv cuda.Ptr, sendcount int64, dt DataType, s cuda.Stream) error {
	return newError("ncclAllGather", C.sgnc_ncclAllGather(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(sendcount), C.int(dt), C.uintptr_t(c), C.uintptr_t(s)), c)
}

// ReduceScatter queues ncclReduceScatter giving each rank recvcount
// elements on s. The in-place form has recv = send + rank*recvcount
// elements.
func (c Comm) ReduceScatter(send, recv cuda.Ptr, recvcount int64, dt DataType, op RedOp, s cuda.Stream) error {
	return newError("ncclReduceScatter", C.sgnc_ncclReduceScatter(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(recvcount), C.int(dt), C.int(op), C.uintptr_t(c), C.uintptr_t(s)), c)
}

// GroupStart opens an NCCL group: the collectives queued until GroupEnd are
// launched together.
func GroupStart() error { return newError("ncclGroupStart", C.sgnc_ncclGroupStart(), 0) }

// GroupEnd closes the group opened by GroupStart and launches its work.
func GroupEnd() error { return newError("ncclGroupEnd", C.sgnc_ncclGroupEnd(), 0) }

// HasPreMulSum reports whether the library has ncclRedOpCreatePreMulSum.
func HasPreMulSum() bool { return C.sgnc_has(C.SG_ncclRedOpCreatePreMulSum) != 0 }

// NewPreMulSum creates an operator that multiplies each input by scalar
// before summing (loss scaling folded into the reduction). scalar holds one
// element of dt in its in-memory form; NCCL copies it at once
// (ncclScalarHostImmediate).
func (c Comm) NewPreMulSum(scalar []byte, dt DataType) (RedOp, error) {
	if !HasPreMulSum() {
		return 0, fmt.Errorf("ncclRedOpCreatePreMulSum: missing from NCCL %s (%s); it needs NCCL 2.11 or newer", VersionString(version), Path())
	}
	if len(scalar) == 0 {
		return 0, fmt.Errorf("ncclRedOpCreatePreMulSum: empty scalar")
	}
	const hostImmediate = 1 // ncclScalarHostImmediate
	var op C.int
	r := C.sgnc_ncclRedOpCreatePreMulSum(&op, unsafe.Pointer(&scalar[0]), C.int(dt), hostImmediate, C.uintptr_t(c))
	return RedOp(op), newError("ncclRedOpCreatePreMulSum", r, c)
}

// DestroyOp frees an operator made by NewPreMulSum.
func (c Comm) DestroyOp(op RedOp) error {
	return newError("ncclRedOpDestroy", C.sgnc_ncclRedOpDestroy(C.int(op), C.uintptr_t(c)), c)
}

// HasMemAlloc reports whether the library has ncclMemAlloc and
// ncclCommRegister (NCCL 2.19), whose buffers let NCCL skip copies.
func HasMemAlloc() bool {
	return C.sgnc_has(C.SG_ncclMemAlloc) != 0 && C.sgnc_has(C.SG_ncclMemFree) != 0 &&
		C.sgnc_has(C.SG_ncclCommRegister) != 0 && C.sgnc_has(C.SG_ncclCommDeregister) != 0
}

// MemAlloc allocates n bytes of device memory suited to NCCL's zero-copy
// paths on the current device.
func MemAlloc(n int64) (cuda.Ptr, error) {
	if !HasMemAlloc() {
		return 0, fmt.Errorf("ncclMemAlloc: missing from NCCL %s (%s); it needs NCCL 2.19 or newer", VersionString(version), Path())
	}
	var p C.uintptr_t
	err := newError(fmt.Sprintf("ncclMemAlloc(%d bytes)", n), C.sgnc_ncclMemAlloc(&p, C.size_t(n)), 0)
	return cuda.Ptr(p), err
}

// MemFree frees memory from MemAlloc.
func MemFree(p cuda.Ptr) error { return newError("ncclMemFree", C.sgnc_ncclMemFree(C.uintptr_t(p)), 0) }

// Register registers a buffer with the communicator for zero-copy
// collectives and returns the handle for Deregister.
func (c Comm) Register(p cuda.Ptr, n int64) (uintptr, error) {
	if !HasMemAlloc() {
		return 0, fmt.Errorf("ncclCommRegister: missing from NCCL %s (%s); it needs NCCL 2.19 or newer", VersionString(version), Path())
	}
	var h C.uintptr_t
	err := newError("ncclCommRegister", C.sgnc_ncclCommRegister(C.uintptr_t(c), C.uintptr_t(p), C.size_t(n), &h), c)
	return uintptr(h), err
}

// Deregister undoes Register.
func (c Comm) Deregister(handle uintptr) error {
	return newError("ncclCommDeregister", C.sgnc_ncclCommDeregister(C.uintptr_t(c), C.uintptr_t(handle)), c)
}

package mpi

/*
#cgo pkg-config: ompi
#cgo CFLAGS: -O3 -I${SRCDIR}/../internal/elem
#include <stdlib.h>
#include <string.h>
#include "sg_mpi.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// ThreadLevel is an MPI thread support level.
type ThreadLevel int

// The thread levels, in increasing order.
const (
	ThreadSingle     ThreadLevel = C.MPI_THREAD_SINGLE
	ThreadFunneled   ThreadLevel = C.MPI_THREAD_FUNNELED
	ThreadSerialized ThreadLevel = C.MPI_THREAD_SERIALIZED
	ThreadMultiple   ThreadLevel = C.MPI_THREAD_MULTIPLE
)

// String names the level as MPI does.
func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "MPI_THREAD_SINGLE"
	case ThreadFunneled:
		return "MPI_THREAD_FUNNELED"
	case ThreadSerialized:
		return "MPI_THREAD_SERIALIZED"
	case ThreadMultiple:
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("thread level %d", int(l))
}

// The dtypes are package elem's: sg_mpi.h numbers them the same way, which
// these declarations check at compile time (an array of negative or
// non-zero length would not compile).
var (
	_ [0]int = [int(C.SG_F64) - int(elem.F64)]int{}
	_ [0]int = [int(C.SG_F32) - int(elem.F32)]int{}
	_ [0]int = [int(C.SG_F16) - int(elem.F16)]int{}
	_ [0]int = [int(C.SG_BF16) - int(elem.BF16)]int{}
	_ [0]int = [int(C.SG_I64) - int(elem.I64)]int{}
	_ [0]int = [int(C.SG_I32) - int(elem.I32)]int{}
	_ [0]int = [int(C.SG_I8) - int(elem.I8)]int{}
	_ [0]int = [int(C.SG_U8) - int(elem.U8)]int{}
)

// Op is a reduction code; the values are package plan's RedOp. Avg is
// reduced as a sum: the caller divides.
type Op uint8

// Error is a failed MPI call.
type Error struct {
	Call string
	Code int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s (MPI error %d)", e.Call, e.Msg, e.Code) }

// check turns an MPI return code into an error.
func check(call string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	return &Error{Call: call, Code: int(rc), Msg: ErrorString(int(rc))}
}

// ErrorString returns MPI's text for an error code.
func ErrorString(code int) string {
	var buf [C.MPI_MAX_ERROR_STRING + 1]C.char
	var n C.int
	if C.MPI_Error_string(C.int(code), &buf[0], &n) != C.MPI_SUCCESS {
		return fmt.Sprintf("unknown MPI error %d", code)
	}
	return C.GoStringN(&buf[0], n)
}

// Init initialises MPI asking for level and returns the level granted. It
// sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so that failures come back as
// errors (communicators duplicated from it inherit that).
func Init(level ThreadLevel) (ThreadLevel, error) {
	var provided C.int
	if err := check("MPI_Init_thread", C.MPI_Init_thread(nil, nil, C.int(level), &provided)); err != nil {
		return 0, err
	}
	if err := check("MPI_Comm_set_errhandler", C.sg_set_errors_return(C.sg_comm_world())); err != nil {
		return 0, err
	}
	return ThreadLevel(provided), nil
}

// Initialized reports whether Init has been called.
func Initialized() bool {
	var flag C.int
	C.MPI_Initialized(&flag)
	return flag != 0
}

// Finalized reports whether Finalize has been called.
func Finalized() bool {
	var flag C.int
	C.MPI_Finalized(&flag)
	return flag != 0
}

// Finalize shuts MPI down.
func Finalize() error { return check("MPI_Finalize", C.MPI_Finalize()) }

// Abort ends every process of the job with code. It may be called from
// any thread: it is the last resort after a fatal error.
func Abort(code int) {
	C.MPI_Abort(C.sg_comm_world(), C.int(code))
}

// LibraryVersion returns MPI_Get_library_version's text, first line.
func LibraryVersion() string {
	var buf [C.MPI_MAX_LIBRARY_VERSION_STRING + 1]C.char
	var n C.int
	if C.MPI_Get_library_version(&buf[0], &n) != C.MPI_SUCCESS {
		return "unknown"
	}
	s := C.GoStringN(&buf[0], n)
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\x00' {
			return s[:i]
		}
	}
	return s
}

// StandardVersion returns the MPI standard version the library implements.
func StandardVersion() (major, minor int) {
	var a, b C.int
	C.MPI_Get_version(&a, &b)
	return int(a), int(b)
}

// ControlVar reads an MPI_T control variable (for Open MPI, an MCA
// parameter such as "btl_vader_eager_limit") and returns its value as
// text (a boolean as true or false); ok is false when the library has no
// variable of that name, or one of a type other than a number, a boolean
// or a string. Component parameters exist
// once MPI_Init has opened their component.
func ControlVar(name string) (value string, ok bool, err error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var buf [256]C.char
	rc := C.sg_control_var(cname, &buf[0], C.int(len(buf)))
	switch {
	case rc == -1:
		return "", false, nil
	case rc != C.MPI_SUCCESS:
		return "", false, &Error{Call: "MPI_T control variable " + name, Code: int(rc), Msg: ErrorString(int(rc))}
	}
	return C.GoString(&buf[0]), true, nil
}

// ProcessorName returns MPI_Get_processor_name (the host name).
func ProcessorName() string {
	var buf [C.MPI_MAX_PROCESSOR_NAME + 1]C.char
	var n C.int
	if C.MPI_Get_processor_name(&buf[0], &n) != C.MPI_SUCCESS {
		return "unknown"
	}
	return C.GoStringN(&buf[0], n)
}

// Comm is a communicator.
type Comm struct{ c C.MPI_Comm }

// World returns MPI_COMM_WORLD.
func World() Comm { return Comm{C.sg_comm_world()} }

// Rank returns the calling process's rank in c.
func (c Comm) Rank() (int, error) {
	var r C.int
	err := check("MPI_Comm_rank", C.MPI_Comm_rank(c.c, &r))
	return int(r), err
}

// Size returns the number of processes in c.
func (c Comm) Size() (int, error) {
	var n C.int
	err := check("MPI_Comm_size", C.MPI_Comm_size(c.c, &n))
	return int(n), err
}

// Dup duplicates c (collective): the copy matches collectives only with
// itself.
func (c Comm) Dup() (Comm, error) {
	var d C.MPI_Comm
	if err := check("MPI_Comm_dup", C.MPI_Comm_dup(c.c, &d)); err != nil {
		return Comm{}, err
	}
	return Comm{d}, check("MPI_Comm_set_errhandler", C.sg_set_errors_return(d))
}

// SplitShared splits c into the processes that share memory with the caller
// (one host): MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), keyed by rank.
func (c Comm) SplitShared() (Comm, error) {
	r, err := c.Rank()
	if err != nil {
		return Comm{}, err
	}
	var d C.MPI_Comm
	if err := check("MPI_Comm_split_type", C.MPI_Comm_split_type(c.c, C.MPI_COMM_TYPE_SHARED, C.int(r), C.sg_info_null(), &d)); err != nil {
		return Comm{}, err
	}
	return Comm{d}, check("MPI_Comm_set_errhandler", C.sg_set_errors_return(d))
}

// Split splits c by color (collective): the callers with the same color
// make one communicator, ordered by key.
func (c Comm) Split(color, key int) (Comm, error) {
	var d C.MPI_Comm
	if err := check("MPI_Comm_split", C.MPI_Comm_split(c.c, C.int(color), C.int(key), &d)); err != nil {
		return Comm{}, err
	}
	return Comm{d}, check("MPI_Comm_set_errhandler", C.sg_set_errors_return(d))
}

// Free releases a communicator made by Dup, SplitShared or Split.
func (c *Comm) Free() error {
	if c.c == C.sg_comm_null() {
		return nil
	}
	return check("MPI_Comm_free", C.MPI_Comm_free(&c.c))
}

// Barrier blocks until every process of c has entered it.
func (c Comm) Barrier() error { return check("MPI_Barrier", C.MPI_Barrier(c.c)) }

// BcastBytes broadcasts root's buf to every process of c (blocking).
func (c Comm) BcastBytes(root int, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	p := C.malloc(C.size_t(len(buf)))
	defer C.free(p)
	tmp := unsafe.Slice((*byte)(p), len(buf))
	copy(tmp, buf)
	if err := check("MPI_Bcast", C.MPI_Bcast(p, C.int(len(buf)), C.sg_datatype(C.SG_U8), C.int(root), c.c)); err != nil {
		return err
	}
	copy(buf, tmp)
	return nil
}

// AllgatherBytes returns every process's rec in rank order (blocking; all
// recs must have the same length).
func (c Comm) AllgatherBytes(rec []byte) ([][]byte, error) {
	n, err := c.Size()
	if err != nil {
		return nil, err
	}
	m := len(rec)
	if m == 0 {
		return make([][]byte, n), nil
	}
	send := C.malloc(C.size_t(m))
	defer C.free(send)
	recv := C.malloc(C.size_t(m * n))
	defer C.free(recv)
	copy(unsafe.Slice((*byte)(send), m), rec)
	u8 := C.sg_datatype(C.SG_U8)
	if err := check("MPI_Allgather", C.MPI_Allgather(send, C.int(m), u8, recv, C.int(m), u8, c.c)); err != nil {
		return nil, err
	}
	all := unsafe.Slice((*byte)(recv), m*n)
	out := make([][]byte, n)
	for i := range out {
		out[i] = append([]byte(nil), all[i*m:(i+1)*m]...)
	}
	return out, nil
}

// datatype maps a dtype code to the MPI datatype the buffers travel as.
func datatype(dt elem.DType) (C.MPI_Datatype, error) {
	if dt < 1 || dt > 8 {
		return nil, fmt.Errorf("mpi: invalid dtype %d", dt)
	}
	return C.sg_datatype(C.int(dt)), nil
}

// op maps (dtype, reduction) to an MPI operator (user-defined ones for the
// 16-bit floats).
func op(dt elem.DType, o Op) (C.MPI_Op, error) {
	r := C.sg_op_value(C.int(dt), C.int(o))
	if r.rc != C.MPI_SUCCESS {
		return nil, check(fmt.Sprintf("MPI_Op for dtype %d op %d", dt, o), r.rc)
	}
	return r.op, nil
}

// Request is a pending nonblocking operation.
type Request struct{ r C.MPI_Request }

// Iallreduce starts an in-place allreduce of count elements at buf.
func (c Comm) Iallreduce(buf unsafe.Pointer, count int, dt elem.DType, o Op) (Request, error) {
	t, err := datatype(dt)
	if err != nil {
		return Request{}, err
	}
	m, err := op(dt, o)
	if err != nil {
		return Request{}, err
	}
	var r C.MPI_Request
	err = check("MPI_Iallreduce", C.MPI_Iallreduce(C.sg_in_place(), buf, C.int(count), t, m, c.c, &r))
	return Request{r}, err
}

// Allreduce is the blocking in-place allreduce (for benchmarks).
func (c Comm) Allreduce(buf unsafe.Pointer, count int, dt elem.DType, o Op) error {
	t, err := datatype(dt)
	if err != nil {
		return err
	}
	m, err := op(dt, o)
	if err != nil {
		return err
	}
	return check("MPI_Allreduce", C.MPI_Allreduce(C.sg_in_place(), buf, C.int(count), t, m, c.c))
}

// Bcast is the blocking broadcast of count elements at buf from root.
func (c Comm) Bcast(buf unsafe.Pointer, count int, dt elem.DType, root int) error {
	t, err := datatype(dt)
	if err != nil {
		return err
	}
	return check("MPI_Bcast", C.MPI_Bcast(buf, C.int(count), t, C.int(root), c.c))
}

// Reduce is the blocking in-place reduce of count elements at buf to root;
// the other ranks' buffers are left unchanged.
func (c Comm) Reduce(buf unsafe.Pointer, count int, dt elem.DType, o Op, root, rank int) error {
	t, err := datatype(dt)
	if err != nil {
		return err
	}
	m, err := op(dt, o)
	if err != nil {
		return err
	}
	send, recv := buf, unsafe.Pointer(nil)
	if rank == root {
		send, recv = C.sg_in_place(), buf
	}
	return check("MPI_Reduce", C.MPI_Reduce(send, recv, C.int(count), t, m, C.int(root), c.c))
}

// Allgather is the blocking in-place allgather: buf holds size blocks of
// count elements and each rank contributes its own block.
func (c Comm) Allgather(buf unsafe.Pointer, count int, dt elem.DType) error {
	t, err := datatype(dt)
	if err != nil {
		return err
	}
	return check("MPI_Allgather", C.MPI_Allgather(C.sg_in_place(), 0, t, buf, C.int(count), t, c.c))
}

// AllgatherStrided is the blocking in-place allgather of one piece of
// every rank's block: rank r's count elements start stride elements after
// rank r-1's, at buf + r*stride. A large allgather is done as a series of
// these (one piece of each block at a time), which keeps every call within
// the sizes where MPI's algorithms are fast. The blocks are described by a
// datatype of count elements whose extent is stride elements, made and
// freed for the call (in C: sg_allgather_strided).
func (c Comm) AllgatherStrided(buf unsafe.Pointer, count int, stride int64, dt elem.DType) error {
	if _, err := datatype(dt); err != nil {
		return err
	}
	return check("MPI_Allgather of a strided piece", C.sg_allgather_strided(buf, C.int(count), C.int64_t(stride), C.int(dt), c.c))
}

// ReduceScatterBlock is the blocking in-place reduce-scatter: buf holds
// size blocks of count elements; MPI leaves the reduction of block r at the
// start of rank r's buf (the caller moves it where it belongs).
func (c Comm) ReduceScatterBlock(buf unsafe.Pointer, count int, dt elem.DType, o Op) error {
	t, err := datatype(dt)
	if err != nil {
		return err
	}
	m, err := op(dt, o)
	if err != nil {
		return err
	}
	return check("MPI_Reduce_scatter_block", C.MPI_Reduce_scatter_block(C.sg_in_place(), buf, C.int(count), t, m, c.c))
}

// GatherBytes collects every rank's rec (of any length) on root, in rank
// order; other ranks get nil.
func (c Comm) GatherBytes(root int, rec []byte) ([][]byte, error) {
	n, err := c.Size()
	if err != nil {
		return nil, err
	}
	me, err := c.Rank()
	if err != nil {
		return nil, err
	}
	lens := C.malloc(C.size_t(4 * n))
	defer C.free(lens)
	mine := C.malloc(4)
	defer C.free(mine)
	*(*C.int)(mine) = C.int(len(rec))
	i32 := C.sg_datatype(C.SG_I32)
	u8 := C.sg_datatype(C.SG_U8)
	if err := check("MPI_Gather", C.MPI_Gather(mine, 1, i32, lens, 1, i32, C.int(root), c.c)); err != nil {
		return nil, err
	}
	send := C.malloc(C.size_t(len(rec) + 1))
	defer C.free(send)
	copy(unsafe.Slice((*byte)(send), len(rec)), rec)
	var recv, displs unsafe.Pointer
	var sizes []C.int
	total := 0
	if me == root {
		sizes = unsafe.Slice((*C.int)(lens), n)
		displs = C.malloc(C.size_t(4 * n))
		defer C.free(displs)
		d := unsafe.Slice((*C.int)(displs), n)
		for i, s := range sizes {
			d[i] = C.int(total)
			total += int(s)
		}
		recv = C.malloc(C.size_t(total + 1))
		defer C.free(recv)
	}
	if err := check("MPI_Gatherv", C.MPI_Gatherv(send, C.int(len(rec)), u8, recv, (*C.int)(lens), (*C.int)(displs), u8, C.int(root), c.c)); err != nil {
		return nil, err
	}
	if me != root {
		return nil, nil
	}
	all := unsafe.Slice((*byte)(recv), total)
	out := make([][]byte, n)
	off := 0
	for i, s := range sizes {
		out[i] = append([]byte(nil), all[off:off+int(s)]...)
		off += int(s)
	}
	return out, nil
}

// Ibcast starts a broadcast of count elements at buf from root.
func (c Comm) Ibcast(buf unsafe.Pointer, count int, dt elem.DType, root int) (Request, error) {
	t, err := datatype(dt)
	if err != nil {
		return Request{}, err
	}
	var r C.MPI_Request
	err = check("MPI_Ibcast", C.MPI_Ibcast(buf, C.int(count), t, C.int(root), c.c, &r))
	return Request{r}, err
}

// Ireduce starts an in-place reduce of count elements at buf to root; the
// other ranks' buffers are left unchanged.
func (c Comm) Ireduce(buf unsafe.Pointer, count int, dt elem.DType, o Op, root, rank int) (Request, error) {
	t, err := datatype(dt)
	if err != nil {
		return Request{}, err
	}
	m, err := op(dt, o)
	if err != nil {
		return Request{}, err
	}
	send, recv := buf, unsafe.Pointer(nil)
	if rank == root {
		send, recv = C.sg_in_place(), buf
	}
	var r C.MPI_Request
	err = check("MPI_Ireduce", C.MPI_Ireduce(send, recv, C.int(count), t, m, C.int(root), c.c, &r))
	return Request{r}, err
}

// Iallgather starts an in-place allgather: buf holds size blocks of count
// elements and each rank contributes its own block.
func (c Comm) Iallgather(buf unsafe.Pointer, count int, dt elem.DType) (Request, error) {
	t, err := datatype(dt)
	if err != nil {
		return Request{}, err
	}
	var r C.MPI_Request
	err = check("MPI_Iallgather", C.MPI_Iallgather(C.sg_in_place(), 0, t, buf, C.int(count), t, c.c, &r))
	return Request{r}, err
}

// IreduceScatterBlock starts an in-place reduce-scatter: buf holds size
// blocks of count elements; MPI leaves the reduction of block r at the
// start of rank r's buf (the caller moves it where it belongs).
func (c Comm) IreduceScatterBlock(buf unsafe.Pointer, count int, dt elem.DType, o Op) (Request, error) {
	t, err := datatype(dt)
	if err != nil {
		return Request{}, err
	}
	m, err := op(dt, o)
	if err != nil {
		return Request{}, err
	}
	var r C.MPI_Request
	err = check("MPI_Ireduce_scatter_block", C.MPI_Ireduce_scatter_block(C.sg_in_place(), buf, C.int(count), t, m, c.c, &r))
	return Request{r}, err
}

// Ibarrier starts a nonblocking barrier.
func (c Comm) Ibarrier() (Request, error) {
	var r C.MPI_Request
	err := check("MPI_Ibarrier", C.MPI_Ibarrier(c.c, &r))
	return Request{r}, err
}

// Test reports whether r has completed (and frees it if so).
func (r *Request) Test() (bool, error) {
	var flag C.int
	err := check("MPI_Test", C.MPI_Test(&r.r, &flag, nil))
	return flag != 0, err
}

// Wait blocks until r completes.
func (r *Request) Wait() error {
	return check("MPI_Wait", C.MPI_Wait(&r.r, nil))
}

// RequestSet is a set of pending requests tested together with
// MPI_Testsome. Slots are reused once their request completed.
type RequestSet struct {
	reqs []C.MPI_Request
	idx  []C.int
	free []int
	live int
}

// Add puts r in the set and returns its slot.
func (s *RequestSet) Add(r Request) int {
	s.live++
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		s.reqs[i] = r.r
		return i
	}
	s.reqs = append(s.reqs, r.r)
	s.idx = append(s.idx, 0)
	return len(s.reqs) - 1
}

// Len returns the number of pending requests.
func (s *RequestSet) Len() int { return s.live }

// Testsome returns the slots of the requests that completed (possibly
// none). Completed slots are free for reuse afterwards.
func (s *RequestSet) Testsome(done []int) ([]int, error) {
	done = done[:0]
	if s.live == 0 {
		return done, nil
	}
	var out C.int
	rc := C.MPI_Testsome(C.int(len(s.reqs)), &s.reqs[0], &out, &s.idx[0], nil)
	if err := check("MPI_Testsome", rc); err != nil {
		return done, err
	}
	if out == C.MPI_UNDEFINED {
		return done, nil
	}
	for _, i := range s.idx[:out] {
		done = append(done, int(i))
		s.free = append(s.free, int(i))
		s.live--
	}
	return done, nil
}

// Malloc allocates n bytes of C memory aligned to 64 bytes (zeroed), for
// buffers that MPI uses.
func Malloc(n int64) (unsafe.Pointer, error) {
	if n <= 0 {
		n = 1
	}
	var p unsafe.Pointer
	if C.posix_memalign(&p, 64, C.size_t(n)) != 0 || p == nil {
		return nil, fmt.Errorf("cannot allocate %d bytes of C memory", n)
	}
	C.memset(p, 0, C.size_t(n))
	return p, nil
}

// Free releases memory from Malloc.
func Free(p unsafe.Pointer) { C.free(p) }

// F32ToF16 converts with the C code of the 16-bit reduction operators
// (exported so that tests can compare it with package runtime's Go code).
func F32ToF16(f float32) uint16 { return uint16(C.sg_f32_to_f16(C.float(f))) }

// F16ToF32 converts with the C code of the 16-bit reduction operators.
func F16ToF32(h uint16) float32 { return float32(C.sg_f16_to_f32(C.uint16_t(h))) }

// F32ToBF16 converts with the C code of the 16-bit reduction operators.
func F32ToBF16(f float32) uint16 { return uint16(C.sg_f32_to_bf16(C.float(f))) }

// BF16ToF32 converts with the C code of the 16-bit reduction operators.
func BF16ToF32(h uint16) float32 { return float32(C.sg_bf16_to_f32(C.uint16_t(h))) }

// ReduceHalf applies the user-defined reduction operator of the 16-bit
// dtype dt (F16 or BF16) to n elements: inout[i] = in[i] op inout[i], as
// MPI calls it (exported for tests and benchmarks).
func ReduceHalf(dt elem.DType, o Op, in, inout unsafe.Pointer, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("mpi: %d elements exceed MPI's int count", n)
	}
	if C.sg_half_reduce(C.int(dt), C.int(o), in, inout, C.int(n)) != 0 {
		return fmt.Errorf("mpi: no 16-bit reduction for dtype %d op %d", dt, o)
	}
	return nil
}

// AvgOfTwo applies the operator with which the batch executor averages
// two ranks' floats of dtype dt to n elements: inout[i] = (in[i] +
// inout[i]) / 2, MPI's sum then the division, in the dtype's arithmetic
// (exported for tests).
func AvgOfTwo(dt elem.DType, in, inout unsafe.Pointer, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("mpi: %d elements exceed MPI's int count", n)
	}
	if C.sg_avg2_reduce(C.int(dt), in, inout, C.int(n)) != 0 {
		return fmt.Errorf("mpi: no two-rank average for dtype %d", dt)
	}
	return nil
}

// Cast converts n elements of dtype sdt at src into dtype ddt at dst, for
// f32 to and from f16 and bf16, with vector conversions where the CPU has
// them, to the values of package elem's CastBytes; it reports false for
// any other pair of dtypes, and converts nothing then.
func Cast(dst unsafe.Pointer, ddt elem.DType, src unsafe.Pointer, sdt elem.DType, n int64) bool {
	return C.sg_cast(dst, C.int(ddt), src, C.int(sdt), C.int64_t(n)) == 0
}

// AvgDivide divides the n elements of dtype dt at p by size, with the C
// code that divides an average's pieces in a batch: the CPU backend's
// other divisions call it too, and tests compare it with package elem's
// AvgDivide, the checker's.
func AvgDivide(p unsafe.Pointer, dt elem.DType, n int64, size int) {
	C.sg_avg_divide(p, C.int(dt), C.int64_t(n), C.int(size))
}

//go:build cgo

package optim

// The C kernels (sg_optim.c), compiled without contracted multiply-adds:
// their results must be the Go loops' bit for bit (see sg_optim.c).

/*
#cgo CFLAGS: -O3 -std=c11 -I${SRCDIR}/../elem
#include "sg_optim.h"
*/
import "C"

import (
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// sg_optim.h numbers the dtypes and optimizers as packages elem and optim
// do, which these declarations check at compile time (an array of
// negative or non-zero length would not compile).
var (
	_ [0]int = [int(C.SG_OPT_F64) - int(elem.F64)]int{}
	_ [0]int = [int(C.SG_OPT_F32) - int(elem.F32)]int{}
	_ [0]int = [int(C.SG_OPT_F16) - int(elem.F16)]int{}
	_ [0]int = [int(C.SG_OPT_BF16) - int(elem.BF16)]int{}
	_ [0]int = [int(C.SG_OPT_SGD) - int(SGD)]int{}
	_ [0]int = [int(C.SG_OPT_ADAMW) - int(AdamW)]int{}
)

// updateC runs the C kernel on the first elements of m and returns how
// many it did: a multiple of 8, or 0 where it does not take the case (no
// AVX2 and F16C, a float64 operand of a float32 update or another of a
// float64 one).
func updateC(h *Hyper, m *Memory) int64 {
	n := int64(len(m.Grad)) / m.GradDT.Size()
	if n < 8 {
		return 0
	}
	a := C.sg_update_args{kind: C.int32_t(h.Kind),
		grad_dt: C.int32_t(m.GradDT), param_dt: C.int32_t(m.ParamDT), out_dt: C.int32_t(m.OutDT)}
	if h.F64 {
		a.f64 = 1
		for i, c := range h.C {
			a.d[i] = C.double(c)
		}
	} else {
		for i, c := range h.consts32() {
			a.c[i] = C.float(c)
		}
	}
	return int64(C.sg_update(a, cPtr(m.Grad), cPtr(m.Param), cPtr(m.State[0]), cPtr(m.State[1]), cPtr(m.Out), C.int64_t(n)))
}

// scaleC runs the C kernel on the first elements of b, as updateC does,
// and reports how many it did and whether any result is not finite.
func scaleC(b []byte, dt elem.DType, factor float64) (int64, bool) {
	n := int64(len(b)) / dt.Size()
	if dt == elem.F64 || n < 8 {
		return 0, false
	}
	r := C.sg_scale(cPtr(b), C.int32_t(dt), C.float(float32(factor)), C.int64_t(n))
	return int64(r.done), r.non_finite != 0
}

// haveKernels says whether the C kernels run on this CPU.
func haveKernels() bool { return C.sg_kernels() != 0 }

// cPtr is b's first byte, nil for no memory.
func cPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

package cuda

// #include <stdlib.h>
// #include "sg_cuda.h"
import "C"

import (
	_ "embed"
	"fmt"
	"os"
	"unsafe"
)

// ptx is kernels/syncgen.cu compiled by nvcc on a GPU machine
// (kernels/regen.sh). It is committed so that building needs no toolkit.
//
//go:embed syncgen.ptx
var ptx []byte

// EnvPTX names a PTX file to load instead of the embedded one, for kernel
// development on the GPU machine.
const EnvPTX = "SYNCGEN_PTX"

// The dtype codes the kernels take: runtime.DType's values (this package
// cannot import runtime, which imports it).
const (
	F64  = 1
	F32  = 2
	F16  = 3
	BF16 = 4
	I64  = 5
	I32  = 6
	I8   = 7
	U8   = 8
)

// Kernels is syncgen's PTX module loaded into the current device's context.
type Kernels struct {
	mod                                     C.uintptr_t
	fill, cast, f32to16, f16to32, div, copy uintptr
	stamp, spin                             uintptr
	scale, set, update                      uintptr // cuda.go's Scale, Set, Update
	// fillAdd is 0 when the PTX predates syncgen_fill_add (see Fill).
	fillAdd uintptr
	// maxBlocks caps grid-stride launches: enough blocks to fill every
	// multiprocessor several times, no more.
	maxBlocks int64
	// Source says where the PTX came from ("embedded" or a path).
	Source string
}

const blockSize = 256

// LoadKernels loads the PTX module into the current device's context (the
// caller has selected the device with SetDevice) and looks up its kernels.
// A JIT failure returns the driver's error log.
func LoadKernels() (*Kernels, error) {
	src, image := "embedded", ptx
	if p := os.Getenv(EnvPTX); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvPTX, err)
		}
		src, image = p, b
	}
	if len(image) == 0 || image[0] == '#' {
		// The placeholder committed before the first nvcc run.
		return nil, fmt.Errorf("the PTX kernels (%s) are a placeholder: run kernels/regen.sh on a machine with nvcc", src)
	}
	cimg := C.CBytes(append(append([]byte(nil), image...), 0))
	defer C.free(cimg)
	var log [8192]C.char
	k := &Kernels{Source: src}
	if r := C.sgcu_cuModuleLoadData(&k.mod, cimg, &log[0], C.size_t(len(log))); r != 0 {
		e := driverError("cuModuleLoadData(syncgen.ptx, "+src+")", r).(*Error)
		e.Log = C.GoString(&log[0])
		return nil, e
	}
	for _, f := range []struct {
		name string
		p    *uintptr
	}{
		{"syncgen_fill", &k.fill}, {"syncgen_cast", &k.cast}, {"syncgen_cast_f32_16", &k.f32to16},
		{"syncgen_cast_16_f32", &k.f16to32}, {"syncgen_div", &k.div}, {"syncgen_copy", &k.copy},
		{"syncgen_stamp", &k.stamp}, {"syncgen_spin", &k.spin},
		{"syncgen_scale", &k.scale}, {"syncgen_set", &k.set}, {"syncgen_update", &k.update},
	} {
		cn := C.CString(f.name)
		var fn C.uintptr_t
		r := C.sgcu_cuModuleGetFunction(&fn, k.mod, cn)
		C.free(unsafe.Pointer(cn))
		if r != 0 {
			return nil, driverError("cuModuleGetFunction("+f.name+")", r)
		}
		*f.p = uintptr(fn)
	}
	// Optional: a PTX from before gradient accumulation lacks it, and only
	// the fills that add need it.
	cn := C.CString("syncgen_fill_add")
	var fn C.uintptr_t
	if C.sgcu_cuModuleGetFunction(&fn, k.mod, cn) == 0 {
		k.fillAdd = uintptr(fn)
	}
	C.free(unsafe.Pointer(cn))
	dev, err := Device()
	if err != nil {
		return nil, err
	}
	sms, err := Attribute(AttrMultiProcessorCount, dev)
	if err != nil {
		return nil, err
	}
	k.maxBlocks = int64(sms) * 8
	return k, nil
}

// Unload releases the module.
func (k *Kernels) Unload() error {
	if r := C.sgcu_cuModuleUnload(k.mod); r != 0 {
		return driverError("cuModuleUnload", r)
	}
	return nil
}

// launch queues kernel f over n work items on s.
func (k *Kernels) launch(name string, f uintptr, n int64, s Stream, args ...uint64) error {
	if n <= 0 {
		return nil
	}
	blocks := (n + blockSize - 1) / blockSize
	if blocks > k.maxBlocks {
		blocks = k.maxBlocks
	}
	var a [16]uint64
	copy(a[:], args)
	if r := C.sgcu_launch(C.uintptr_t(f), C.uint(blocks), blockSize, C.uintptr_t(s), (*C.uint64_t)(unsafe.Pointer(&a[0])), C.int(len(args))); r != 0 {
		return driverError("cuLaunchKernel("+name+")", r)
	}
	return nil
}

// FillParams mirrors runtime.FillParams for the fill kernel.
type FillParams struct {
	Kind              int
	SeedA, SeedB      uint32
	Lo, Hi, Dev, Sign int32
	Two, Neg          bool
	// Add adds the pattern to what dst holds (syncgen_fill_add).
	Add bool
}

// Fill queues writing the pattern p into n elements of dtype at dst, or,
// with p.Add, adding it to them.
func (k *Kernels) Fill(s Stream, dst Ptr, dtype int, n int64, p FillParams) error {
	var flags uint64
	if p.Two {
		flags |= 1
	}
	if p.Neg {
		flags |= 2
	}
	name, f := "syncgen_fill", k.fill
	if p.Add {
		if k.fillAdd == 0 {
			return fmt.Errorf("the PTX kernels (%s) have no syncgen_fill_add, which gradient accumulation needs: regenerate them with kernels/regen.sh (make ptx) and commit runtime/cuda/syncgen.ptx", k.Source)
		}
		name, f = "syncgen_fill_add", k.fillAdd
	}
	return k.launch(name, f, n, s, uint64(dst), uint64(n), uint64(dtype), uint64(p.Kind),
		uint64(p.SeedA), uint64(p.SeedB), uint64(int64(p.Lo)), uint64(int64(p.Hi)), uint64(int64(p.Dev)),
		uint64(int64(p.Sign)), flags)
}

// Cast queues converting n elements of srcType at src to dstType at dst,
// rounding to nearest even (runtime.RoundTo's semantics). float32 to and
// from the 16-bit floats take a vectorised kernel.
func (k *Kernels) Cast(s Stream, dst Ptr, dstType int, src Ptr, srcType int, n int64) error {
	switch {
	case srcType == F32 && (dstType == F16 || dstType == BF16):
		vec := uint64(0)
		if src%16 == 0 && dst%8 == 0 {
			vec = 1
		}
		return k.launch("syncgen_cast_f32_16", k.f32to16, work(n, vec), s, uint64(dst), uint64(src), uint64(n), b2u(dstType == BF16), vec)
	case dstType == F32 && (srcType == F16 || srcType == BF16):
		vec := uint64(0)
		if src%8 == 0 && dst%16 == 0 {
			vec = 1
		}
		return k.launch("syncgen_cast_16_f32", k.f16to32, work(n, vec), s, uint64(dst), uint64(src), uint64(n), b2u(srcType == BF16), vec)
	}
	return k.launch("syncgen_cast", k.cast, n, s, uint64(dst), uint64(src), uint64(n), uint64(dstType), uint64(srcType))
}

// work is the number of threads a kernel that handles four elements a
// thread when vec is set wants.
func work(n int64, vec uint64) int64 {
	if vec == 1 {
		return (n + 3) / 4
	}
	return n
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Div queues dividing n elements of dtype at p by d in place.
func (k *Kernels) Div(s Stream, p Ptr, dtype int, n int64, d int) error {
	return k.launch("syncgen_div", k.div, n, s, uint64(p), uint64(n), uint64(dtype), uint64(int64(d)))
}

// Copy queues copying n bytes (a multiple of 16, both addresses 16-byte
// aligned) with a kernel: the benchmark's in-kernel copy bandwidth.
func (k *Kernels) Copy(s Stream, dst, src Ptr, n int64) error {
	return k.launch("syncgen_copy", k.copy, n/16, s, uint64(dst), uint64(src), uint64(n/16))
}

// Stamp queues writing the device clock to the 8 bytes at p.
func (k *Kernels) Stamp(s Stream, p Ptr) error {
	return k.launchOne("syncgen_stamp", k.stamp, s, uint64(p))
}

// Spin queues a kernel that keeps one warp busy until ns nanoseconds after
// the clock value at stamp if useStamp (written by Stamp, or the previous
// Spin's target), else after its start, and that writes that target time at
// stamp.
func (k *Kernels) Spin(s Stream, ns int64, stamp Ptr, useStamp bool) error {
	return k.launchOne("syncgen_spin", k.spin, s, uint64(ns), uint64(stamp), b2u(useStamp))
}

// launchOne queues f as one block of one warp.
func (k *Kernels) launchOne(name string, f uintptr, s Stream, args ...uint64) error {
	var a [16]uint64
	copy(a[:], args)
	if r := C.sgcu_launch(C.uintptr_t(f), 1, 32, C.uintptr_t(s), (*C.uint64_t)(unsafe.Pointer(&a[0])), C.int(len(args))); r != 0 {
		return driverError("cuLaunchKernel("+name+")", r)
	}
	return nil
}

package optim

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// The element loops over raw memory that the CPU backend runs: the same
// arithmetic as Apply and Scaled. Each goroutine's share goes to the C
// kernels first (sg_optim.c, vectorised), which do the elements they can
// and say how many; the Go loops (updateGo, scaleGo) do the rest, and all
// of it where the kernels do not apply. The Go loops are the reference:
// the tests compare the kernels' bytes with theirs.

// chunk is how many elements the loops decode and encode at a time.
const chunk = 1024

// ScaleBytes multiplies every element of b (elements of float dtype dt)
// by factor in place, as Scaled does, and reports whether any result is
// infinite or NaN.
func ScaleBytes(b []byte, dt elem.DType, factor float64) (nonFinite bool) {
	var found atomic.Bool
	size := int64(dt.Size())
	elem.ParallelFor(int64(len(b))/size, func(lo, hi int64) {
		if scaleRange(b[lo*size:hi*size], dt, factor) {
			found.Store(true)
		}
	})
	return found.Load()
}

// scaleRange is ScaleBytes on one goroutine's share.
func scaleRange(b []byte, dt elem.DType, factor float64) (nonFinite bool) {
	done, nonFinite := scaleC(b, dt, factor)
	return scaleGo(b[done*dt.Size():], dt, factor) || nonFinite
}

// scaleGo is scaleRange in Go, a chunk of elements at a time.
func scaleGo(b []byte, dt elem.DType, factor float64) (nonFinite bool) {
	var vals [chunk]float64
	n := len(b) / int(dt.Size())
	for off := 0; off < n; off += chunk {
		m := min(n-off, chunk)
		part := b[off*int(dt.Size()) : (off+m)*int(dt.Size())]
		v := vals[:m]
		elem.LoadAll(v, part, dt)
		for i, x := range v {
			y := Scaled(x, factor, dt)
			if math.IsInf(y, 0) || math.IsNaN(y) {
				nonFinite = true
			}
			v[i] = y
		}
		elem.StoreAll(part, dt, v)
	}
	return nonFinite
}

// Memory is one update's operands in raw memory: Grad (elements of
// GradDT), Param and State (elements of ParamDT; a State of length 0 when
// the optimizer keeps none) and, if not nil, Out (elements of OutDT), all
// of the same number of elements.
type Memory struct {
	Grad           []byte
	Param          []byte
	State          [2][]byte
	Out            []byte
	GradDT         elem.DType
	ParamDT, OutDT elem.DType
}

// UpdateBytes applies h to every element of m, as Apply does, storing the
// parameters and state rounded to the parameter dtype, and the parameters
// also into Out.
func UpdateBytes(h *Hyper, m *Memory) {
	// Split over the usable cores, as the fill is: each share is the
	// same memory's elements lo..hi of every operand.
	elem.ParallelFor(int64(len(m.Grad))/m.GradDT.Size(), func(lo, hi int64) {
		part := m.part(lo, hi)
		updateRange(h, &part)
	})
}

// part returns elements lo..hi of every operand of m.
func (m *Memory) part(lo, hi int64) Memory {
	cut := func(b []byte, dt elem.DType) []byte {
		if len(b) == 0 {
			return b
		}
		return b[lo*dt.Size() : hi*dt.Size()]
	}
	part := Memory{Grad: cut(m.Grad, m.GradDT), Param: cut(m.Param, m.ParamDT),
		State:  [2][]byte{cut(m.State[0], m.ParamDT), cut(m.State[1], m.ParamDT)},
		GradDT: m.GradDT, ParamDT: m.ParamDT, OutDT: m.OutDT}
	if m.Out != nil {
		part.Out = cut(m.Out, m.OutDT)
	}
	return part
}

// updateRange is UpdateBytes on one goroutine's share.
func updateRange(h *Hyper, m *Memory) {
	done := updateC(h, m)
	rest := m.part(done, int64(len(m.Grad))/m.GradDT.Size())
	updateGo(h, &rest)
}

// updateGo is updateRange in Go.
func updateGo(h *Hyper, m *Memory) {
	if m.GradDT == elem.F32 && m.ParamDT == elem.F32 && m.Out == nil && !h.F64 {
		update32(h, m)
		return
	}
	var g, p, s0, s1 [chunk]float64
	c := h.consts32()
	gs, ps := int(m.GradDT.Size()), int(m.ParamDT.Size())
	n := len(m.Grad) / gs
	for off := 0; off < n; off += chunk {
		k := min(n-off, chunk)
		at := func(b []byte, size int) []byte { return b[off*size : (off+k)*size] }
		elem.LoadAll(g[:k], at(m.Grad, gs), m.GradDT)
		elem.LoadAll(p[:k], at(m.Param, ps), m.ParamDT)
		if len(m.State[0]) > 0 {
			elem.LoadAll(s0[:k], at(m.State[0], ps), m.ParamDT)
		}
		if len(m.State[1]) > 0 {
			elem.LoadAll(s1[:k], at(m.State[1], ps), m.ParamDT)
		}
		if h.F64 {
			for i := range k {
				p[i], s0[i], s1[i] = h.apply64(g[i], p[i], s0[i], s1[i])
			}
		} else {
			for i := range k {
				np, n0, n1 := apply32(h.Kind, &c, float32(g[i]), float32(p[i]), float32(s0[i]), float32(s1[i]))
				p[i], s0[i], s1[i] = float64(np), float64(n0), float64(n1)
			}
		}
		elem.StoreAll(at(m.Param, ps), m.ParamDT, p[:k])
		if len(m.State[0]) > 0 {
			elem.StoreAll(at(m.State[0], ps), m.ParamDT, s0[:k])
		}
		if len(m.State[1]) > 0 {
			elem.StoreAll(at(m.State[1], ps), m.ParamDT, s1[:k])
		}
		if m.Out != nil {
			os := int(m.OutDT.Size())
			elem.StoreAll(at(m.Out, os), m.OutDT, p[:k])
		}
	}
}

// update32 is UpdateBytes for float32 gradients and parameters, the
// common case, without decoding to float64 and back: the same arithmetic
// (apply32) on the memory itself.
func update32(h *Hyper, m *Memory) {
	g, p := f32s(m.Grad), f32s(m.Param)
	s0, s1 := f32s(m.State[0]), f32s(m.State[1])
	c := h.consts32()
	switch {
	case s1 != nil: // AdamW
		for i := range g {
			p[i], s0[i], s1[i] = apply32(h.Kind, &c, g[i], p[i], s0[i], s1[i])
		}
	case s0 != nil: // SGD with momentum
		for i := range g {
			p[i], s0[i], _ = apply32(h.Kind, &c, g[i], p[i], s0[i], 0)
		}
	default:
		for i := range g {
			p[i], _, _ = apply32(h.Kind, &c, g[i], p[i], 0, 0)
		}
	}
}

// f32s views b as float32s (nil for no memory).
func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

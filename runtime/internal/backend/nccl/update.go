package nccl

// The training step's element-wise operations on the GPU: loss scaling,
// setting values and the optimizer update, each one kernel of package cuda
// (kernels/syncgen.cu) that reproduces package optim bit for bit.

import (
	"fmt"
	goruntime "runtime"

	"github.com/syncgen/syncgen/runtime/cuda"
	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
)

// Scale leaves the stream's mark as it is: scaling a fresh gradient stands
// for work a real backward does for free (it scales the loss, not each
// gradient), so its time counts against the next Busy as the fill's does.
func (s *gpuStream) Scale(buf backend.Span, factor float64, flag backend.Span) error {
	if !buf.DType.IsFloat() {
		return fmt.Errorf("nccl backend: stream %s: scale of %s, not a float dtype", s.name, buf.DType)
	}
	p, err := addr(buf)
	if err != nil {
		return err
	}
	fp, err := flagAddr(flag)
	if err != nil {
		return fmt.Errorf("nccl backend: stream %s: scale: %w", s.name, err)
	}
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	if err := s.b.kernels.Scale(s.s, p, int(buf.DType), buf.N, factor, fp); err != nil {
		return fmt.Errorf("nccl backend: stream %s: scale of %d %s by %v: %w", s.name, buf.N, buf.DType, factor, err)
	}
	return nil
}

// Set leaves the stream's mark as it is, as Scale does: it injects values
// into fresh gradients, and resets the flag.
func (s *gpuStream) Set(dst backend.Span, v float64) error {
	if !dst.DType.Valid() {
		return fmt.Errorf("nccl backend: stream %s: set of an invalid dtype %d", s.name, dst.DType)
	}
	p, err := addr(dst)
	if err != nil {
		return err
	}
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	if err := s.b.kernels.Set(s.s, p, int(dst.DType), dst.N, v); err != nil {
		return fmt.Errorf("nccl backend: stream %s: set of %d %s to %v: %w", s.name, dst.N, dst.DType, v, err)
	}
	return nil
}

func (s *gpuStream) Update(u backend.UpdateOp) error {
	a, err := updateArgs(&u)
	if err != nil {
		return fmt.Errorf("nccl backend: stream %s: update: %w", s.name, err)
	}
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	s.mark = markNone
	if err := s.b.kernels.Update(s.s, a); err != nil {
		return fmt.Errorf("nccl backend: stream %s: %s update of %d %s parameters: %w", s.name, u.Hyper.Kind, u.Param.N, u.Param.DType, err)
	}
	return nil
}

// updateArgs checks u and returns the kernel's operands: float spans of
// Grad.N elements (or none, where the span may be absent), the state of
// the parameters' dtype, and the state that the optimizer reads present.
func updateArgs(u *backend.UpdateOp) (*cuda.UpdateArgs, error) {
	n := u.Grad.N
	h := &u.Hyper
	if h.Kind != optim.SGD && h.Kind != optim.AdamW {
		return nil, fmt.Errorf("unknown optimizer %s", h.Kind)
	}
	a := &cuda.UpdateArgs{N: n, Kind: int(h.Kind), F64: h.F64, C: h.C,
		GradType: int(u.Grad.DType), ParamType: int(u.Param.DType), OutType: int(u.Out.DType)}
	// span returns the address of a span of n floats, or 0 for an absent
	// one (N == 0) where optional.
	span := func(what string, sp backend.Span, optional bool) (cuda.Ptr, error) {
		if sp.N == 0 && (optional || n == 0) {
			return 0, nil
		}
		if sp.N != n {
			return 0, fmt.Errorf("%d gradients but %d elements of %s", n, sp.N, what)
		}
		if !sp.DType.IsFloat() {
			return 0, fmt.Errorf("%s of %s, not a float dtype", what, sp.DType)
		}
		return addr(sp)
	}
	var err error
	if a.Grad, err = span("gradients", u.Grad, false); err != nil {
		return nil, err
	}
	if a.Param, err = span("parameters", u.Param, false); err != nil {
		return nil, err
	}
	if a.State0, err = span("optimizer state 0", u.State[0], true); err != nil {
		return nil, err
	}
	if a.State1, err = span("optimizer state 1", u.State[1], true); err != nil {
		return nil, err
	}
	if a.Out, err = span("the output", u.Out, true); err != nil {
		return nil, err
	}
	for k, st := range u.State {
		if st.N != 0 && st.DType != u.Param.DType {
			return nil, fmt.Errorf("optimizer state %d of %s but parameters of %s", k, st.DType, u.Param.DType)
		}
	}
	// The kernel takes absent state as 0 and does not store it: right only
	// for state the optimizer does not read.
	needs := 0
	switch {
	case h.Kind == optim.AdamW:
		needs = 2
	case h.Kind == optim.SGD && h.C[2] != 0:
		needs = 1
	}
	if n > 0 && ((needs >= 1 && a.State0 == 0) || (needs == 2 && a.State1 == 0)) {
		return nil, fmt.Errorf("%s needs %d state spans of %d elements", h.Kind, needs, n)
	}
	if a.Flag, err = flagAddr(u.Flag); err != nil {
		return nil, err
	}
	return a, nil
}

// flagAddr returns the address of an overflow flag, one I32 element, or 0
// for none (N == 0).
func flagAddr(flag backend.Span) (cuda.Ptr, error) {
	if flag.N == 0 {
		return 0, nil
	}
	if flag.N != 1 || flag.DType != elem.I32 {
		return 0, fmt.Errorf("the overflow flag must be one i32, not %d %s", flag.N, flag.DType)
	}
	return addr(flag)
}

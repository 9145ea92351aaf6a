package optim

import (
	"fmt"
	"math"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// Kind is an optimizer.
type Kind uint8

// The optimizers.
const (
	NoKind Kind = iota
	// SGD is stochastic gradient descent with optional momentum and
	// (coupled, L2) weight decay, as torch.optim.SGD with dampening 0.
	SGD
	// AdamW is Adam with decoupled weight decay, as torch.optim.AdamW.
	AdamW
)

var kindNames = [...]string{"none", "sgd", "adamw"}

// String returns the optimizer's keyword ("sgd").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("optimizer(%d)", k)
}

// Spec is an update's settings as the plan gives them.
type Spec struct {
	Kind Kind
	// LR is the learning rate; WeightDecay the weight decay (SGD: added to
	// the gradient as WeightDecay*p; AdamW: p is multiplied by
	// 1-LR*WeightDecay first).
	LR, WeightDecay float64
	// Momentum is SGD's (0: none, and no state).
	Momentum float64
	// Beta1, Beta2 and Eps are AdamW's.
	Beta1, Beta2, Eps float64
	// Master keeps float32 parameters and state for f16 and bf16
	// gradients (mixed precision's master weights).
	Master bool
}

// States returns how many state values each parameter has: SGD's
// momentum buffer (none without momentum), AdamW's two moments.
func (s Spec) States() int {
	switch {
	case s.Kind == AdamW:
		return 2
	case s.Kind == SGD && s.Momentum != 0:
		return 1
	}
	return 0
}

// ParamDType returns the dtype of the parameters (and of the optimizer
// state) for gradients of dtype grad: float32 master parameters for f16
// and bf16 gradients with Master, else the gradients' own dtype.
func (s Spec) ParamDType(grad elem.DType) elem.DType {
	if s.Master && (grad == elem.F16 || grad == elem.BF16) {
		return elem.F32
	}
	return grad
}

// Hyper is one update's constants as the kernels take them, already
// rounded to the computing precision; C's meaning depends on Kind:
//
//	SGD:   C[0] lr, C[1] weight decay, C[2] momentum
//	AdamW: C[0] 1-lr*wd, C[1] beta1, C[2] 1-beta1, C[3] beta2,
//	       C[4] 1-beta2, C[5] lr/(1-beta1^t), C[6] sqrt(1-beta2^t), C[7] eps
//
// The host computes them in float64 (so every backend gets the same
// values) and rounds them once.
type Hyper struct {
	Kind Kind
	// F64 computes in float64 (parameters of f64), else in float32.
	F64 bool
	C   [8]float64
}

// Hyper returns the constants of update number t (counted from 1; skipped
// steps do not count, as in PyTorch, whose optimizer.step() they skip) for
// parameters of dtype param.
func (s Spec) Hyper(t int, param elem.DType) Hyper {
	h := Hyper{Kind: s.Kind, F64: param == elem.F64}
	switch s.Kind {
	case SGD:
		h.C[0], h.C[1], h.C[2] = s.LR, s.WeightDecay, s.Momentum
	case AdamW:
		bc1 := 1 - math.Pow(s.Beta1, float64(t))
		bc2 := 1 - math.Pow(s.Beta2, float64(t))
		h.C = [8]float64{1 - s.LR*s.WeightDecay, s.Beta1, 1 - s.Beta1, s.Beta2, 1 - s.Beta2, s.LR / bc1, math.Sqrt(bc2), s.Eps}
	}
	if !h.F64 {
		for i, c := range h.C {
			h.C[i] = float64(float32(c))
		}
	}
	return h
}

// Apply computes one element's update: g is the gradient, p the
// parameter and s0, s1 the state (momentum; or AdamW's m and v), each
// as loaded from memory. It returns the new parameter and state in the
// computing precision; the caller stores them in the parameter dtype.
func (h *Hyper) Apply(g, p, s0, s1 float64) (float64, float64, float64) {
	if h.F64 {
		return h.apply64(g, p, s0, s1)
	}
	np, n0, n1 := h.apply32(float32(g), float32(p), float32(s0), float32(s1))
	return float64(np), float64(n0), float64(n1)
}

// apply32 is Apply in float32. Every product is converted explicitly,
// which the Go specification says rounds it: no multiply-add is fused.
func (h *Hyper) apply32(g, p, s0, s1 float32) (float32, float32, float32) {
	c := h.consts32()
	return apply32(h.Kind, &c, g, p, s0, s1)
}

// consts32 returns the constants in float32 (each exact: Hyper rounded
// them).
func (h *Hyper) consts32() [8]float32 {
	return [8]float32{float32(h.C[0]), float32(h.C[1]), float32(h.C[2]), float32(h.C[3]),
		float32(h.C[4]), float32(h.C[5]), float32(h.C[6]), float32(h.C[7])}
}

// apply32 is Hyper.apply32 with the constants converted once, for loops.
func apply32(kind Kind, c *[8]float32, g, p, s0, s1 float32) (float32, float32, float32) {
	switch kind {
	case SGD:
		if c[1] != 0 {
			g = g + float32(c[1]*p)
		}
		if c[2] != 0 {
			s0 = float32(c[2]*s0) + g
			g = s0
		}
		p = p - float32(c[0]*g)
	case AdamW:
		p = float32(p * c[0])
		s0 = float32(c[1]*s0) + float32(c[2]*g)
		s1 = float32(c[3]*s1) + float32(float32(c[4]*g)*g)
		denom := float32(float32(math.Sqrt(float64(s1)))/c[6]) + c[7]
		p = p - float32(c[5]*float32(s0/denom))
	}
	return p, s0, s1
}

// apply64 is Apply in float64, in the same order as apply32.
func (h *Hyper) apply64(g, p, s0, s1 float64) (float64, float64, float64) {
	c := &h.C
	switch h.Kind {
	case SGD:
		if c[1] != 0 {
			g = g + float64(c[1]*p)
		}
		if c[2] != 0 {
			s0 = float64(c[2]*s0) + g
			g = s0
		}
		p = p - float64(c[0]*g)
	case AdamW:
		p = float64(p * c[0])
		s0 = float64(c[1]*s0) + float64(c[2]*g)
		s1 = float64(c[3]*s1) + float64(float64(c[4]*g)*g)
		denom := float64(math.Sqrt(s1)/c[6]) + c[7]
		p = p - float64(c[5]*float64(s0/denom))
	}
	return p, s0, s1
}

// Scaled returns x (a value of dtype dt) multiplied by factor, a power of
// two, as stored in dt: computed in float32 for f32, f16 and bf16 and in
// float64 for f64, then rounded to dt. Loss scaling and unscaling use it;
// the product is exact unless it overflows (to infinity) or underflows.
func Scaled(x, factor float64, dt elem.DType) float64 {
	if dt == elem.F64 {
		return x * factor
	}
	return elem.RoundTo(float64(float32(x)*float32(factor)), dt)
}

// InitialParam is the value every rank starts element i of tensor t's
// parameters with: a small dyadic fraction in [-1, 1), exact in every
// float dtype, the same on every rank (as after a broadcast of the
// initial model).
func InitialParam(t int, i int64) float64 {
	h := elem.ElemHash(elem.Seed(0x9a7a, uint32(t)), i)
	return float64(int32(h%256)-128) / 128
}

package optim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// The C kernels (sg_optim.c) against the Go loops, the reference: the same
// inputs through UpdateBytes and ScaleBytes (the kernels, then Go for the
// tail of each share) and through updateGo and scaleGo (Go only) must give
// the same bytes, NaNs included.

// kernelLengths are not multiples of the kernels' 8 elements but for 8
// itself, and the last is split between goroutines (elem.ParallelFor).
var kernelLengths = []int{0, 1, 7, 8, 9, 1023, 4097, 3<<16 + 13}

// specialF32 are the values random inputs are mixed with: zeros, f32, f16
// and bf16 subnormals, values halfway between two f16 or bf16 values (ties
// to even, up and down), values that overflow f16 or bf16 when stored,
// products, or squares, the largest float32, infinities and NaNs of
// several signs and payloads (a quiet one of Go's, the default NaN of x86,
// a signalling one, one with a payload).
var specialF32 = []uint32{
	0x00000000, 0x80000000, // ±0
	0x00000001, 0x80000001, 0x007fffff, 0x00400000, // f32 subnormals
	0x33800000, 0x33000000, 0xb3400000, 0x387fc000, 0x38800000, // f16 subnormals, half the smallest, the smallest normal
	0x00010000, 0x00018000, 0x00008000, // bf16 subnormal, a tie, half the smallest
	0x3f801000, 0x3f803000, 0xbf801000, // 1+2^-11, 1+3*2^-11: f16 ties to even, down and up
	0x3f808000, 0x3f818000, 0xbf808000, // 1+2^-8, 1+3*2^-8: bf16 ties
	0x477fe000, 0x477ff000, 0xc77ff000, 0x47800000, // 65504, 65520 (f16 overflows), 65536
	0x7f7f8000, 0x7f7fffff, 0xff7fffff, 0x5f800000, 0x1f800000, // bf16 overflows, max float32, 2^64, 2^-64
	0x7f800000, 0xff800000, // ±Inf
	0x7fc00000, 0xffc00000, 0x7f800001, 0xffa12345, 0x7fe00000, // NaNs
}

// specialF64 are float64's own special values for f64 operands: zeros,
// subnormals, the smallest normal, the largest finite value, infinities
// and NaNs (Go's, x86's default, a signalling one, one with a payload).
var specialF64 = []uint64{
	0x0000000000000000, 0x8000000000000000,
	0x0000000000000001, 0x800fffffffffffff, 0x0010000000000000,
	0x7fefffffffffffff, 0xffefffffffffffff,
	0x7ff0000000000000, 0xfff0000000000000,
	0x7ff8000000000001, 0xfff8000000000000, 0x7ff0000000000001, 0xfff4123456789abc,
}

// randomBytes returns n elements of dt: a third normal values of several
// magnitudes, a third special values (for f64, half of them its own), a
// third random bit patterns (every 16-bit pattern is a value of f16 and
// bf16, NaNs included).
func randomBytes(rng *rand.Rand, n int, dt elem.DType) []byte {
	b := make([]byte, n*int(dt.Size()))
	for i := range n {
		var f32 uint32
		var f64 float64
		switch rng.Intn(3) {
		case 0:
			f64 = rng.NormFloat64() * math.Ldexp(1, rng.Intn(40)-20)
			f32 = math.Float32bits(float32(f64))
		case 1:
			f32 = specialF32[rng.Intn(len(specialF32))]
			f64 = float64(math.Float32frombits(f32))
			if dt == elem.F64 && rng.Intn(2) == 0 {
				f64 = math.Float64frombits(specialF64[rng.Intn(len(specialF64))])
			}
		default:
			f32 = rng.Uint32()
			f64 = math.Float64frombits(rng.Uint64())
		}
		switch dt {
		case elem.F64:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f64))
		case elem.F32:
			binary.LittleEndian.PutUint32(b[4*i:], f32)
		case elem.F16:
			h := elem.F32ToF16(math.Float32frombits(f32))
			if f32&1 == 1 {
				h = uint16(f32 >> 8) // any pattern, NaN payloads too
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		case elem.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(f32>>16))
		}
	}
	return b
}

// kernelSpecs are the optimizers the differential tests run: SGD with and
// without momentum and weight decay, AdamW with and without weight decay.
var kernelSpecs = []Spec{
	{Kind: SGD, LR: 0.1},
	{Kind: SGD, LR: 0.01, WeightDecay: 1e-4},
	{Kind: SGD, LR: 0.5, Momentum: 0.9},
	{Kind: SGD, LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4},
	{Kind: AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01},
	{Kind: AdamW, LR: 3e-4, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6},
	{Kind: SGD, LR: math.Inf(1), Momentum: 0.9}, // left to Go: a constant is not finite
}

func (s Spec) String() string {
	return fmt.Sprintf("%v lr %g wd %g momentum %g betas %g %g eps %g master %v", s.Kind, s.LR, s.WeightDecay, s.Momentum, s.Beta1, s.Beta2, s.Eps, s.Master)
}

// clone returns a copy of m's memory.
func (m *Memory) clone() Memory {
	c := *m
	cp := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		return bytes.Clone(b)
	}
	c.Grad, c.Param, c.Out = cp(m.Grad), cp(m.Param), cp(m.Out)
	c.State = [2][]byte{cp(m.State[0]), cp(m.State[1])}
	return c
}

func TestUpdateBytesKernelsMatchGo(t *testing.T) {
	if !haveKernels() {
		t.Log("no C kernels (no cgo, or no AVX2 and F16C): UpdateBytes runs the Go loop alone")
	}
	rng := rand.New(rand.NewSource(7))
	for _, spec := range kernelSpecs {
		for _, master := range []bool{false, true} {
			spec.Master = master
			for _, gdt := range []elem.DType{elem.F32, elem.F16, elem.BF16, elem.F64} {
				pdt := spec.ParamDType(gdt)
				for _, out := range []bool{false, true} {
					for _, n := range kernelLengths {
						for _, step := range []int{1, 1000} {
							m := Memory{Grad: randomBytes(rng, n, gdt), Param: randomBytes(rng, n, pdt), GradDT: gdt, ParamDT: pdt, OutDT: gdt}
							for k := range spec.States() {
								m.State[k] = randomBytes(rng, n, pdt)
							}
							if out {
								m.Out = randomBytes(rng, n, gdt)
							}
							h := spec.Hyper(step, pdt)
							name := fmt.Sprintf("%v, %s gradients, out %v, %d elements, step %d", spec, gdt, out, n, step)
							checkUpdate(t, name, &h, &m)
						}
					}
				}
			}
		}
	}
}

// checkUpdate runs UpdateBytes and updateGo on copies of m and compares
// every operand's bytes.
func checkUpdate(t *testing.T, name string, h *Hyper, m *Memory) {
	t.Helper()
	in, fast, ref := m.clone(), m.clone(), m.clone()
	UpdateBytes(h, &fast)
	updateGo(h, &ref)
	// The kernels do every element below n rounded down to 8 where they
	// run, f64 included, unless the update is one they leave to Go.
	n := len(m.Grad) / int(m.GradDT.Size())
	want := int64(n &^ 7)
	if !haveKernels() || math.IsInf(h.C[0], 0) {
		want = 0
	}
	if done := updateC(h, ptr(m.clone())); done != want {
		t.Fatalf("%s: the kernel did %d elements, want %d", name, done, want)
	}
	operands := []struct {
		what          string
		got, want, in []byte
		dt            elem.DType
	}{
		{"gradient", fast.Grad, ref.Grad, in.Grad, m.GradDT},
		{"parameter", fast.Param, ref.Param, in.Param, m.ParamDT},
		{"state 0", fast.State[0], ref.State[0], in.State[0], m.ParamDT},
		{"state 1", fast.State[1], ref.State[1], in.State[1], m.ParamDT},
		{"out", fast.Out, ref.Out, in.Out, m.OutDT},
	}
	for _, o := range operands {
		if i := firstDiff(o.got, o.want, o.dt); i >= 0 {
			t.Fatalf("%s: %s %d: got %s, want %s; inputs: gradient %s, parameter %s, state %s %s", name, o.what, i,
				bitsAt(o.got, o.dt, i), bitsAt(o.want, o.dt, i), bitsAt(in.Grad, m.GradDT, i), bitsAt(in.Param, m.ParamDT, i),
				bitsAt(in.State[0], m.ParamDT, i), bitsAt(in.State[1], m.ParamDT, i))
		}
	}
}

func ptr[T any](v T) *T { return &v }

// firstDiff returns the index of the first element of dt where a and b
// differ, or -1.
func firstDiff(a, b []byte, dt elem.DType) int {
	if bytes.Equal(a, b) {
		return -1
	}
	size := int(dt.Size())
	for i := 0; i < len(a); i += size {
		if !bytes.Equal(a[i:i+size], b[i:i+size]) {
			return i / size
		}
	}
	return len(a) / size
}

// bitsAt formats element i of b (elements of dt) as its bits and value.
func bitsAt(b []byte, dt elem.DType, i int) string {
	size := int(dt.Size())
	if len(b) < (i+1)*size {
		return "-"
	}
	v := make([]float64, 1)
	elem.LoadAll(v, b[i*size:(i+1)*size], dt)
	var bits uint64
	for k := size - 1; k >= 0; k-- {
		bits = bits<<8 | uint64(b[i*size+k])
	}
	return fmt.Sprintf("0x%0*x (%v)", 2*size, bits, v[0])
}

func TestScaleBytesKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	factors := []float64{1, 2, 0.5, 1 << 16, 1.0 / (1 << 16), 1 << 40, 1.0 / (1 << 40), 1 << 127, math.Ldexp(1, -149), math.Ldexp(1, 200)}
	for _, dt := range []elem.DType{elem.F32, elem.F16, elem.BF16, elem.F64} {
		for _, n := range kernelLengths {
			for _, factor := range factors {
				for _, finite := range []bool{false, true} {
					b := randomBytes(rng, n, dt)
					if finite {
						// Only values whose products stay finite, so that
						// the flag must stay clear.
						v := make([]float64, n)
						for i := range v {
							v[i] = rng.NormFloat64()
						}
						elem.StoreAll(b, dt, v)
					}
					if want := int64(n &^ 7); haveKernels() && dt != elem.F64 {
						if done, _ := scaleC(bytes.Clone(b), dt, factor); done != want {
							t.Fatalf("%s, %d elements: the kernel did %d, want %d", dt, n, done, want)
						}
					}
					in, fast, ref := bytes.Clone(b), bytes.Clone(b), bytes.Clone(b)
					gotFlag := ScaleBytes(fast, dt, factor)
					wantFlag := scaleGo(ref, dt, factor)
					name := fmt.Sprintf("%s, %d elements, factor %g, finite inputs %v", dt, n, factor, finite)
					if i := firstDiff(fast, ref, dt); i >= 0 {
						t.Fatalf("%s: element %d: got %s, want %s, from %s", name, i, bitsAt(fast, dt, i), bitsAt(ref, dt, i), bitsAt(in, dt, i))
					}
					if gotFlag != wantFlag {
						t.Fatalf("%s: non-finite %v, want %v", name, gotFlag, wantFlag)
					}
				}
			}
		}
	}
}

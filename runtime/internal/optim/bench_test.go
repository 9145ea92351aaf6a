package optim

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// benchElems is the length of the benchmarks' buffers: 64 MiB an f32
// operand, more than a CPU's caches hold, so that they stream from memory
// as a large bucket's update does.
const benchElems = 1 << 24

// benchCase is one update the benchmarks run.
type benchCase struct {
	name string
	spec Spec
	grad elem.DType
	out  bool // with an Out copy in the gradient dtype
}

var (
	benchSGD      = Spec{Kind: SGD, LR: 0.1}
	benchMomentum = Spec{Kind: SGD, LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4}
	benchAdamW    = Spec{Kind: AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
)

func withMaster(s Spec) Spec {
	s.Master = true
	return s
}

var benchCases = []benchCase{
	{"sgd/f32", benchSGD, elem.F32, false},
	{"momentum/f32", benchMomentum, elem.F32, false},
	{"adamw/f32", benchAdamW, elem.F32, false},
	{"adamw/f32/out", benchAdamW, elem.F32, true},
	{"momentum/bf16", benchMomentum, elem.BF16, false},
	{"adamw/bf16", benchAdamW, elem.BF16, false},
	{"adamw/f16", benchAdamW, elem.F16, false},
	{"momentum/bf16/master", withMaster(benchMomentum), elem.BF16, false},
	{"adamw/bf16/master", withMaster(benchAdamW), elem.BF16, false},
	{"adamw/bf16/master/out", withMaster(benchAdamW), elem.BF16, true},
	{"adamw/f16/master/out", withMaster(benchAdamW), elem.F16, true},
	{"momentum/f64", benchMomentum, elem.F64, false},
	{"adamw/f64", benchAdamW, elem.F64, false},
}

// benchBytes returns n elements of dt with values like a step's
// (normal, small; non-negative for a second moment).
func benchBytes(rng *rand.Rand, n int, dt elem.DType, positive bool) []byte {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64() * 0.01
		if positive && v[i] < 0 {
			v[i] = -v[i]
		}
	}
	b := make([]byte, n*int(dt.Size()))
	elem.StoreAll(b, dt, v)
	return b
}

// BenchmarkUpdateBytes runs each optimizer on benchElems elements. ns/elem
// is the time per element; MB/s counts every byte read or written
// (gradient, parameter and state read, parameter and state written, Out
// written).
func BenchmarkUpdateBytes(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			pdt := c.spec.ParamDType(c.grad)
			m := Memory{Grad: benchBytes(rng, benchElems, c.grad, false), Param: benchBytes(rng, benchElems, pdt, false),
				GradDT: c.grad, ParamDT: pdt, OutDT: c.grad}
			for k := range c.spec.States() {
				m.State[k] = benchBytes(rng, benchElems, pdt, true)
			}
			if c.out {
				m.Out = make([]byte, benchElems*int(c.grad.Size()))
			}
			h := c.spec.Hyper(1, pdt)
			bytes := int64(len(m.Grad)) + 2*int64(len(m.Param)+len(m.State[0])+len(m.State[1])) + int64(len(m.Out))
			b.SetBytes(bytes)
			b.ResetTimer()
			for range b.N {
				UpdateBytes(&h, &m)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchElems, "ns/elem")
		})
	}
}

// BenchmarkScaleBytes scales benchElems elements of each float dtype by a
// power of two and back (so that the values stay the same from one
// iteration to the next); ns/elem is the time of one scaling.
func BenchmarkScaleBytes(b *testing.B) {
	for _, dt := range []elem.DType{elem.F32, elem.F16, elem.BF16, elem.F64} {
		b.Run(fmt.Sprint(dt), func(b *testing.B) {
			buf := benchBytes(rand.New(rand.NewSource(1)), benchElems, dt, false)
			b.SetBytes(2 * int64(len(buf)))
			b.ResetTimer()
			for i := range b.N {
				factor := 1024.0
				if i%2 == 1 {
					factor = 1.0 / 1024
				}
				ScaleBytes(buf, dt, factor)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchElems, "ns/elem")
		})
	}
}

// BenchmarkCopyBytes is the yardstick of the two above: Go's copy of
// benchElems f32 elements from one buffer to another, on one goroutine,
// whose MB/s (bytes read and written) is what one core moves at memory
// speed.
func BenchmarkCopyBytes(b *testing.B) {
	src := benchBytes(rand.New(rand.NewSource(1)), benchElems, elem.F32, false)
	dst := make([]byte, len(src))
	b.SetBytes(2 * int64(len(src)))
	for range b.N {
		copy(dst, src)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchElems, "ns/elem")
}

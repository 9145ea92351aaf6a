package check

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// benchElems is the size of the buffers of the element-wise benchmarks:
// large enough that the parallel paths run, small enough for a CI machine.
const benchElems = 8 << 20

// elemTimer reports a benchmark's time per element twice: wall time
// (ns/elem), which shows the parallel fill's speed-up, and the process's
// CPU time (cpu-ns/elem), which is what ranks sharing a machine's cores pay
// and which another job on the machine disturbs much less.
type elemTimer struct{ cpu0 time.Duration }

func startTimer(b *testing.B) elemTimer {
	b.ResetTimer()
	return elemTimer{cpuTime()}
}

func (t elemTimer) report(b *testing.B, elems int64) {
	n := float64(int64(b.N) * elems)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/elem")
	b.ReportMetric(float64((cpuTime()-t.cpu0).Nanoseconds())/n, "cpu-ns/elem")
}

// cpuTime returns the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFill measures the CPU backend's gradient fill (elem.FillBytes) for
// each dtype and pattern kind that big models use.
func BenchmarkFill(b *testing.B) {
	for _, c := range []struct {
		dt    elem.DType
		shape elem.PatternShape
	}{
		{elem.F32, elem.PatternShape{Kind: elem.FillUniform, Lo: -100, Hi: 100}},
		{elem.F32, elem.PatternShape{Kind: elem.FillAvg, Lo: -32, Hi: 32, Dev: 32}},
		{elem.BF16, elem.PatternShape{Kind: elem.FillUniform, Lo: -64, Hi: 64}},
		{elem.F16, elem.PatternShape{Kind: elem.FillAvg, Lo: -256, Hi: 256, Dev: 256}},
		{elem.F64, elem.PatternShape{Kind: elem.FillUniform, Lo: -1000, Hi: 1000}},
		{elem.I8, elem.PatternShape{Kind: elem.FillProd, Two: true, Neg: true}},
	} {
		b.Run(fmt.Sprintf("%s/%s", c.dt, c.shape.Kind), func(b *testing.B) {
			buf := make([]byte, benchElems*c.dt.Size())
			p := c.shape.Params(1, 4, 1, 1)
			b.SetBytes(int64(len(buf)))
			t := startTimer(b)
			for i := 0; i < b.N; i++ {
				elem.FillBytes(buf, c.dt, &p)
			}
			t.report(b, benchElems)
		})
	}
}

// BenchmarkCast measures the casts around a collective whose wire dtype
// differs from the tensors' (bert_large: f32 tensors on a bf16 wire).
func BenchmarkCast(b *testing.B) {
	for _, c := range [][2]elem.DType{{elem.F32, elem.BF16}, {elem.BF16, elem.F32}, {elem.F32, elem.F16}, {elem.F16, elem.F32}} {
		b.Run(fmt.Sprintf("%s-%s", c[0], c[1]), func(b *testing.B) {
			src := make([]byte, benchElems*c[0].Size())
			p := elem.PatternShape{Kind: elem.FillUniform, Lo: -100, Hi: 100}.Params(0, 4, 1, 1)
			elem.FillBytes(src, c[0], &p)
			dst := make([]byte, benchElems*c[1].Size())
			b.SetBytes(int64(len(src)))
			t := startTimer(b)
			for i := 0; i < b.N; i++ {
				elem.CastBytes(dst, c[1], src, c[0])
			}
			t.report(b, benchElems)
		})
	}
}

// BenchmarkAvgDivide measures the division that turns an allreduce's sum
// into an average.
func BenchmarkAvgDivide(b *testing.B) {
	for _, dt := range []elem.DType{elem.F32, elem.BF16, elem.F16} {
		b.Run(dt.String(), func(b *testing.B) {
			buf := make([]byte, benchElems*dt.Size())
			p := elem.PatternShape{Kind: elem.FillUniform, Lo: -100, Hi: 100}.Params(0, 4, 1, 1)
			elem.FillBytes(buf, dt, &p)
			b.SetBytes(int64(len(buf)))
			t := startTimer(b)
			for i := 0; i < b.N; i++ {
				elem.AvgDivide(buf, dt, 4) // the values shrink, the work does not
			}
			t.report(b, benchElems)
		})
	}
}

// BenchmarkCheck measures the checker's work for one large tensor on one
// rank of 4 after an allreduce, as checkBucket does it (all cores), per
// element of the tensor.
func BenchmarkCheck(b *testing.B) {
	for _, c := range []struct {
		tdt, wire elem.DType
		op        plan.RedOp
	}{
		{elem.F32, elem.F32, plan.Sum},
		{elem.F32, elem.BF16, plan.Avg}, // bert_large
		{elem.BF16, elem.BF16, plan.Sum},
	} {
		b.Run(fmt.Sprintf("%s-on-%s/%s", c.tdt, c.wire, c.op), func(b *testing.B) {
			chain := []plan.Stmt{{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Op: c.op, Buckets: []int{0}}}
			const n = 2 << 20
			e := testEngine(c.tdt, c.wire, n, 4, 1, chain)
			e.mem.Tensors = []backend.TensorMem{{Elems: n}}
			host := make([]byte, n*c.tdt.Size())
			b.SetBytes(int64(len(host)))
			t := startTimer(b)
			for i := 0; i < b.N; i++ {
				r := e.model.checkHost([]int{0}, []int64{0}, host)
				if r.Wrong == 0 {
					b.Fatal("a zero buffer passed the check")
				}
			}
			t.report(b, n)
		})
	}
}

// BenchmarkCheckTensors measures checkBucket on a bucket of many small f32
// tensors (one rank of 4, after an allreduce avg), per tensor: what a check
// costs beyond its elements. It includes the copies to the host.
func BenchmarkCheckTensors(b *testing.B) {
	for _, c := range []struct {
		tensors int
		elems   int64
	}{{10000, 1}, {1000, 100}, {100, 10000}} {
		b.Run(fmt.Sprintf("%dx%d", c.tensors, c.elems), func(b *testing.B) {
			dts, elems := make([]elem.DType, c.tensors), make([]int64, c.tensors)
			for i := range dts {
				dts[i], elems[i] = elem.F32, c.elems
			}
			e, _ := bucketEngine(dts, elems, elem.F32, plan.Avg, 4, 1)
			t := startTimer(b)
			for i := 0; i < b.N; i++ {
				if _, err := e.model.CheckBucket(0); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N * c.tensors)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/tensor")
			b.ReportMetric(float64((cpuTime()-t.cpu0).Nanoseconds())/n, "cpu-ns/tensor")
		})
	}
}

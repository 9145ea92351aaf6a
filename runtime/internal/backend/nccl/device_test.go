package nccl

// Tests of the NCCL backend on a GPU: the kernels against the Go code they
// reproduce (bit for bit), every collective, op and dtype, events, timing
// and the spin. They skip where no GPU and NCCL load, so CI (no GPU) runs
// none of them; scripts/gpu-check.sh runs them on the GPU machine.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// soloBoot is the bootstrap of a one-rank job, for tests without MPI.
type soloBoot struct{}

func (soloBoot) Bcast(root int, buf []byte) error { return nil }
func (soloBoot) Allgather(rec []byte) ([][]byte, error) {
	return [][]byte{append([]byte(nil), rec...)}, nil
}

// newTestGPU returns a one-rank NCCL backend with two streams, or skips.
func newTestGPU(t testing.TB) (*gpuBackend, *gpuStream, *gpuStream) {
	t.Helper()
	env := &backend.Env{Size: 1, LocalSize: 1, Host: "test", Boot: soloBoot{}}
	if ok, why := gpuProbe(env); !ok {
		t.Skipf("no NCCL backend here: %s", why)
	}
	be, err := newGPUBackend(env)
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*gpuBackend)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	s1, err := b.NewStream(0, "compute", plan.PriorityDefault)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.NewStream(1, "comm", plan.PriorityHigh)
	if err != nil {
		t.Fatal(err)
	}
	return b, s1.(*gpuStream), s2.(*gpuStream)
}

func mustAlloc(t testing.TB, b backend.Backend, dt elem.DType, n int64) backend.Buffer {
	t.Helper()
	buf, err := b.Alloc(dt, n)
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

func hostCopy(t testing.TB, b backend.Backend, s backend.Span) []byte {
	t.Helper()
	out := make([]byte, s.Bytes())
	if err := b.CopyToHost(out, s); err != nil {
		t.Fatal(err)
	}
	return out
}

var allDTypes = []elem.DType{elem.F64, elem.F32, elem.F16, elem.BF16, elem.I64, elem.I32, elem.I8, elem.U8}

// fillCases are parameters of every kind, in ranges every dtype holds.
func fillCases(dt elem.DType) []elem.FillParams {
	lo, hi := int32(-100), int32(100)
	if dt == elem.U8 {
		lo, hi = 0, 200
	}
	return []elem.FillParams{
		{Kind: elem.FillUniform, SeedA: elem.Seed(1, 0, 7, 3), Lo: lo, Hi: hi},
		{Kind: elem.FillUniform, SeedA: 12345, Lo: 5, Hi: 5},
		{Kind: elem.FillAvg, SeedA: elem.Seed(2, 7, 3), SeedB: elem.Seed(3, 0, 7, 3), Lo: 10, Hi: 50, Dev: 9, Sign: 1},
		{Kind: elem.FillAvg, SeedA: 99, SeedB: 98, Lo: 10, Hi: 50, Dev: 9, Sign: -1},
		{Kind: elem.FillProd, SeedA: 4242, Two: true, Neg: dt != elem.U8},
		{Kind: elem.FillProd, SeedA: 4243},
	}
}

func TestGPUFillMatchesGo(t *testing.T) {
	b, s, _ := newTestGPU(t)
	const n = 1<<20 + 13
	for _, dt := range allDTypes {
		buf := mustAlloc(t, b, dt, n+3)
		for ci, p := range fillCases(dt) {
			// An odd offset, as tensors inside buckets have.
			span := backend.Span{Buf: buf, Off: 3, N: n, DType: dt}
			if err := s.Fill(span, p); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			got := hostCopy(t, b, span)
			want := make([]byte, len(got))
			elem.FillBytes(want, dt, &p)
			if i := firstDiff(got, want, int(dt.Size())); i >= 0 {
				t.Errorf("%s fill case %d: element %d is %x, want %x", dt, ci, i, got[i*int(dt.Size()):(i+1)*int(dt.Size())], want[i*int(dt.Size()):(i+1)*int(dt.Size())])
			}
		}
	}
}

// TestGPUFillAddMatchesGo adds every fill case to a buffer that holds
// another fill (gradient accumulation), as elem.AddBytes does.
func TestGPUFillAddMatchesGo(t *testing.T) {
	b, s, _ := newTestGPU(t)
	const n = 1<<20 + 13
	for _, dt := range allDTypes {
		buf := mustAlloc(t, b, dt, n+3)
		for ci, p := range fillCases(dt) {
			span := backend.Span{Buf: buf, Off: 3, N: n, DType: dt}
			base := fillCases(dt)[0]
			add := p
			add.Add = true
			if err := s.Fill(span, base); err != nil {
				t.Fatal(err)
			}
			if err := s.Fill(span, add); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			got := hostCopy(t, b, span)
			want := make([]byte, len(got))
			elem.FillBytes(want, dt, &base)
			elem.AddBytes(want, dt, &add)
			if i := firstDiff(got, want, int(dt.Size())); i >= 0 {
				t.Errorf("%s fill-add case %d: element %d is %x, want %x", dt, ci, i, got[i*int(dt.Size()):(i+1)*int(dt.Size())], want[i*int(dt.Size()):(i+1)*int(dt.Size())])
			}
		}
	}
}

func firstDiff(a, b []byte, size int) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := 0; i < len(a); i += size {
		if !bytes.Equal(a[i:i+size], b[i:i+size]) {
			return i / size
		}
	}
	return -1
}

// castSource returns n elements of dt worth converting: for the 16-bit
// floats every bit pattern, for the others random bits and the edge cases
// of rounding and saturation.
func castSource(dt elem.DType, r *rand.Rand) []byte {
	var vals []float64
	for _, v := range []float64{0, math.Copysign(0, -1), 0.5, 1.5, 2.5, -2.5, 127.5, 128.5, -128.5, 254.5, 255.5, 256,
		65504, 65519.99, 65520, 1 << 24, 1<<24 + 1, 1 << 31, -(1 << 31), 1 << 53, 1<<63 - 1024, 1e30, -1e30,
		math.Inf(1), math.Inf(-1), 5.96e-8, 2.98e-8, 1e-40, 1.17549435e-38, 3.4028235e38, 3.4028236e38} {
		vals = append(vals, v)
	}
	switch dt {
	case elem.F16, elem.BF16:
		out := make([]byte, 2*65536)
		for i := 0; i < 65536; i++ {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(i))
		}
		return out
	case elem.F32:
		out := make([]byte, 0, 4*(len(vals)+200000))
		for _, v := range vals {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
		}
		for i := 0; i < 200000; i++ {
			u := r.Uint32()
			if i%2 == 0 {
				// Mostly values near the 16-bit formats' range.
				u = math.Float32bits(float32(math.Ldexp(r.Float64()*2-1, r.Intn(60)-40)))
			}
			out = binary.LittleEndian.AppendUint32(out, u)
		}
		return out
	case elem.F64:
		out := make([]byte, 0, 8*(len(vals)+200000))
		for _, v := range vals {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		}
		for i := 0; i < 200000; i++ {
			u := r.Uint64()
			if i%2 == 0 {
				u = math.Float64bits(math.Ldexp(r.Float64()*2-1, r.Intn(200)-150))
			}
			out = binary.LittleEndian.AppendUint64(out, u)
		}
		return out
	}
	size := int(dt.Size())
	out := make([]byte, size*100000)
	r.Read(out)
	for i, v := range []int64{0, -1, 1, 127, 128, -128, -129, 255, 256, math.MaxInt32, math.MinInt32, 1 << 53, 1<<53 + 1, math.MaxInt64, math.MinInt64} {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], uint64(v))
		copy(out[i*size:], w[:size])
	}
	return out
}

// sameElems compares cast results, taking any NaN for any NaN (Go and CUDA
// encode NaN payloads differently; gradients are never NaN).
func sameElems(got, want []byte, dt elem.DType) int {
	n := len(got) / int(dt.Size())
	g := make([]float64, n)
	w := make([]float64, n)
	elem.LoadAll(g, got, dt)
	elem.LoadAll(w, want, dt)
	size := int(dt.Size())
	for i := 0; i < n; i++ {
		if bytes.Equal(got[i*size:(i+1)*size], want[i*size:(i+1)*size]) {
			continue
		}
		if math.IsNaN(g[i]) && math.IsNaN(w[i]) {
			continue
		}
		return i
	}
	return -1
}

func TestGPUCastMatchesGo(t *testing.T) {
	b, s, _ := newTestGPU(t)
	r := rand.New(rand.NewSource(1))
	for _, sdt := range allDTypes {
		src := castSource(sdt, r)
		n := int64(len(src)) / sdt.Size()
		for _, ddt := range allDTypes {
			if ddt == sdt {
				continue
			}
			want := make([]byte, n*ddt.Size())
			elem.CastBytes(want, ddt, src, sdt)
			// Offsets 0 (the vectorised kernels' case) and 1 (unaligned).
			for _, off := range []int64{0, 1} {
				sb := mustAlloc(t, b, sdt, n+1)
				db := mustAlloc(t, b, ddt, n+1)
				sspan := backend.Span{Buf: sb, Off: off, N: n, DType: sdt}
				dspan := backend.Span{Buf: db, Off: off, N: n, DType: ddt}
				if err := b.CopyFromHost(sspan, src); err != nil {
					t.Fatal(err)
				}
				if err := s.Cast(dspan, sspan); err != nil {
					t.Fatal(err)
				}
				if err := s.Synchronize(); err != nil {
					t.Fatal(err)
				}
				got := hostCopy(t, b, dspan)
				if i := sameElems(got, want, ddt); i >= 0 {
					size := int(ddt.Size())
					ss := int(sdt.Size())
					t.Errorf("cast %s to %s (offset %d): element %d (source %x) is %x, want %x", sdt, ddt, off, i,
						src[i*ss:(i+1)*ss], got[i*size:(i+1)*size], want[i*size:(i+1)*size])
				}
			}
		}
	}
}

func TestGPUDivideMatchesGo(t *testing.T) {
	b, s, _ := newTestGPU(t)
	const n = 100003
	for _, dt := range allDTypes {
		for _, size := range []int{3, 6, 7} {
			buf := mustAlloc(t, b, dt, n)
			span := backend.Span{Buf: buf, N: n, DType: dt}
			p := elem.FillParams{Kind: elem.FillUniform, SeedA: uint32(size), Lo: -120, Hi: 120}
			if dt == elem.U8 {
				p.Lo = 0
			}
			if err := s.Fill(span, p); err != nil {
				t.Fatal(err)
			}
			ptr, _ := addr(span)
			if err := b.enter(); err != nil {
				t.Fatal(err)
			}
			err := b.kernels.Div(s.s, ptr, int(dt), n, size)
			goruntime.UnlockOSThread()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			got := hostCopy(t, b, span)
			want := make([]byte, len(got))
			elem.FillBytes(want, dt, &p)
			elem.AvgDivide(want, dt, size)
			if i := firstDiff(got, want, int(dt.Size())); i >= 0 {
				t.Errorf("%s / %d: element %d differs", dt, size, i)
			}
		}
	}
}

// TestGPUCollectives runs every collective, op and dtype in place on one
// rank, where each must leave the buffer as it was (the average of one is
// itself), and a group over two streams.
func TestGPUCollectives(t *testing.T) {
	b, s1, s2 := newTestGPU(t)
	const n = 4096 + 8
	for _, dt := range allDTypes {
		buf := mustAlloc(t, b, dt, n)
		span := backend.Span{Buf: buf, N: n, DType: dt}
		p := elem.FillParams{Kind: elem.FillUniform, SeedA: 5, Lo: 1, Hi: 100}
		want := make([]byte, span.Bytes())
		elem.FillBytes(want, dt, &p)
		var ops []backend.CollOp
		for _, c := range []plan.Coll{plan.CollAllReduce, plan.CollReduce, plan.CollReduceScatter} {
			for _, op := range []plan.RedOp{plan.Sum, plan.Avg, plan.Min, plan.Max, plan.Prod} {
				ops = append(ops, backend.CollOp{Stream: s2, Coll: c, Op: op, Buf: span, Name: "b"})
			}
		}
		ops = append(ops, backend.CollOp{Stream: s2, Coll: plan.CollBroadcast, Buf: span, Name: "b"},
			backend.CollOp{Stream: s2, Coll: plan.CollAllGather, Buf: span, Name: "b"})
		for _, op := range ops {
			if err := s2.Fill(span, p); err != nil {
				t.Fatal(err)
			}
			if err := b.Collectives([]backend.CollOp{op}); err != nil {
				t.Fatal(err)
			}
			if err := s2.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(hostCopy(t, b, span), want, int(dt.Size())); i >= 0 {
				t.Errorf("%s %s %s on one rank changed element %d", op.Coll, op.Op, dt, i)
			}
		}
	}
	// A group across two streams, ordered after the compute stream by an
	// event, as `allreduce ... after compute` does.
	a := mustAlloc(t, b, elem.F32, 1<<20)
	c := mustAlloc(t, b, elem.BF16, 1<<20)
	ev, err := b.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	p := elem.FillParams{Kind: elem.FillUniform, SeedA: 9, Lo: -8, Hi: 8}
	sa, sc := backend.Span{Buf: a, N: 1 << 20, DType: elem.F32}, backend.Span{Buf: c, N: 1 << 20, DType: elem.BF16}
	for _, st := range []error{s1.Fill(sa, p), s1.Fill(sc, p), s1.Record(ev), s2.WaitEvent(ev)} {
		if st != nil {
			t.Fatal(st)
		}
	}
	err = b.Collectives([]backend.CollOp{
		{Stream: s2, Coll: plan.CollAllReduce, Op: plan.Sum, Buf: sa, Name: "a"},
		{Stream: s1, Coll: plan.CollAllReduce, Op: plan.Avg, Buf: sc, Name: "c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, sc.Bytes())
	elem.FillBytes(want, elem.BF16, &p)
	if i := firstDiff(hostCopy(t, b, sc), want, 2); i >= 0 {
		t.Errorf("grouped allreduce changed element %d", i)
	}
}

// TestGPUCollectivesInto runs every collective, op and dtype out of place
// (CollOp.Out) on one rank: the output must hold the input (the reduction
// or gather of one rank) and the input must be left as it was. The odd
// count is one whose last elements NCCL's one-rank average kernel leaves
// unwritten.
func TestGPUCollectivesInto(t *testing.T) {
	b, _, s2 := newTestGPU(t)
	for _, n := range []int64{4096 + 8, 232071} {
		testGPUCollectivesInto(t, b, s2, n)
	}
}

func testGPUCollectivesInto(t *testing.T, b *gpuBackend, s2 *gpuStream, n int64) {
	for _, dt := range allDTypes {
		in := backend.Span{Buf: mustAlloc(t, b, dt, n), N: n, DType: dt}
		out := backend.Span{Buf: mustAlloc(t, b, dt, n), N: n, DType: dt}
		p := elem.FillParams{Kind: elem.FillUniform, SeedA: 7, Lo: 1, Hi: 100}
		zero := elem.FillParams{Kind: elem.FillUniform, SeedA: 8, Lo: 0, Hi: 0}
		want := make([]byte, in.Bytes())
		elem.FillBytes(want, dt, &p)
		var ops []backend.CollOp
		for _, c := range []plan.Coll{plan.CollAllReduce, plan.CollReduce, plan.CollReduceScatter} {
			for _, op := range []plan.RedOp{plan.Sum, plan.Avg, plan.Min, plan.Max, plan.Prod} {
				ops = append(ops, backend.CollOp{Stream: s2, Coll: c, Op: op, Buf: in, Out: out, Name: "b→o"})
			}
		}
		ops = append(ops, backend.CollOp{Stream: s2, Coll: plan.CollBroadcast, Buf: in, Out: out, Name: "b→o"},
			backend.CollOp{Stream: s2, Coll: plan.CollAllGather, Buf: in, Out: out, Name: "b→o"})
		for _, op := range ops {
			for _, err := range []error{s2.Fill(in, p), s2.Fill(out, zero), b.Collectives([]backend.CollOp{op}), s2.Synchronize()} {
				if err != nil {
					t.Fatal(err)
				}
			}
			if i := firstDiff(hostCopy(t, b, out), want, int(dt.Size())); i >= 0 {
				t.Errorf("%s %s %s out of place on one rank: output element %d is not the input's", op.Coll, op.Op, dt, i)
			}
			if i := firstDiff(hostCopy(t, b, in), want, int(dt.Size())); i >= 0 {
				t.Errorf("%s %s %s out of place on one rank changed input element %d", op.Coll, op.Op, dt, i)
			}
		}
	}
}

// TestGPUBusy checks the spin's length against CUDA events and that a run
// of fills before it counts against its time.
func TestGPUBusy(t *testing.T) {
	b, s, _ := newTestGPU(t)
	e0, _ := b.NewEvent()
	e1, _ := b.NewEvent()
	measure := func(work func() error) time.Duration {
		t.Helper()
		if err := s.Record(e0); err != nil {
			t.Fatal(err)
		}
		if err := work(); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(e1); err != nil {
			t.Fatal(err)
		}
		if err := e1.Synchronize(); err != nil {
			t.Fatal(err)
		}
		d, err := b.Elapsed(e0, e1)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// What a kernel launch after an event costs on this GPU, so that the
	// bounds below do not count it against the spin.
	measure(func() error { return s.Busy(time.Microsecond) }) // loads the kernel
	launch := measure(func() error { return s.Busy(0) })
	t.Logf("Busy(0) took %v", launch)
	tolerance := func(d time.Duration) time.Duration { return d/100 + launch + 10*time.Microsecond }
	for _, d := range []time.Duration{100 * time.Microsecond, 2 * time.Millisecond, 20 * time.Millisecond} {
		got := measure(func() error { return s.Busy(d) })
		t.Logf("Busy(%v) took %v", d, got)
		if got < d || got > d+tolerance(d) {
			t.Errorf("Busy(%v) took %v", d, got)
		}
	}
	big := mustAlloc(t, b, elem.F32, 1<<28)
	span := backend.Span{Buf: big, N: 1 << 28, DType: elem.F32}
	p := elem.FillParams{Kind: elem.FillUniform, SeedA: 1, Lo: 0, Hi: 9}
	fills := measure(func() error { return s.Fill(span, p) })
	d := 5 * time.Millisecond
	got := measure(func() error {
		if err := s.Fill(span, p); err != nil {
			return err
		}
		return s.Busy(d)
	})
	t.Logf("a 1 GiB fill took %v; fill + Busy(%v) took %v", fills, d, got)
	// A backward pass of many small tensors: spins and fills alternate, and
	// the whole lasts what the spins add up to, not that plus the fills and
	// the gaps between the kernels.
	// Every other tensor is so small that its share of the time is zero:
	// its fill overruns, and the spins after it make up for that.
	small := backend.Span{Buf: big, N: 4096, DType: elem.F32}
	const tensors = 300
	back := measure(func() error {
		for i := 0; i < tensors; i++ {
			share := 2 * d / tensors
			if i%2 == 1 {
				share = 0
			}
			if err := s.Busy(share); err != nil {
				return err
			}
			if err := s.Fill(small, p); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("%d x (Busy + fill), the Busy adding up to %v, took %v", tensors, d, back)
	if back > d+tolerance(d)+20*time.Microsecond {
		t.Errorf("%d x (Busy + fill), the Busy adding up to %v, took %v", tensors, d, back)
	}
	if got > d+tolerance(d) {
		t.Errorf("fill + Busy(%v) took %v: the fill's %v was not subtracted", d, got, fills)
	}
	if got < d-tolerance(d) {
		t.Errorf("fill + Busy(%v) took %v: more than the fill's %v was subtracted", d, got, fills)
	}
}

// TestGPUOverlap: an allreduce on the comm stream runs while the compute
// stream spins, which is the point of separate streams.
func TestGPUOverlap(t *testing.T) {
	b, compute, comm := newTestGPU(t)
	buf := mustAlloc(t, b, elem.F32, 1<<24)
	span := backend.Span{Buf: buf, N: 1 << 24, DType: elem.F32}
	evs := make([]backend.Event, 4)
	for i := range evs {
		evs[i], _ = b.NewEvent()
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(compute.Fill(span, elem.FillParams{Kind: elem.FillUniform, SeedA: 3, Lo: 0, Hi: 9}))
	must(compute.Record(evs[0]))
	must(comm.WaitEvent(evs[0]))
	must(compute.Busy(10 * time.Millisecond))
	must(compute.Record(evs[1]))
	must(comm.Record(evs[2]))
	must(b.Collectives([]backend.CollOp{{Stream: comm, Coll: plan.CollAllReduce, Op: plan.Avg, Buf: span, Name: "grads"}}))
	must(comm.Record(evs[3]))
	must(compute.Synchronize())
	must(comm.Synchronize())
	collEnd, err := b.Elapsed(evs[0], evs[3])
	must(err)
	spinEnd, err := b.Elapsed(evs[0], evs[1])
	must(err)
	t.Logf("allreduce ended %v after the fill, the spin %v after it", collEnd, spinEnd)
	if collEnd >= spinEnd {
		t.Errorf("the allreduce on the comm stream waited for the spin on the compute stream")
	}
}

func TestGPUCopyRoundTrip(t *testing.T) {
	b, _, _ := newTestGPU(t)
	buf := mustAlloc(t, b, elem.I32, 1000)
	span := backend.Span{Buf: buf, Off: 10, N: 900, DType: elem.I32}
	in := make([]byte, span.Bytes())
	rand.New(rand.NewSource(2)).Read(in)
	if err := b.CopyFromHost(span, in); err != nil {
		t.Fatal(err)
	}
	if out := hostCopy(t, b, span); !bytes.Equal(in, out) {
		t.Error("host -> device -> host changed the bytes")
	}
	if err := b.CopyToHost(make([]byte, 4), span); err == nil {
		t.Error("a short destination was accepted")
	}
	if _, err := addr(backend.Span{Buf: buf, Off: 900, N: 101, DType: elem.I32}); err == nil {
		t.Error("a span past the buffer's end was accepted")
	}
}

var floatDTypes = []elem.DType{elem.F64, elem.F32, elem.F16, elem.BF16}

// sameValue compares decoded elements bit for bit, taking any NaN for any
// NaN (Go and CUDA encode NaN payloads differently).
func sameValue(got, want float64) bool {
	return math.Float64bits(got) == math.Float64bits(want) || (math.IsNaN(got) && math.IsNaN(want))
}

// encode returns vals as elements of dt.
func encode(dt elem.DType, vals []float64) []byte {
	b := make([]byte, int64(len(vals))*dt.Size())
	elem.StoreAll(b, dt, vals)
	return b
}

// decode returns the elements of dt in b.
func decode(dt elem.DType, b []byte) []float64 {
	v := make([]float64, int64(len(b))/dt.Size())
	elem.LoadAll(v, b, dt)
	return v
}

// flagValue reads an overflow flag back.
func flagValue(t *testing.T, b backend.Backend, flag backend.Span) int32 {
	t.Helper()
	return int32(binary.LittleEndian.Uint32(hostCopy(t, b, flag)))
}

// scaleSources returns values of dt to scale: every finite value and then
// every value of the 16-bit formats; for f32 and f64 random bit patterns
// (every exponent, subnormals and values near the largest included), once
// finite only and once with zeros, infinities and NaN.
func scaleSources(dt elem.DType, r *rand.Rand) (finite, all []float64) {
	switch dt {
	case elem.F16, elem.BF16:
		for i := 0; i < 65536; i++ {
			v := elem.F16Value(uint16(i))
			if dt == elem.BF16 {
				v = elem.BF16Value(uint16(i))
			}
			all = append(all, v)
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				finite = append(finite, v)
			}
		}
		return finite, all
	}
	for len(finite) < 200000 {
		var v float64
		if dt == elem.F32 {
			v = float64(math.Float32frombits(r.Uint32()))
		} else {
			v = math.Float64frombits(r.Uint64())
		}
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			finite = append(finite, v)
		}
	}
	max := math.MaxFloat64
	if dt == elem.F32 {
		max = math.MaxFloat32
	}
	finite = append(finite, max, -max, elem.RoundTo(max/65536, dt), elem.RoundTo(max/32768*1.5, dt), 0, math.Copysign(0, -1))
	all = append(append([]float64(nil), finite...), math.Inf(1), math.Inf(-1), math.NaN())
	return finite, all
}

// TestGPUScaleMatchesGo scales every float dtype by 2^-16 .. 2^16 and
// compares each element with optim.Scaled, and the flag with whether any
// result is infinite or NaN.
func TestGPUScaleMatchesGo(t *testing.T) {
	b, s, _ := newTestGPU(t)
	r := rand.New(rand.NewSource(3))
	flag := backend.Span{Buf: mustAlloc(t, b, elem.I32, 1), N: 1, DType: elem.I32}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, dt := range floatDTypes {
		finite, all := scaleSources(dt, r)
		for si, vals := range [][]float64{finite, all} {
			n := int64(len(vals))
			src := encode(dt, vals)
			// An odd offset, as tensors inside buckets have.
			span := backend.Span{Buf: mustAlloc(t, b, dt, n+1), Off: 1, N: n, DType: dt}
			sawSet, sawClear := false, false
			for k := -16; k <= 16; k++ {
				factor := math.Ldexp(1, k)
				must(b.CopyFromHost(span, src))
				must(s.Set(flag, 0))
				must(s.Scale(span, factor, flag))
				must(s.Synchronize())
				want := make([]float64, n)
				wantFlag := int32(0)
				for i, v := range vals {
					want[i] = optim.Scaled(v, factor, dt)
					if math.IsInf(want[i], 0) || math.IsNaN(want[i]) {
						wantFlag = 1
					}
				}
				got := hostCopy(t, b, span)
				if i := sameElems(got, encode(dt, want), dt); i >= 0 {
					t.Errorf("%s source %d * 2^%d: element %d (%g) is %g, want %g", dt, si, k, i, vals[i], decode(dt, got)[i], want[i])
				}
				if f := flagValue(t, b, flag); f != wantFlag {
					t.Errorf("%s source %d * 2^%d: flag %d, want %d", dt, si, k, f, wantFlag)
				}
				sawSet = sawSet || wantFlag == 1
				sawClear = sawClear || wantFlag == 0
			}
			if si == 0 && (!sawSet || !sawClear) {
				t.Errorf("%s: the finite values never (or always) overflowed: the test lost its edge cases", dt)
			}
		}
		// The flag is never cleared, and no flag is no flag.
		vals := finite[:1000]
		span := backend.Span{Buf: mustAlloc(t, b, dt, int64(len(vals))), N: int64(len(vals)), DType: dt}
		must(b.CopyFromHost(span, encode(dt, vals)))
		must(s.Set(flag, 1))
		must(s.Scale(span, 0.5, flag))
		must(s.Scale(span, 2, backend.Span{}))
		must(s.Synchronize())
		if f := flagValue(t, b, flag); f != 1 {
			t.Errorf("%s: a scale without overflow cleared the flag to %d", dt, f)
		}
		want := make([]float64, len(vals))
		for i, v := range vals {
			want[i] = optim.Scaled(optim.Scaled(v, 0.5, dt), 2, dt)
		}
		if i := sameElems(hostCopy(t, b, span), encode(dt, want), dt); i >= 0 {
			t.Errorf("%s: a scale without a flag: element %d differs", dt, i)
		}
	}
	if err := s.Scale(backend.Span{Buf: flag.Buf, N: 1, DType: elem.I32}, 2, backend.Span{}); err == nil {
		t.Error("scaling an i32 span was accepted")
	}
	f32 := backend.Span{Buf: mustAlloc(t, b, elem.F32, 4), N: 4, DType: elem.F32}
	if err := s.Scale(f32, 2, f32); err == nil {
		t.Error("a flag of 4 f32 was accepted")
	}
}

// TestGPUSetMatchesGo sets spans of every dtype to values that round,
// saturate, overflow and underflow, and checks each element against
// elem.RoundTo and the elements around the span against their old values.
func TestGPUSetMatchesGo(t *testing.T) {
	b, s, _ := newTestGPU(t)
	vals := []float64{0, math.Copysign(0, -1), 1, -1.5, 2.5, 3.5, -2.5, 0.1, 1.0 / 3, 127.5, 128.5, -128.5, -129, 255.5, 256,
		65504, 65519.99, 65520, 1e5, -1e5, 1 << 24, 1<<24 + 1, 1 << 31, -(1 << 31) - 1, 1 << 53, 1<<53 + 1, 1 << 63, -1e19,
		1e30, 3.4028235e38, 3.4028236e38, 1e300, 5.96e-8, 2.98e-8, 1e-40, 1e-320, math.Inf(1), math.Inf(-1), math.NaN()}
	const n, pad = 1000, 3
	for _, dt := range allDTypes {
		buf := mustAlloc(t, b, dt, n+2*pad)
		whole := backend.Span{Buf: buf, N: n + 2*pad, DType: dt}
		span := backend.Span{Buf: buf, Off: pad, N: n, DType: dt}
		p := elem.FillParams{Kind: elem.FillUniform, SeedA: 77, Lo: 1, Hi: 100}
		for _, v := range vals {
			if err := s.Fill(whole, p); err != nil {
				t.Fatal(err)
			}
			if err := s.Set(span, v); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, whole.Bytes())
			elem.FillBytes(want, dt, &p)
			set := make([]float64, n)
			for i := range set {
				set[i] = elem.RoundTo(v, dt)
			}
			elem.StoreAll(want[pad*dt.Size():(pad+n)*dt.Size()], dt, set)
			got := hostCopy(t, b, whole)
			if i := sameElems(got, want, dt); i >= 0 {
				t.Errorf("set %s to %g: element %d is %g, want %g", dt, v, i, decode(dt, got)[i], decode(dt, want)[i])
			}
		}
	}
}

// updateCases are the optimizers the update test runs.
var updateCases = []struct {
	name string
	spec optim.Spec
}{
	{"sgd", optim.Spec{Kind: optim.SGD, LR: 0.1}},
	{"sgd+wd", optim.Spec{Kind: optim.SGD, LR: 0.05, WeightDecay: 0.01}},
	{"sgd+momentum", optim.Spec{Kind: optim.SGD, LR: 0.1, Momentum: 0.9}},
	{"sgd+momentum+wd", optim.Spec{Kind: optim.SGD, LR: 0.02, Momentum: 0.9, WeightDecay: 1e-4}},
	{"adamw", optim.Spec{Kind: optim.AdamW, LR: 1e-3, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}},
	{"adamw-wd0", optim.Spec{Kind: optim.AdamW, LR: 3e-4, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6}},
}

// randomValues returns n values of dt: signed, of magnitudes 2^lo to
// 2^hi, every 17th an exact zero of either sign.
func randomValues(r *rand.Rand, dt elem.DType, n, lo, hi int) []float64 {
	v := make([]float64, n)
	for i := range v {
		if i%17 == 0 {
			v[i] = math.Copysign(0, float64(i%2)-0.5)
			continue
		}
		v[i] = elem.RoundTo(math.Ldexp(r.Float64()*2-1, lo+r.Intn(hi-lo+1)), dt)
	}
	return v
}

// TestGPUUpdateMatchesGo runs a few optimizer steps of every optimizer,
// parameter dtype and gradient dtype on the GPU and in Go (Hyper.Apply,
// then elem.RoundTo to the stored dtypes) and compares every element of
// the parameters, the state and the output after each; and checks that a
// set overflow flag changes nothing.
func TestGPUUpdateMatchesGo(t *testing.T) {
	b, s, _ := newTestGPU(t)
	r := rand.New(rand.NewSource(4))
	const n, steps = 4099, 4
	outTypes := []elem.DType{0, elem.F16, elem.BF16, elem.F32, elem.F64} // 0: no output
	flag := backend.Span{Buf: mustAlloc(t, b, elem.I32, 1), N: 1, DType: elem.I32}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ci := 0
	for _, c := range updateCases {
		for _, pdt := range floatDTypes {
			for _, gdt := range floatDTypes {
				ci++
				odt := outTypes[ci%len(outTypes)]
				useFlag := ci%2 == 0
				name := c.name + " " + pdt.String() + " params, " + gdt.String() + " gradients"
				if odt != 0 {
					name += ", " + odt.String() + " out"
				}
				// Odd offsets, as tensors inside buckets have.
				sp := func(dt elem.DType) backend.Span {
					return backend.Span{Buf: mustAlloc(t, b, dt, n+1), Off: 1, N: n, DType: dt}
				}
				u := backend.UpdateOp{Grad: sp(gdt), Param: sp(pdt)}
				states := c.spec.States()
				for k := 0; k < states; k++ {
					u.State[k] = sp(pdt)
				}
				if odt != 0 {
					u.Out = sp(odt)
				}
				// The Go side: the values as stored.
				param := randomValues(r, pdt, n, -3, 2)
				var state [2][]float64
				state[0], state[1] = make([]float64, n), make([]float64, n)
				out := make([]float64, n)
				must(b.CopyFromHost(u.Param, encode(pdt, param)))
				for k := 0; k < states; k++ {
					must(b.CopyFromHost(u.State[k], encode(pdt, state[k])))
				}
				for step := 1; step <= steps+1; step++ {
					// The last step runs with the flag set: nothing changes.
					skipped := step == steps+1
					grad := randomValues(r, gdt, n, -10, 2)
					must(b.CopyFromHost(u.Grad, encode(gdt, grad)))
					u.Hyper = c.spec.Hyper(step, pdt)
					u.Flag = backend.Span{}
					when := ""
					switch {
					case skipped:
						u.Flag = flag
						when = " (flag set)"
						must(s.Set(flag, 1))
					case useFlag:
						u.Flag = flag
						must(s.Set(flag, 0))
					}
					must(s.Update(u))
					must(s.Synchronize())
					if !skipped {
						for i := range param {
							np, n0, n1 := u.Hyper.Apply(grad[i], param[i], state[0][i], state[1][i])
							param[i] = elem.RoundTo(np, pdt)
							if states > 0 {
								state[0][i] = elem.RoundTo(n0, pdt)
							}
							if states > 1 {
								state[1][i] = elem.RoundTo(n1, pdt)
							}
							if odt != 0 {
								out[i] = elem.RoundTo(np, odt)
							}
						}
					}
					check := func(what string, span backend.Span, want []float64) bool {
						got := decode(span.DType, hostCopy(t, b, span))
						for i := range want {
							if !sameValue(got[i], want[i]) {
								t.Errorf("%s, step %d%s: %s element %d is %g (%#x), want %g (%#x); gradient %g",
									name, step, when, what, i,
									got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]), grad[i])
								return false
							}
						}
						return true
					}
					ok := check("parameter", u.Param, param)
					for k := 0; k < states && ok; k++ {
						ok = check(fmt.Sprintf("state %d", k), u.State[k], state[k])
					}
					if ok && odt != 0 {
						ok = check("out", u.Out, out)
					}
					if !ok {
						break
					}
				}
			}
		}
	}
}

// TestGPUUpdateRefuses: updates whose spans do not fit are errors at
// queue time, with what is wrong.
func TestGPUUpdateRefuses(t *testing.T) {
	b, s, _ := newTestGPU(t)
	sp := func(dt elem.DType, n int64) backend.Span {
		return backend.Span{Buf: mustAlloc(t, b, dt, n), N: n, DType: dt}
	}
	adam := optim.Spec{Kind: optim.AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}.Hyper(1, elem.F32)
	sgd := optim.Spec{Kind: optim.SGD, LR: 0.1}.Hyper(1, elem.F32)
	good := backend.UpdateOp{Grad: sp(elem.F32, 8), Param: sp(elem.F32, 8), State: [2]backend.Span{sp(elem.F32, 8), sp(elem.F32, 8)}, Hyper: adam}
	if err := s.Update(good); err != nil {
		t.Fatalf("a good update refused: %v", err)
	}
	for _, c := range []struct {
		what string
		edit func(u *backend.UpdateOp)
	}{
		{"integer gradients", func(u *backend.UpdateOp) { u.Grad = sp(elem.I32, 8) }},
		{"fewer parameters", func(u *backend.UpdateOp) { u.Param = sp(elem.F32, 7) }},
		{"state of another dtype", func(u *backend.UpdateOp) { u.State[1] = sp(elem.F16, 8) }},
		{"adamw without its second moment", func(u *backend.UpdateOp) { u.State[1] = backend.Span{} }},
		{"an output of another length", func(u *backend.UpdateOp) { u.Out = sp(elem.BF16, 9) }},
		{"an integer output", func(u *backend.UpdateOp) { u.Out = sp(elem.I8, 8) }},
		{"a flag of f32", func(u *backend.UpdateOp) { u.Flag = sp(elem.F32, 1) }},
		{"a flag of two elements", func(u *backend.UpdateOp) { u.Flag = sp(elem.I32, 2) }},
		{"no optimizer", func(u *backend.UpdateOp) { u.Hyper.Kind = optim.NoKind }},
		{"momentum without state", func(u *backend.UpdateOp) {
			u.Hyper = sgd
			u.Hyper.C[2] = 0.9
			u.State = [2]backend.Span{}
		}},
	} {
		u := good
		c.edit(&u)
		if err := s.Update(u); err == nil {
			t.Errorf("an update with %s was accepted", c.what)
		} else {
			t.Logf("%s: %v", c.what, err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// TestGPUPreDivide: averages with PreDivide on one rank leave every
// collective's buffer as it was (each input divided by 1, then summed),
// and the division kernel they use gives elem.AvgOf's result for every
// element.
func TestGPUPreDivide(t *testing.T) {
	b, s1, s2 := newTestGPU(t)
	const n = 4096 + 8
	for _, dt := range allDTypes {
		span := backend.Span{Buf: mustAlloc(t, b, dt, n), N: n, DType: dt}
		p := elem.FillParams{Kind: elem.FillUniform, SeedA: 6, Lo: -100, Hi: 100}
		if dt == elem.U8 {
			p.Lo = 0
		}
		want := make([]byte, span.Bytes())
		elem.FillBytes(want, dt, &p)
		for _, c := range []plan.Coll{plan.CollAllReduce, plan.CollReduce, plan.CollReduceScatter} {
			if err := s2.Fill(span, p); err != nil {
				t.Fatal(err)
			}
			op := backend.CollOp{Stream: s2, Coll: c, Op: plan.Avg, Buf: span, Name: "b", PreDivide: true}
			if err := b.Collectives([]backend.CollOp{op}); err != nil {
				t.Fatal(err)
			}
			if err := s2.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(hostCopy(t, b, span), want, int(dt.Size())); i >= 0 {
				t.Errorf("%s avg with PreDivide of %s on one rank changed element %d", c, dt, i)
			}
		}
	}
	// A group over two streams, each op dividing on its own stream.
	r := rand.New(rand.NewSource(5))
	a := backend.Span{Buf: mustAlloc(t, b, elem.F32, 1<<16), N: 1 << 16, DType: elem.F32}
	c := backend.Span{Buf: mustAlloc(t, b, elem.BF16, 1<<16), N: 1 << 16, DType: elem.BF16}
	wa, wc := encode(elem.F32, randomValues(r, elem.F32, 1<<16, -20, 20)), encode(elem.BF16, randomValues(r, elem.BF16, 1<<16, -20, 20))
	if err := b.CopyFromHost(a, wa); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyFromHost(c, wc); err != nil {
		t.Fatal(err)
	}
	err := b.Collectives([]backend.CollOp{
		{Stream: s2, Coll: plan.CollAllReduce, Op: plan.Avg, Buf: a, Name: "a", PreDivide: true},
		{Stream: s1, Coll: plan.CollAllReduce, Op: plan.Avg, Buf: c, Name: "c", PreDivide: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hostCopy(t, b, a), wa) || !bytes.Equal(hostCopy(t, b, c), wc) {
		t.Error("a grouped avg with PreDivide on one rank changed its buffers")
	}

	// The division itself, as more ranks would divide: every element
	// against elem.AvgOf. Floats from castSource (every 16-bit value,
	// random f32 and f64 bits); integers from the pattern, whose values
	// float64 holds exactly.
	for _, dt := range allDTypes {
		var src []byte
		if dt.IsFloat() {
			src = castSource(dt, r)
		} else {
			p := elem.FillParams{Kind: elem.FillUniform, SeedA: 8, Lo: -120, Hi: 120}
			if dt == elem.U8 {
				p.Lo = 0
			}
			src = make([]byte, 100003*dt.Size())
			elem.FillBytes(src, dt, &p)
		}
		vals := decode(dt, src)
		nn := int64(len(vals))
		span := backend.Span{Buf: mustAlloc(t, b, dt, nn+1), Off: 1, N: nn, DType: dt}
		for _, size := range []int{1, 3, 6, 7} {
			if err := b.CopyFromHost(span, src); err != nil {
				t.Fatal(err)
			}
			ptr, _ := addr(span)
			if err := b.enter(); err != nil {
				t.Fatal(err)
			}
			err := b.kernels.Div(s1.s, ptr, int(dt), nn, size)
			goruntime.UnlockOSThread()
			if err != nil {
				t.Fatal(err)
			}
			if err := s1.Synchronize(); err != nil {
				t.Fatal(err)
			}
			want := make([]float64, nn)
			for i, v := range vals {
				want[i] = elem.AvgOf(v, dt, size)
			}
			got := hostCopy(t, b, span)
			if i := sameElems(got, encode(dt, want), dt); i >= 0 {
				t.Errorf("%s / %d: element %d (%g) is %g, want %g", dt, size, i, vals[i], decode(dt, got)[i], want[i])
			}
		}
	}
}

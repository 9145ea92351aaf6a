package nccl

// Tests of the NCCL backend on a GPU: the kernels against the Go code they
// reproduce (bit for bit), every collective, op and dtype, events, timing
// and the spin. They skip where no GPU and NCCL load, so CI (no GPU) runs
// none of them; scripts/gpu-check.sh runs them on the GPU machine.

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
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

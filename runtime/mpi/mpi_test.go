package mpi

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// One test runs MPI as a single rank (Open MPI's singleton mode), since MPI
// can be initialised only once per process. Multi-rank behaviour is tested
// through package runtime's mpirun tests.
func TestSingleRank(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev, or run `make setup`)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A parameter set in the environment, for ControlVar to read back.
	t.Setenv("OMPI_MCA_mpi_leave_pinned", "0")
	level, err := Init(ThreadSerialized)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Finalize(); err != nil {
			t.Error(err)
		}
	}()
	if level < ThreadSerialized {
		t.Fatalf("granted %s", level)
	}
	w := World()
	if n, err := w.Size(); err != nil || n != 1 {
		t.Fatalf("size %d, %v", n, err)
	}
	if LibraryVersion() == "unknown" || ProcessorName() == "unknown" {
		t.Errorf("version %q, host %q", LibraryVersion(), ProcessorName())
	}
	if v, ok, err := ControlVar("mpi_leave_pinned"); err != nil || !ok || v != "0" {
		t.Errorf(`ControlVar("mpi_leave_pinned") = %q, %v, %v; want "0", true, nil`, v, ok, err)
	}
	if v, ok, err := ControlVar("mpi_param_check"); err != nil || !ok || (v != "true" && v != "false") {
		t.Errorf(`ControlVar("mpi_param_check") = %q, %v, %v; want a boolean`, v, ok, err)
	}
	if v, ok, err := ControlVar("no_such_parameter"); err != nil || ok {
		t.Errorf(`ControlVar("no_such_parameter") = %q, %v, %v; want not found`, v, ok, err)
	}
	c, err := w.Dup()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()

	const n = 1000
	p, err := Malloc(n * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(p)
	f := unsafe.Slice((*float32)(p), n)
	for i := range f {
		f[i] = float32(i)
	}
	// Nonblocking collectives of every kind complete through Testsome and
	// leave a single rank's data as it was.
	var set RequestSet
	for _, start := range []func() (Request, error){
		func() (Request, error) { return c.Iallreduce(p, n, 2, 1) },
		func() (Request, error) { return c.Ibcast(p, n, 2, 0) },
		func() (Request, error) { return c.Ireduce(p, n, 2, 5, 0, 0) },
		func() (Request, error) { return c.Iallgather(p, n, 2) },
		func() (Request, error) { return c.IreduceScatterBlock(p, n, 2, 4) },
		func() (Request, error) { return c.Iallreduce(p, n/2, 3, 1) }, // f16 user-defined sum
	} {
		r, err := start()
		if err != nil {
			t.Fatal(err)
		}
		set.Add(r)
	}
	var done []int
	for set.Len() > 0 {
		if done, err = set.Testsome(done); err != nil {
			t.Fatal(err)
		}
	}
	for i := range f {
		if f[i] != float32(i) {
			t.Fatalf("element %d changed to %v", i, f[i])
		}
	}
	if err := c.Allreduce(p, n, 9, 1); err == nil {
		t.Errorf("an invalid dtype was accepted")
	}
	if _, err := c.Iallreduce(p, n, 3, 9); err == nil {
		t.Errorf("an invalid operator was accepted")
	}
	if err := w.Barrier(); err != nil {
		t.Fatal(err)
	}
	all, err := w.AllgatherBytes([]byte("abc"))
	if err != nil || len(all) != 1 || string(all[0]) != "abc" {
		t.Fatalf("allgather: %q, %v", all, err)
	}
	if ErrorString(1) == "" {
		t.Errorf("no error string")
	}
	testBatch(t, c)
}

// testBatch runs batches on a one-rank communicator: the stamps are in
// order, every collective leaves the data as it was except for the average,
// divided by the Size given, and a failure names its call and piece.
func testBatch(t *testing.T, c Comm) {
	const n = 10
	p, err := Malloc(n * 8)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(p)
	var b Batch
	defer b.Free()

	i32 := unsafe.Slice((*int32)(p), n)
	for i := range i32 {
		i32[i] = int32(i) - 5
	}
	x := Coll{Comm: c, Buf: p, Count: n, Chunk: 3, DType: elem.I32, Op: 1, Size: 1}
	before := MonotonicNanos()
	b.Barrier(c)
	s0 := b.Stamp()
	b.Allreduce(x)
	b.Bcast(x)
	b.Reduce(x)
	avg := x
	avg.Op, avg.Size = Avg, 2 // one rank, divided as if there were two
	b.Allreduce(avg)
	b.Stamp()
	if done, err := b.Run(); err != nil || done != b.Len() {
		t.Fatalf("batch: %d of %d done, %v", done, b.Len(), err)
	}
	if *s0 == 0 || b.Time(1) != *s0 || b.Time(1) < before || b.Time(6) < b.Time(1) || MonotonicNanos() < b.Time(6) {
		t.Errorf("stamps out of order: before %d, %d, %d", before, b.Time(1), b.Time(6))
	}
	for i, v := range i32 {
		if want := (int32(i) - 5) / 2; v != want { // truncated toward zero, as Go does
			t.Errorf("i32 element %d: %d after avg, want %d", i, v, want)
		}
	}

	// bf16 and f16 averages round once from float32, as package runtime's
	// avgDivide does.
	h := unsafe.Slice((*uint16)(p), n)
	for _, dt := range []struct {
		code     elem.DType
		from     func(float32) uint16
		to       func(uint16) float32
		dtypeStr string
	}{{elem.F16, F32ToF16, F16ToF32, "f16"}, {elem.BF16, F32ToBF16, BF16ToF32, "bf16"}} {
		for i := range h {
			h[i] = dt.from(float32(i)*1.37 + 0.01)
		}
		want := make([]uint16, n)
		for i := range want {
			want[i] = dt.from(dt.to(h[i]) / 2)
		}
		// In the operator asks for what MPI's operator cannot do on one
		// rank: the batch divides inline instead.
		for _, divide := range []Divide{DivideInline, DivideInOperator} {
			for i := range h {
				h[i] = dt.from(float32(i)*1.37 + 0.01)
			}
			b.Reset()
			b.Allreduce(Coll{Comm: c, Buf: p, Count: n, Chunk: 4, DType: dt.code, Op: Avg, Size: 2, Divide: divide})
			if _, err := b.Run(); err != nil {
				t.Fatal(err)
			}
			for i := range h {
				if h[i] != want[i] {
					t.Errorf("%s element %d, divide %d: %#04x after avg, want %#04x", dt.dtypeStr, i, divide, h[i], want[i])
				}
			}
		}
	}

	// A failure stops the batch and says which call, and which piece.
	b.Reset()
	b.Stamp()
	b.Allreduce(Coll{Comm: c, Buf: p, Count: n, Chunk: 4, DType: 9, Op: 1, Size: 1})
	b.Stamp()
	done, err := b.Run()
	if done != 1 || err == nil || !strings.Contains(err.Error(), "MPI_Allreduce") || !strings.Contains(err.Error(), "elements 0..4 of 10") {
		t.Errorf("invalid dtype: %d done, %v", done, err)
	}
}

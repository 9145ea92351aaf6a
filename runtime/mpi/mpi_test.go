package mpi

import (
	"os/exec"
	"runtime"
	"testing"
	"unsafe"
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
}

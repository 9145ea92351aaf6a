package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/dl"
)

// These tests call load, not Load, so that each sees its own environment.

func TestLoadNotFound(t *testing.T) {
	t.Setenv(EnvCudart, "/nonexistent/libcudart.so.13")
	err := load()
	var nf *dl.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a *dl.NotFoundError", err)
	}
	if !strings.Contains(err.Error(), "/nonexistent/libcudart.so.13") || !strings.Contains(err.Error(), EnvCudart) {
		t.Errorf("unhelpful error %q", err)
	}
}

func TestLoadSymbolMissing(t *testing.T) {
	// libm opens fine but is no CUDA runtime.
	t.Setenv(EnvCudart, "libm.so.6")
	err := load()
	var se *dl.SymbolError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *dl.SymbolError", err)
	}
	if se.Symbol != "cudaGetErrorString" || !strings.Contains(err.Error(), "libm.so.6") {
		t.Errorf("unhelpful error %q", err)
	}
}

func TestLoadDriverNotFound(t *testing.T) {
	t.Setenv(EnvCudart, "")
	t.Setenv(EnvDriver, "/nonexistent/libcuda.so.1")
	err := load()
	if err == nil {
		t.Fatal("loaded a driver that does not exist")
	}
	// Without a CUDA runtime (a build machine) the runtime is what fails;
	// on a GPU machine it loads, and the driver named above must fail.
	if !strings.Contains(err.Error(), "libcudart.so.13") && !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1") {
		t.Errorf("unhelpful error %q", err)
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Op: "cudaMalloc(64 bytes)", Code: 2, Name: "cudaErrorMemoryAllocation", Msg: "out of memory"}
	if got, want := e.Error(), "cudaMalloc(64 bytes): cudaErrorMemoryAllocation (2): out of memory"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e.Log = "ptxas error: line 7\n"
	if !strings.HasSuffix(e.Error(), "\nptxas error: line 7") {
		t.Errorf("log missing from %q", e.Error())
	}
	if VersionString(13000) != "13.0" || VersionString(12040) != "12.4" {
		t.Error("VersionString")
	}
}

func TestPTXEmbedded(t *testing.T) {
	if len(ptx) == 0 {
		t.Fatal("no PTX embedded")
	}
	if ptx[0] == '#' {
		t.Skip("placeholder PTX: kernels/regen.sh has not been run")
	}
	s := string(ptx)
	for _, k := range []string{"syncgen_fill", "syncgen_fill_add", "syncgen_cast", "syncgen_cast_f32_16", "syncgen_cast_16_f32", "syncgen_div", "syncgen_stamp", "syncgen_spin", "syncgen_copy", "syncgen_scale", "syncgen_set", "syncgen_update"} {
		if !strings.Contains(s, ".entry "+k+"(") {
			t.Errorf("the PTX has no kernel %s", k)
		}
	}
	if !strings.Contains(s, ".target sm_70") {
		t.Error("the PTX does not target sm_70: Volta could not run it")
	}
}

package nccl

import (
	"errors"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/dl"
)

func TestLoadNotFound(t *testing.T) {
	t.Setenv(EnvLib, "/nonexistent/libnccl.so.2")
	err := load()
	var nf *dl.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a *dl.NotFoundError", err)
	}
	if !strings.Contains(err.Error(), "/nonexistent/libnccl.so.2") || !strings.Contains(err.Error(), EnvLib) {
		t.Errorf("unhelpful error %q", err)
	}
}

func TestLoadSymbolMissing(t *testing.T) {
	t.Setenv(EnvLib, "libm.so.6")
	err := load()
	var se *dl.SymbolError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *dl.SymbolError", err)
	}
	if se.Symbol != "ncclGetVersion" || !strings.Contains(err.Error(), "libm.so.6") {
		t.Errorf("unhelpful error %q", err)
	}
}

func TestVersionString(t *testing.T) {
	for code, want := range map[int]string{22708: "2.27.8", 21903: "2.19.3", 2804: "2.8.4", 21000: "2.10.0"} {
		if got := VersionString(code); got != want {
			t.Errorf("VersionString(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Op: "ncclAllReduce", Code: InvalidArgument, Msg: "invalid argument (run with NCCL_DEBUG=WARN for details)", Last: "NULL recvbuff"}
	want := "ncclAllReduce: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details): NULL recvbuff"
	if e.Error() != want {
		t.Errorf("got %q, want %q", e.Error(), want)
	}
	e = &Error{Op: "x", Code: 42, Msg: "?"}
	if !strings.Contains(e.Error(), "ncclResult 42") {
		t.Errorf("got %q", e.Error())
	}
}

func TestUniqueIDSize(t *testing.T) {
	// ncclUniqueId is passed by value: the struct must be exactly
	// NCCL_UNIQUE_ID_BYTES.
	if UniqueIDBytes != 128 {
		t.Errorf("UniqueIDBytes = %d, want 128", UniqueIDBytes)
	}
}

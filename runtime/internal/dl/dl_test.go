package dl

import (
	"errors"
	"strings"
	"testing"
)

const env = "SYNCGEN_DL_TEST_LIB"

func TestOpenNamedByEnvMissing(t *testing.T) {
	t.Setenv(env, "/nonexistent/libfoo.so.1")
	_, err := Open("Foo", env, "libc.so.6")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a *NotFoundError", err)
	}
	msg := err.Error()
	for _, want := range []string{"Foo", "/nonexistent/libfoo.so.1", env} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not mention %q", msg, want)
		}
	}
	// The variable overrides the candidates: libc was not tried.
	if strings.Contains(msg, "libc.so.6") {
		t.Errorf("%q tried a candidate although %s was set", msg, env)
	}
}

func TestOpenCandidatesMissing(t *testing.T) {
	t.Setenv(env, "")
	_, err := Open("Foo", env, "libsyncgen-none.so.9", "libsyncgen-none.so.8")
	if err == nil {
		t.Fatal("opened a library that does not exist")
	}
	for _, want := range []string{"libsyncgen-none.so.9", "libsyncgen-none.so.8", env} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestSymbols(t *testing.T) {
	t.Setenv(env, "")
	lib, err := Open("C library", env, "libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6 here: %v", err)
	}
	if p, err := lib.Sym("strlen"); err != nil || p == 0 {
		t.Errorf("Sym(strlen) = %v, %v", p, err)
	}
	_, err = lib.Sym("ncclAllReduce")
	var se *SymbolError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *SymbolError", err)
	}
	if se.Symbol != "ncclAllReduce" || !strings.Contains(err.Error(), "libc.so.6") {
		t.Errorf("unhelpful error %q", err)
	}
	if lib.Has("ncclAllReduce") || !lib.Has("strlen") {
		t.Error("Has is wrong")
	}
}

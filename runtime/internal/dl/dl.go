package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <stdint.h>

// sg_dlopen opens path and, on failure, returns dlerror's text in *err.
// dlerror is per thread, so it must be read in the same C call as dlopen.
static void *sg_dlopen(const char *path, const char **err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	*err = h ? NULL : dlerror();
	return h;
}

static uintptr_t sg_dlsym(void *h, const char *name) {
	dlerror();
	return (uintptr_t)dlsym(h, name);
}

static int sg_dlclose(void *h) { return dlclose(h); }
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// Library is an opened shared library.
type Library struct {
	// Name is what the library is called in messages ("NCCL").
	Name string
	// Path is the file name that dlopen accepted.
	Path   string
	handle unsafe.Pointer
}

// NotFoundError reports a library that none of the candidate paths opened.
type NotFoundError struct {
	// Name is the library's name in messages ("NCCL").
	Name string
	// Env is the environment variable that may name the library's path.
	Env string
	// Tried lists each path tried with the reason dlopen gave.
	Tried []string
}

// Error describes where the library was looked for and why each try failed.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("cannot load the %s library: tried %s; install it, add its folder to LD_LIBRARY_PATH or set %s to its path",
		e.Name, strings.Join(e.Tried, "; "), e.Env)
}

// SymbolError reports a function missing from an opened library.
type SymbolError struct {
	// Library is the library's name in messages; Path the file opened.
	Library, Path string
	// Symbol is the missing function.
	Symbol string
}

// Error names the symbol and the file it was looked for in.
func (e *SymbolError) Error() string {
	return fmt.Sprintf("the %s library %s has no function %s (too old a version?)", e.Library, e.Path, e.Symbol)
}

// Open opens the library called name. If the environment variable env is set,
// its value is the only path tried, so that a user who names a library is
// never silently given another one; otherwise the candidates are tried in
// order (sonames such as "libnccl.so.2", found through the loader's search
// path).
func Open(name, env string, candidates ...string) (*Library, error) {
	paths := candidates
	if p := os.Getenv(env); p != "" {
		paths = []string{p}
	}
	nf := &NotFoundError{Name: name, Env: env}
	for _, p := range paths {
		cp := C.CString(p)
		var cerr *C.char
		h := C.sg_dlopen(cp, &cerr)
		C.free(unsafe.Pointer(cp))
		if h != nil {
			return &Library{Name: name, Path: p, handle: h}, nil
		}
		reason := "unknown dlopen error"
		if cerr != nil {
			reason = C.GoString(cerr)
		}
		// dlerror repeats the path; keep the message short.
		reason = strings.TrimPrefix(reason, p+": ")
		nf.Tried = append(nf.Tried, fmt.Sprintf("%s (%s)", p, reason))
	}
	if os.Getenv(env) != "" {
		nf.Tried[0] += " named by " + env
	}
	return nil, nf
}

// Sym returns the address of the function name, or a *SymbolError.
// The address is a uintptr because Go code only hands it back to C.
func (l *Library) Sym(name string) (uintptr, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	p := C.sg_dlsym(l.handle, cn)
	if p == 0 {
		return 0, &SymbolError{Library: l.Name, Path: l.Path, Symbol: name}
	}
	return uintptr(p), nil
}

// Has reports whether the library exports name.
func (l *Library) Has(name string) bool {
	_, err := l.Sym(name)
	return err == nil
}

// Close closes the library. Function addresses taken from it become invalid.
func (l *Library) Close() error {
	if C.sg_dlclose(l.handle) != 0 {
		return fmt.Errorf("dlclose %s failed", l.Path)
	}
	return nil
}

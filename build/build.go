// Package build compiles generated programs with the local Go toolchain.
//
// It lays out a module beside the generated source, with the runtime's
// embedded source under syncgenrt/ and a replace directive that points the
// runtime's import path at it, so that the build needs no network and no
// checkout of syncgen. Finished binaries are cached by a key made of
// everything that goes into them, which makes rebuilding an unchanged plan
// a file copy.
package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/syncgen/syncgen"
)

// Options control a build.
type Options struct {
	// Output is the path of the binary to write.
	Output string
	// CacheDir holds build directories and cached binaries; empty means
	// $SYNCGEN_CACHE, else the user's cache directory plus "syncgen".
	CacheDir string
	// NoCache forces a compile even when a cached binary exists.
	NoCache bool
	// Log receives the go command's output when it fails; may be nil.
	Log io.Writer
}

// Result says what a build did.
type Result struct {
	Output string // the binary written
	Dir    string // the module the binary was built from
	Cached bool   // true when the binary came from the cache
}

// ErrNoGo is returned when no Go toolchain is on PATH.
var ErrNoGo = errors.New("syncgen build needs the Go toolchain to compile the generated program, " +
	"and `go` is not on PATH: install Go (https://go.dev/dl) or add it to PATH; " +
	"`syncgen gen` writes the source without compiling it")

// ErrNoMPI is returned when the MPI development files cgo needs are missing.
var ErrNoMPI = errors.New("the generated program links Open MPI, but `pkg-config ompi` finds no MPI development files: " +
	"install them (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev), or run `make setup`")

// RuntimeDir is the directory of the embedded runtime module inside a
// build directory or a module written by WriteModule.
const RuntimeDir = "syncgenrt"

// Build compiles the generated files (from codegen.Generate) into
// opts.Output.
func Build(files map[string][]byte, opts Options) (*Result, error) {
	if opts.Output == "" {
		return nil, errors.New("build: no output path")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, ErrNoGo
	}
	cacheDir, err := cacheRoot(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	goVersion, err := goEnv(goBin, "GOVERSION")
	if err != nil {
		return nil, err
	}
	key, err := cacheKey(files, goVersion)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cacheDir, key)
	bin := filepath.Join(dir, "bin", "program")
	res := &Result{Output: opts.Output, Dir: filepath.Join(dir, "src")}

	if !opts.NoCache {
		if _, err := os.Stat(bin); err == nil {
			if err := copyExecutable(bin, opts.Output); err != nil {
				return nil, err
			}
			res.Cached = true
			return res, nil
		}
	}
	if err := checkMPI(); err != nil {
		return nil, err
	}
	if _, err := writeModule(res.Dir, "program", files); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	tmpBin := bin + ".tmp"
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", tmpBin, ".")
	cmd.Dir = res.Dir
	// No network and no surprises from the user's environment: the module
	// is self-contained, so the proxy is never needed, and a go.work or a
	// newer toolchain line elsewhere must not take part.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local", "CGO_ENABLED=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if opts.Log != nil {
			opts.Log.Write(out.Bytes())
		}
		return nil, &CompileError{Dir: res.Dir, Output: out.String(), Err: err}
	}
	if err := os.Rename(tmpBin, bin); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	if err := copyExecutable(bin, opts.Output); err != nil {
		return nil, err
	}
	return res, nil
}

// CompileError is a failure of the Go compiler on generated code. The
// generated code is meant to always compile, so this is a syncgen bug; the
// directory is kept for the bug report.
type CompileError struct {
	Dir    string
	Output string
	Err    error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("the generated program did not compile (%v). This is a bug in syncgen, not in your plan: "+
		"please report it with the output below; the generated module is kept in %s\n%s",
		e.Err, e.Dir, strings.TrimSpace(e.Output))
}

func (e *CompileError) Unwrap() error { return e.Err }

func cacheRoot(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("SYNCGEN_CACHE")
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "syncgen")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build cache %s: %w (every build compiles in it, --no-cache too: set SYNCGEN_CACHE to a directory you can write)", dir, err)
	}
	return dir, nil
}

func goEnv(goBin, name string) (string, error) {
	cmd := exec.Command(goBin, "env", name)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("running `go env %s`: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func checkMPI() error {
	if _, err := exec.LookPath("pkg-config"); err != nil {
		return ErrNoMPI
	}
	if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		return ErrNoMPI
	}
	return nil
}

// cacheKey hashes everything that goes into the binary: the generated
// files, the runtime's source, the Go version, the target platform and the
// cgo settings that change how MPI is linked.
func cacheKey(files map[string][]byte, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "go=%s os=%s arch=%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	for _, v := range []string{"CGO_CFLAGS", "CGO_LDFLAGS", "PKG_CONFIG_PATH", "CC"} {
		fmt.Fprintf(h, "%s=%s\n", v, os.Getenv(v))
	}
	for _, name := range sortedKeys(files) {
		fmt.Fprintf(h, "file %s %d\n", name, len(files[name]))
		h.Write(files[name])
	}
	err := walkRuntime(func(rel string, data []byte) error {
		fmt.Fprintf(h, "runtime %s %d\n", rel, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// walkRuntime calls fn for every file of the embedded runtime that a build
// needs, with its path relative to the runtime module root.
func walkRuntime(fn func(rel string, data []byte) error) error {
	return fs.WalkDir(syncgen.RuntimeFS, "runtime", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := syncgen.RuntimeFS.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(p, data)
	})
}

// WriteModule lays out a buildable module in dir: the generated files, a
// go.mod that requires the runtime, and the runtime's source under
// RuntimeDir. The module is named after dir's last element (of its
// absolute path, for `.` and `..`) when that is a valid import path
// element, so that `go build` in dir makes a program of that name
// (hello_sync, not "program"). It returns how many files of the runtime
// it wrote, and is exported for `syncgen gen --module`.
func WriteModule(dir string, files map[string][]byte) (runtimeFiles int, err error) {
	name := filepath.Base(filepath.Clean(dir))
	if name == "." || name == ".." {
		// The directory it stands for: `gen -o . --module` in ~/resnet.
		if abs, err := filepath.Abs(dir); err == nil {
			name = filepath.Base(abs)
		}
	}
	if !modulePathElement.MatchString(name) {
		name = "program"
	}
	return writeModule(dir, name, files)
}

// modHeader is the first line of the go.mod files that WriteModule
// writes, which marks them as syncgen's (see NotGenerated).
const modHeader = "// Code generated by syncgen. DO NOT EDIT."

// NotGenerated returns the paths, under dir, of the files that writing
// files there (with WriteModule when module is set) would replace and
// that syncgen did not write, sorted; nil when there are none. A file is
// syncgen's when its first line is the header of generated code that
// names syncgen ("// Code generated by syncgen ... DO NOT EDIT.", as the
// generated source and go.mod have); a go.mod is also syncgen's when its
// module is syncgen.generated/NAME. RuntimeDir, which WriteModule
// replaces whole, is syncgen's when its go.mod is, or names the runtime's
// module (as older versions wrote it). Anything else (the user's
// main.go, their go.mod, a directory where a file would go) is listed.
func NotGenerated(dir string, files map[string][]byte, module bool) ([]string, error) {
	names := sortedKeys(files)
	if module {
		names = append(names, "go.mod")
	}
	var foreign []string
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		ok, exists, err := generatedFile(p, func(first, rest string) bool {
			return name == "go.mod" && modulePathIs(first+"\n"+rest, "syncgen.generated/")
		})
		if err != nil {
			return nil, err
		}
		if exists && !ok {
			foreign = append(foreign, p)
		}
	}
	if module {
		rt := filepath.Join(dir, RuntimeDir)
		if fi, err := os.Lstat(rt); err == nil {
			ok := false
			if fi.IsDir() {
				ok, _, err = generatedFile(filepath.Join(rt, "go.mod"), func(first, rest string) bool {
					return modulePathIs(first+"\n"+rest, syncgen.ModulePath)
				})
				if err != nil {
					return nil, err
				}
			}
			if !ok {
				foreign = append(foreign, rt+string(filepath.Separator))
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("build: %w", err)
		}
	}
	sort.Strings(foreign)
	return foreign, nil
}

// generatedFile reports whether the file at p exists and whether syncgen
// wrote it: its first line is syncgen's header of generated code, or
// also reads it as syncgen's (given the first line and the rest of the
// file's start). Anything but a regular file is not syncgen's.
func generatedFile(p string, also func(first, rest string) bool) (ok, exists bool, err error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("build: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return false, true, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return false, true, fmt.Errorf("build: %w", err)
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false, true, fmt.Errorf("build: %w", err)
	}
	first, rest, _ := strings.Cut(string(head[:n]), "\n")
	first = strings.TrimSuffix(first, "\r")
	if syncgenHeader.MatchString(first) {
		return true, true, nil
	}
	return also(first, rest), true, nil
}

// syncgenHeader matches the first line of a file that syncgen generated:
// Go's header of generated code, naming syncgen (and its version).
var syncgenHeader = regexp.MustCompile(`^// Code generated by syncgen\b.* DO NOT EDIT\.$`)

// modulePathIs reports whether the go.mod text declares a module whose
// path is path, or starts with it when path ends in "/".
func modulePathIs(text, path string) bool {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			mod := strings.Trim(f[1], `"`)
			return mod == path || strings.HasSuffix(path, "/") && strings.HasPrefix(mod, path)
		}
	}
	return false
}

// modulePathElement matches the names that are safe as the last element
// of a module path (and as a program's file name).
var modulePathElement = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func writeModule(dir, name string, files map[string][]byte) (int, error) {
	if err := os.RemoveAll(filepath.Join(dir, RuntimeDir)); err != nil {
		return 0, fmt.Errorf("build: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("build: %w", err)
	}
	goMod := fmt.Sprintf("%s\n\nmodule syncgen.generated/%s\n\ngo 1.22\n\n"+
		"require %s v0.0.0\n\nreplace %s => ./%s\n", modHeader, name, syncgen.ModulePath, syncgen.ModulePath, RuntimeDir)
	all := map[string][]byte{"go.mod": []byte(goMod)}
	for name, data := range files {
		all[name] = data
	}
	all[path.Join(RuntimeDir, "go.mod")] = []byte(fmt.Sprintf("%s\n\nmodule %s\n\ngo 1.22\n", modHeader, syncgen.ModulePath))
	runtimeFiles := 1 // its go.mod
	err := walkRuntime(func(rel string, data []byte) error {
		all[path.Join(RuntimeDir, rel)] = data
		runtimeFiles++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("build: reading the embedded runtime: %w", err)
	}
	for _, name := range sortedKeys(all) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, fmt.Errorf("build: %w", err)
		}
		if err := os.WriteFile(p, all[name], 0o644); err != nil {
			return 0, fmt.Errorf("build: %w", err)
		}
	}
	return runtimeFiles, nil
}

// copyExecutable writes src to dst through a temporary file and a rename,
// so a running copy of dst is never overwritten in place.
func copyExecutable(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	if dir := filepath.Dir(dst); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	tmp := dst + ".syncgen-tmp"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		return fmt.Errorf("build: writing %s: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build: writing %s: %w", dst, err)
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

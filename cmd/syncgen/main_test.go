package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/syncgen/syncgen/build"
	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/ir"
)

// syncgen runs the CLI in-process and returns its exit status and output.
func syncgen(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"syncgen"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const helloPlan = `tensor w f32[64, 64]
tensor b f32[64]
bucket grads { * }
step {
    backward 1ms
    allreduce grads after ready
    wait comm
}
run steps 2 warmup 0 check every 1
`

func TestCheckOK(t *testing.T) {
	p := writeFile(t, t.TempDir(), "ok.sync", helloPlan)
	code, out, errOut := syncgen(t, "check", p)
	if code != 0 {
		t.Fatalf("check exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "ok: 2 tensors, 4,160 parameters") {
		t.Errorf("check summary = %q, want the tensor and parameter counts", out)
	}
}

// TestSummary checks the one-line summary of a plan: singular nouns for
// one, thousands separators in every count.
func TestSummary(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"tensor a f32[1]\nbucket g { a }\nstep {}\n", "1 tensor, 1 parameter, 4 B, 1 bucket, 2 streams"},
		{"tensor t.{0..1199} f32[1000]\nstream s\nbucket g { * }\nstep {}\n", "1,200 tensors, 1,200,000 parameters, 4.6 MiB, 1 bucket, 1 stream"},
		// The bytes are the gradients', as the program's header counts
		// them: a frozen tensor has none.
		{"tensor a f32[1] frozen\nstep {}\n", "1 tensor, 1 parameter, 0 B, 0 buckets, 2 streams"},
		{"tensor a f32[4]\ntensor b f32[32] frozen\nbucket g { a }\nstep {}\n", "2 tensors, 36 parameters, 16 B, 1 bucket, 2 streams"},
		// The output buffers of `into` are counted apart from the buckets.
		{"tensor a f32[4]\nbucket g { a }\nstep { allreduce g into s; allgather s into f }\n", "1 tensor, 4 parameters, 16 B, 1 bucket, 2 output buffers, 2 streams"},
	} {
		prog, diags := dsl.Check("plan.sync", []byte(tc.src))
		if prog == nil {
			t.Errorf("%q: %v", tc.src, diags)
			continue
		}
		if got := summary(prog); got != tc.want {
			t.Errorf("%q: summary %q, want %q", tc.src, got, tc.want)
		}
	}
	// Totals that would pass 2^63 (the checker refuses such a plan) stop
	// at the largest int64 rather than wrap to a negative count or 0 B.
	big := &ir.Program{Streams: make([]ir.Stream, 2)}
	for range 10 {
		big.Tensors = append(big.Tensors, ir.Tensor{DType: ir.F32, Shape: []int64{1e18}, Elems: 1e18, Bucket: -1})
	}
	want := "10 tensors, at least 9,223,372,036,854,775,807 parameters, at least 8.0 EiB, 0 buckets, 2 streams"
	if got := summary(big); got != want {
		t.Errorf("summary of 10 tensors of 10^18 f32 = %q, want %q", got, want)
	}
	if got := humanBytes(1 << 62); got != "4.0 EiB" {
		t.Errorf("humanBytes(2^62) = %q, want 4.0 EiB", got)
	}
}

// check refuses a plan whose tensors add up to 2^63 bytes or more, with
// the tensor where the total passes it.
func TestCheckTotalOverflow(t *testing.T) {
	p := writeFile(t, t.TempDir(), "big.sync", "tensor a.{0..9} f32[1000000000000000000]\nbucket g { * } cap 1MiB\nstep { backward 1ms; allreduce g after ready }\n")
	code, out, errOut := syncgen(t, "check", p)
	if code != 1 || out != "" || !strings.Contains(errOut, "big.sync:1:8: error: the program's tensors add up to 2^63 bytes or more, from tensor `a.2` on") {
		t.Errorf("check: exit %d, stdout %q, stderr %q; want 1 and the total refused", code, out, errOut)
	}
}

func TestCheckSyntaxError(t *testing.T) {
	p := writeFile(t, t.TempDir(), "bad.sync", "tensor w f32[64, 64]\nbucket grads { * }\nstep {\n    allreduce grads on comms\n}\n")
	code, _, errOut := syncgen(t, "check", p)
	if code != 1 {
		t.Fatalf("check of a bad plan: exit %d, want 1", code)
	}
	if !strings.Contains(errOut, "bad.sync:4:") || !strings.Contains(errOut, "comms") {
		t.Errorf("check output does not point at line 4 and the unknown stream:\n%s", errOut)
	}
	if !strings.Contains(errOut, "^") {
		t.Errorf("check output has no caret under the error:\n%s", errOut)
	}
}

func TestCheckJSON(t *testing.T) {
	p := writeFile(t, t.TempDir(), "bad.sync", "tensor w f32[0]\n")
	code, out, _ := syncgen(t, "check", "--format", "json", p)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var diags []map[string]any
	if err := json.Unmarshal([]byte(out), &diags); err != nil {
		t.Fatalf("--format json output is not a JSON array: %v\n%s", err, out)
	}
	if len(diags) == 0 || diags[0]["line"] != float64(1) {
		t.Errorf("diagnostics = %v, want one on line 1", diags)
	}
}

func TestCheckMissingFile(t *testing.T) {
	code, _, errOut := syncgen(t, "check", filepath.Join(t.TempDir(), "nope.sync"))
	if code != 1 || !strings.Contains(errOut, "nope.sync") {
		t.Errorf("check of a missing file: exit %d, stderr %q; want 1 and the file named", code, errOut)
	}
}

func TestFmt(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "messy.sync", "tensor   w f32[ 4,4 ]   // the weight\nbucket g {*}\nstep{backward 1ms\nallreduce g after ready\nwait comm}\n")
	code, out, errOut := syncgen(t, "fmt", "-d", p)
	if code != 0 || !strings.Contains(out, "+tensor w f32[4, 4]") {
		t.Fatalf("fmt -d: exit %d, out:\n%s\nerr:\n%s", code, out, errOut)
	}
	if code, _, errOut := syncgen(t, "fmt", "-w", p); code != 0 {
		t.Fatalf("fmt -w: exit %d: %s", code, errOut)
	}
	formatted, _ := os.ReadFile(p)
	if !strings.Contains(string(formatted), "// the weight") {
		t.Errorf("fmt lost a comment:\n%s", formatted)
	}
	code, out, _ = syncgen(t, "fmt", "-l", p)
	if code != 0 || out != "" {
		t.Errorf("fmt -l after fmt -w: exit %d, listed %q; want nothing", code, out)
	}
	bad := writeFile(t, dir, "bad.sync", "tensor w f32[4\n")
	if code, _, _ := syncgen(t, "fmt", "-w", bad); code != 1 {
		t.Errorf("fmt of a file with a syntax error: exit %d, want 1", code)
	}
}

func TestGen(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "hello.sync", helloPlan)
	out := filepath.Join(dir, "gen")
	code, _, errOut := syncgen(t, "gen", p, "-o", out)
	if code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errOut)
	}
	src, err := os.ReadFile(filepath.Join(out, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "// Code generated by syncgen " + version + ". DO NOT EDIT.\n// Source: hello.sync\n"; !bytes.HasPrefix(src, []byte(want)) {
		t.Errorf("gen wrote a file that does not start with %q", want)
	}
}

// A plan with only a warning about the whole file (no step block) is
// generated, the warning shown: line 0 is not an unreadable file.
func TestGenWithFileWarning(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "nostep.sync", "tensor a f32[4]\nbucket g { a }\n")
	code, _, errOut := syncgen(t, "gen", p, "-o", filepath.Join(dir, "gen"))
	if code != 0 || !strings.Contains(errOut, "warning: the program has no step block") {
		t.Errorf("gen of a plan without step: exit %d, stderr %q; want 0 and the warning", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "gen", "main.go")); err != nil {
		t.Errorf("gen wrote no main.go: %v", err)
	}
}

func TestBuildWithoutGo(t *testing.T) {
	p := writeFile(t, t.TempDir(), "hello.sync", helloPlan)
	t.Setenv("PATH", t.TempDir())
	code, _, errOut := syncgen(t, "build", p, "-o", filepath.Join(t.TempDir(), "x"))
	if code != 1 || !strings.Contains(errOut, "Go toolchain") {
		t.Errorf("build without go: exit %d, stderr %q; want 1 and a message about the Go toolchain", code, errOut)
	}
}

func TestBuildAndCache(t *testing.T) {
	needToolchain(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	p := writeFile(t, dir, "hello.sync", helloPlan)
	bin := filepath.Join(dir, "hello_sync")
	code, out, errOut := syncgen(t, "build", p, "-o", bin)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "compiled") {
		t.Errorf("first build output %q does not say it compiled", out)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("build did not write an executable %s: %v", bin, err)
	}
	code, out, _ = syncgen(t, "build", p, "-o", bin)
	if code != 0 || !strings.Contains(out, "cached") {
		t.Errorf("second build: exit %d, output %q; want it served from the cache", code, out)
	}
	help, err := exec.Command(bin, "--help").CombinedOutput()
	if !strings.Contains(string(help), "-steps") || !strings.Contains(string(help), "-backend") {
		t.Errorf("%s --help (%v) does not list the -steps and -backend flags:\n%s", bin, err, help)
	}
}

func TestBuildDefaultOutputName(t *testing.T) {
	needToolchain(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	p := writeFile(t, dir, "my-model.sync", helloPlan)
	t.Chdir(dir)
	if code, _, errOut := syncgen(t, "build", p); code != 0 {
		t.Fatalf("build: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "my-model_sync")); err != nil {
		t.Errorf("build did not write ./my-model_sync: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"check"}, {"gen"}, {"build"}, {"run"}, {"fmt"}, {"check", "--format", "xml", "x.sync"}} {
		code, _, errOut := syncgen(t, args...)
		if code != 2 || !strings.Contains(errOut, "usage") && !strings.Contains(errOut, "use text or json") {
			t.Errorf("syncgen %v: exit %d, stderr %q; want 2 and a usage hint", args, code, errOut)
		}
	}
}

func TestPermuteArgs(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	got := permuteArgs(app, []string{"syncgen", "run", "m.sync", "-np", "4", "--", "--steps", "3"})
	want := []string{"syncgen", "run", "-np", "4", "m.sync", "--", "--steps", "3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("permuteArgs = %v, want %v", got, want)
	}
}

// needToolchain skips tests that compile programs where Go or Open MPI's
// development files are missing; `make test` installs Open MPI.
func needToolchain(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	if err := exec.Command("pkg-config", "--exists", "ompi").Run(); err != nil {
		t.Skip("Open MPI development files missing; run `make setup` (make test does)")
	}
}

// needMPIRun skips the test where mpirun is missing, and returns its path.
func needMPIRun(t *testing.T) string {
	t.Helper()
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found; `make test` installs Open MPI")
	}
	return mpirun
}

func TestProgramArgs(t *testing.T) {
	for _, tc := range []struct {
		tail []string
		want string
		ok   bool
	}{
		{nil, "", true},
		{[]string{"--"}, "", true},
		{[]string{"--", "--steps", "3", "--quiet"}, "--steps 3 --quiet", true},
		{[]string{"--", "--", "x"}, "-- x", true},
		{[]string{"other.sync"}, "", false},
		{[]string{"--steps", "3"}, "", false},
	} {
		got, err := programArgs(tc.tail)
		if (err == nil) != tc.ok || strings.Join(got, " ") != tc.want {
			t.Errorf("programArgs(%q) = %q, %v; want %q, ok %v", tc.tail, got, err, tc.want, tc.ok)
		}
	}
}

// TestRunPassesProgramFlags runs `syncgen run` with a launcher that records
// its arguments: the program's flags after "--" must reach the program
// without the "--" (which would make it take them for positional arguments).
func TestRunPassesProgramFlags(t *testing.T) {
	needToolchain(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	p := writeFile(t, dir, "hello.sync", helloPlan)
	record := filepath.Join(dir, "args.txt")
	launcher := writeFile(t, dir, "fake-mpirun", "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\necho \"$@\" > "+record+"\n")
	if err := os.Chmod(launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello_sync")
	code, out, errOut := syncgen(t, "run", p, "-np", "3", "--mpirun", launcher, "-o", bin, "--", "--steps", "5", "--quiet")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if want := "-np 3 " + bin + " --steps 5 --quiet\n"; string(got) != want {
		t.Errorf("the launcher got %q, want %q", got, want)
	}
	// The echoed command line quotes what a shell would split or expand.
	code, out, errOut = syncgen(t, "run", p, "-np", "3", "--mpirun", launcher, "-o", bin, "--", "--trace", "a b.json", "--json", "")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	if want := "+ " + shellQuote(launcher) + " -np 3 "; !strings.Contains(errOut, want) || !strings.Contains(errOut, " --trace 'a b.json' --json ''\n") {
		t.Errorf("run echoed %q, want a line starting %q that quotes 'a b.json' and ''", errOut, want)
	}
	if code, _, errOut := syncgen(t, "run", p, "--mpirun", launcher, "-o", bin, "extra.sync"); code != 2 || !strings.Contains(errOut, "extra.sync") {
		t.Errorf("run with a second file: exit %d, stderr %q; want 2 and the argument named", code, errOut)
	}
}

// TestShellJoin checks that the command line syncgen run echoes can be
// pasted into a shell: arguments with spaces, shell metacharacters or
// quotes, and empty ones, are quoted; plain ones are not.
func TestShellJoin(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"mpirun", "-np", "2", "/tmp/x/hello_sync", "--steps", "5"}, "mpirun -np 2 /tmp/x/hello_sync --steps 5"},
		{[]string{"/my dir/prog", "--trace", "a b.json"}, "'/my dir/prog' --trace 'a b.json'"},
		{[]string{"--json", ""}, "--json ''"},
		{[]string{"x;rm", "$HOME", "a*b", "it's", "--trace=t.json"}, `'x;rm' '$HOME' 'a*b' 'it'\''s' --trace=t.json`},
	} {
		if got := shellJoin(tc.in); got != tc.want {
			t.Errorf("shellJoin(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestFlagErrors checks that a wrong or incomplete flag gets one line
// naming it and the command's --help, exit status 2, and not the whole
// help text (which scrolled the error out of sight).
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--bogus", "x.sync"}, "syncgen: check: flag provided but not defined: -bogus; see 'syncgen check --help'\n"},
		{[]string{"build", "-o"}, "syncgen: build: flag needs an argument: -o; see 'syncgen build --help'\n"},
		{[]string{"run", "--np", "x", "x.sync"}, "syncgen: run: invalid value \"x\" for flag -np: parse error; see 'syncgen run --help'\n"},
		{[]string{"-x"}, "syncgen: flag provided but not defined: -x; see 'syncgen --help'\n"},
		// The program's flag without the `--` before it.
		{[]string{"run", "-np", "2", "x.sync", "--steps", "2"}, "syncgen: run: flag provided but not defined: -steps; see 'syncgen run --help'; " +
			"the program's own flags go after --, e.g. syncgen run -np 2 model.sync -- --steps 100\n"},
	} {
		code, out, errOut := syncgen(t, tc.args...)
		if code != 2 || !strings.HasPrefix(errOut, tc.want) || out != "" {
			t.Errorf("syncgen %q: exit %d, stdout %q, stderr %q; want 2, no output and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestInputNotAFile checks what check, gen, build and fmt say about a
// directory, a missing file and a file given without its .sync: one
// error with a hint each, exit status 1.
func TestInputNotAFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "hello.sync", helloPlan)
	for _, tc := range []struct {
		args       []string
		want, hint string
	}{
		{[]string{"check", dir}, "is a directory", "syncgen check " + filepath.Join(dir, "*.sync")},
		{[]string{"gen", dir}, "is a directory", "not a directory"},
		{[]string{"build", filepath.Join(dir, "nope.sync")}, "no such file or directory", "check the path"},
		{[]string{"check", filepath.Join(dir, "hello")}, "no such file or directory", "did you mean `" + filepath.Join(dir, "hello.sync") + "`?"},
		{[]string{"check", ""}, "cannot read", "the file name is empty"},
		{[]string{"fmt", dir}, "is a directory", "syncgen fmt -l " + filepath.Join(dir, "*.sync")},
	} {
		code, _, errOut := syncgen(t, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, tc.hint) || strings.Contains(errOut, "has errors") {
			t.Errorf("syncgen %q: exit %d, stderr %q; want 1, %q and %q", tc.args, code, errOut, tc.want, tc.hint)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, errOut := syncgen(t, "chek", "x.sync")
	if code != 2 || !strings.Contains(errOut, `unknown command "chek"`) || strings.Contains(errOut, "help topic") {
		t.Errorf("syncgen chek: exit %d, stderr %q; want 2 and `unknown command`", code, errOut)
	}
}

// syncgen help [COMMAND] is what a new user types first.
func TestHelpCommand(t *testing.T) {
	checkCLI(t, "", []cliCase{
		{[]string{"help"}, 0, "COMMANDS:", ""},
		{[]string{"help", "build"}, 0, "build checks the plan, generates its Go program", ""},
		{[]string{"help", "fmt"}, 0, "syncgen fmt -w model.sync", ""},
		{[]string{"help", "biuld"}, 2, "", `help: unknown command "biuld"`},
		{[]string{"help", "build", "run"}, 2, "", "give at most one command"},
	})
}

// TestHelpFlags: --help and -h show the help of syncgen or of a command on
// standard output, exit status 0, like `syncgen help [COMMAND]`, wherever
// they are among the command's flags and files. `syncgen --help` used to
// fail with "flag: help requested", and `syncgen build model.sync --help`
// took model.sync for a help topic.
func TestHelpFlags(t *testing.T) {
	_, appHelp, _ := syncgen(t, "help")
	for _, flag := range []string{"--help", "-h", "-help"} {
		if code, out, errOut := syncgen(t, flag); code != 0 || out != appHelp || errOut != "" {
			t.Errorf("syncgen %s: exit %d, stdout %q, stderr %q; want 0 and the help of `syncgen help`", flag, code, out, errOut)
		}
	}
	cases := []cliCase{
		{[]string{"--help", "build"}, 0, "build checks the plan, generates its Go program", ""},
		{[]string{"-h", "biuld"}, 2, "", `unknown command "biuld"`},
		{[]string{"build", "model.sync", "--help"}, 0, "build checks the plan, generates its Go program", ""},
		{[]string{"build", "-o", "bin/x", "model.sync", "-h"}, 0, "build checks the plan, generates its Go program", ""},
		{[]string{"run", "-np", "2", "model.sync", "-h", "--", "--steps", "3"}, 0, "run builds the plan like 'syncgen build'", ""},
		{[]string{"check", "a.sync", "b.sync", "--help"}, 0, "check reads each plan", ""},
		{[]string{"help", "fmt", "-h"}, 0, "syncgen fmt -w model.sync", ""},
	}
	for _, cmd := range newApp(&bytes.Buffer{}, &bytes.Buffer{}).Commands {
		for _, flag := range []string{"--help", "-h"} {
			cases = append(cases, cliCase{[]string{cmd.Name, flag}, 0, "USAGE:\n   syncgen ", ""})
		}
	}
	checkCLI(t, "", cases)
}

// TestHelpHints runs the help that error messages point at ("see 'syncgen
// build --help'", "(syncgen --help)"): it must show help, not fail as
// `syncgen --help` once did.
func TestHelpHints(t *testing.T) {
	hint := regexp.MustCompile(`syncgen(?: [a-z]+)? --help`)
	for _, args := range [][]string{
		{"nosuch"}, {"-x"}, {"check", "--bogus", "x.sync"}, {"fmt", "-z"}, {"gen", "-z", "x.sync"},
		{"build", "-o"}, {"run", "--np", "x", "x.sync"}, {"help", "-z"},
	} {
		_, _, errOut := syncgen(t, args...)
		h := hint.FindString(errOut)
		if h == "" {
			t.Errorf("syncgen %s: stderr %q points at no --help", strings.Join(args, " "), errOut)
			continue
		}
		code, out, errOut := syncgen(t, strings.Fields(h)[1:]...)
		if code != 0 || !strings.Contains(out, "USAGE:") || errOut != "" {
			t.Errorf("syncgen %s points at `%s`, which gives exit %d, stdout %q, stderr %q; want 0 and the help", strings.Join(args, " "), h, code, out, errOut)
		}
	}
}

// cliCase is one run of syncgen: its arguments, and the exit status and
// parts of stdout and stderr it must give.
type cliCase struct {
	args           []string
	code           int
	stdout, stderr string
}

// checkCLI runs each case, with stdin on standard input when it is not
// empty.
func checkCLI(t *testing.T, stdin string, cases []cliCase) {
	t.Helper()
	for _, c := range cases {
		var code int
		var out, errOut string
		if stdin != "" {
			code, out, errOut = syncgenStdin(t, stdin, c.args...)
		} else {
			code, out, errOut = syncgen(t, c.args...)
		}
		if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
			t.Errorf("syncgen %s: exit %d, stdout %q, stderr %q; want %d, %q, %q", strings.Join(c.args, " "), code, out, errOut, c.code, c.stdout, c.stderr)
		}
	}
}

func TestFmtFlagsCombine(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "m.sync", "tensor a f32[ 4 ]\ntensor b f32[4]\n")
	code, out, errOut := syncgen(t, "fmt", "-l", "-d", "-w", p)
	if code != 0 {
		t.Fatalf("fmt -l -d -w: exit %d: %s", code, errOut)
	}
	// -l lists, -d shows removed lines before added ones, -w writes.
	want := p + "\n--- " + p + "\n+++ " + p + " (formatted)\n@@ -1,2 +1,2 @@\n-tensor a f32[ 4 ]\n+tensor a f32[4]\n tensor b f32[4]\n"
	if out != want {
		t.Errorf("fmt -l -d -w printed\n%s\nwant\n%s", out, want)
	}
	if got, _ := os.ReadFile(p); string(got) != "tensor a f32[4]\ntensor b f32[4]\n" {
		t.Errorf("fmt -l -d -w did not write the file: %q", got)
	}
}

func TestGenOntoProgram(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "hello.sync", helloPlan)
	prog := writeFile(t, dir, "hello_sync", "a program built by syncgen build")
	code, _, errOut := syncgen(t, "gen", "--module", p, "-o", prog)
	if code != 1 || !strings.Contains(errOut, "is not a directory") || !strings.Contains(errOut, "-o DIR") {
		t.Errorf("gen into a file: exit %d, stderr %q; want 1 and a clear message", code, errOut)
	}
}

// TestBuildOntoGenDirectory: `syncgen gen` writes the source into
// ./NAME_sync/, where `syncgen build` puts the program by default; build
// then says so instead of failing to rename its temporary file.
func TestBuildOntoGenDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	p := writeFile(t, dir, "hello.sync", helloPlan)
	t.Chdir(dir)
	if code, _, errOut := syncgen(t, "gen", p); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errOut)
	}
	code, _, errOut := syncgen(t, "build", p)
	if code != 1 || !strings.Contains(errOut, "is a directory") || !strings.Contains(errOut, "-o PATH") {
		t.Errorf("build onto gen's directory: exit %d, stderr %q; want 1 and a clear message", code, errOut)
	}
}

// TestBuildOntoPlan: build and run refuse, as a usage error, to write the
// program over the plan's own file or over a file it imports, directly or
// through a file that only imports another, however -o spells the path:
// through .., a symbolic link, a hard link, or a directory the program
// goes into. The plan's files are left as they were. They used to be
// silently replaced by the program.
func TestBuildOntoPlan(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	lib := filepath.Join(dir, "lib")
	if err := os.Mkdir(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	plan := "import \"./lib/common.sync\"\n" + helloPlan
	p := writeFile(t, dir, "h.sync", plan)
	// common.sync declares nothing: nothing in the program comes from it.
	common := writeFile(t, lib, "common.sync", "// not ./notes.sync, which holds notes:\n// import \"./notes.sync\"\nimport \"./leaf.sync\"\n")
	leaf := writeFile(t, lib, "leaf.sync", "tensor extra f32[4]\n")
	// lib/other_sync, a plan file without .sync, is where `build -o lib/
	// other.sync` would put the program.
	other := writeFile(t, dir, "other.sync", "import \"./lib/other_sync\"\n"+helloPlan)
	otherSync := writeFile(t, lib, "other_sync", "tensor other f32[4]\n")
	files := []string{p, common, leaf, other, otherSync}
	before := map[string]string{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[f] = string(text)
	}
	link := filepath.Join(dir, "link.sync")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.sync")
	if err := os.Link(p, hard); err != nil {
		t.Fatal(err)
	}
	launcher := writeFile(t, dir, "fake-mpirun", "#!/bin/sh\nexit 0\n")
	if err := os.Chmod(launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	own := func(file string) string {
		return " is the plan's own file (" + file + "): the program would overwrite it; give -o another path"
	}
	checkCLI(t, "", []cliCase{
		{[]string{"build", p, "-o", p}, 2, "", "syncgen: build: -o " + p + " is the plan's own file: the program would overwrite it; give -o another path\n"},
		{[]string{"build", p, "-o", filepath.Join(lib, "..", "h.sync")}, 2, "", "is the plan's own file: "},
		{[]string{"build", p, "-o", link}, 2, "", "build: -o " + link + own(p)},
		{[]string{"build", p, "-o", hard}, 2, "", "build: -o " + hard + own(p)},
		{[]string{"build", link, "-o", p}, 2, "", "build: -o " + p + own(link)},
		{[]string{"build", p, "-o", common}, 2, "", "build: -o " + common + " is a file the plan imports: the program would overwrite it"},
		{[]string{"build", p, "-o", leaf}, 2, "", "build: -o " + leaf + " is a file the plan imports: "},
		{[]string{"build", other, "-o", lib + string(filepath.Separator)}, 2, "", "build: -o " + lib + string(filepath.Separator) + " (" + otherSync + ") is a file the plan imports: "},
		{[]string{"run", p, "--mpirun", launcher, "-o", common}, 2, "", "run: -o " + common + " is a file the plan imports: "},
	})
	// A plan on standard input imports from the current directory.
	t.Chdir(dir)
	checkCLI(t, plan, []cliCase{
		{[]string{"build", "-o", filepath.Join("lib", "common.sync"), "-"}, 2, "", "build: -o " + filepath.Join("lib", "common.sync") + " is a file the plan imports: "},
	})
	for _, f := range files {
		if got, err := os.ReadFile(f); err != nil || string(got) != before[f] {
			t.Errorf("%s changed (%v): %q, was %q", f, err, got, before[f])
		}
	}
	// A .sync file that the plan does not import, only names in a
	// comment, is another plan: refused too. Another file is overwritten
	// as asked: this build gets past the check, to where it needs Go.
	notes := writeFile(t, lib, "notes.sync", "notes\n")
	notesTxt := writeFile(t, lib, "notes.txt", "notes\n")
	checkCLI(t, "", []cliCase{
		{[]string{"build", p, "-o", notes}, 2, "", "build: -o " + notes + " is a .sync file, another plan: the program would overwrite it; give -o another path"},
		{[]string{"run", p, "--mpirun", launcher, "-o", notes}, 2, "", "run: -o " + notes + " is a .sync file, another plan: "},
	})
	if got, err := os.ReadFile(notes); err != nil || string(got) != "notes\n" {
		t.Errorf("%s changed (%v)", notes, err)
	}
	t.Setenv("PATH", t.TempDir())
	checkCLI(t, "", []cliCase{{[]string{"build", p, "-o", notesTxt}, 1, "", "Go toolchain"}})
}

// TestFlagWithoutValue: a flag that takes a value and has none after it,
// or has "--" after it, is a usage error. It used to take the next
// argument of the permuted command line: `build b.sync a.sync -o` built
// a.sync into the plan b.sync, `build a.sync -o --` wrote a program named
// "--", and `run a.sync -o -- --steps 2` took --steps for run's flag.
func TestFlagWithoutValue(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.sync", helloPlan)
	b := writeFile(t, dir, "b.sync", helloPlan)
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	t.Chdir(dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", b, a, "-o"}, "syncgen: build: flag needs an argument: -o; see 'syncgen build --help'\n"},
		{[]string{"build", a, "-o"}, "syncgen: build: flag needs an argument: -o; see 'syncgen build --help'\n"},
		{[]string{"build", a, "-o", "--"}, "syncgen: build: flag needs an argument: -o; see 'syncgen build --help'\n"},
		{[]string{"run", a, "-o", "--", "--steps", "2"}, "syncgen: run: flag needs an argument: -o; see 'syncgen run --help'\n"},
		// Named as written: the flag package's message said -np, -json.
		{[]string{"run", a, "--np"}, "syncgen: run: flag needs an argument: --np; see 'syncgen run --help'\n"},
		{[]string{"run", a, "-np"}, "syncgen: run: flag needs an argument: -np; see 'syncgen run --help'\n"},
		{[]string{"predict", "--profile", "ib-hdr", a, "--json"}, "syncgen: predict: flag needs an argument: --json; see 'syncgen predict --help'\n"},
		{[]string{"gen", a, "-o", "--"}, "syncgen: gen: flag needs an argument: -o; see 'syncgen gen --help'\n"},
		{[]string{"check", a, "--format"}, "syncgen: check: flag needs an argument: --format; see 'syncgen check --help'\n"},
		// An empty value is no value: `build -o ''` built ./a_sync.
		{[]string{"build", a, "-o", ""}, "syncgen: build: -o '': an empty value; give -o a value, or leave it out; see 'syncgen build --help'\n"},
		{[]string{"build", a, "-o="}, "syncgen: build: -o=: an empty value; give -o a value, or leave it out; see 'syncgen build --help'\n"},
		{[]string{"run", "--o=", a}, "syncgen: run: --o=: an empty value; give --o a value, or leave it out; see 'syncgen run --help'\n"},
		{[]string{"predict", "--profile", "", a}, "syncgen: predict: --profile '': an empty value; give --profile a value, or leave it out; see 'syncgen predict --help'\n"},
		{[]string{"calibrate", "--np", "2", "-o", ""}, "syncgen: calibrate: -o '': an empty value; give -o a value"},
	} {
		code, out, errOut := syncgen(t, tc.args...)
		if code != 2 || !strings.HasPrefix(errOut, tc.want) || out != "" {
			t.Errorf("syncgen %q: exit %d, stdout %q, stderr %q; want 2, no output and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if got, err := os.ReadFile(b); err != nil || string(got) != helloPlan {
		t.Errorf("b.sync changed (%v)", err)
	}
	for _, name := range []string{"--", "a_sync"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("a program named %s was written", name)
		}
	}
	// A value that starts with "-" is still a value.
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	got := permuteArgs(app, []string{"syncgen", "run", "m.sync", "--restarts", "-1", "-o", "-"})
	want := []string{"syncgen", "run", "--restarts", "-1", "-o", "-", "m.sync"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("permuteArgs = %q, want %q", got, want)
	}
}

func TestBuildIntoDirectory(t *testing.T) {
	needToolchain(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	p := writeFile(t, dir, "hello.sync", helloPlan)
	outDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := syncgen(t, "build", "-o", outDir, p)
	if code != 0 {
		t.Fatalf("build -o DIR: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Stat(filepath.Join(outDir, "hello_sync")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("build -o DIR did not write DIR/hello_sync: %v", err)
	}
}

// gen --module says everything it wrote: go.mod, the program and the
// runtime's source.
func TestGenModule(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "hello.sync", helloPlan)
	out := filepath.Join(dir, "mod")
	code, stdout, errOut := syncgen(t, "gen", "--module", p, "-o", out)
	if code != 0 {
		t.Fatalf("gen --module: exit %d: %s", code, errOut)
	}
	rt := filepath.Join(out, build.RuntimeDir)
	n := countFiles(rt)
	if n == 0 {
		t.Fatalf("gen --module wrote no runtime under %s", rt)
	}
	for _, f := range []string{"go.mod", "main.go"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("gen --module did not write %s: %v", f, err)
		}
	}
	// Named after the folder, so that `go build` there makes ./mod, not
	// ./program.
	if mod, err := os.ReadFile(filepath.Join(out, "go.mod")); err != nil || !strings.Contains(string(mod), "\nmodule syncgen.generated/mod\n") {
		t.Errorf("go.mod does not name the module after its folder (%v):\n%s", err, mod)
	}
	want := "wrote " + filepath.Join(out, "go.mod") + " " + filepath.Join(out, "main.go") +
		" and the runtime's source, " + strconv.Itoa(n) + " files in " + rt + "\n"
	if stdout != want {
		t.Errorf("gen --module printed %q, want %q", stdout, want)
	}
}

// gen never overwrites a file that syncgen did not write: the user's
// main.go and go.mod were silently replaced. It lists them and says what
// to do; what an earlier gen wrote it replaces.
func TestGenKeepsUsersFiles(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "hello.sync", helloPlan)
	proj := filepath.Join(dir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	mainGo := writeFile(t, proj, "main.go", "package main // MINE\n")
	goMod := writeFile(t, proj, "go.mod", "module mine\n")
	checkCLI(t, "", []cliCase{
		{[]string{"gen", "-o", proj, "--module", p}, 1, "", "syncgen: gen: " + proj + " holds files that syncgen did not write, and gen would overwrite them: " +
			goMod + ", " + mainGo + "; pass -o an empty or new directory, or move them away\n"},
		{[]string{"gen", "-o", proj, p}, 1, "", "gen would overwrite it: " + mainGo + ";"},
	})
	for f, want := range map[string]string{mainGo: "package main // MINE\n", goMod: "module mine\n"} {
		if got, err := os.ReadFile(f); err != nil || string(got) != want {
			t.Errorf("%s changed (%v): %q", f, err, got)
		}
	}
	// Without --module, gen writes main.go alone: the user's go.mod stays.
	os.Remove(mainGo)
	checkCLI(t, "", []cliCase{{[]string{"gen", "-o", proj, p}, 0, "wrote " + mainGo, ""}})
	if got, _ := os.ReadFile(goMod); string(got) != "module mine\n" {
		t.Errorf("go.mod changed: %q", got)
	}
	// Its own files, gen writes again.
	os.Remove(goMod)
	checkCLI(t, "", []cliCase{
		{[]string{"gen", "-o", proj, "--module", p}, 0, "wrote " + goMod, ""},
		{[]string{"gen", "-o", proj, "--module", p}, 0, "wrote " + goMod, ""},
	})
}

// fmt -d on a file that only lacks its final newline shows a hunk with
// diff's "\ No newline at end of file", not a bare header.
func TestFmtDiffMissingFinalNewline(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "n.sync", "tensor a f32[4]")
	code, out, errOut := syncgen(t, "fmt", "-d", p)
	if code != 0 {
		t.Fatalf("fmt -d: exit %d: %s", code, errOut)
	}
	want := "--- " + p + "\n+++ " + p + " (formatted)\n@@ -1,1 +1,1 @@\n-tensor a f32[4]\n\\ No newline at end of file\n+tensor a f32[4]\n"
	if out != want {
		t.Errorf("fmt -d printed\n%s\nwant\n%s", out, want)
	}
}

// countFiles counts the regular files under dir.
func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestFmtDiffLargeFile checks fmt -d on a file too large for the
// quadratic diff (every line of 3,000 changes): it prints one hunk that
// turns the file into its formatted form, without a table of 9M cells.
func TestFmtDiffLargeFile(t *testing.T) {
	dir := t.TempDir()
	var src, formatted strings.Builder
	src.WriteString("// head\n")
	formatted.WriteString("// head\n")
	for i := range 3000 {
		fmt.Fprintf(&src, "tensor  t%d f32[1]\n", i)
		fmt.Fprintf(&formatted, "tensor t%d f32[1]\n", i)
	}
	p := writeFile(t, dir, "big.sync", src.String())
	code, out, errOut := syncgen(t, "fmt", "-d", p)
	if code != 0 {
		t.Fatalf("fmt -d: exit %d: %s", code, errOut)
	}
	lines := strings.SplitAfter(out, "\n")
	if len(lines) < 3 || lines[2] != "@@ -1,3001 +1,3001 @@\n" {
		t.Fatalf("fmt -d of a large file: hunk header %q, want @@ -1,3001 +1,3001 @@", lines[min(2, len(lines)-1)])
	}
	var before, after strings.Builder
	for _, l := range lines[3:] {
		switch {
		case strings.HasPrefix(l, " "):
			before.WriteString(l[1:])
			after.WriteString(l[1:])
		case strings.HasPrefix(l, "-"):
			before.WriteString(l[1:])
		case strings.HasPrefix(l, "+"):
			after.WriteString(l[1:])
		}
	}
	if before.String() != src.String() || after.String() != formatted.String() {
		t.Errorf("the diff does not turn the file into its formatted form")
	}
}

// check - reads the plan from standard input, for editors with unsaved
// buffers; diagnostics name it <stdin>.
func TestCheckStdin(t *testing.T) {
	for _, c := range []struct {
		src, stdout, stderr string
		code                int
	}{
		{helloPlan, "<stdin>: ok:", "", 0},
		{"tensor a f32[4]\nbucket g { b }\n", "", "<stdin>:2:12: error: pattern `b` matches no tensor", 1},
	} {
		code, out, errOut := syncgenStdin(t, c.src, "check", "-")
		if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
			t.Errorf("check - of %q: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.src, code, out, errOut, c.code, c.stdout, c.stderr)
		}
	}
}

// fmt, gen and build read the plan from standard input too when FILE is
// -; gen and build then need -o, having no file name to name the output
// after, and fmt -w has nowhere to write.
func TestStdinCommands(t *testing.T) {
	dir := t.TempDir()
	messy := "tensor w f32[64,64]\ntensor b f32[64]\nbucket grads { * }\nstep {\nallreduce grads\n}\n"
	want := "tensor w f32[64, 64]\ntensor b f32[64]\nbucket grads { * }\nstep {\n    allreduce grads\n}\n"
	checkCLI(t, messy, []cliCase{
		{[]string{"fmt", "-"}, 0, want, ""},
		{[]string{"fmt", "-l", "-"}, 0, "<stdin>\n", ""},
		{[]string{"fmt", "-d", "-"}, 0, "+    allreduce grads", ""},
		{[]string{"fmt", "-w", "-"}, 2, "", "-w cannot write back standard input"},
		{[]string{"gen", "-"}, 2, "", "pass -o DIR"},
		{[]string{"gen", "-o", filepath.Join(dir, "gen"), "-"}, 0, "wrote " + filepath.Join(dir, "gen", "main.go"), ""},
		{[]string{"build", "-"}, 2, "", "pass -o PATH"},
		{[]string{"build", "-o", dir + string(filepath.Separator), "-"}, 2, "", "is a directory"},
	})
	// A plan from standard input is named after gen's directory, not
	// "<stdin>".
	if src, err := os.ReadFile(filepath.Join(dir, "gen", "main.go")); err != nil || !regexp.MustCompile(`\bName:\s+"gen",`).Match(src) {
		t.Errorf("gen -o DIR/gen -: the program is not named gen (%v):\n%s", err, src)
	}
	if code, _, errOut := syncgenStdin(t, "tensor a f32[\n", "fmt", "-"); code != 1 || !strings.Contains(errOut, "<stdin>:1:") {
		t.Errorf("fmt - of a broken plan: exit %d, stderr %q; want 1 and a diagnostic naming <stdin>", code, errOut)
	}
	needToolchain(t)
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	bin := filepath.Join(dir, "plan")
	code, out, errOut := syncgenStdin(t, helloPlan, "build", "-o", bin, "-")
	if code != 0 || !strings.Contains(out, "from <stdin>") {
		t.Fatalf("build -o %s -: exit %d, stdout %q, stderr %q", bin, code, out, errOut)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("build -o %s -: no executable program there (%v)", bin, err)
	}
}

// syncgenStdin runs syncgen with src on standard input.
func syncgenStdin(t *testing.T, src string, args ...string) (int, string, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.WriteString(src)
		w.Close()
	}()
	defer r.Close()
	return syncgenFromFile(t, r, args...)
}

// syncgenFromFile runs syncgen with f as its standard input.
func syncgenFromFile(t *testing.T, f *os.File, args ...string) (int, string, string) {
	t.Helper()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	return syncgen(t, args...)
}

// TestRunLauncherNotFound: a launcher named with --mpirun that does not
// exist is the user's path to fix, not a missing Open MPI to install;
// without --mpirun, the hint says how to install it or name one.
func TestRunLauncherNotFound(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "hello.sync", helloPlan)
	missing := filepath.Join(dir, "no-mpirun")
	code, _, errOut := syncgen(t, "run", "--mpirun", missing, p)
	want := "syncgen: run: --mpirun " + missing + ": no such file or directory; check the path, or leave --mpirun out to use mpirun from PATH\n"
	if code != 1 || errOut != want {
		t.Errorf("run --mpirun %s: exit %d, stderr %q; want 1 and %q", missing, code, errOut, want)
	}
	t.Setenv("PATH", dir)
	code, _, errOut = syncgen(t, "run", p)
	if code != 1 || !strings.Contains(errOut, "mpirun not found: install Open MPI") || !strings.Contains(errOut, "or pass --mpirun PATH") {
		t.Errorf("run without mpirun on PATH: exit %d, stderr %q; want 1 and how to install Open MPI", code, errOut)
	}
}

// TestFmtErrorsPrefixed: fmt's errors about a file start with "syncgen:",
// as every other command's do.
func TestFmtErrorsPrefixed(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.sync")
	code, _, errOut := syncgen(t, "fmt", missing)
	if want := "syncgen: fmt: " + missing + ": no such file or directory\n"; code != 1 || errOut != want {
		t.Errorf("fmt %s: exit %d, stderr %q; want 1 and %q", missing, code, errOut, want)
	}
	code, _, errOut = syncgen(t, "fmt", "-w", "-")
	if want := "syncgen: fmt: -w cannot write back standard input"; code != 2 || !strings.HasPrefix(errOut, want) {
		t.Errorf("fmt -w -: exit %d, stderr %q; want 2 and %q...", code, errOut, want)
	}
}

// TestFmtWriteStdin: -w with - is a usage error, exit status 2 like the
// others (README.md, "The CLI"): standard input has nowhere to be written
// back. It is refused before any file is rewritten.
func TestFmtWriteStdin(t *testing.T) {
	messy := "tensor   a f32[4]\n"
	p := writeFile(t, t.TempDir(), "messy.sync", messy)
	checkCLI(t, messy, []cliCase{
		{[]string{"fmt", "-w", "-"}, 2, "", "syncgen: fmt: -w cannot write back standard input; give the file's path instead of -"},
		{[]string{"fmt", "-", "-w"}, 2, "", "-w cannot write back standard input"},
		{[]string{"fmt", "-w", p, "-"}, 2, "", "-w cannot write back standard input"},
	})
	if got, _ := os.ReadFile(p); string(got) != messy {
		t.Errorf("fmt -w %s - rewrote %s before refusing -: %q", p, p, got)
	}
}

// build and run never replace what is not a regular file (a device such as
// /dev/null, a named pipe, a directory where the program would go), never
// write a program named "-", and never write over a plan file given on
// standard input.
func TestBuildOntoSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	p := writeFile(t, dir, "h.sync", helloPlan)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "out", "h_sync"), 0o755); err != nil {
		t.Fatal(err)
	}
	checkCLI(t, "", []cliCase{
		{[]string{"build", p, "-o", os.DevNull}, 2, "", "build: -o " + os.DevNull + " is a device, not a regular file: the program would replace it; give -o the path of a file"},
		{[]string{"build", p, "-o", fifo}, 2, "", "build: -o " + fifo + " is a named pipe, not a regular file"},
		{[]string{"build", p, "-o", filepath.Join(dir, "out") + "/"}, 2, "", "is a directory, not a regular file"},
		{[]string{"build", p, "-o", "-"}, 2, "", `build: -o - would name the program "-"`},
	})
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("%s is no longer a device: %v %v", os.DevNull, fi.Mode(), err)
	}
	if fi, err := os.Stat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the named pipe was replaced: %v %v", fi.Mode(), err)
	}
	// `syncgen build - -o h.sync < h.sync`: standard input is the file.
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code, _, errOut := syncgenFromFile(t, f, "build", "-", "-o", p)
	if code != 2 || !strings.Contains(errOut, "is the plan's own file (on standard input)") {
		t.Errorf("build - -o h.sync < h.sync: exit %d, stderr %q", code, errOut)
	}
	if got, _ := os.ReadFile(p); string(got) != helloPlan {
		t.Errorf("h.sync changed: %q", got)
	}
}

// Small things of the CLI: run's errors about the plan say "run", not
// "build"; --restarts is checked before the plan is built (here, without
// Go or mpirun on PATH); standard input is read once; a plan on standard
// input generated into `.` is named after that directory, not ".".
func TestCLIDetails(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "hello.sync", helloPlan)
	checkCLI(t, helloPlan, []cliCase{
		{[]string{"run", "-"}, 2, "", "syncgen: run: a plan on standard input has no file name to name the program after; pass -o PATH\n"},
		{[]string{"check", "-", "-"}, 2, "", "syncgen: check: - (standard input) is given twice: it holds one plan; give it once\n"},
		{[]string{"check", "-", p, "-"}, 2, "", "is given twice"},
		{[]string{"check", "-", p}, 0, "<stdin>: ok:", ""},
	})
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	checkCLI(t, "", []cliCase{{[]string{"run", "--restarts", "-1", p}, 2, "", "syncgen: run: --restarts -1: want 0 or more\n"}})
	proj := filepath.Join(dir, "myplan")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(proj)
	checkCLI(t, helloPlan, []cliCase{{[]string{"gen", "-o", ".", "-"}, 0, "wrote main.go", ""}})
	if src, err := os.ReadFile(filepath.Join(proj, "main.go")); err != nil || !regexp.MustCompile(`\bName:\s+"myplan",`).Match(src) {
		t.Errorf("gen -o . -: the program is not named myplan (%v)", err)
	}
	for out, want := range map[string]string{
		"bin/resnet": "resnet", "bin/resnet_sync": "resnet", "bin/resnet/": "resnet", ".": "myplan", "./": "myplan",
		"sub/..": "myplan", "..": filepath.Base(dir), "/": "program", "_sync": "_sync",
	} {
		if got := nameFromOutput(out); got != want {
			t.Errorf("nameFromOutput(%q) = %q, want %q", out, got, want)
		}
	}
}

package runtime_test

// Tests that build a small program against the runtime
// (internal/testprog) and run it under mpirun with 1 to 4 ranks. They need
// Open MPI's mpirun; `make test` installs it (scripts/setup.sh).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var testprog string // the built program, or "" when mpirun is missing

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if _, err := exec.LookPath("mpirun"); err == nil {
		dir, err := os.MkdirTemp("", "syncgen-runtime-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		testprog = filepath.Join(dir, "testprog")
		// The test hooks (SYNCGEN_TEST_*) exist only with this tag.
		cmd := exec.Command("go", "build", "-tags", "syncgen_testhooks", "-o", testprog, "./internal/testprog")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building internal/testprog: %v\n", err)
			return 1
		}
	}
	return m.Run()
}

// needMPI skips the test when mpirun is not installed.
func needMPI(t *testing.T) {
	t.Helper()
	if testprog == "" {
		t.Skip("mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev, or run `make setup`)")
	}
}

// result is what a run printed and how it ended.
type result struct {
	out  string
	code int
	took time.Duration
}

// mpirunArgv is mpirun with the options every test run takes: as many
// ranks as asked for on CI's few cores, unbound, and root allowed.
func mpirunArgv() []string {
	argv := []string{"mpirun", "--oversubscribe", "--bind-to", "none"}
	if os.Geteuid() == 0 {
		argv = append(argv, "--allow-run-as-root")
	}
	return argv
}

// mpirun runs testprog with np ranks (np 0: without mpirun) and the given
// arguments and extra environment, killing it after limit.
func mpirun(t *testing.T, np int, env []string, limit time.Duration, args ...string) result {
	t.Helper()
	needMPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var argv []string
	if np > 0 {
		argv = append(mpirunArgv(), "-np", fmt.Sprint(np))
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			argv = append(argv, "-x", k)
		}
	}
	argv = append(argv, testprog)
	argv = append(argv, args...)
	return run(t, ctx, env, argv)
}

// mpmd runs mpirun's A : B form, killing it after limit: apps is what
// follows mpirun's options, "-np N [-x VAR=VALUE] testprog ARGS" for each
// app, the apps separated by ":".
func mpmd(t *testing.T, limit time.Duration, apps ...string) result {
	t.Helper()
	needMPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return run(t, ctx, nil, append(mpirunArgv(), apps...))
}

func run(t *testing.T, ctx context.Context, env []string, argv []string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	// What a run writes where it runs (flight records, checkpoints by
	// default) goes to a directory of the test's, not the source tree.
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	r := result{out: out.String(), took: time.Since(t0)}
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after its time limit; output:\n%s", strings.Join(argv, " "), r.out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return r
}

// ok runs a plan that must pass its checks.
func ok(t *testing.T, np int, args ...string) result {
	t.Helper()
	r := mpirun(t, np, nil, 90*time.Second, args...)
	if r.code != 0 {
		t.Fatalf("np %d %v: exit status %d; output:\n%s", np, args, r.code, r.out)
	}
	if !strings.Contains(r.out, "# 0 wrong") {
		t.Fatalf("np %d %v: no \"0 wrong\" in the output:\n%s", np, args, r.out)
	}
	if strings.Contains(r.out, "unchecked") {
		t.Fatalf("np %d %v: elements left unchecked:\n%s", np, args, r.out)
	}
	return r
}

func mustContain(t *testing.T, r result, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.out, s) {
			t.Fatalf("output lacks %q:\n%s", s, r.out)
		}
	}
}

// A program built as users build theirs, without the tag the tests set,
// has none of the test hooks: a hook that would make it panic, corrupt an
// element or hang changes nothing.
func TestHooksOnlyWithTheTag(t *testing.T) {
	needMPI(t)
	prog := filepath.Join(t.TempDir(), "userprog")
	cmd := exec.Command("go", "build", "-o", prog, "./internal/testprog")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building internal/testprog without the tag: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := run(t, ctx, []string{"SYNCGEN_TEST_PANIC=0:0", "SYNCGEN_TEST_CORRUPT=0:0:0:0", "SYNCGEN_TEST_HANG=0:1"},
		[]string{prog, "basic", "--steps", "2", "--timeout", "20s"})
	if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || strings.Contains(r.out, "SYNCGEN_TEST") {
		t.Fatalf("exit %d, want 0 and 0 wrong with no hook acting:\n%s", r.code, r.out)
	}
}

func TestSingleRankWithoutMPIRun(t *testing.T) {
	r := ok(t, 0, "basic")
	mustContain(t, r, "ranks 1 on 1 host", "grads[0]", "grads[1]", "allreduce")
}

// Every collective with every operator on every dtype, including padded
// allgather and reducescatter buckets and roots other than 0.
func TestEveryCollectiveOpAndDType(t *testing.T) {
	for _, np := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			ok(t, np, "matrix", "--steps", "2", "--warmup", "1", "--quiet")
		})
	}
}

// Every collective out of place (`into NAME`), with padded sources, a
// cast wire, a group, chains through outputs and an output rewritten by
// another collective: every output and every source (unchanged) checked,
// none left unchecked; the rows name source and output, and count bytes
// as nccl-tests' out-of-place runs (an allgather its output, a
// reducescatter its padded input).
func TestIntoEveryCollective(t *testing.T) {
	for _, np := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			r := ok(t, np, "into", "--steps", "2", "--warmup", "1")
			padded := (103 + np - 1) / np * np * 4 // grads: 103 f32 elements
			mustContain(t, r, "grads→sum", "shard→full", "sum→copied",
				fmt.Sprintf("grads→shard                    2 %12d", padded),
				fmt.Sprintf("half→hall                      1 %12d", np*37*4))
		})
	}
}

// The out-of-place collectives in the CPU backend's other modes: pieces
// far smaller than the buffers, and nonblocking calls.
func TestIntoInPiecesAndNonblocking(t *testing.T) {
	for _, env := range []string{"SYNCGEN_CPU_CHUNK=24B", "SYNCGEN_CPU_MODE=nonblocking"} {
		t.Run(env, func(t *testing.T) {
			r := mpirun(t, 3, []string{env}, 60*time.Second, "into", "--steps", "2", "--warmup", "1")
			if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || strings.Contains(r.out, "unchecked") {
				t.Fatalf("exit %d; output:\n%s", r.code, r.out)
			}
		})
	}
}

// A wrong element of an output buffer is counted, on the rank and output
// that hold it: one the chain reaches through another output, one only
// the root of a reduce defines; and an element of a reduce's output on
// another rank, which the reduce leaves undefined, is not.
func TestIntoWrongElementDetected(t *testing.T) {
	for _, tc := range []struct{ corrupt, want string }{
		{"1:1:5:40", `bucket "full": 1 wrong; first: output "full" element 40`},
		{"2:1:9:10", `bucket "copied": 1 wrong; first: output "copied" element 10`},
		{"0:1:8:3", `bucket "nred": 1 wrong; first: output "nred" element 3`},
		{"1:1:8:3", ""},
	} {
		t.Run(tc.corrupt, func(t *testing.T) {
			r := mpirun(t, 3, []string{"SYNCGEN_TEST_CORRUPT=" + tc.corrupt}, 60*time.Second, "into", "--steps", "2", "--warmup", "0", "--quiet")
			if tc.want == "" {
				if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || !strings.Contains(r.out, "changed element 3 of output") {
					t.Fatalf("exit %d, want 0 wrong for an undefined element:\n%s", r.code, r.out)
				}
				return
			}
			if r.code == 0 {
				t.Fatalf("a wrong element passed:\n%s", r.out)
			}
			mustContain(t, r, "# 1 wrong", tc.want)
		})
	}
}

// An average over world sizes that are not powers of two (the division
// is not an exact scaling there), in every float dtype, in one piece and
// in several (20 MiB: pieces of 4 MiB), every element checked.
func TestAvgOddWorldSizes(t *testing.T) {
	for _, np := range []int{3, 5} {
		for _, arg := range []string{"allreduce:1000B:avg:f16", "allreduce:20MiB:avg:f32", "allreduce:64KiB:avg:bf16", "allreduce:4KiB:avg:f64"} {
			t.Run(fmt.Sprintf("%s/np%d", arg, np), func(t *testing.T) {
				ok(t, np, arg, "--steps", "2", "--warmup", "0", "--check", "1", "--quiet")
			})
		}
	}
}

func TestWireCasts(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			ok(t, np, "wire", "--steps", "2", "--quiet")
		})
	}
}

func TestGroupsChainsAndInit(t *testing.T) {
	t.Run("group", func(t *testing.T) {
		r := ok(t, 4, "group", "--steps", "3")
		mustContain(t, r, "allreduce*", "issued in a group")
	})
	t.Run("chain", func(t *testing.T) { ok(t, 3, "chain", "--steps", "3", "--quiet") })
	t.Run("init", func(t *testing.T) { ok(t, 2, "init", "--steps", "3", "--quiet") })
}

// Averages divided ahead (backend/cpu/divide.go): each piece of a chunked
// bucket is divided on the divider thread while the next one is reduced,
// the last is split between the two threads, and every element is what
// the checker expects, at a world size that is not a power of two.
func TestAvgDividedAhead(t *testing.T) {
	for _, c := range []struct{ arg, chunk string }{
		{"allreduce:3MiB:avg:bf16", "256KiB"},
		{"allreduce:4000012B:avg:f32", "256KiB"},
		{"allreduce:1MiB:avg:f16", "4MiB"}, // one piece: inline, with the divider on
	} {
		t.Run(c.arg, func(t *testing.T) {
			env := []string{"SYNCGEN_CPU_DIVIDE=ahead", "SYNCGEN_CPU_CHUNK=" + c.chunk}
			r := mpirun(t, 3, env, 90*time.Second, c.arg, "--steps", "2", "--warmup", "0", "--check", "1")
			if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || !strings.Contains(r.out, "averages divided on a thread of their own") {
				t.Fatalf("exit %d; output:\n%s", r.code, r.out)
			}
		})
	}
}

// At two ranks MPI's operator itself divides a float average of one piece
// (runtime/mpi's avg2_op), and the header says so. MPI needs the same
// operator on both ranks, so the choice must not follow SYNCGEN_CPU_DIVIDE,
// in which ranks may differ: here rank 0 divides ahead and rank 1 inline,
// on every collective, operator and dtype, in one piece (the operator) and
// in pieces of 24 bytes (MPI's sum, then each rank's own division), and on
// a bucket that MPI reduces half on each rank, where ranks passing
// different operators would get different halves: every element is what
// the checker expects.
func TestAvgOfTwoRanksInsideTheOperator(t *testing.T) {
	needMPI(t)
	for _, c := range []struct{ chunk, plan string }{
		{"1MiB", "matrix"},
		{"24B", "matrix"},
		{"1MiB", "allreduce:1MiB:avg:bf16"}, // large enough for a ring: each rank reduces half
	} {
		t.Run(c.chunk+"/"+c.plan, func(t *testing.T) {
			chunk := "SYNCGEN_CPU_CHUNK=" + c.chunk
			r := mpmd(t, 90*time.Second,
				"-np", "1", "-x", chunk, "-x", "SYNCGEN_CPU_DIVIDE=ahead", testprog, c.plan, "--steps", "2", "--warmup", "1", ":",
				"-np", "1", "-x", chunk, "-x", "SYNCGEN_CPU_DIVIDE=inline", testprog, c.plan, "--steps", "2", "--warmup", "1")
			if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || !strings.Contains(r.out, "float averages of one piece divided inside MPI's operator") {
				t.Fatalf("exit %d; output:\n%s", r.code, r.out)
			}
		})
	}
}

// A bucket larger than the CPU backend's chunk, split into many pieces.
func TestChunkedLargeBuckets(t *testing.T) {
	r := mpirun(t, 2, []string{"SYNCGEN_CPU_CHUNK=256KiB"}, 90*time.Second, "big:1000003", "--steps", "2", "--warmup", "0")
	if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || !strings.Contains(r.out, "pieces of 256.0 KiB (SYNCGEN_CPU_CHUNK)") {
		t.Fatalf("exit %d; output:\n%s", r.code, r.out)
	}
}

// Steps that are not checked fill zeros instead of the pattern (the CPU
// backend's cheap fill); the checked steps that follow must still find
// every element right, also in plans whose buckets carry values from step
// to step (chain, init's frozen bucket).
func TestUncheckedStepsThenCheck(t *testing.T) {
	for _, plan := range []string{"matrix", "chain", "init", "wire"} {
		t.Run(plan, func(t *testing.T) {
			r := ok(t, 2, plan, "--steps", "5", "--warmup", "1", "--check", "4")
			mustContain(t, r, "every 4", "# 0 wrong")
		})
	}
}

// Every collective, operator and dtype with a chunk far smaller than the
// buckets: allreduce, broadcast and reduce in many pieces, allgather and
// reducescatter one piece of every rank's block at a time, the last piece
// shorter than the others.
func TestEveryCollectiveInPieces(t *testing.T) {
	for _, np := range []int{3, 4} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			r := mpirun(t, np, []string{"SYNCGEN_CPU_CHUNK=24B"}, 120*time.Second, "matrix", "--steps", "2", "--warmup", "0")
			if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || !strings.Contains(r.out, "pieces of 24 B (SYNCGEN_CPU_CHUNK)") {
				t.Fatalf("exit %d; output:\n%s", r.code, r.out)
			}
		})
	}
}

// traceFile is the part of a Chrome trace file that the tests read.
type traceFile struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

// readTrace reads the trace file at path.
func readTrace(t *testing.T, path string) traceFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr traceFile
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	return tr
}

// The trace shows a bucket's collective starting while backward still
// runs: communication overlaps compute.
func TestOverlapInTrace(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.json")
	ok(t, 2, "overlap", "--steps", "2", "--warmup", "1", "--trace", trace, "--quiet")
	tr := readTrace(t, trace)
	threads := map[[2]int]string{}
	grads := 0
	for _, e := range tr.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			threads[[2]int{e.Pid, e.Tid}] = fmt.Sprint(e.Args["name"])
		}
		if strings.HasPrefix(e.Name, "grad ") {
			grads++
		}
	}
	for _, want := range [][2]int{{0, 1}, {0, 2}, {1, 1}, {1, 2}} {
		if threads[want] == "" {
			t.Errorf("no thread_name for pid %d tid %d (have %v)", want[0], want[1], threads)
		}
	}
	if grads == 0 {
		t.Errorf("no gradient events in the trace")
	}
	for rank := 0; rank < 2; rank++ {
		for step := 1.0; step <= 2; step++ {
			var backEnd, firstColl float64 = -1, -1
			for _, e := range tr.TraceEvents {
				if e.Ph != "X" || e.Pid != rank || e.Args["step"] != step {
					continue
				}
				if e.Name == "backward" {
					backEnd = e.Ts + e.Dur
				}
				if strings.HasPrefix(e.Name, "allreduce ") && (firstColl < 0 || e.Ts < firstColl) {
					firstColl = e.Ts
				}
			}
			if backEnd < 0 || firstColl < 0 {
				t.Fatalf("rank %d step %v: backward or allreduce missing from the trace", rank, step)
			}
			if firstColl >= backEnd {
				t.Errorf("rank %d step %v: the first allreduce starts at %.0f us, after backward ends at %.0f us", rank, step, firstColl, backEnd)
			}
		}
	}
}

// `after STREAM` on a compute and a backward makes their stream wait for
// the collective without the host: in the trace, each starts once the
// first allreduce has ended, on every rank and step, and the second
// backward, which rewrites the bucket, leaves the first allreduce's result
// alone (every element checked).
func TestComputeAndBackwardAfterStream(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.json")
	ok(t, 2, "after", "--steps", "2", "--warmup", "1", "--check", "1", "--trace", trace, "--quiet")
	tr := readTrace(t, trace)
	for rank := 0; rank < 2; rank++ {
		for step := 1.0; step <= 2; step++ {
			start := map[string]float64{}
			var firstEnd float64 = -1
			for _, e := range tr.TraceEvents {
				if e.Ph != "X" || e.Pid != rank || e.Args["step"] != step {
					continue
				}
				src := fmt.Sprint(e.Args["src"])
				switch {
				case strings.HasPrefix(e.Name, "allreduce ") && strings.HasSuffix(src, ":11:5"):
					firstEnd = e.Ts + e.Dur
				case e.Name == "compute" || (e.Name == "backward" && strings.HasSuffix(src, ":13:5")):
					start[e.Name] = e.Ts
				}
			}
			if firstEnd < 0 || len(start) != 2 {
				t.Fatalf("rank %d step %v: the first allreduce, the compute or the second backward is missing from the trace (%v)", rank, step, start)
			}
			for name, ts := range start {
				if ts < firstEnd {
					t.Errorf("rank %d step %v: %s after comm starts at %.1f us, before the allreduce ends at %.1f us", rank, step, name, ts, firstEnd)
				}
			}
		}
	}
}

// A backward in pieces: each piece is its own backward span, the checks
// pass (the frozen tensor and the pieces' fills as the model says), and a
// bucket whose tensors two pieces on two streams make ready is reduced
// only after both: g0's allreduce starts after the longer first piece
// ends, though the piece holding most of g0 ends long before.
func TestBackwardInPieces(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.json")
	ok(t, 2, "pieces", "--steps", "2", "--warmup", "1", "--check", "1", "--trace", trace, "--quiet")
	tr := readTrace(t, trace)
	for rank := 0; rank < 2; rank++ {
		for step := 1.0; step <= 2; step++ {
			pieces := 0
			firstEnd, g0Start := -1.0, -1.0
			for _, e := range tr.TraceEvents {
				if e.Ph != "X" || e.Pid != rank || e.Args["step"] != step {
					continue
				}
				src := fmt.Sprint(e.Args["src"])
				switch {
				case e.Name == "backward":
					pieces++
					if strings.HasSuffix(src, ":10:5") {
						firstEnd = e.Ts + e.Dur
					}
				case strings.HasPrefix(e.Name, "allreduce ") && strings.HasSuffix(src, ":12:5"):
					g0Start = e.Ts
				}
			}
			if pieces != 2 || firstEnd < 0 || g0Start < 0 {
				t.Fatalf("rank %d step %v: %d backward spans (want 2), first piece end %v, g0 allreduce start %v", rank, step, pieces, firstEnd, g0Start)
			}
			if g0Start < firstEnd {
				t.Errorf("rank %d step %v: g0's allreduce starts at %.1f us, before the first piece, which makes l0.b ready, ends at %.1f us", rank, step, g0Start, firstEnd)
			}
		}
	}
}

func TestJSONReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	ok(t, 2, "basic", "--steps", "3", "--json", path, "--quiet")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Ranks    int               `json:"ranks"`
		Backend  string            `json:"backend"`
		Versions map[string]string `json:"versions"`
		Hosts    []string          `json:"hosts"`
		MaxProcs []int             `json:"gomaxprocs"`
		Buckets  []struct {
			Bucket string  `json:"bucket"`
			BusBW  float64 `json:"busbw_gbs"`
			Wrong  *int64  `json:"wrong"`
		} `json:"buckets"`
		Summary struct {
			Wrong   int64     `json:"wrong"`
			StepsMs []float64 `json:"step_ms"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if j.Ranks != 2 || j.Backend != "cpu" || len(j.Hosts) != 2 || len(j.MaxProcs) != 2 || j.Versions["MPI"] == "" {
		t.Errorf("header fields: %+v", j)
	}
	if len(j.Buckets) != 2 || j.Buckets[0].Wrong == nil || j.Buckets[0].BusBW <= 0 {
		t.Errorf("bucket rows: %+v", j.Buckets)
	}
	if j.Summary.Wrong != 0 || len(j.Summary.StepsMs) != 3 {
		t.Errorf("summary: %+v", j.Summary)
	}
}

// A simulated backward lasts at least what the plan asks, also on the first
// step after the set-up, whose fill of every buffer takes longer than the
// backward itself (big: 30 MiB of buffers, backward 10ms).
func TestBackwardLastsWhatThePlanSays(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.json")
	r := mpirun(t, 1, nil, 90*time.Second, "big", "--steps", "1", "--warmup", "0", "--check", "off", "--json", out)
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Summary struct {
			ComputeMs float64 `json:"compute_ms"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	// Sleeps end late, never early: 10 ms is a lower bound.
	if j.Summary.ComputeMs < 10 {
		t.Errorf("backward 10ms lasted %.2f ms", j.Summary.ComputeMs)
	}
}

func TestPlanMismatchNamesRanks(t *testing.T) {
	r := mpmd(t, 60*time.Second, "-np", "1", testprog, "basic", ":", "-np", "2", testprog, "other", ":", "-np", "1", testprog, "basic")
	if r.code != 2 {
		t.Fatalf("different plans ran; output:\n%s", r.out)
	}
	mustContain(t, r, "do not all run the same plan", "ranks 0, 3 run plan", "testdata/basic.sync", "ranks 1, 2 run plan", "testdata/other.sync")
}

// Ranks started with different --steps, --warmup, --check or --backend
// would hang in a collective or report the other's data as wrong: the plan
// comparison names them instead, before the first step.
func TestFlagMismatchNamesRanks(t *testing.T) {
	for _, c := range []struct {
		name       string
		a, b, want []string
	}{
		{"steps", []string{"--steps", "3"}, []string{"--steps", "4"}, []string{"rank 0 runs --steps 3 --warmup 1", "rank 1 runs --steps 4 --warmup 1"}},
		{"check", []string{"--check", "1"}, []string{"--check", "off"}, []string{"rank 0 runs --steps 3 --warmup 1 --check 1", "rank 1 runs --steps 3 --warmup 1 --check off"}},
		{"speed", []string{"--speed", "1=0.5"}, nil, []string{"rank 0 runs --steps 3 --warmup 1 --check 1 --backend auto --speed 1=0.5\n", "rank 1 runs --steps 3 --warmup 1 --check 1 --backend auto\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			apps := append(append([]string{"-np", "1", testprog, "basic"}, c.a...), ":", "-np", "1", testprog, "basic")
			r := mpmd(t, 60*time.Second, append(apps, c.b...)...)
			if r.code == 0 || r.took > 30*time.Second {
				t.Fatalf("exit %d after %v; output:\n%s", r.code, r.took, r.out)
			}
			mustContain(t, r, append([]string{"started with different flags"}, c.want...)...)
		})
	}
}

// Ranks launched with different flags (mpirun's A : B form): a bad flag on
// some ranks is printed once and names them; --trace given only to rank 0
// (only rank 0 writes it) traces every rank, where rank 0 waited for the
// others' events for good.
func TestFlagsOfSomeRanks(t *testing.T) {
	oneAndTwo := func(a, b []string) result {
		apps := append(append([]string{"-np", "1", testprog, "basic"}, a...), ":", "-np", "2", testprog, "basic")
		return mpmd(t, 60*time.Second, append(apps, b...)...)
	}
	r := oneAndTwo([]string{"--steps", "2"}, []string{"--steps", "two"})
	if r.code != 2 || strings.Count(r.out, `testprog: ranks 1, 2: error: invalid value "two" for flag --steps`) != 1 {
		t.Errorf("a bad flag on ranks 1 and 2: exit %d:\n%s", r.code, r.out)
	}
	trace := filepath.Join(t.TempDir(), "t.json")
	r = oneAndTwo([]string{"--steps", "2", "--quiet", "--trace", trace}, []string{"--steps", "2", "--quiet"})
	if r.code != 0 || r.took > 30*time.Second {
		t.Fatalf("--trace on rank 0 only: exit %d after %v:\n%s", r.code, r.took, r.out)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Pid int `json:"pid"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{}
	for _, e := range tr.TraceEvents {
		pids[e.Pid] = true
	}
	if len(pids) != 3 {
		t.Errorf("the trace has ranks %v, want 0, 1 and 2", pids)
	}
}

// --json - and --trace - write to standard output, and the report goes to
// standard error.
func TestOutputToStdout(t *testing.T) {
	needMPI(t)
	for _, flag := range []string{"--json", "--trace"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		argv := append(mpirunArgv(), "-np", "2")
		cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], testprog, "basic", "--steps", "2", flag, "-")...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("%s -: %v\n%s%s", flag, err, stdout.String(), stderr.String())
		}
		var j map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &j); err != nil {
			t.Errorf("%s -: standard output is not JSON: %v\n%s", flag, err, stdout.String())
		}
		if !strings.Contains(stderr.String(), "# syncgen: basic") || !strings.Contains(stderr.String(), "# 0 wrong") {
			t.Errorf("%s -: the report is not on standard error:\n%s", flag, stderr.String())
		}
	}
}

// A named pipe as --json: with a reader (a FIFO, or bash's `--json
// >(jq .)`) it gets the JSON; without one, rank 0's check of the file
// blocked until --timeout, and now the run stops at once with a usage
// error.
func TestOutputToNamedPipe(t *testing.T) {
	needMPI(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := mpirun(t, 2, nil, 30*time.Second, "basic", "--steps", "1", "--json", fifo, "--timeout", "20s")
	if r.code != 2 || r.took > 15*time.Second || strings.Count(r.out, "testprog: error: --json "+fifo+": cannot write the file: it is a named pipe (FIFO) that no process reads") != 1 {
		t.Errorf("a FIFO without a reader: exit %d after %v:\n%s", r.code, r.took, r.out)
	}
	// A reader that holds the pipe from the start (so the program finds
	// it whenever it starts), and one that reads it to the end.
	held, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(held)
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // opened once the program opens the pipe
		got <- b
	}()
	r = mpirun(t, 2, nil, 30*time.Second, "basic", "--steps", "2", "--json", fifo)
	if r.code != 0 {
		t.Fatalf("a FIFO with a reader: exit %d:\n%s", r.code, r.out)
	}
	var j struct{ Ranks int }
	if b := <-got; json.Unmarshal(b, &j) != nil || j.Ranks != 2 {
		t.Errorf("the reader of the FIFO got %q", b)
	}
}

// A root outside the world, with rank counts the plan's author did not
// think of: one message from rank 0 before anything runs, naming the
// statement, the bucket and the rank count to run with; exit 2 (the job
// cannot run as started), no abort.
func TestRootOutsideWorld(t *testing.T) {
	for _, np := range []int{0, 1, 3} {
		world := max(np, 1)
		r := mpirun(t, np, nil, 60*time.Second, "root:3")
		if r.code != 2 || r.took > 30*time.Second || strings.Contains(r.out, "MPI_ABORT") {
			t.Fatalf("np %d: exit %d after %v:\n%s", np, r.code, r.took, r.out)
		}
		want := fmt.Sprintf("testprog: error: the plan cannot run on %d rank%s:\ntest.sync:7:5: broadcast of bucket \"params\" from rank 3: root 3 is outside the world of %d rank",
			world, map[bool]string{true: "s"}[world > 1], world)
		if strings.Count(r.out, want) != 1 || !strings.Contains(r.out, "run with at least 4 ranks (mpirun -np 4), or change `from 3` in the plan") {
			t.Errorf("np %d: want one message %q:\n%s", np, want, r.out)
		}
		if strings.Contains(r.out, "# syncgen:") {
			t.Errorf("np %d: the run started:\n%s", np, r.out)
		}
	}
	ok(t, 2, "root:1", "--quiet")
}

// A rank that panics ends the whole job quickly, with the rank named.
func TestPanicAbortsJob(t *testing.T) {
	r := mpirun(t, 4, []string{"SYNCGEN_TEST_PANIC=2:1"}, 60*time.Second, "basic", "--steps", "5")
	if r.code == 0 {
		t.Fatalf("job succeeded:\n%s", r.out)
	}
	if r.took > 20*time.Second {
		t.Errorf("job took %v to end", r.took)
	}
	mustContain(t, r, "rank 2", "panic", "SYNCGEN_TEST_PANIC")
}

// A rank that stops makes the others time out; every rank says where it
// waits, and the job ends.
func TestTimeoutReportsWhereRanksWait(t *testing.T) {
	r := mpirun(t, 3, []string{"SYNCGEN_TEST_HANG=1:1"}, 60*time.Second, "basic", "--steps", "3", "--timeout", "1s")
	if r.code == 0 {
		t.Fatalf("job succeeded:\n%s", r.out)
	}
	// Rank 1 queued the barrier that starts every step and stopped before
	// the step's statements. Its streams run what was queued (as a GPU
	// would with its host thread stuck), so the others pass the barrier and
	// wait in the step's first collective.
	mustContain(t, r, "timeout: step 1", "rank 1 host: waiting at SYNCGEN_TEST_HANG",
		"rank 0 host: waiting at wait comm at test.sync:12:5",
		"rank 0 stream comm: in allreduce of bucket \"grads[0]\", step 1 at test.sync:11:5",
		"rank 2 stream comm: in allreduce of bucket \"grads[0]\", step 1 at test.sync:11:5",
		"rank 1 stream comm: idle")
}

// A rank that stops before one of its collectives leaves the others inside
// that collective: their reports name it, its bucket, step and position.
func TestTimeoutNamesTheCollective(t *testing.T) {
	// chain's statements: backward, allreduce on comm, broadcast x from
	// rank 0 on side... Rank 0, the root, stops before the broadcast, so
	// rank 1 cannot finish it (a root can, as MPI sends small messages
	// eagerly).
	r := mpirun(t, 2, []string{"SYNCGEN_TEST_HANG=0:1:2"}, 60*time.Second, "chain", "--steps", "3", "--timeout", "1s")
	if r.code == 0 {
		t.Fatalf("job succeeded:\n%s", r.out)
	}
	mustContain(t, r, "rank 0 host: waiting at SYNCGEN_TEST_HANG: rank 0 stopped before test.sync:12:5",
		"rank 1 stream side: in broadcast of bucket \"x\", step 1 at test.sync:12:5")
}

// A rank stuck before the first step (here: before allocating) makes the
// others time out too: every rank names the phase it is in, and the job
// ends instead of waiting in MPI for good.
func TestTimeoutDuringSetup(t *testing.T) {
	r := mpirun(t, 2, []string{"SYNCGEN_TEST_HANG=1:-1"}, 60*time.Second, "basic", "--steps", "3", "--timeout", "1s")
	if r.code == 0 {
		t.Fatalf("job succeeded:\n%s", r.out)
	}
	if r.took > 30*time.Second {
		t.Errorf("job took %v to end", r.took)
	}
	// Rank 0 waits in the creation of the streams' communicators, which
	// every rank must join.
	for _, rank := range []string{"0", "1"} {
		re := regexp.MustCompile(`rank ` + rank + ` \([^)]*\): timeout: setting up the streams and buffers has taken`)
		if !re.MatchString(r.out) {
			t.Fatalf("rank %s does not report its phase:\n%s", rank, r.out)
		}
	}
}

// A step or phase that times out fails the job even when it finishes
// during the watchdog's grace: the run must not report and exit 0 after
// printing a timeout. Every step of basic sleeps longer than 1 ms. Each
// rank says once where it was: with 1ns every set-up phase times out, and
// each used to print its own line while the host went on.
func TestTimeoutFailsEvenIfTheStepFinishes(t *testing.T) {
	for _, np := range []int{0, 2} {
		for _, timeout := range []string{"1ms", "1ns"} {
			t.Run(fmt.Sprintf("np%d/%s", np, timeout), func(t *testing.T) {
				r := mpirun(t, np, nil, 60*time.Second, "basic", "--steps", "3", "--timeout", timeout)
				if r.code != 3 {
					t.Fatalf("exit %d, want 3:\n%s", r.code, r.out)
				}
				if n := strings.Count(r.out, "timeout:"); n != max(np, 1) {
					t.Fatalf("%d timeout messages, want one per rank:\n%s", n, r.out)
				}
			})
		}
	}
}

// A corrupted element is counted, reported and fails the run.
func TestWrongElementDetected(t *testing.T) {
	for _, plan := range []string{"basic", "wire"} {
		t.Run(plan, func(t *testing.T) {
			r := mpirun(t, 2, []string{"SYNCGEN_TEST_CORRUPT=1:2:0:3"}, 60*time.Second, plan, "--steps", "3")
			if r.code == 0 {
				t.Fatalf("a wrong element passed:\n%s", r.out)
			}
			mustContain(t, r, "# 1 wrong", "rank 1: step 2:", "element 3")
		})
	}
	// Element 12 of bucket 0 (fc2.bias, 10 elements, then fc2.weight) is
	// element 2 of its second tensor: the hook changed element 12 of the
	// first tensor, which has none, so nothing was wrong.
	t.Run("second tensor", func(t *testing.T) {
		r := mpirun(t, 2, []string{"SYNCGEN_TEST_CORRUPT=1:2:0:12"}, 60*time.Second, "basic", "--steps", "2", "--quiet")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
		}
		mustContain(t, r, "# 1 wrong", `changed element 2 of "fc2.weight"`)
	})
	// The init block's results are checked once, right after it (step -1
	// of the hook): bucket 1, "frozen", is touched by no step collective
	// but the max allreduce.
	t.Run("init", func(t *testing.T) {
		r := mpirun(t, 3, []string{"SYNCGEN_TEST_CORRUPT=2:-1:1:7"}, 60*time.Second, "init", "--steps", "2", "--warmup", "0")
		if r.code == 0 {
			t.Fatalf("a wrong element after init passed:\n%s", r.out)
		}
		mustContain(t, r, "# 1 wrong, 3 checks", `rank 2: step init: bucket "frozen": 1 wrong`)
	})
}

func TestFlags(t *testing.T) {
	r := mpirun(t, 0, nil, 30*time.Second, "basic", "--help")
	if r.code != 0 {
		t.Errorf("--help: exit %d", r.code)
	}
	mustContain(t, r, "gradient synchronisation plan", "-steps", "-backend", "--bind-to none")
	r = mpirun(t, 0, nil, 30*time.Second, "basic", "--check", "often")
	if r.code != 2 {
		t.Errorf("bad --check: exit %d", r.code)
	}
	r = mpirun(t, 0, nil, 30*time.Second, "basic", "--check", "off", "--steps", "2", "--backend", "cpu")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	mustContain(t, r, "checks off", "backend cpu (--backend cpu)")
	// A backend that no rank can run: every rank knows it from the same
	// gathered answers, so one message and exit 1, not an abort.
	r = mpirun(t, 2, []string{"SYNCGEN_CUDART_LIB=/nonexistent/libcudart.so"}, 30*time.Second, "basic", "--steps", "1", "--backend", "nccl")
	if r.code != 1 || strings.Contains(r.out, "MPI_ABORT") || strings.Count(r.out, "error: --backend nccl: ranks 0, 1:") != 1 {
		t.Errorf("--backend nccl that no rank can run: exit %d:\n%s", r.code, r.out)
	}
	// An output file rank 0 cannot write is a usage error on every rank:
	// exit 2 and one message, not an abort of the job.
	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "r.json")
	for _, np := range []int{0, 2} {
		r = mpirun(t, np, nil, 30*time.Second, "basic", "--steps", "1", "--json", bad)
		if r.code != 2 || strings.Contains(r.out, "MPI_ABORT") || strings.Count(r.out, "cannot write the file") != 1 {
			t.Errorf("np %d, an unwritable --json: exit %d:\n%s", np, r.code, r.out)
		}
	}
	// A bad flag: one message, not one per rank, worded like every other
	// error ("prog: error: ..."; it was "prog: invalid value ...", while an
	// unwritable file said "prog: error: ...").
	r = mpirun(t, 3, nil, 30*time.Second, "basic", "--check", "-1")
	if r.code != 2 || strings.Count(r.out, `testprog: error: invalid value "-1" for flag --check`) != 1 {
		t.Errorf("np 3, --check -1: exit %d:\n%s", r.code, r.out)
	}
	// A repeated output flag is a usage error too: the last one won, and
	// the first file was never written.
	r = mpirun(t, 2, nil, 30*time.Second, "basic", "--steps", "1", "--json", filepath.Join(t.TempDir(), "a.json"), "--json", filepath.Join(t.TempDir(), "b.json"))
	if r.code != 2 || strings.Contains(r.out, "# syncgen:") || strings.Count(r.out, "testprog: error: --json given twice") != 1 {
		t.Errorf("np 2, --json twice: exit %d:\n%s", r.code, r.out)
	}
	r = mpirun(t, 3, nil, 30*time.Second, "basic", "--help")
	if r.code != 0 || strings.Count(r.out, "gradient synchronisation plan") != 1 {
		t.Errorf("np 3, --help: exit %d:\n%s", r.code, r.out)
	}
	// Warm-up and measured steps past what the pattern can number: the
	// count overflowed, no step ran, and the run passed.
	r = mpirun(t, 2, nil, 30*time.Second, "basic", "--warmup", "9223372036854775807", "--steps", "1")
	if r.code != 2 || strings.Count(r.out, "more than a run can number") != 1 {
		t.Errorf("np 2, --warmup 2^63-1: exit %d:\n%s", r.code, r.out)
	}
	// A trace too large to gather, from a huge --warmup: refused before
	// the steps, not after them.
	r = mpirun(t, 2, nil, 30*time.Second, "basic", "--warmup", "2000000000", "--trace", filepath.Join(t.TempDir(), "t.json"))
	if r.code != 2 || strings.Contains(r.out, "# syncgen:") || strings.Count(r.out, "error: --trace of 2000000003 steps (2000000000 warm-up, 3 measured)") != 1 {
		t.Errorf("np 2, --trace with 2e9 warm-up steps: exit %d:\n%s", r.code, r.out)
	}
	// A file that opens but takes no data (/dev/full: a full disk) fails
	// only when the JSON is written: the report is complete, every rank
	// closes normally, exit 2.
	if _, err := os.Stat("/dev/full"); err == nil {
		r = mpirun(t, 2, nil, 30*time.Second, "basic", "--steps", "1", "--json", "/dev/full")
		if r.code != 2 || strings.Contains(r.out, "MPI_ABORT") || !strings.Contains(r.out, "# 0 wrong") ||
			strings.Count(r.out, "error: --json /dev/full: writing the file: write /dev/full: no space left on device (the report above is complete)") != 1 {
			t.Errorf("np 2, --json /dev/full: exit %d:\n%s", r.code, r.out)
		}
	}
	// A --steps whose per-step results do not fit is refused before the
	// backend starts: it used to allocate them all and die out of memory.
	r = mpirun(t, 2, nil, 30*time.Second, "basic", "--steps", "2000000000")
	if r.code != 2 || strings.Contains(r.out, "MPI_ABORT") || strings.Count(r.out, "error: --steps 2000000000 is too many") != 1 ||
		!strings.Contains(r.out, "run at most") {
		t.Errorf("a huge --steps: exit %d:\n%s", r.code, r.out)
	}
}

// The progress-thread mode runs the same plans to the same results.
func TestNonblockingMode(t *testing.T) {
	env := []string{"SYNCGEN_CPU_MODE=nonblocking", "SYNCGEN_CPU_CHUNK=64KiB", "SYNCGEN_CPU_INFLIGHT=3"}
	for _, c := range []struct {
		np   int
		plan string
	}{{3, "matrix"}, {4, "group"}, {2, "big:300001"}, {2, "chain"}} {
		t.Run(fmt.Sprintf("%s-np%d", c.plan, c.np), func(t *testing.T) {
			r := mpirun(t, c.np, env, 90*time.Second, c.plan, "--steps", "2")
			if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") || strings.Contains(r.out, "unchecked") {
				t.Fatalf("exit %d:\n%s", r.code, r.out)
			}
			mustContain(t, r, "nonblocking MPI calls driven by a progress thread")
		})
	}
}

// Ranks with different tuning would split collectives differently: caught
// before anything runs.
func TestTuningMismatch(t *testing.T) {
	r := mpmd(t, 60*time.Second, "-np", "1", "-x", "SYNCGEN_CPU_CHUNK=2MiB", testprog, "basic", ":", "-np", "1", "-x", "SYNCGEN_CPU_CHUNK=1MiB", testprog, "basic")
	if r.code == 0 {
		t.Fatalf("ranks with different chunk sizes ran:\n%s", r.out)
	}
	mustContain(t, r, "differs between ranks", "rank 0: blocking, pieces of 2.0 MiB;", "rank 1: blocking, pieces of 1.0 MiB)")
}

// A bad knob on a rank other than 0 is ignored there and the rank says so
// once the ranks have compared their warnings; rank 0, which saw no bad
// value, says nothing about it.
func TestWarningOnOtherRank(t *testing.T) {
	r := mpmd(t, 60*time.Second, "-np", "1", testprog, "basic", "--steps", "1", ":",
		"-np", "1", "-x", "SYNCGEN_CPU_MODE=fast", testprog, "basic", "--steps", "1")
	if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	mustContain(t, r, `rank 1: ignoring SYNCGEN_CPU_MODE="fast": want blocking or nonblocking`)
	if n := strings.Count(r.out, "SYNCGEN_CPU_MODE"); n != 1 {
		t.Errorf("the warning is printed %d times, want once:\n%s", n, r.out)
	}
}

// The thread level asked of MPI: single by default (the runtime serialises
// every call itself), serialized on request; both run every collective of
// every dtype to the same results, and the header says which was granted.
func TestMPIThreadLevel(t *testing.T) {
	for _, c := range []struct {
		name, env, want string
	}{
		{"default", "", "MPI thread level: MPI_THREAD_SINGLE"},
		{"serialized", "SYNCGEN_MPI_THREAD=serialized", "MPI thread level: MPI_THREAD_SERIALIZED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var env []string
			if c.env != "" {
				env = []string{c.env}
			}
			r := mpirun(t, 3, env, 90*time.Second, "matrix", "--steps", "2", "--warmup", "0")
			if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") {
				t.Fatalf("exit %d:\n%s", r.code, r.out)
			}
			mustContain(t, r, c.want)
		})
	}
}

// The runtime sets Open MPI's shared-memory eager limit and fast boxes,
// and on Open MPI 4 an allreduce rule (mpisettings.go); MPI reads them
// back, and the report says so. A value the user sets wins,
// SYNCGEN_MPI_TUNING=off keeps Open MPI's defaults, and a bad value of it
// is an error.
func TestMPISettings(t *testing.T) {
	for _, c := range []struct {
		name      string
		env       []string
		want      []string // the transport parameters set, without the component's prefix
		wantRule  bool     // on Open MPI 4
		userSets  string   // a parameter the user set
		userValue string
	}{
		{"default", nil, []string{"eager_limit", "fbox_size"}, true, "", ""},
		{"user", []string{"OMPI_MCA_btl_vader_eager_limit=8192"}, []string{"fbox_size"}, true, "OMPI_MCA_btl_vader_eager_limit", "8192"},
		{"user rules", []string{"OMPI_MCA_coll_tuned_use_dynamic_rules=0"}, []string{"eager_limit", "fbox_size"}, false, "OMPI_MCA_coll_tuned_use_dynamic_rules", "0"},
		{"off", []string{"SYNCGEN_MPI_TUNING=off"}, nil, false, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.json")
			r := mpirun(t, 2, c.env, 90*time.Second, "basic", "--steps", "2", "--json", path)
			if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") {
				t.Fatalf("exit %d:\n%s", r.code, r.out)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var j struct {
				Versions map[string]string `json:"versions"`
				Env      map[string]string `json:"env"`
				Settings map[string]string `json:"mpi_settings"`
			}
			if err := json.Unmarshal(data, &j); err != nil {
				t.Fatal(err)
			}
			// btl/vader was renamed btl/sm in Open MPI 5, which gets no
			// allreduce rule.
			component := "vader"
			m := regexp.MustCompile(`Open MPI v(\d+)\.`).FindStringSubmatch(j.Versions["MPI"])
			if m == nil {
				t.Fatalf("not Open MPI: %q", j.Versions["MPI"])
			}
			major, _ := strconv.Atoi(m[1])
			if major >= 5 {
				component = "sm"
			}
			want := map[string]string{}
			for _, p := range c.want {
				want["btl_"+component+"_"+p] = "32768"
			}
			if c.wantRule && major == 4 {
				want["allreduce rule"] = "2 ranks, 4096 to 8191 bytes: recursive doubling"
			}
			if !reflect.DeepEqual(j.Settings, want) && len(j.Settings)+len(want) > 0 {
				t.Errorf("mpi_settings %v, want %v", j.Settings, want)
			}
			for k := range j.Env {
				if strings.HasPrefix(k, "OMPI_MCA_btl_") || strings.HasPrefix(k, "OMPI_MCA_coll_") {
					if k != c.userSets {
						t.Errorf("env lists %s, which the user did not set", k)
					}
				}
			}
			if c.userSets != "" && j.Env[c.userSets] != c.userValue {
				t.Errorf("env %v lacks the user's %s=%s", j.Env, c.userSets, c.userValue)
			}
			if got := strings.Contains(r.out, "MPI settings: "); got != (len(want) > 0) {
				t.Errorf("header line \"MPI settings\" shown %v, want %v:\n%s", got, len(want) > 0, r.out)
			}
		})
	}
	// A value that is neither on nor off is ignored, as every knob's is:
	// one line says so and the settings stay on.
	r := mpirun(t, 2, []string{"SYNCGEN_MPI_TUNING=maybe"}, 90*time.Second, "basic", "--steps", "1")
	if r.code != 0 {
		t.Fatalf("SYNCGEN_MPI_TUNING=maybe: exit status %d:\n%s", r.code, r.out)
	}
	mustContain(t, r, `ignoring SYNCGEN_MPI_TUNING="maybe": want on or off`)
	mustContain(t, r, "MPI settings: ")
	if n := strings.Count(r.out, `ignoring SYNCGEN_MPI_TUNING`); n != 1 {
		t.Errorf("the warning is printed %d times, want once:\n%s", n, r.out)
	}
}

// The ranks settle before the measured steps (settle.go) for as long as
// SYNCGEN_SETTLE says, and not at all when there are no measured steps; a
// value that is not a duration is reported and the default used.
func TestSettle(t *testing.T) {
	timed := func(env string, args ...string) (time.Duration, result) {
		t.Helper()
		start := time.Now()
		r := mpirun(t, 2, []string{env}, 90*time.Second, append([]string{"basic", "--warmup", "1"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d:\n%s", env, r.code, r.out)
		}
		return time.Since(start), r
	}
	if d, _ := timed("SYNCGEN_SETTLE=3s", "--steps", "2"); d < 3*time.Second {
		t.Errorf("SYNCGEN_SETTLE=3s: the run took %v, less than the settle", d)
	}
	if d, _ := timed("SYNCGEN_SETTLE=30s", "--steps", "0"); d >= 30*time.Second {
		t.Errorf("no measured steps: the run took %v, so it settled", d)
	}
	_, r := timed("SYNCGEN_SETTLE=soon", "--steps", "1")
	mustContain(t, r, `ignoring SYNCGEN_SETTLE="soon"`)
}

// The CPU backend's steps allocate nothing once warm (cpuEvent.record says
// why that matters): markers are reused, queued operations carry their
// operands instead of closures, and the engine reuses its buffers. Go's
// count of heap allocations is updated in batches, and the Go runtime
// itself allocates now and then (a goroutine's first park, say, more of
// them on a loaded machine), so the test allows 30 allocations plus one per
// 10 steps, still fewer than one a step for every plan here; before, every
// step made several, each backward's tensor at least one.
func TestStepsAllocateNothing(t *testing.T) {
	line := regexp.MustCompile(`rank (\d+): (\d+) heap allocations in (\d+) measured steps`)
	for _, c := range []struct {
		plan  string
		steps int // a few seconds' worth
	}{
		{"allreduce:4KiB", 500}, // one collective, as the benchmark runs it
		{"chain", 200},          // every collective, waits between streams
		{"group", 200},          // groups across streams
		{"wire", 60},            // casts to and from the wire dtype
		{"pieces", 100},         // backward pieces on two streams
	} {
		t.Run(c.plan, func(t *testing.T) {
			r := mpirun(t, 2, []string{"SYNCGEN_TEST_ALLOCS=1"}, 90*time.Second,
				c.plan, "--steps", fmt.Sprint(c.steps), "--warmup", "3", "--check", "off", "--quiet")
			if r.code != 0 {
				t.Fatalf("exit %d:\n%s", r.code, r.out)
			}
			found := line.FindAllStringSubmatch(r.out, -1)
			if len(found) != 2 {
				t.Fatalf("want one allocation count per rank, got %d:\n%s", len(found), r.out)
			}
			for _, m := range found {
				if n, _ := strconv.Atoi(m[2]); n > 30+c.steps/10 || m[3] != fmt.Sprint(c.steps) {
					t.Errorf("rank %s: %s allocations in %s steps, want at most %d", m[1], m[2], m[3], 30+c.steps/10)
				}
			}
		})
	}
}

// The JSON rows say which bucket the unchecked elements are in. In the
// init plan, bucket "frozen" holds a frozen tensor that no backward
// refills and that every step all-reduces again: from its 64th collective
// since the init block's fill on, its 50 elements are unchecked on every
// rank (steps 63 to 69 of 70: 7 checks, 2 ranks, 700 element-ranks).
func TestUncheckedPerBucketInJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	r := mpirun(t, 2, nil, 90*time.Second, "init", "--steps", "70", "--warmup", "0", "--check", "1", "--json", path, "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	mustContain(t, r, "# 0 wrong, 700 unchecked")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Buckets []map[string]any `json:"buckets"`
		Summary struct {
			Unchecked int64 `json:"unchecked"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if j.Summary.Unchecked != 700 {
		t.Errorf("summary: %d unchecked, want 700", j.Summary.Unchecked)
	}
	for _, row := range j.Buckets {
		want := any(nil) // omitted when 0
		if row["bucket"] == "frozen" {
			want = 700.0
		}
		if row["unchecked"] != want {
			t.Errorf("bucket %v: unchecked %v, want %v", row["bucket"], row["unchecked"], want)
		}
	}
}

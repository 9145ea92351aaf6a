package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

// tunePlan has four 64 KiB tensors in one bucket declaration.
const tunePlan = `tensor t{0..3} f32[16384]
stream compute
stream comm
bucket grads { * } cap 128KiB order reverse
step {
    backward 2ms on compute
    allreduce grads op avg on comm after ready
    wait comm
}
run steps 3 warmup 1 check every 1
`

// TestCalibratePredictTune is the whole loop at 2 ranks, small: calibrate
// a profile over a small sweep, predict a plan with it, tune the plan
// running the best candidate for real (checked), and run the plan tune
// wrote with the profile: it checks, builds, runs with 0 wrong, and its
// report sets the prediction beside the measurement.
func TestCalibratePredictTune(t *testing.T) {
	needToolchain(t)
	needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	prof := filepath.Join(dir, "prof.json")
	code, out, errOut := syncgen(t, "calibrate", "--np", "2", "--max", "64K", "--reps", "3", "--backend", "cpu", "-o", prof)
	if code != 0 {
		t.Fatalf("calibrate: exit %d\n%s%s", code, out, errOut)
	}
	p, err := costmodel.ReadProfile(prof)
	if err != nil {
		t.Fatal(err)
	}
	// 4 B to 64 KiB in steps of 4: 8 points of an f32 sum allreduce.
	if p.Ranks != 2 || p.Backend != "cpu" || len(p.Curves) != 1 || p.Curves[0].Key() != "allreduce sum f32" || len(p.Curves[0].Points) != 8 {
		t.Fatalf("profile %+v", p)
	}
	plan := writeFile(t, dir, "plan.sync", tunePlan)
	code, out, errOut = syncgen(t, "predict", "--np", "2", "--profile", prof, plan)
	if code != 0 || !strings.Contains(out, "grads[1]") || !strings.Contains(out, "# step time") {
		t.Fatalf("predict: exit %d\n%s%s", code, out, errOut)
	}
	tuned := filepath.Join(dir, "tuned.sync")
	code, out, errOut = syncgen(t, "tune", "--np", "2", "--profile", prof, "--caps", "64K,none", "--firsts", "none", "--orders", "reverse",
		"--run", "1", "--args", "--steps 2 --warmup 1 --backend cpu", "--out", tuned, "--plot", filepath.Join(dir, "caps.svg"), plan)
	if code != 0 || !strings.Contains(out, "winner (fastest measured with 0 wrong)") {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errOut)
	}
	if _, diags := dsl.Load(tuned); diags.HasErrors() {
		t.Fatalf("the tuned plan does not check: %v", diags)
	}
	report := filepath.Join(dir, "run.json")
	code, out, errOut = syncgen(t, "run", "-np", "2", "-o", filepath.Join(dir, "tuned_sync"), tuned, "--",
		"--backend", "cpu", "--profile", prof, "--json", report, "--quiet")
	if code != 0 {
		t.Fatalf("run of the tuned plan: exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Buckets []struct {
			PredictedUs *float64 `json:"predicted_us"`
		} `json:"buckets"`
		Summary struct {
			Wrong           int64    `json:"wrong"`
			Checks          int      `json:"checks"`
			PredictedStepMs *float64 `json:"predicted_step_ms"`
			StepErrorPct    *float64 `json:"step_error_pct"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Summary.Wrong != 0 || r.Summary.Checks == 0 || r.Summary.PredictedStepMs == nil || *r.Summary.PredictedStepMs <= 0 || r.Summary.StepErrorPct == nil ||
		len(r.Buckets) == 0 || r.Buckets[0].PredictedUs == nil {
		t.Fatalf("the run's report: %s", data)
	}
	// syncgen predict (from the IR) and the run (from its recorded
	// program) replay the same schedule: the same step, to the nanosecond.
	code, out, errOut = syncgen(t, "predict", "--np", "2", "--profile", prof, "--json", "-", tuned)
	if code != 0 {
		t.Fatalf("predict --json: exit %d\n%s%s", code, out, errOut)
	}
	var pj struct {
		StepMs float64 `json:"step_ms"`
	}
	if err := json.Unmarshal([]byte(out), &pj); err != nil {
		t.Fatal(err)
	}
	if d := pj.StepMs - *r.Summary.PredictedStepMs; d > 1e-6 || d < -1e-6 {
		t.Errorf("syncgen predict: step %v ms; the run predicted %v ms", pj.StepMs, *r.Summary.PredictedStepMs)
	}
}

// Tune deals pieces over 2 streams only where that can overlap: not with a
// CPU profile, whose backend runs every stream's collectives one at a time;
// --streams still asks for them.
func TestTuneStreamsByBackend(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.sync", tunePlan)
	cpu := writeFile(t, dir, "cpu.json", `{"format": "syncgen-profile/1", "backend": "cpu", "ranks": 2,
  "collectives": [{"collective": "allreduce", "segments": [{"from_bytes": 0, "alpha_us": 5, "busbw_gbs": 2}]}]}`)
	for _, c := range []struct {
		args        []string
		withStreams bool
	}{
		{[]string{"--profile", "nvlink-h100"}, true},
		{[]string{"--profile", cpu}, false},
		{[]string{"--profile", cpu, "--streams", "1,2"}, true},
	} {
		args := append(append([]string{"tune", "--np", "2", "--caps", "64K,none", "--firsts", "none"}, c.args...), plan)
		code, out, errOut := syncgen(t, args...)
		if code != 0 || strings.Contains(out, "streams 2") != c.withStreams {
			t.Errorf("%v: exit %d, streams 2 in the table: %v, want %v\n%s%s", c.args, code, strings.Contains(out, "streams 2"), c.withStreams, out, errOut)
		}
	}
}

// TestUnmeasuredNotes: predict and tune say where a prediction rests on
// figures the profile did not measure for the plan: a bf16 sum curve
// measured up to 4 KiB, taken for the plan's f32 average of 128 KiB
// buckets.
func TestUnmeasuredNotes(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.sync", tunePlan)
	prof := writeFile(t, dir, "bf16.json", `{"format": "syncgen-profile/1", "backend": "cpu", "ranks": 2,
  "collectives": [{"collective": "allreduce", "op": "sum", "dtype": "bf16", "segments": [{"from_bytes": 0, "alpha_us": 5, "busbw_gbs": 2}],
    "points": [{"bytes": 4, "us": 5}, {"bytes": 4096, "us": 7}]}]}`)
	const other = "allreduce avg f32: the profile has no curve of its own; predicted with allreduce sum bf16's (calibrate --plan with this plan measures it)\n"
	code, out, errOut := syncgen(t, "predict", "--profile", prof, plan)
	if code != 0 || !strings.Contains(out, "# note: "+other) ||
		!strings.Contains(out, "# note: allreduce sum bf16: collectives up to 128.0 KiB, beyond the largest size the profile measured (4.0 KiB): its last segment extrapolated; calibrate with a larger --max\n") {
		t.Errorf("predict: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = syncgen(t, "tune", "--profile", prof, "--caps", "64K", "--firsts", "none", "--orders", "reverse", "--group-below", "none", plan)
	if code != 0 || !strings.Contains(out, "# winner (best predicted): cap 64KiB order reverse") || !strings.Contains(out, "# note on the winner's prediction: "+other) ||
		!strings.Contains(out, "# note on the winner's prediction: allreduce sum bf16: collectives up to 64.0 KiB") {
		t.Errorf("tune: exit %d\n%s%s", code, out, errOut)
	}
}

// TestPredictTuneNeedProfile: predict and tune without --profile are
// usage errors (status 2) that say what --profile takes, whether or not
// the plan's file is given, never "unknown command FILE.sync".
func TestPredictTuneNeedProfile(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "hello.sync", helloPlan)
	var cases []cliCase
	for _, cmd := range []string{"predict", "tune"} {
		need := cmd + ": --profile is needed: a profile from syncgen calibrate (--profile FILE) or a built-in fabric (--profile NAME: ib-hdr, "
		cases = append(cases,
			cliCase{args: []string{cmd, "--np", "2", plan}, code: 2, stderr: need},
			cliCase{args: []string{cmd, plan, "--np", "2"}, code: 2, stderr: need},
			cliCase{args: []string{cmd, "--profile=", plan}, code: 2, stderr: cmd + ": --profile=: an empty value; give --profile a value"},
			cliCase{args: []string{cmd}, code: 2, stderr: cmd + ": give exactly one .sync file"},
		)
	}
	checkCLI(t, "", cases)
	for _, cmd := range []string{"predict", "tune"} {
		code, out, errOut := syncgen(t, cmd, "--np", "2", plan)
		if strings.Contains(errOut, "unknown command") || strings.Contains(out, "USAGE:") {
			t.Errorf("%s without --profile: exit %d, stdout %q, stderr %q; want one line about --profile", cmd, code, out, errOut)
		}
	}
}

// importingPlan is a plan that imports gpt2.sync, as cli.md's example does.
const importingPlan = `import "gpt2.sync"
stream compute
stream comm priority high
bucket grads { * } cap 25MiB order reverse
step {
    backward 60ms on compute
    allreduce grads op avg on comm after ready
    wait comm
}
`

// TestTuneTargets: --out and --plot are checked before any candidate is
// predicted or run, and never name the plan, a file it imports (by any
// spelling or link), a directory, a device or each other's file; each
// refusal is a usage error that names the flag given.
func TestTuneTargets(t *testing.T) {
	dir := t.TempDir()
	module := writeFile(t, dir, "gpt2.sync", "tensor h.{0..3}.w f32[1024, 64]\n")
	plan := writeFile(t, dir, "docplan.sync", importingPlan)
	link := filepath.Join(dir, "link.sync")
	if err := os.Symlink(module, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "somedir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, "afile", "")
	svg := filepath.Join(dir, "caps.svg")
	// --run 1 with a launcher that does not exist: a target checked only
	// after the candidates would fail on the launcher first.
	tune := func(args ...string) []string {
		return append(append([]string{"tune", "--np", "2", "--profile", "ib-hdr", "--run", "1", "--mpirun", filepath.Join(dir, "no-mpirun")}, args...), plan)
	}
	checkCLI(t, "", []cliCase{
		{args: tune("--out", module), code: 2, stderr: "tune: --out " + module + " is a file the plan imports: the winning plan would overwrite it"},
		{args: tune("--out", link), code: 2, stderr: "tune: --out " + link + " is a file the plan imports (" + module + ")"},
		{args: tune("--plot", module), code: 2, stderr: "tune: --plot " + module + " is a file the plan imports: the plot would overwrite it"},
		{args: tune("--out", plan), code: 2, stderr: "tune: --out " + plan + " is the plan's own file"},
		{args: tune("--out", filepath.Join(dir, ".", "docplan.sync")), code: 2, stderr: "is the plan's own file"},
		{args: tune("--out", sub), code: 2, stderr: "tune: --out " + sub + " is a directory; give --out the path of a file in it, such as " + filepath.Join(sub, "tuned.sync")},
		{args: tune("--plot", sub), code: 2, stderr: "tune: --plot " + sub + " is a directory"},
		{args: tune("--out", os.DevNull), code: 2, stderr: "tune: --out /dev/null is a device, not a regular file"},
		{args: tune("--out", filepath.Join(file, "x", "tuned.sync")), code: 2, stderr: file + " is a file, not a directory"},
		{args: tune("--out", svg, "--plot", svg), code: 2, stderr: "tune: --plot " + svg + " is also --out's file"},
	})
	if data, err := os.ReadFile(module); err != nil || string(data) != "tensor h.{0..3}.w f32[1024, 64]\n" {
		t.Errorf("the module: %q, %v", data, err)
	}
	// A target that can be written: the table, the winner and the plot.
	out := filepath.Join(dir, "tuned.sync")
	code, stdout, errOut := syncgen(t, "tune", "--np", "2", "--profile", "ib-hdr", "--caps", "1M,none", "--out", out, "--plot", svg, plan)
	if code != 0 || !strings.Contains(stdout, "wrote "+out) || !strings.Contains(stdout, "wrote "+svg) {
		t.Errorf("tune --out --plot: exit %d\n%s%s", code, stdout, errOut)
	}
}

// fakeLauncher writes a launcher that, instead of running the program,
// copies the report at report to the program's --json file and appends
// its arguments to the file it returns.
func fakeLauncher(t *testing.T, dir, report string) (launcher, argsFile string) {
	t.Helper()
	argsFile = filepath.Join(dir, "launcher.args")
	launcher = writeFile(t, dir, "fake-mpirun", `#!/bin/sh
echo "$@" >> '`+argsFile+`'
while [ $# -gt 0 ]; do
	if [ "$1" = --json ]; then cp '`+report+`' "$2"; fi
	shift
done
`)
	if err := os.Chmod(launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	return launcher, argsFile
}

// sweepReport is the JSON report of a sweep program's run at 2 ranks that
// measured an f32 sum allreduce at each of sizes.
func sweepReport(sizes ...int64) string {
	rows := []string{`{"bucket":"warm","bytes":4,"wire":"f32","collective":"allreduce","op":"sum","time_median_us":50}`}
	for i, b := range sizes {
		rows = append(rows, fmt.Sprintf(`{"bucket":"bk0_s%d","bytes":%d,"wire":"f32","collective":"allreduce","op":"sum","time_median_us":%g}`, i, b, 2+float64(b)/1e3))
	}
	return `{"ranks":2,"hosts":["h"],"backend":"nccl","buckets":[` + strings.Join(rows, ",") + `],"summary":{"wrong":0}}`
}

// TestCalibrateProgramSweep: with --program the profile's source says
// what the program measured, and a --max, --full or --plan that disagrees
// with the program's sweep is a usage error that writes no profile;
// --reps becomes the program's --steps.
func TestCalibrateProgramSweep(t *testing.T) {
	dir := t.TempDir()
	report := writeFile(t, dir, "report.json", sweepReport(4, 16, 64, 256, 1024, 4096))
	launcher, argsFile := fakeLauncher(t, dir, report)
	// The program that the fake launcher runs in name only: calibrate
	// checks that it is there and executable.
	t.Chdir(dir)
	if err := os.Chmod(writeFile(t, dir, "sweep_sync", "#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := writeFile(t, dir, "bcast.sync", `tensor a f32[8]
stream compute
stream comm
bucket x { a }
step {
    backward 1ms on compute
    broadcast x from 0 on comm after ready
    wait comm
}
`)
	for _, c := range []struct {
		flags  []string
		code   int
		stderr string // the error, for code 2
	}{
		{nil, 0, ""},
		{[]string{"--max", "4K"}, 0, ""},
		{[]string{"--max", "4096"}, 0, ""},
		{[]string{"--max", "64K"}, 2, "calibrate: --max 64K: the program ./sweep_sync measured allreduce sum f32 at 6 sizes, 4 B to 4.0 KiB, but --max 64K asks for each collective at 8 sizes, 4 B to 64.0 KiB"},
		{[]string{"--full"}, 2, "--full asks for each collective at 27 sizes, 4 B to 256.0 MiB"},
		{[]string{"--max", "4K", "--full"}, 2, "at 11 sizes, 4 B to 4.0 KiB"},
		{[]string{"--plan", plan}, 2, "--plan " + plan + ": the program ./sweep_sync measured allreduce sum f32 at 6 sizes, 4 B to 4.0 KiB, but --plan " + plan + " asks for broadcast f32 at the program's sizes"},
	} {
		out := filepath.Join(dir, "p.json")
		os.Remove(out)
		args := append([]string{"calibrate", "--np", "2", "--mpirun", launcher, "--program", "./sweep_sync", "-o", out}, c.flags...)
		code, stdout, errOut := syncgen(t, args...)
		if code != c.code || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.flags, code, errOut, c.code, c.stderr)
			continue
		}
		p, err := costmodel.ReadProfile(out)
		if c.code != 0 {
			if err == nil {
				t.Errorf("%v: a profile was written", c.flags)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v\n%s", c.flags, err, stdout)
			continue
		}
		if want := "--program ./sweep_sync (measured: allreduce sum f32 at 6 sizes, 4 B to 4.0 KiB; syncgen "; !strings.Contains(p.Source, want) {
			t.Errorf("%v: source %q; want it to contain %q", c.flags, p.Source, want)
		}
	}
	// An allgather's buffers are padded to the ranks the program was
	// emitted for (3 here), which the report does not say: its sizes
	// count, not its padded bytes.
	gather := strings.NewReplacer(`"collective":"allreduce","op":"sum"`, `"collective":"allgather"`, `"bytes":4,`, `"bytes":12,`,
		`"bytes":16,`, `"bytes":24,`, `"bytes":64,`, `"bytes":72,`).Replace(sweepReport(4, 16, 64))
	if err := os.WriteFile(report, []byte(gather), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		max  string
		code int
	}{{"64", 0}, {"256", 2}} {
		code, _, errOut := syncgen(t, "calibrate", "--np", "2", "--mpirun", launcher, "--program", "./sweep_sync", "--max", c.max, "-o", filepath.Join(dir, "g.json"))
		if code != c.code {
			t.Errorf("an allgather's sweep, --max %s: exit %d, want %d\n%s", c.max, code, c.code, errOut)
		}
	}
	if err := os.WriteFile(report, []byte(sweepReport(4, 16, 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(argsFile)
	if code, _, errOut := syncgen(t, "calibrate", "--np", "2", "--mpirun", launcher, "--program", "./sweep_sync", "--reps", "3", "-o", filepath.Join(dir, "r.json")); code != 0 {
		t.Fatalf("--reps 3: exit %d\n%s", code, errOut)
	}
	if args, err := os.ReadFile(argsFile); err != nil || !strings.Contains(string(args), "./sweep_sync --quiet --json") || !strings.HasSuffix(strings.TrimSpace(string(args)), "--steps 3") {
		t.Errorf("the program's arguments: %q, %v; want --steps 3", args, err)
	}
}

// TestTuneCalibrateFlagErrors: flags that cannot work are usage errors
// (status 2) before anything is built or run; the launcher given does not
// exist, so a check that came later would fail on it instead.
func TestTuneCalibrateFlagErrors(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.sync", tunePlan)
	sub := filepath.Join(dir, "somedir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(dir, "no-mpirun")
	tune := func(args ...string) []string {
		return append(append([]string{"tune", "--np", "2", "--profile", "ib-hdr", "--mpirun", none}, args...), plan)
	}
	cal := func(args ...string) []string {
		return append([]string{"calibrate", "--np", "2", "--mpirun", none}, args...)
	}
	p := filepath.Join(dir, "p.json")
	checkCLI(t, "", []cliCase{
		{args: tune("--wire", "keep,f8"), code: 2, stderr: `tune: --wire: "f8": want keep or a dtype: f64, f32, f16, bf16, i64, i32, i8, u8`},
		{args: tune("--wire", "bf16", "--run", "1"), code: 1, stderr: "no-mpirun not found"},
		{args: tune("--run=-1"), code: 2, stderr: "tune: --run -1: want the number of best candidates to run, 0 (none, the default) or more"},
		// --args that --run cannot take, refused before anything is built.
		{args: tune("--run", "1", "--args", "--steps 3 --check off"), code: 2, stderr: "tune: --args: --check off: tune --run picks its winner among checked runs"},
		{args: tune("--run", "1", "--args", "--check=off"), code: 2, stderr: "tune: --args: --check off:"},
		{args: tune("--run", "1", "--args", "--check 'off'"), code: 2, stderr: "tune: --args: --check off:"},
		{args: tune("--run", "1", "--args", "--trace 'a b"), code: 2, stderr: `tune: --args: the single quote at byte 8 of "--trace 'a b" is not closed`},
		{args: tune("--run", "1", "--args", `--trace a\`), code: 2, stderr: `tune: --args: a backslash at the end of "--trace a\\" escapes nothing`},
		{args: tune("--run", "1", "--args", "--json r.json"), code: 2, stderr: "tune: --args: --json: tune --run gives each run its own --json; leave it out"},
		{args: tune("--run", "1", "--args", "-profile=x.json"), code: 2, stderr: "tune: --args: -profile=x.json: tune --run gives each run its own --profile"},
		{args: cal("--max", "5", "-o", p), code: 2, stderr: "calibrate: --max 5: want a size of at least 16 bytes, such as 64M: the sweep goes from 4 B in steps of 4, and the fit needs at least 2 sizes"},
		{args: cal("--max", "15", "-o", p), code: 2, stderr: "at least 16 bytes"},
		{args: cal("--max", "16", "-o", p), code: 1, stderr: "no-mpirun not found"},
		{args: cal("--full", "--max", "7", "-o", p), code: 2, stderr: "at least 8 bytes, such as 64M: the sweep goes from 4 B in steps of 2"},
		{args: cal("--full", "--max", "8", "-o", p), code: 1, stderr: "no-mpirun not found"},
		// A size that is not one says so; suffixes take either case.
		{args: cal("--max", "1T", "-o", p), code: 2, stderr: "calibrate: --max 1T: not a size: want a whole number of bytes, with K, M or G for binary multiples, such as 64M"},
		{args: cal("--max", "1.5M", "-o", p), code: 2, stderr: "--max 1.5M: not a size"},
		{args: cal("--max", "64kib", "-o", p), code: 1, stderr: "no-mpirun not found"},
		// --emit runs nothing: an -o or a --program beside it would be
		// ignored.
		{args: cal("--emit", filepath.Join(dir, "e.sync"), "-o", p), code: 2, stderr: "calibrate: --emit and -o: --emit writes the sweep's plan and stops, running nothing, so -o would be ignored"},
		{args: cal("--emit", filepath.Join(dir, "e.sync"), "--program", "./sweep_sync"), code: 2, stderr: "calibrate: --emit and --program: "},
		{args: cal("--backend", "foo", "-o", p), code: 2, stderr: `calibrate: --backend "foo": want auto, cpu or nccl`},
		{args: cal("--program", "./sweep_sync", "--backend", "gpu", "-o", p), code: 2, stderr: `--backend "gpu"`},
		{args: cal("-o", sub), code: 2, stderr: "calibrate: -o " + sub + " is a directory; give -o the path of a file in it"},
		{args: cal("--plan", plan, "-o", plan), code: 2, stderr: "calibrate: -o " + plan + " is the plan's own file: the profile would overwrite it"},
		{args: cal("--plan", plan, "--emit", plan), code: 2, stderr: "calibrate: --emit " + plan + " is the plan's own file: the sweep's plan would overwrite it"},
	})
	if data, err := os.ReadFile(plan); err != nil || string(data) != tunePlan {
		t.Errorf("the plan: %q, %v", data, err)
	}
}

// TestPredictJSONProfileName: the JSON names the profile as the table
// does: a built-in one by its name, a calibrated one by its machine.
func TestPredictJSONProfileName(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.sync", tunePlan)
	vm := writeFile(t, dir, "vm.json", `{"format": "syncgen-profile/1", "machine": "vm", "backend": "cpu", "ranks": 2,
  "collectives": [{"collective": "allreduce", "segments": [{"from_bytes": 0, "alpha_us": 5, "busbw_gbs": 2}]}]}`)
	for _, c := range []struct{ profile, name string }{{vm, "vm"}, {"ib-hdr", "ib-hdr"}} {
		code, out, errOut := syncgen(t, "predict", "--np", "2", "--profile", c.profile, plan)
		if code != 0 || !strings.Contains(out, ", profile "+c.name+" (") {
			t.Errorf("%s: the table: exit %d\n%s%s", c.profile, code, out, errOut)
		}
		code, out, errOut = syncgen(t, "predict", "--np", "2", "--profile", c.profile, "--json", "-", plan)
		var j struct {
			Profile string `json:"profile"`
		}
		if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.Profile != c.name {
			t.Errorf("%s: the JSON's profile %q (exit %d, %v), want %q\n%s", c.profile, j.Profile, code, err, c.name, errOut)
		}
	}
}

// TestPredictOneRankBusBW: at one rank an allreduce's busbw is 0, as the
// runtime's own table prints it, while its algbw is not.
func TestPredictOneRankBusBW(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.sync", tunePlan)
	for _, np := range []string{"1", "2", "4"} {
		code, out, errOut := syncgen(t, "predict", "--np", np, "--profile", "ib-hdr", "--json", "-", plan)
		var j struct {
			Buckets []struct {
				AlgBW float64 `json:"algbw_gbs"`
				BusBW float64 `json:"busbw_gbs"`
			} `json:"buckets"`
		}
		if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || len(j.Buckets) == 0 {
			t.Fatalf("--np %s: exit %d, %v\n%s%s", np, code, err, out, errOut)
		}
		for _, b := range j.Buckets {
			want := b.AlgBW * costmodel.BusFactor("allreduce", map[string]int{"1": 1, "2": 2, "4": 4}[np])
			if b.AlgBW <= 0 || b.BusBW != want || (np == "1" && b.BusBW != 0) {
				t.Errorf("--np %s: algbw %v, busbw %v; want busbw %v", np, b.AlgBW, b.BusBW, want)
			}
		}
	}
}

// TestTuneRunLabels: tune --run names the plan as written as such in its
// progress lines, not by the grid's options ("no cap" of a plan with a
// cap). The launcher is a stand-in that writes a report.
func TestTuneRunLabels(t *testing.T) {
	needToolchain(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	plan := writeFile(t, dir, "plan.sync", strings.Replace(tunePlan, "cap 128KiB", "cap 2KiB", 1))
	report := writeFile(t, dir, "report.json", `{"summary": {"step_p50_ms": 2.5, "wrong": 0, "checks": 23}}`)
	launcher, _ := fakeLauncher(t, dir, report)
	tune := func(launcher string) (int, string, string) {
		return syncgen(t, "tune", "--np", "2", "--profile", "ib-hdr", "--caps", "none", "--firsts", "none", "--orders", "reverse",
			"--streams", "1", "--group-below", "none", "--run", "2", "--mpirun", launcher, plan)
	}
	code, out, errOut := tune(launcher)
	if code != 0 || strings.Count(errOut, "tune: running candidate") != 2 || !strings.Contains(errOut, " (the plan as written)\n") ||
		!strings.Contains(errOut, " (no cap order reverse)\n") || strings.Contains(errOut, " (no cap)\n") ||
		!strings.Contains(out, "# winner (fastest measured with 0 wrong)") {
		t.Fatalf("exit %d; want one progress line for the grid's candidate, one for the plan as written\n%s%s", code, out, errOut)
	}
	// A run that checked nothing (a plan's check off) counts no wrong
	// element: the table and the winner say it is unchecked.
	writeFile(t, dir, "report.json", `{"summary": {"step_p50_ms": 2.5, "wrong": 0, "checks": 0}}`)
	code, out, errOut = tune(launcher)
	if code != 0 || strings.Count(out, "  unchecked") != 2 || !strings.Contains(out, "# winner (fastest measured; unchecked: its run checked no element)") {
		t.Fatalf("unchecked runs: exit %d\n%s%s", code, out, errOut)
	}
	// --args is split into words as a shell does: a quoted or escaped
	// space stays inside its argument.
	lines := writeFile(t, dir, "lines-mpirun", `#!/bin/sh
for a; do printf '%s\n' "$a"; done > '`+filepath.Join(dir, "launcher.lines")+`'
while [ $# -gt 0 ]; do
	if [ "$1" = --json ]; then cp '`+report+`' "$2"; fi
	shift
done
`)
	os.Chmod(lines, 0o755)
	code, out, errOut = syncgen(t, "tune", "--np", "2", "--profile", "ib-hdr", "--caps", "none", "--firsts", "none", "--orders", "reverse",
		"--streams", "1", "--group-below", "none", "--run", "1", "--mpirun", lines,
		"--args", `--steps 2 --trace 'my dir/t.json' --flight-dir "fr \"a\""  --resume x\ y`, plan)
	got, _ := os.ReadFile(filepath.Join(dir, "launcher.lines"))
	if code != 0 || !strings.Contains(string(got), "\n--steps\n2\n--trace\nmy dir/t.json\n--flight-dir\nfr \"a\"\n--resume\nx y\n--profile\nib-hdr\n") {
		t.Fatalf("--args with quotes: exit %d, the program's arguments:\n%s\n%s%s", code, got, out, errOut)
	}
	// A failed run is named by its candidate and --args, not by the
	// temporary program's path.
	failing := writeFile(t, dir, "failing-mpirun", "#!/bin/sh\nexit 3\n")
	os.Chmod(failing, 0o755)
	code, out, errOut = tune(failing)
	if code != 1 || !strings.Contains(errOut, `tune: the run of candidate 1 (the plan as written) with --args "--steps 20 --warmup 3" failed (exit status 3)`) {
		t.Fatalf("a failed run: exit %d\n%s%s", code, out, errOut)
	}
}

// TestOutputTargets: one rule for every output of every command
// (checkTargets): never the plan or a file it imports, however spelt or
// linked, never another existing .sync file (but for the outputs that
// write plans, calibrate --emit and tune --out), never a directory or a
// device; refused as usage errors that name the flag, before anything is
// written. Missing directories are created.
func TestOutputTargets(t *testing.T) {
	dir := t.TempDir()
	module := writeFile(t, dir, "gpt2.sync", "tensor h.{0..3}.w f32[1024, 64]\n")
	plan := writeFile(t, dir, "docplan.sync", importingPlan)
	other := writeFile(t, dir, "other.sync", helloPlan)
	link := filepath.Join(dir, "link.sync")
	if err := os.Symlink(plan, link); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, f := range []string{module, plan, other} {
		data, _ := os.ReadFile(f)
		before[f] = string(data)
	}
	none := filepath.Join(dir, "no-mpirun")
	predict := func(args ...string) []string {
		return append([]string{"predict", "--np", "2", "--profile", "ib-hdr", plan}, args...)
	}
	tune := func(args ...string) []string {
		return append([]string{"tune", "--np", "2", "--profile", "ib-hdr", "--caps", "1M", plan}, args...)
	}
	cal := func(args ...string) []string {
		return append([]string{"calibrate", "--np", "2", "--max", "16", "--mpirun", none}, args...)
	}
	checkCLI(t, "", []cliCase{
		{args: predict("--json", plan), code: 2, stderr: "predict: --json " + plan + " is the plan's own file: the prediction would overwrite it; give --json another path"},
		{args: predict("--json", link), code: 2, stderr: "predict: --json " + link + " is the plan's own file (" + plan + ")"},
		{args: predict("--json", module), code: 2, stderr: "predict: --json " + module + " is a file the plan imports"},
		{args: predict("--json", other), code: 2, stderr: "predict: --json " + other + " is a .sync file, another plan: the prediction would overwrite it"},
		{args: predict("--json", dir), code: 2, stderr: "predict: --json " + dir + " is a directory; give --json the path of a file in it"},
		{args: predict("--json", os.DevNull), code: 2, stderr: "predict: --json /dev/null is a device, not a regular file"},
		{args: cal("-o", other), code: 2, stderr: "calibrate: -o " + other + " is a .sync file, another plan: the profile would overwrite it; give -o another path"},
		{args: cal("--plan", plan, "-o", module), code: 2, stderr: "calibrate: -o " + module + " is a file the plan imports"},
		{args: cal("--plan", plan, "--emit", module), code: 2, stderr: "calibrate: --emit " + module + " is a file the plan imports: the sweep's plan would overwrite it"},
		{args: tune("--plot", other), code: 2, stderr: "tune: --plot " + other + " is a .sync file, another plan: the plot would overwrite it"},
		{args: tune("--out", link), code: 2, stderr: "tune: --out " + link + " is the plan's own file"},
		{args: []string{"build", plan, "-o", other}, code: 2, stderr: "build: -o " + other + " is a .sync file, another plan"},
		// Written, into directories that are created.
		{args: predict("--json", filepath.Join(dir, "nd", "x.json")), code: 0},
		{args: cal("--emit", filepath.Join(dir, "em", "sweep.sync")), code: 0, stdout: "wrote " + filepath.Join(dir, "em", "sweep.sync")},
	})
	for f, want := range before {
		if data, _ := os.ReadFile(f); string(data) != want {
			t.Errorf("%s changed: %q", f, data)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "nd", "x.json")); err != nil || !strings.HasPrefix(string(data), "{") {
		t.Errorf("predict --json nd/x.json: %q, %v", data, err)
	}
	// The outputs that write plans may replace a plan that is not an
	// input: calibrate --emit over the sweep it wrote before, tune --out
	// over another plan.
	checkCLI(t, "", []cliCase{
		{args: cal("--emit", filepath.Join(dir, "em", "sweep.sync")), code: 0, stdout: "wrote "},
		{args: tune("--out", other), code: 0, stdout: "wrote " + other},
	})
}

// TestTuneOutImports: the winner written into another directory imports
// the plan's files by paths from there, so that it checks.
func TestTuneOutImports(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hf"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "hf"), "m.sync", "tensor h.{0..3}.w f32[1024, 64]\n")
	plan := writeFile(t, dir, "plan.sync", `import "hf/m.sync"
stream compute
stream comm priority high
bucket grads { * } cap 25MiB order reverse
step {
    backward 60ms on compute
    allreduce grads op avg on comm after ready
    wait comm
}
`)
	for _, out := range []string{
		filepath.Join(dir, "out", "tuned.sync"),
		filepath.Join(dir, "hf", "tuned.sync"),
		filepath.Join(dir, "tuned.sync"),
	} {
		code, stdout, errOut := syncgen(t, "tune", "--np", "2", "--profile", "ib-hdr", "--caps", "1M", plan, "--out", out)
		if code != 0 || !strings.Contains(stdout, "wrote "+out) {
			t.Fatalf("tune --out %s: exit %d\n%s%s", out, code, stdout, errOut)
		}
		if code, stdout, errOut := syncgen(t, "check", out); code != 0 {
			t.Errorf("check %s (tune's --out): exit %d\n%s%s", out, code, stdout, errOut)
		}
	}
}

// TestPredictHugeTensors: a tensor that the checker accepts can have more
// bytes than an int64 holds; the update's and the casts' bytes wrapped
// around and predicted a short step. They saturate, and predict says it
// cannot predict them.
func TestPredictHugeTensors(t *testing.T) {
	dir := t.TempDir()
	plan := func(name, tensors, wire, update string) string {
		return writeFile(t, dir, name, tensors+"stream compute\nstream comm\nbucket g { * }"+wire+`
step {
    backward 1ms on compute
    allreduce g op avg on comm after ready
`+update+"}\n")
	}
	adamw := plan("adamw.sync", "tensor w f32[1000000000, 1000000000, 2]\n", "", "    update g adamw lr 0.001 on comm after synced\n")
	// Each tensor's cast fits; the bucket's two do not.
	cast := plan("cast.sync", "tensor a f32[1000000000, 1000000000]\ntensor b f32[1000000000, 1000000000]\n", " wire bf16", "")
	checkCLI(t, "", []cliCase{
		{args: []string{"predict", "--np", "2", "--profile", "ib-hdr", adamw}, code: 1, stderr: "the updates of this step move more than 9223372036854775807 bytes (8 EiB), more than a prediction counts"},
		{args: []string{"predict", "--np", "2", "--profile", "ib-hdr", cast}, code: 1, stderr: "the casts of this step move more than 9223372036854775807 bytes"},
	})
}

// TestNPBounds: --np is 1 to 2^31-1 in calibrate, predict and tune (mpirun
// read -np 3000000000 as -1294967296), and calibrate and tune --run, which
// launch on this machine, refuse far more ranks than its cores as run
// does, unless --oversubscribe; all usage errors before anything runs
// (the launcher does not exist).
func TestNPBounds(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.sync", tunePlan)
	none := filepath.Join(dir, "no-mpirun")
	p := filepath.Join(dir, "p.json")
	many := strconv.Itoa(8*runtime.NumCPU() + 1)
	cases := []cliCase{
		{args: []string{"calibrate", "--np", many, "-o", p, "--mpirun", none}, code: 2, stderr: "calibrate: --np " + many + " is far more ranks than this machine's"},
		{args: []string{"calibrate", "--np", many, "--oversubscribe", "-o", p, "--mpirun", none}, code: 1, stderr: "no-mpirun not found"},
		{args: []string{"tune", "--np", many, "--run", "1", "--profile", "ib-hdr", "--mpirun", none, plan}, code: 2, stderr: "tune: --np " + many + " is far more ranks"},
		{args: []string{"predict", "--np", many, "--profile", "ib-hdr", plan}, code: 0},
		{args: []string{"predict", "--np", "2147483647", "--profile", "ib-hdr", plan}, code: 0},
	}
	for _, np := range []string{"3000000000", "2147483648", "0", "-1"} {
		want := "--np " + np + ": more ranks than a job can have (at most 2147483647"
		if np[0] == '0' || np[0] == '-' {
			want = "--np " + np + ": need at least one rank"
		}
		cases = append(cases,
			cliCase{args: []string{"calibrate", "--np=" + np, "-o", p, "--mpirun", none}, code: 2, stderr: "calibrate: " + want},
			cliCase{args: []string{"predict", "--np=" + np, "--profile", "ib-hdr", plan}, code: 2, stderr: "predict: " + want},
			cliCase{args: []string{"tune", "--np=" + np, "--profile", "ib-hdr", plan}, code: 2, stderr: "tune: " + want})
	}
	checkCLI(t, "", cases)
}

// TestCalibrateProgramMissing: --program that is not there, not a file or
// not executable is a usage error before mpirun starts (the launcher here
// does not exist, so a later check would fail on it instead).
func TestCalibrateProgramMissing(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "no-mpirun")
	notExec := writeFile(t, dir, "sweep_sync", "#!/bin/sh\n")
	p := filepath.Join(dir, "p.json")
	cal := func(prog string) []string {
		return []string{"calibrate", "--np", "2", "--mpirun", none, "-o", p, "--program", prog}
	}
	checkCLI(t, "", []cliCase{
		{args: cal(filepath.Join(dir, "nothere")), code: 2, stderr: "calibrate: --program " + filepath.Join(dir, "nothere") + ": no such file; build the sweep of --emit"},
		{args: cal(dir), code: 2, stderr: "calibrate: --program " + dir + ": is a directory, not a program"},
		{args: cal(notExec), code: 2, stderr: "calibrate: --program " + notExec + ": is not executable (mode -rw-r--r--)"},
	})
	if err := os.Chmod(notExec, 0o755); err != nil {
		t.Fatal(err)
	}
	checkCLI(t, "", []cliCase{{args: cal(notExec), code: 1, stderr: "no-mpirun not found"}})
}

package runtime_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/scaler"
)

// trainJSON is the training part of --json.
type trainJSON struct {
	Warnings []string `json:"warnings"`
	Training struct {
		Rows []struct {
			Bucket string  `json:"bucket"`
			Work   string  `json:"work"`
			Bytes  int64   `json:"bytes"`
			GBs    float64 `json:"gbs"`
		} `json:"rows"`
		WrongParams     int64 `json:"wrong_parameters"`
		UncheckedParams int64 `json:"unchecked_parameters"`
		Scaler          *struct {
			Rule      string    `json:"rule"`
			FirstStep int       `json:"first_step"`
			Scale     []float64 `json:"scale"`
			Skipped   []int     `json:"skipped_steps"`
		} `json:"scaler"`
	} `json:"training"`
	Summary struct {
		Wrong  int64 `json:"wrong"`
		Checks int   `json:"checks"`
	} `json:"summary"`
}

// runTrain runs a plan that must pass with --json and returns the file.
func runTrain(t *testing.T, np int, args ...string) trainJSON {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.json")
	ok(t, np, append(args, "--json", path)...)
	return readTrainJSON(t, path)
}

// runOverflowing runs a plan with overflows, whose elements are unchecked
// where the overflow went: it must exit 0 with no wrong element.
func runOverflowing(t *testing.T, np int, args ...string) trainJSON {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.json")
	r := mpirun(t, np, nil, 90*time.Second, append(args, "--json", path)...)
	if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") {
		t.Fatalf("np %d %v: exit %d:\n%s", np, args, r.code, r.out)
	}
	return readTrainJSON(t, path)
}

func readTrainJSON(t *testing.T, path string) trainJSON {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j trainJSON
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// Every optimizer with gradients of every float dtype, at 1, 2 and 4
// ranks: the parameters and the optimizer state of every rank equal the
// Go reference, element for element, after every step.
func TestUpdateMatchesReference(t *testing.T) {
	cases := []struct {
		np   int
		plan string
	}{
		{1, "train:sgd:f32"},
		{2, "train:adamw:f32"},
		{4, "train:sgd:f16"},
		{2, "train:adamw:bf16:master"},
		{4, "train:adamw:f16"},
		{2, "train:sgd-plain:f64"},
		{2, "train:sgd:bf16:master"},
		{4, "zero"}, // each rank keeps and updates its shard only
		// A reduce into an output between the reducescatter and the
		// update leaves the bucket reduce-scattered: the update is still
		// the shard's.
		{2, "zerointo"},
		// The tensors' gradients live apart from the f32 wire buffer: the
		// new parameters go over them, and the allgather casts them in.
		{2, "zero:f32"},
		// The unscale and update after synced wait for the allreduce's
		// casts back into the f32 gradients, not only for the allreduce.
		{2, "apart"},
		// ... and for an allreduce into an output that reads the bucket
		// after the in-place one, on another stream.
		{2, "syncedinto"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/np%d", c.plan, c.np), func(t *testing.T) {
			j := runTrain(t, c.np, c.plan, "--steps", "3", "--warmup", "1")
			if j.Summary.Checks != 4 || j.Training.WrongParams != 0 || j.Training.UncheckedParams != 0 {
				t.Fatalf("checks %d, wrong parameters %d, unchecked %d", j.Summary.Checks, j.Training.WrongParams, j.Training.UncheckedParams)
			}
			if len(j.Training.Rows) != 2 || j.Training.Rows[0].Bytes == 0 || j.Training.Rows[0].GBs <= 0 {
				t.Fatalf("training rows: %+v", j.Training.Rows)
			}
		})
	}
}

// A parameter that differs from the reference fails the run, naming it.
func TestWrongParameterDetected(t *testing.T) {
	r := mpirun(t, 2, []string{"SYNCGEN_TEST_CORRUPT_PARAM=1:2:0:5"}, 60*time.Second, "train:adamw:f32", "--steps", "2")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	mustContain(t, r, `rank 1: step 2: parameters of bucket "grads[0]": 1 wrong`, "of which 1 in parameters")
}

// The scaler's scale and skipped steps over 100 steps, with overflows
// injected at chosen steps on chosen ranks, are those of the Go model of
// each rule; every rank skips the same steps.
func TestScalerFollowsItsRule(t *testing.T) {
	inject := map[int]int{3: 1, 4: 0, 5: 1, 20: 0, 21: 1, 40: 1, 41: 1, 42: 0, 77: 0}
	var args []string
	for _, step := range sortedKeys(inject) {
		args = append(args, "--overflow", fmt.Sprintf("%d:%d:w=nan", step, inject[step]))
	}
	specs := map[string]scaler.Spec{
		"static":    {Rule: scaler.Static, Init: 64},
		"torch":     {Rule: scaler.Torch, Init: 256, Interval: 3},
		"megatron":  {Rule: scaler.Megatron, Init: 256, Interval: 3},
		"deepspeed": {Rule: scaler.DeepSpeed, Init: 256, Interval: 3},
	}
	for _, rule := range []string{"static", "torch", "megatron", "deepspeed"} {
		t.Run(rule, func(t *testing.T) {
			j := runOverflowing(t, 2, append([]string{"scaled:" + rule, "--steps", "100", "--warmup", "0", "--check", "25", "--quiet"}, args...)...)
			sc := j.Training.Scaler
			if sc == nil || len(sc.Scale) != 100 {
				t.Fatalf("scaler: %+v", sc)
			}
			model := scaler.New(specs[rule].WithDefaults())
			var want []int
			for step := range 100 {
				if got := sc.Scale[step]; got != model.Scale() {
					t.Fatalf("step %d: scale %v, want %v (skipped so far %v)", step, got, model.Scale(), want)
				}
				_, over := inject[step]
				if over {
					want = append(want, step)
				}
				model.Update(over)
			}
			if !slices.Equal(sc.Skipped, want) {
				t.Fatalf("skipped %v, want %v", sc.Skipped, want)
			}
		})
	}
}

func sortedKeys(m map[int]int) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ZeRO's step: a NaN on one rank lands in another rank's shard after the
// reduce-scatter, and the ranks agree on the overflow with an allreduce of
// the flag: every rank skips the step, and the parameters (each rank's
// shard, then gathered) stay equal to the reference.
func TestOverflowOnOneRankSkipsEveryRank(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.json")
	j := runOverflowing(t, 2, "zero", "--steps", "6", "--warmup", "0", "--overflow", "2:1:w=nan", "--overflow", "4:0:v=-inf", "--trace", trace)
	sc := j.Training.Scaler
	if sc == nil || !slices.Equal(sc.Skipped, []int{2, 4}) {
		t.Fatalf("scaler: %+v", sc)
	}
	if j.Training.WrongParams != 0 {
		t.Fatalf("wrong parameters: %d", j.Training.WrongParams)
	}
	// The trace has every rank's loss scale as a counter, the skipped
	// steps marked, and the updates, unscales and the flag's allreduce.
	skipped, counters, work := map[int]bool{}, 0, map[string]int{}
	for _, ev := range readTrace(t, trace).TraceEvents {
		switch {
		case ev.Ph == "C" && ev.Name == "loss scale":
			counters++
			if ev.Args["skipped"] == 1.0 {
				skipped[ev.Pid] = true
			}
		case ev.Ph == "X":
			work[strings.Fields(ev.Name)[0]]++
		}
	}
	if counters != 12 || len(skipped) != 2 || work["update"] != 12 || work["unscale"] != 12 || work["allreduce"] < 12 {
		t.Fatalf("trace: %d scale counters, skipped on ranks %v, work %v", counters, skipped, work)
	}
}

// An f16 sum over 4 ranks at a large static scale overflows where every
// rank's gradients do not; dividing before the sum (DDP's fp16 hook) keeps
// it finite, and no step is skipped.
func TestPreDivideAvoidsWireOverflow(t *testing.T) {
	plain := runOverflowing(t, 4, "scaled:static:f16", "--steps", "4", "--warmup", "0", "--quiet")
	if sc := plain.Training.Scaler; sc == nil || len(sc.Skipped) != 4 {
		t.Fatalf("without pre-division: %+v", sc)
	}
	// The runtime said so before the steps: the wire headroom warning.
	if len(plain.Warnings) != 1 || !strings.Contains(plain.Warnings[0], "declare the bucket with `divide before`") {
		t.Fatalf("warnings without pre-division: %q", plain.Warnings)
	}
	pre := runTrain(t, 4, "scaled:static:f16:pre", "--steps", "4", "--warmup", "0", "--quiet")
	if sc := pre.Training.Scaler; sc == nil || len(sc.Skipped) != 0 || len(pre.Warnings) != 0 {
		t.Fatalf("with pre-division: %+v, warnings %q", sc, pre.Warnings)
	}
}

// --overflow naming what does not exist is a usage error before MPI
// starts.
func TestOverflowFlagErrors(t *testing.T) {
	for _, c := range []struct{ plan, value, want string }{
		{"scaled:torch", "2:0:nope", `the plan has no tensor "nope"`},
		{"scaled:torch", "99:0:w", "past the run's last step"},
		{"scaled:torch", "1:0:w=big", "want inf, -inf or nan"},
		{"scaled:torch", "x:0:w", "is not a step number"},
		{"train:sgd:f32", "1:0:l0.bias", "the plan has no scaler"},
	} {
		r := mpirun(t, 0, nil, 30*time.Second, c.plan, "--steps", "3", "--overflow", c.value)
		if r.code != 2 || !strings.Contains(r.out, c.want) {
			t.Errorf("--overflow %s: exit %d, want 2 and %q:\n%s", c.value, r.code, c.want, r.out)
		}
	}
	r := mpirun(t, 2, nil, 30*time.Second, "scaled:torch", "--steps", "3", "--overflow", "1:5:w")
	if r.code == 0 || !strings.Contains(r.out, "rank 5 is outside the world of 2 ranks") {
		t.Errorf("rank outside the world: exit %d:\n%s", r.code, r.out)
	}
}

// --fault values that cannot happen are usage errors before MPI starts.
func TestFaultFlagErrors(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"explode:0:1", "want KIND:RANK:STEP"},
		{"crash:0", "want KIND:RANK:STEP"},
		{"crash:x:1", `rank "x" is not a rank number`},
		{"hang:0:99", "past the run's last step"},
		{"delay:0:1", "delay needs a duration"},
		{"delay:0:1:soon", "is not a positive duration"},
	} {
		r := mpirun(t, 0, nil, 30*time.Second, "train:sgd:f32", "--steps", "3", "--fault", c.value)
		if r.code != 2 || !strings.Contains(r.out, c.want) {
			t.Errorf("--fault %s: exit %d, want 2 and %q:\n%s", c.value, r.code, c.want, r.out)
		}
	}
}

// A rank that hangs ends the job at the timeout, and the report names it
// and where it stopped.
func TestFaultHangEndsAtTimeout(t *testing.T) {
	r := mpirun(t, 2, nil, 60*time.Second, "train:sgd:f32", "--steps", "6", "--fault", "hang:1:3", "--timeout", "2s", "--quiet")
	if r.code == 0 {
		t.Fatalf("exit 0:\n%s", r.out)
	}
	mustContain(t, r, "rank 1 host: waiting at --fault hang: rank 1 stopped at the start of step 3 on purpose")
}

// A restart (--resume since:TIME, as syncgen run --restarts gives it)
// passes on the job's --overflow flags: those before the checkpoint it
// resumes from were injected by the launch that ran those steps, so they
// are left out with a note, where --resume DIR refuses them; the later
// ones still fire.
func TestRestartLeavesOutEarlierOverflows(t *testing.T) {
	dir := t.TempDir()
	since := "since:" + time.Now().UTC().Format(time.RFC3339Nano)
	common := []string{"scaled:torch", "--steps", "5", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", dir,
		"--checkpoint-keep", "5", "--overflow", "1:0:w", "--overflow", "4:1:w=nan", "--quiet"}
	if j := runOverflowing(t, 2, common...); !slices.Equal(j.Training.Scaler.Skipped, []int{1, 4}) {
		t.Fatalf("straight run: skipped %v, want [1 4]", j.Training.Scaler.Skipped)
	}
	path := filepath.Join(t.TempDir(), "out.json")
	r := mpirun(t, 2, nil, 90*time.Second, append(common, "--resume", since, "--json", path)...)
	if r.code != 0 {
		t.Fatalf("restart: exit %d:\n%s", r.code, r.out)
	}
	mustContain(t, r, `--overflow "1:0:w" left out: this restart resumes at step 4`)
	if sc := readTrainJSON(t, path).Training.Scaler; sc.FirstStep != 4 || !slices.Equal(sc.Skipped, []int{4}) {
		t.Fatalf("restart: first step %d, skipped %v; want 4, [4]", sc.FirstStep, sc.Skipped)
	}
}

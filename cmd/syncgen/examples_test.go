package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/ir"
)

// Limits for running an example in the end-to-end test. CI machines have 2
// cores and 24 GiB: gpt2_xl (6.2 GB of f32 gradients a rank) and bigger
// plans are checked and built there but run on GPU machines (their headers
// say so). Plans of more than bigPlan bytes a rank (bert_large and zero,
// 1.3 GB) run two checked steps and no warm-up: on 4 oversubscribed ranks
// each checked step costs seconds of filling, casting and checking, and the
// buffers' first touch costs as much again.
const (
	maxBytesPerRank = 2560 << 20
	maxBytesPerJob  = 10 << 30
	bigPlan         = 512 << 20
)

// TestExamples checks, builds and runs every example under mpirun with 1, 2
// and 4 ranks on the CPU backend, with checks on every step, and requires 0
// wrong elements and exit status 0.
func TestExamples(t *testing.T) {
	needToolchain(t)
	mpirun := needMPIRun(t)
	examples, _ := filepath.Glob("../../examples/*.sync")
	if len(examples) < 7 {
		t.Fatalf("found %d examples in ../../examples, want at least 7", len(examples))
	}
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	for _, ex := range examples {
		name := stem(ex)
		t.Run(name, func(t *testing.T) {
			prog, diags := dsl.Load(ex)
			if diags.HasErrors() || len(diags) > 0 {
				var b strings.Builder
				diags.Render(&b)
				t.Fatalf("%s has diagnostics:\n%s", ex, b.String())
			}
			bin := filepath.Join(dir, name+"_sync")
			if code, out, errOut := syncgen(t, "build", ex, "-o", bin); code != 0 {
				t.Fatalf("syncgen build %s: exit %d\n%s%s", ex, code, out, errOut)
			}
			perRank := bytesPerRank(prog)
			for _, np := range []int{1, 2, 4} {
				if perRank > maxBytesPerRank || int64(np)*perRank > maxBytesPerJob {
					t.Logf("%s: not run with %d ranks here: %d MiB of buffers a rank (checked and built only; it runs on the GPU machine)",
						name, np, perRank>>20)
					continue
				}
				steps := []string{"--steps", "2", "--warmup", "1"}
				if perRank > bigPlan {
					steps = []string{"--steps", "2", "--warmup", "0"}
				}
				runExample(t, mpirun, bin, np, steps)
			}
		})
	}
}

// runExample runs one built example and checks its JSON report.
func runExample(t *testing.T, mpirun, bin string, np int, steps []string) {
	t.Helper()
	report := filepath.Join(t.TempDir(), fmt.Sprintf("np%d.json", np))
	args := []string{"-np", fmt.Sprint(np), "--bind-to", "none"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	if np > runtime.NumCPU() {
		args = append(args, "--oversubscribe")
	}
	args = append(args, bin)
	args = append(args, steps...)
	args = append(args, "--check", "1", "--backend", "cpu", "--quiet", "--json", report)
	cmd := exec.Command(mpirun, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun -np %d %s: %v\n%s", np, filepath.Base(bin), err, out)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("-np %d: no JSON report: %v\n%s", np, err, out)
	}
	var r struct {
		Ranks   int `json:"ranks"`
		Summary struct {
			Wrong  int64 `json:"wrong"`
			Checks int   `json:"checks"`
		} `json:"summary"`
		Buckets []struct {
			Bucket string `json:"bucket"`
		} `json:"buckets"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("-np %d: JSON report does not parse: %v", np, err)
	}
	if r.Ranks != np || r.Summary.Wrong != 0 || r.Summary.Checks == 0 || len(r.Buckets) == 0 {
		t.Errorf("-np %d: report says ranks %d, %d wrong, %d checks, %d bucket rows; want %d ranks, 0 wrong, some checks and rows",
			np, r.Ranks, r.Summary.Wrong, r.Summary.Checks, len(r.Buckets), np)
	}
}

// bytesPerRank estimates the host memory a rank needs: every gradient in its
// own dtype plus every bucket's wire buffer where it is a separate copy.
func bytesPerRank(p *ir.Program) int64 {
	var n int64
	for _, t := range p.Tensors {
		if !t.Frozen {
			n += t.Bytes()
		}
	}
	for _, b := range p.Buckets {
		for _, ti := range b.Tensors {
			if p.Tensors[ti].DType != b.Wire {
				n += b.Bytes()
				break
			}
		}
	}
	return n + trainBytes(p)
}

// trainBytes is what the training step adds a rank: every updated
// bucket's parameters and optimizer state, and the checker's reference of
// them (float32 values, float64 for f64).
func trainBytes(p *ir.Program) int64 {
	var n int64
	for _, s := range p.Step {
		if s.Kind != ir.StmtUpdate {
			continue
		}
		arrays := int64(1)
		switch {
		case s.Update.Optimizer == ir.AdamW:
			arrays = 3
		case s.Update.Momentum != 0:
			arrays = 2
		}
		for _, bi := range s.Buckets {
			b := &p.Buckets[bi]
			dt := p.Tensors[b.Tensors[0]].DType
			if s.Update.Master && (dt == ir.F16 || dt == ir.BF16) {
				dt = ir.F32
			}
			ref := int64(4)
			if dt == ir.F64 {
				ref = 8
			}
			n += arrays * b.Elems * (dt.Size() + ref)
		}
	}
	return n
}

// TestLanguageDocTrainingPlan runs the runnable plan of docs/language.md
// §13 as its comment says to: it must run clean, without the warning that
// its first loss scale overflows f16 and without a skipped step (with
// init 64, step 1 of the run overflowed).
func TestLanguageDocTrainingPlan(t *testing.T) {
	needToolchain(t)
	mpirun := needMPIRun(t)
	doc, err := os.ReadFile("../../docs/language.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```\n(// A runnable plan: syncgen run train.sync -np 2\n.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/language.md has no runnable plan train.sync")
	}
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	plan := writeFile(t, dir, "train.sync", string(m[1]))
	bin := filepath.Join(dir, "train_sync")
	if code, out, errOut := syncgen(t, "build", plan, "-o", bin); code != 0 {
		t.Fatalf("syncgen build: exit %d\n%s%s", code, out, errOut)
	}
	args := []string{"-np", "2", "--bind-to", "none"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	args = append(args, bin, "--steps", "3", "--warmup", "0", "--backend", "cpu")
	out, err := exec.Command(mpirun, args...).CombinedOutput()
	if err != nil || strings.Contains(string(out), "warning") || !strings.Contains(string(out), "0 of 3 steps skipped") || !strings.Contains(string(out), "# 0 wrong") {
		t.Errorf("mpirun -np 2 train_sync: %v; want it to run clean, no warning, no skipped step, 0 wrong:\n%s", err, out)
	}
}

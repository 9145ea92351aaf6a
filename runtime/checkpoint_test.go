package runtime_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shardSums reads a committed checkpoint's shard checksums.
func shardSums(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Shards []struct {
			SHA256 string `json:"sha256"`
		} `json:"shards"`
	}
	if err := json.Unmarshal(data, &md); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range md.Shards {
		out = append(out, s.SHA256)
	}
	return out
}

// A run resumed from a checkpoint ends with the same parameters and
// optimizer state, byte for byte on every rank, as one that never stopped:
// a replicated plan, ZeRO's sharded one, one whose loss scaler skipped
// steps before and after the checkpoint, one accumulating gradients, and
// one balancing the batch dynamically with a weighted average.
func TestResumeIsBitIdentical(t *testing.T) {
	for _, c := range []struct {
		plan  string
		extra []string
		// skipped are the steps the resumed run's scaler skips, by
		// their numbers from 0 (nil: not looked at).
		skipped []int
	}{
		{"train:adamw:f16", nil, nil},
		{"zero", []string{"--overflow", "2:1:w", "--overflow", "6:0:v=nan"}, []int{6}},
		{"scaled:megatron", []string{"--overflow", "1:0:w", "--overflow", "5:1:w"}, []int{5}},
		// Written in the background: the staged bytes are those of the
		// save, not the later steps' (the shards after step 8 would differ).
		{"train:adamw:bf16:master", []string{"--checkpoint-async"}, nil},
		// Gradient accumulation: a checkpoint after a step of 3
		// micro-batches resumes at the next step's first micro-batch.
		{"accumulate:3:f16:avg:scaled", nil, nil},
		// Dynamic balancing, which weights the average by the shares: the
		// resumed run goes on with the shares in force at the checkpoint
		// and each rank's compute since the last rebalance (jittered, so
		// that a part of the period gives other shares than the whole).
		{"train:adamw:f32:wavg", []string{"--batch", "60", "--balance", "dynamic:3", "--speed", "0=0.5", "--jitter", "7:1ms"}, nil},
	} {
		t.Run(c.plan, func(t *testing.T) {
			dir := t.TempDir()
			straight, resumed := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			args := []string{c.plan, "--steps", "8", "--warmup", "0", "--checkpoint-every", "4", "--quiet"}
			r := runOK(t, 2, slices.Concat(args, c.extra, []string{"--checkpoint-dir", straight})...)
			// The resumed run starts at step 4: an overflow before it
			// would never be injected, and is refused.
			for i := 0; i < len(c.extra); i++ {
				if c.extra[i] == "--overflow" {
					if step, _, _ := strings.Cut(c.extra[i+1], ":"); mustAtoi(t, step) < 4 {
						i++
						continue
					}
				}
				args = append(args, c.extra[i])
			}
			mustContain(t, r, "# checkpoints: 2 written")
			js := filepath.Join(dir, "resumed.json")
			r = runOK(t, 2, append(args, "--checkpoint-dir", resumed, "--resume", filepath.Join(straight, "step-00000004"), "--json", js)...)
			mustContain(t, r, "# checkpoints: 1 written", "# resumed at step 4, from the checkpoint after 4 steps (steps 0 to 3); reading the checkpoint took")
			if c.skipped != nil {
				// The scaler's steps are numbered as --overflow numbers
				// them, from the resumed checkpoint's step on.
				mustContain(t, r, "of the 4 steps after the resume (steps 4 to 7) skipped on overflow")
				sc := readTrainJSON(t, js).Training.Scaler
				if sc == nil || sc.FirstStep != 4 || len(sc.Scale) != 4 || !slices.Equal(sc.Skipped, c.skipped) {
					t.Errorf("resumed run's scaler %+v, want first_step 4, 4 scales, skipped steps %v", sc, c.skipped)
				}
			}
			a, b := shardSums(t, filepath.Join(straight, "step-00000008")), shardSums(t, filepath.Join(resumed, "step-00000008"))
			if len(a) != 2 || !slices.Equal(a, b) {
				t.Fatalf("shards after step 8: straight %v, resumed %v", a, b)
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runOK runs a plan that must exit 0 with no wrong element (unchecked
// elements allowed: the overflows injected).
func runOK(t *testing.T, np int, args ...string) result {
	t.Helper()
	r := mpirun(t, np, nil, 90*time.Second, args...)
	if r.code != 0 || !strings.Contains(r.out, "# 0 wrong") {
		t.Fatalf("np %d %v: exit %d:\n%s", np, args, r.code, r.out)
	}
	return r
}

// --checkpoint-keep keeps the newest committed checkpoints; --resume auto
// takes the newest committed one and ignores one whose write never
// committed.
func TestCheckpointKeepAndAuto(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(t.TempDir(), "trace.json")
	runOK(t, 2, "train:sgd:f32", "--steps", "6", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-keep", "1", "--checkpoint-dir", dir, "--quiet", "--trace", trace)
	saves := 0
	for _, ev := range readTrace(t, trace).TraceEvents {
		if strings.HasPrefix(ev.Name, "checkpoint after ") && ev.Ph == "X" && ev.Dur > 0 {
			saves++
		}
	}
	if saves != 6 { // 3 saves on each of 2 ranks
		t.Errorf("%d checkpoint events in the trace, want 6", saves)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "step-00000006" {
		t.Fatalf("kept: %v", entries)
	}
	if err := os.MkdirAll(filepath.Join(dir, "step-00000007"), 0o755); err != nil { // an interrupted write
		t.Fatal(err)
	}
	r := runOK(t, 2, "train:sgd:f32", "--steps", "8", "--warmup", "0", "--checkpoint-dir", dir, "--resume", "auto")
	if !strings.Contains(r.out, "# 0 wrong, 2 checks") {
		t.Fatalf("auto did not resume at step 6:\n%s", r.out)
	}
}

// Checkpoints that cannot be resumed are refused with what is wrong,
// printed once by rank 0 (naming the ranks that found it when not all
// did), and every rank exits without aborting the job: 2 (a usage error,
// which a restart would repeat) when the metadata already refuses it, 1
// when a rank finds a shard damaged as it reads it.
func TestResumeRefusals(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	runOK(t, 2, "train:adamw:f32", "--steps", "4", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", ck, "--quiet")
	step2 := filepath.Join(ck, "step-00000002")
	broken := func(name string, change func(dir string)) string {
		d := filepath.Join(dir, name)
		if err := os.CopyFS(d, os.DirFS(step2)); err != nil {
			t.Fatal(err)
		}
		change(d)
		return d
	}
	truncated := broken("truncated", func(d string) { os.Truncate(filepath.Join(d, "rank-00001.safetensors"), 100) })
	flipped := broken("flipped", func(d string) {
		p := filepath.Join(d, "rank-00000.safetensors")
		b, _ := os.ReadFile(p)
		b[len(b)-3] ^= 1
		os.WriteFile(p, b, 0o644)
	})
	uncommitted := broken("uncommitted", func(d string) { os.Remove(filepath.Join(d, "metadata.json")) })
	missing := broken("missing", func(d string) { os.Remove(filepath.Join(d, "rank-00001.safetensors")) })
	for _, c := range []struct {
		np   int
		args []string
		want string
	}{
		// A fault in a step before the checkpoint would never fire: a
		// usage error (status 2).
		{2, []string{"train:adamw:f32", "--resume", step2, "--fault", "crash:1:1"}, `--fault "crash:1:1": step 1 is before this run's first: it resumes from the checkpoint after 2 steps (steps 0 to 1) and starts at step 2`},
		{2, []string{"train:adamw:f32", "--resume", truncated}, "rank 1: error: --resume: " + truncated + ": shard " + filepath.Join(truncated, "rank-00001.safetensors") + " has 100 bytes; the checkpoint's metadata says"},
		{2, []string{"train:adamw:f32", "--resume", flipped}, "rank-00000.safetensors: sha256"},
		{2, []string{"train:adamw:f32", "--resume", ck}, "is a directory of checkpoints, not a checkpoint: give --checkpoint-dir " + ck + " --resume auto"},
		{2, []string{"train:adamw:f32", "--resume", uncommitted}, "the checkpoint was never committed"},
		{2, []string{"train:adamw:f32", "--resume", missing}, "rank-00001.safetensors is missing"},
		{2, []string{"scaled:torch", "--resume", step2}, `is a checkpoint of plan "train"`},
		{2, []string{"train:adamw:f32", "--resume", step2, "--steps", "1", "--warmup", "0"}, "nothing is left to run"},
		{2, []string{"train:adamw:f32", "--resume", "auto", "--checkpoint-dir", filepath.Join(dir, "none")}, "no committed checkpoint in"},
		{2, []string{"train:adamw:f32", "--checkpoint-every", "1", "--checkpoint-dir", filepath.Join(step2, "metadata.json")}, "the checkpoint directory"},
	} {
		r := mpirun(t, c.np, nil, 60*time.Second, append(c.args, "--quiet")...)
		code := 2
		if c.args[2] == truncated || c.args[2] == flipped || c.args[2] == missing {
			code = 1
		}
		if r.code != code || !strings.Contains(r.out, c.want) || strings.Count(r.out, "error:") != 1 || strings.Contains(r.out, "MPI_ABORT") {
			t.Errorf("%v: exit %d, want %d and one error with %q, no abort:\n%s", c.args, r.code, code, c.want, r.out)
		}
	}
	// The newest checkpoint's shard damaged: --resume auto would take it
	// again, so the error names the one before it.
	os.Truncate(filepath.Join(ck, "step-00000004", "rank-00001.safetensors"), 100)
	r := mpirun(t, 2, nil, 60*time.Second, "train:adamw:f32", "--resume", "auto", "--checkpoint-dir", ck, "--steps", "6", "--quiet")
	if want := "it is truncated or was changed; resume from another checkpoint (the newest committed checkpoint of this plan before it: --resume " + step2 + ")"; r.code != 1 || !strings.Contains(r.out, want) {
		t.Errorf("the newest checkpoint damaged: exit %d, want 1 and %q:\n%s", r.code, want, r.out)
	}
}

// A checkpoint written by 4 ranks resumes at 2 and at 3: the replicated
// plan takes any rank's copy, ZeRO's shards are put together and cut into
// the new world's slices; every element of every later step is checked.
func TestResumeAtAnotherWorldSize(t *testing.T) {
	for _, plan := range []string{"train:sgd:f32", "zero"} {
		t.Run(plan, func(t *testing.T) {
			dir := t.TempDir()
			runOK(t, 4, plan, "--steps", "4", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", dir, "--quiet")
			for _, np := range []int{2, 3} {
				r := runOK(t, np, plan, "--steps", "5", "--warmup", "0", "--resume", filepath.Join(dir, "step-00000004"))
				if !strings.Contains(r.out, "# 0 wrong, 1 check") {
					t.Fatalf("np %d:\n%s", np, r.out)
				}
			}
		})
	}
}

// A plan larger than the host's memory is refused before anything is
// allocated, with the figures, instead of being killed by the OOM killer.
func TestPlanLargerThanHostRefused(t *testing.T) {
	r := mpirun(t, 2, nil, 60*time.Second, "allreduce:4096GiB", "--steps", "1", "--quiet")
	if r.code == 0 {
		t.Fatalf("exit 0:\n%s", r.out)
	}
	mustContain(t, r, "this host's 2 ranks need about 8.0 TiB for the plan's buffers", "run fewer ranks on each host")
}

// A run that ends early still writes rank 0's JSON: the steps it finished,
// marked incomplete with the reason; after a timeout, and when another
// rank was killed.
func TestPartialJSONWhenTheRunEndsEarly(t *testing.T) {
	for _, c := range []struct{ fault, want string }{
		{"hang:1:5", "timeout: step 5"},
		{"crash:1:5", "terminated (SIGTERM) in step 5"},
	} {
		path := filepath.Join(t.TempDir(), "out.json")
		r := mpirun(t, 2, nil, 60*time.Second, "train:sgd:f32", "--steps", "8", "--warmup", "0", "--fault", c.fault, "--timeout", "2s", "--json", path, "--quiet")
		if r.code == 0 {
			t.Fatalf("%s: exit 0", c.fault)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: no JSON: %v\n%s", c.fault, err, r.out)
		}
		var j struct {
			Incomplete string `json:"incomplete"`
			Summary    struct {
				StepsMs []float64 `json:"step_ms"`
			} `json:"summary"`
		}
		if err := json.Unmarshal(data, &j); err != nil || !strings.HasPrefix(j.Incomplete, c.want) || len(j.Summary.StepsMs) != 5 {
			t.Errorf("%s: incomplete %q, %d steps (want 5): %v", c.fault, j.Incomplete, len(j.Summary.StepsMs), err)
		}
	}
}

// --timeout covers MPI's start-up: a rank stopped before MPI_Init ends the
// job at the timeout (it once hung it for ten minutes), and none of its
// processes is left.
func TestTimeoutCoversMPIStart(t *testing.T) {
	start := time.Now()
	r := mpirun(t, 2, nil, 60*time.Second, "train:sgd:f32", "--steps", "3", "--fault", "stop:1:start", "--timeout", "3s", "--quiet")
	if r.code != 3 || time.Since(start) > 40*time.Second {
		t.Fatalf("exit %d after %v:\n%s", r.code, time.Since(start), r.out)
	}
	mustContain(t, r, "rank 0: timeout: starting MPI (MPI_Init and the ranks' local communicator) has taken 10s (--timeout 3s, at least 10s for the start)")
}

// --timeout covers a checkpoint's save as it covers a step: a rank whose
// shard writer is stuck (a file system that no longer answers) leaves the
// others waiting for its checksum, and the job ends at the timeout with
// status 3, each rank saying where in the save it waits. The save was once
// unwatched, and such a job hung for good. Async saves wait for the shard
// at the end of the next step, watched the same way.
func TestTimeoutCoversCheckpointSave(t *testing.T) {
	for _, async := range []bool{false, true} {
		args := []string{"train:sgd:f32", "--steps", "6", "--warmup", "0", "--checkpoint-every", "2",
			"--checkpoint-dir", t.TempDir(), "--timeout", "1s", "--quiet"}
		if async {
			args = append(args, "--checkpoint-async")
		}
		r := mpirun(t, 2, []string{"SYNCGEN_TEST_HANG_SAVE=1:2"}, 40*time.Second, args...)
		if r.code != 3 {
			t.Fatalf("async %v: exit %d, want 3:\n%s", async, r.code, r.out)
		}
		mustContain(t, r, "timeout: saving the checkpoint after 2 steps has taken",
			"rank 0 host: waiting at gathering the shards' checksums of the checkpoint after 2 steps",
			"rank 1 host: waiting at writing its shard of the checkpoint after 2 steps")
	}
}

// A replicated bucket's copies in a checkpoint that differ (ranks that had
// diverged when it was saved, a shard changed and its checksum written
// anew) are found by the resumed run's checks: every rank checks against
// rank 0's copy, so rank 1's own, restored from its shard, is wrong, where
// a reference from each rank's own shard passed it unseen.
func TestResumeChecksReplicatedCopiesAgainstOne(t *testing.T) {
	dir := t.TempDir()
	runOK(t, 2, "train:sgd:f32", "--steps", "2", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", dir, "--quiet")
	ck := filepath.Join(dir, "step-00000002")
	changeShardParam(t, ck, 1, "param/grads[0]")
	r := mpirun(t, 2, nil, 90*time.Second, "train:sgd:f32", "--steps", "4", "--warmup", "0", "--resume", ck, "--quiet")
	// The parameter and its momentum, at both steps, on rank 1 alone.
	if r.code != 1 || !strings.Contains(r.out, "# 4 wrong, of which 4 in parameters") || !strings.Contains(r.out, `rank 1: step 2: parameters of bucket "grads[0]": 2 wrong`) || strings.Contains(r.out, "rank 0: step") {
		t.Fatalf("resumed from a checkpoint whose rank 1 holds another parameter: exit %d, want 1 and rank 1's parameter and momentum wrong at both checks:\n%s", r.code, r.out)
	}
}

// changeShardParam adds 1 to the first element of tensor name (f32) in
// rank's shard of checkpoint ck, and writes the shard's new size and
// sha256 into the metadata, so that the checkpoint still reads as whole.
func changeShardParam(t *testing.T, ck string, rank int, name string) {
	t.Helper()
	path := filepath.Join(ck, fmt.Sprintf("rank-%05d.safetensors", rank))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var header map[string]struct {
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	at := 8 + int(n) + header[name].Offsets[0]
	v := math.Float32frombits(binary.LittleEndian.Uint32(data[at:]))
	binary.LittleEndian.PutUint32(data[at:], math.Float32bits(v+1))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	editMetadata(t, ck, func(md map[string]any) {
		sum := sha256.Sum256(data)
		shard := md["shards"].([]any)[rank].(map[string]any)
		shard["sha256"], shard["bytes"] = hex.EncodeToString(sum[:]), len(data)
	})
}

// editMetadata rewrites checkpoint ck's metadata.json as edit changes it.
func editMetadata(t *testing.T, ck string, edit func(md map[string]any)) {
	t.Helper()
	mdPath := filepath.Join(ck, "metadata.json")
	raw, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	if err := json.Unmarshal(raw, &md); err != nil {
		t.Fatal(err)
	}
	edit(md)
	if raw, err = json.Marshal(md); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mdPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint of the plan as it was before an edit that changes none of
// the state it holds (its run line: `run steps 100` grown to 200, say; here
// the plan hash in the metadata is another) resumes, with a note, where
// it was once refused as another plan's; one whose state differs too is
// still refused.
func TestResumeAfterAnEditThatKeepsTheState(t *testing.T) {
	dir := t.TempDir()
	runOK(t, 2, "train:sgd:f32", "--steps", "2", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", dir, "--quiet")
	ck := filepath.Join(dir, "step-00000002")
	editMetadata(t, ck, func(md map[string]any) {
		if h, _ := md["state_hash"].(string); len(h) != 16 {
			t.Errorf("the checkpoint's state_hash is %q, want 16 hex digits", h)
		}
		md["plan_hash"] = "0123456789abcdef"
	})
	r := runOK(t, 2, "train:sgd:f32", "--steps", "4", "--warmup", "0", "--resume", ck, "--quiet")
	mustContain(t, r, "resuming from "+ck+`, a checkpoint of plan "train" as it was before an edit that changes none of the state it holds (hash 0123456789ab, now `, "# 0 wrong, 2 checks")
	editMetadata(t, ck, func(md map[string]any) { md["state_hash"] = "0123456789abcdef" })
	r = mpirun(t, 2, nil, 60*time.Second, "train:sgd:f32", "--steps", "4", "--warmup", "0", "--resume", ck, "--quiet")
	if want := "hash 0123456789ab), not of this program's \"train\""; r.code != 2 || !strings.Contains(r.out, want) {
		t.Errorf("a checkpoint whose state differs: exit %d, want 2 and %q:\n%s", r.code, want, r.out)
	}
}

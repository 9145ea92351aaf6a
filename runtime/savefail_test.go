package runtime_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A checkpoint's save that fails (here a full disk, by the test hook) ends
// the run on every rank together: rank 0 prints one error that names the
// ranks that failed and why, every rank finalises MPI (no MPI_Abort, no
// error line per rank), and the status is 1. The checkpoint committed
// before stays whole and the failed one uncommitted. Every rank failing
// alike (a full disk they share) is said once, as every rank's; one rank
// failing alone is named, here with an async save, whose failure comes out
// at the end of the next step.
func TestFailedSaveEndsTogether(t *testing.T) {
	for _, c := range []struct {
		rank, want string
		async      bool
	}{
		{"-1", "failed on every rank: writing its shard into ", false},
		{"1", "failed on rank 1 (", true},
	} {
		dir := t.TempDir()
		ck, js := filepath.Join(dir, "ck"), filepath.Join(dir, "out.json")
		args := []string{"train:sgd:f32", "--steps", "6", "--warmup", "0", "--checkpoint-every", "2",
			"--checkpoint-dir", ck, "--json", js, "--timeout", "30s", "--quiet"}
		if c.async {
			args = append(args, "--checkpoint-async")
		}
		r := mpirun(t, 2, []string{"SYNCGEN_TEST_SAVE_FAIL=" + c.rank + ":4"}, 60*time.Second, args...)
		head := "testprog: error: the checkpoint after 4 steps (after step 3) " + c.want
		if r.code != 1 || strings.Count(r.out, "error:") != 1 || !strings.Contains(r.out, head) || strings.Contains(r.out, "MPI_ABORT") {
			t.Fatalf("rank %s: exit %d, want 1 and one error %q..., no abort:\n%s", c.rank, r.code, head, r.out)
		}
		mustContain(t, r, "step-00000004: no space left on device (the disk is full: free space there")
		// The checkpoint before is committed and whole.
		for i, sum := range shardSums(t, filepath.Join(ck, "step-00000002")) {
			data, err := os.ReadFile(filepath.Join(ck, "step-00000002", []string{"rank-00000.safetensors", "rank-00001.safetensors"}[i]))
			if got := sha256.Sum256(data); err != nil || hex.EncodeToString(got[:]) != sum {
				t.Errorf("rank %s: shard %d of the checkpoint after 2 steps changed: %v", c.rank, i, err)
			}
		}
		if _, err := os.Stat(filepath.Join(ck, "step-00000004", "metadata.json")); !os.IsNotExist(err) {
			t.Errorf("rank %s: the failed checkpoint is committed: %v", c.rank, err)
		}
		if c.rank == "-1" {
			// The failed save's partial shards stay until a later
			// checkpoint of the plan is committed, which removes them.
			if _, err := os.Stat(filepath.Join(ck, "step-00000004", "rank-00000.safetensors")); err != nil {
				t.Fatalf("the failed save left no partial shard: %v", err)
			}
			runOK(t, 2, "train:sgd:f32", "--steps", "6", "--warmup", "0", "--checkpoint-every", "3", "--checkpoint-dir", ck, "--resume", "auto", "--quiet")
			if _, err := os.Stat(filepath.Join(ck, "step-00000004")); !os.IsNotExist(err) {
				t.Errorf("the failed save's directory is still there after the commit of a later checkpoint: %v", err)
			}
		}
		var j struct {
			Incomplete string `json:"incomplete"`
		}
		if data, err := os.ReadFile(js); err != nil || json.Unmarshal(data, &j) != nil || !strings.HasPrefix(j.Incomplete, "error: the checkpoint after 4 steps") {
			t.Errorf("rank %s: rank 0's JSON is not marked incomplete with the error (%v): %q", c.rank, err, j.Incomplete)
		}
	}
}

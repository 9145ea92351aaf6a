package ckpt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// A shard reads back as written, the same tensors give the same bytes,
// and a changed byte or size is caught.
func TestShardRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tensors := []Tensor{{Name: "param/g", DType: elem.F32, Shape: []int64{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Name: "state0/g", DType: elem.BF16, Shape: []int64{1}, Data: []byte{9, 10}}}
	meta := map[string]string{"rank": "0", "steps": "4"}
	p1, p2 := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	n1, s1, err := WriteShard(p1, meta, tensors)
	if err != nil {
		t.Fatal(err)
	}
	n2, s2, _ := WriteShard(p2, meta, tensors)
	if n1 != n2 || s1 != s2 {
		t.Fatalf("the same tensors gave %d %s and %d %s", n1, s1, n2, s2)
	}
	sh, err := ReadShard(p1, ShardInfo{Bytes: n1, SHA256: s1})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.Tensors["state0/g"]; got.DType != elem.BF16 || string(got.Data) != "\x09\x0a" || sh.Meta["steps"] != "4" {
		t.Fatalf("read back: %+v %v", got, sh.Meta)
	}
	b, _ := os.ReadFile(p1)
	b[len(b)-1] ^= 1
	os.WriteFile(p1, b, 0o644)
	if _, err := ReadShard(p1, ShardInfo{Bytes: n1, SHA256: s1}); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("a changed byte: %v", err)
	}
	if _, err := ReadShard(p1, ShardInfo{Bytes: n1 + 1, SHA256: s1}); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a wrong size: %v", err)
	}
}

// Only committed checkpoints count; Prune keeps the newest (always at
// least one).
func TestCommittedAndPrune(t *testing.T) {
	root := t.TempDir()
	for _, steps := range []int{10, 2, 30} {
		commitStub(t, root, "", steps)
	}
	os.MkdirAll(StepDir(root, 40), 0o755) // never committed
	cks, _ := Committed(root)
	if len(cks) != 3 || filepath.Base(cks[0]) != "step-00000002" || filepath.Base(cks[2]) != "step-00000030" {
		t.Fatalf("committed: %v", cks)
	}
	if _, err := ReadMetadata(StepDir(root, 40)); err == nil || !strings.Contains(err.Error(), "never committed") {
		t.Errorf("uncommitted: %v", err)
	}
	if err := Prune(root, 0, "", "", ""); err != nil {
		t.Fatal(err)
	}
	cks, _ = Committed(root)
	if len(cks) != 1 || filepath.Base(cks[0]) != "step-00000030" {
		t.Fatalf("after pruning to 0 (kept 1): %v", cks)
	}
}

// The checkpoint's write against a plain sequential write and fsync of
// the same bytes to the same disk (docs/performance.md): the sha256 that
// WriteShard computes on the way is the difference.
func BenchmarkWriteShard(b *testing.B) {
	data := make([]byte, 256<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	dir := b.TempDir()
	b.Run("shard", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, _, err := WriteShard(filepath.Join(dir, "s"), nil, []Tensor{{Name: "param/g", DType: elem.F32, Shape: []int64{int64(len(data) / 4)}, Data: data}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			f, err := os.Create(filepath.Join(dir, "p"))
			if err != nil {
				b.Fatal(err)
			}
			f.Write(data)
			f.Sync()
			f.Close()
		}
	})
}

// Prune keeps the newest committed checkpoints of its own plan by the time
// they were committed: another plan's are left alone, and an earlier run's
// checkpoint at a later step goes before the one just committed.
func TestPruneOwnPlanNewestCommitted(t *testing.T) {
	root := t.TempDir()
	commit := func(hash string, steps int) { commitStub(t, root, hash, steps) }
	commit("other", 50) // another plan's
	commit("p", 10)     // an earlier run of p, up to step 10
	commit("p", 2)      // this run of p
	commit("p", 4)
	if err := Prune(root, 2, "p", "", ""); err != nil {
		t.Fatal(err)
	}
	if got := committedNames(root); got != "step-00000002 step-00000004 step-00000050" {
		t.Errorf("kept %s, want step-00000002 step-00000004 step-00000050", got)
	}
}

// Prune counts as its plan's the checkpoints of the same state hash, the
// plan's before an edit that changed none of its state (its run line),
// which it resumes; those of another state are another plan's.
func TestPruneSameState(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		hash, state string
		steps       int
	}{{"old", "s", 2}, {"old", "s", 4}, {"other", "t", 5}, {"new", "s", 6}} {
		d := StepDir(root, c.steps)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		md := &Metadata{Format: Format, PlanHash: c.hash, StateHash: c.state, Steps: c.steps, WorldSize: 1, Shards: []ShardInfo{{File: ShardName(0), Bytes: 8}}}
		if err := Commit(d, md); err != nil {
			t.Fatal(err)
		}
	}
	if err := Prune(root, 2, "new", "s", ""); err != nil {
		t.Fatal(err)
	}
	if got := committedNames(root); got != "step-00000004 step-00000005 step-00000006" {
		t.Errorf("kept %s, want step-00000004 step-00000005 step-00000006", got)
	}
}

// Prune never removes the checkpoint that a run resumed from (protect),
// however many newer ones it keeps.
func TestPruneKeepsTheResumedCheckpoint(t *testing.T) {
	root := t.TempDir()
	for _, steps := range []int{8, 10, 2, 4} {
		commitStub(t, root, "p", steps)
	}
	if err := Prune(root, 1, "p", "", StepDir(root, 8)+"/"); err != nil {
		t.Fatal(err)
	}
	if got := committedNames(root); got != "step-00000004 step-00000008" {
		t.Errorf("kept %s, want step-00000004 step-00000008", got)
	}
}

// A committed checkpoint about to be written again is uncommitted first:
// resume no longer lists it, and its shards stay until they are replaced.
func TestUncommit(t *testing.T) {
	root := t.TempDir()
	d := commitStub(t, root, "", 6)
	shard := filepath.Join(d, ShardName(0))
	if err := os.WriteFile(shard, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Uncommit(d); err != nil {
		t.Fatal(err)
	}
	if cks, _ := Committed(root); len(cks) != 0 {
		t.Errorf("still committed: %v", cks)
	}
	if _, err := os.Stat(shard); err != nil {
		t.Errorf("the shard went too: %v", err)
	}
	if err := Uncommit(d); err != nil {
		t.Errorf("a directory already uncommitted: %v", err)
	}
	if err := Uncommit(filepath.Join(root, "absent")); err != nil {
		t.Errorf("a directory that does not exist: %v", err)
	}
}

// committedNames lists root's committed checkpoints by name, in order.
func committedNames(root string) string {
	var names []string
	cks, _ := Committed(root)
	for _, c := range cks {
		names = append(names, filepath.Base(c))
	}
	return strings.Join(names, " ")
}

// commitStub commits a checkpoint of plan hash after steps steps in root,
// of one rank, without its shard, and returns its directory.
func commitStub(t *testing.T, root, hash string, steps int) string {
	t.Helper()
	d := StepDir(root, steps)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	md := &Metadata{Format: Format, PlanHash: hash, Steps: steps, WorldSize: 1, Shards: []ShardInfo{{File: ShardName(0), Bytes: 8}}}
	if err := Commit(d, md); err != nil {
		t.Fatal(err)
	}
	return d
}

// A shard that the disk has no room for says so, and what to do
// (/dev/full answers every write with ENOSPC).
func TestWriteShardDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	_, _, err := WriteShard("/dev/full", nil, []Tensor{{Name: "param/g", DType: elem.F32, Shape: []int64{1}, Data: make([]byte, 4)}})
	if err == nil || !strings.Contains(err.Error(), "the disk is full: free space there or give another --checkpoint-dir") {
		t.Errorf("writing to a full disk: %v", err)
	}
}

// A file given as a checkpoint is named as not one, with what to give.
func TestReadMetadataOfAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.sync")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMetadata(f); err == nil || !strings.Contains(err.Error(), f+" is not a checkpoint (a step-NNNNNNNN directory): give") {
		t.Errorf("a file: %v", err)
	}
}

// A save that failed or was interrupted leaves a step directory that is
// never committed; PruneUncommitted removes those of its plan below the
// checkpoint just committed, and nothing else: not another plan's, not
// one whose plan its files do not tell, not one with a file a save does
// not write, not one at or past the commit (a save in progress).
func TestPruneUncommitted(t *testing.T) {
	root := t.TempDir()
	shard := func(steps, rank int, hash string, cut int64) {
		t.Helper()
		d := StepDir(root, steps)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := map[string]string{"format": Format, "plan_hash": hash, "rank": fmt.Sprint(rank), "steps": fmt.Sprint(steps)}
		p := filepath.Join(d, ShardName(rank))
		n, _, err := WriteShard(p, meta, []Tensor{{Name: "param/g", DType: elem.F32, Shape: []int64{256}, Data: make([]byte, 1024)}})
		if err != nil {
			t.Fatal(err)
		}
		if cut > 0 {
			os.Truncate(p, min(cut, n))
		}
	}
	commitStub(t, root, "p", 2)
	shard(2, 0, "p", 0) // beside the committed one's metadata: kept
	// Removed: a full disk's shards, one cut in its data and one in its
	// header, and an unfinished commit's metadata.
	shard(1, 0, "p", 600)
	shard(1, 1, "p", 5)
	os.WriteFile(filepath.Join(StepDir(root, 1), MetadataName+".tmp"), []byte("{"), 0o644)
	shard(7, 0, "p", 0) // removed
	// Kept: another plan's; two plans' shards; a file a save does not
	// write; an empty directory and one whose header does not read
	// (whose they are is not known); shards of another step than their
	// directory's (step-0000001 is step 1); at the commit and past it (a
	// save in progress).
	shard(3, 0, "other", 0)
	shard(5, 0, "p", 0)
	shard(5, 1, "other", 0)
	shard(6, 0, "p", 0)
	os.WriteFile(filepath.Join(StepDir(root, 6), "notes.txt"), nil, 0o644)
	os.MkdirAll(StepDir(root, 4), 0o755)
	shard(0, 0, "p", 5)
	shard(9, 0, "p", 0)
	os.Rename(StepDir(root, 9), filepath.Join(root, "step-0000001"))
	shard(10, 0, "p", 0)
	shard(11, 0, "p", 0)
	os.MkdirAll(filepath.Join(root, "step-x"), 0o755)
	if err := PruneUncommitted(root, "p", 10); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := "step-00000000 step-00000002 step-00000003 step-00000004 step-00000005 step-00000006 step-0000001 step-00000010 step-00000011 step-x"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("left %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(StepDir(root, 2), ShardName(0))); err != nil {
		t.Errorf("a committed checkpoint's shard was removed: %v", err)
	}
}

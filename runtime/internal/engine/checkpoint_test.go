package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/ckpt"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// A sharded bucket is put together from every old rank's slice (the last
// one short, the padding past the bucket absent); a replicated one is
// any rank's copy.
func TestWholeBucket(t *testing.T) {
	const elems, world = 10, 4 // padded to 12: slices of 3, the last holds 1
	full := make([]byte, elems*4)
	for i := range full {
		full[i] = byte(i)
	}
	bi := ckpt.BucketInfo{Name: "g", DType: "f32", Elems: elems, States: 0, Sharded: true, Slice: 3}
	shards := make([]*ckpt.Shard, world)
	for r := range world {
		lo, hi := min(int64(r)*3, elems), min(int64(r+1)*3, elems)
		shards[r] = &ckpt.Shard{Tensors: map[string]ckpt.Tensor{"param/g": {Data: full[lo*4 : hi*4]}}}
	}
	read := func(r int) (*ckpt.Shard, error) { return shards[r], nil }
	got, err := wholeBucket(bi, "param/g", elem.F32, world, 1, read)
	if err != nil || !bytes.Equal(got, full) {
		t.Fatalf("sharded: %v %v", got, err)
	}
	bi.Sharded = false
	shards[3] = &ckpt.Shard{Tensors: map[string]ckpt.Tensor{"param/g": {Data: full}}}
	if got, err := wholeBucket(bi, "param/g", elem.F32, world, 7, read); err != nil || !bytes.Equal(got, full) {
		t.Fatalf("replicated, from a larger world's rank: %v %v", got, err)
	}
	shards[3] = &ckpt.Shard{Tensors: map[string]ckpt.Tensor{"param/g": {Data: full[:8]}}}
	if _, err := wholeBucket(bi, "param/g", elem.F32, world, 7, read); err == nil {
		t.Fatal("a short tensor was taken")
	}
}

// commitFake commits a checkpoint of plan hash after steps steps in root,
// with no shard.
func commitFake(t *testing.T, root, hash string, steps int) string {
	t.Helper()
	dir := ckpt.StepDir(root, steps)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	md := &ckpt.Metadata{Format: ckpt.Format, PlanHash: hash, PlanName: "p", Source: "p.sync", Steps: steps,
		WorldSize: 1, Shards: []ckpt.ShardInfo{{File: ckpt.ShardName(0), Bytes: 8}}}
	if err := ckpt.Commit(dir, md); err != nil {
		t.Fatal(err)
	}
	return dir
}

// FindResume says what is wrong with the checkpoint --resume names, and
// what to do, before any shard is read.
func TestFindResume(t *testing.T) {
	root := t.TempDir()
	p := &plan.Plan{Name: "p", Source: "p.sync", Hash: "aaaa"}
	commitFake(t, root, "aaaa", 2)
	four := commitFake(t, root, "aaaa", 4)
	other := commitFake(t, filepath.Join(root, "other"), "bbbb", 2)
	if err := os.MkdirAll(ckpt.StepDir(root, 6), 0o755); err != nil { // never committed
		t.Fatal(err)
	}
	empty := t.TempDir()
	if err := os.MkdirAll(ckpt.StepDir(empty, 1), 0o755); err != nil {
		t.Fatal(err)
	}
	if rp, err := FindResume("auto", root, p, 10); err != nil || rp.Dir != four || rp.Steps() != 4 || rp.Note != "" {
		t.Errorf("auto: %+v %v, want %s", rp, err, four)
	}
	// A newer checkpoint whose metadata was damaged after its commit is
	// passed over, with a note naming it.
	damaged := filepath.Join(t.TempDir(), "ck")
	commitFake(t, damaged, "aaaa", 2)
	three := commitFake(t, damaged, "aaaa", 3)
	five := commitFake(t, damaged, "aaaa", 5)
	if err := os.WriteFile(filepath.Join(five, ckpt.MetadataName), []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rp, err := FindResume("auto", damaged, p, 10); err != nil || rp.Dir != three ||
		!strings.Contains(rp.Note, "resuming from "+three+", the newest committed checkpoint whose metadata reads; passed over: "+filepath.Join(five, ckpt.MetadataName)) {
		t.Errorf("auto past a damaged metadata: %+v %v, want %s", rp, err, three)
	}
	for _, c := range []struct {
		value, root string
		total       int
		want        string
	}{
		{"auto", empty, 10, "no committed checkpoint in " + empty + " (it holds 1 whose write was interrupted before the commit): run without --resume"},
		{"auto", filepath.Join(root, "none"), 10, "(it does not exist): run without --resume to start from step 0"},
		{filepath.Join(root, "none"), root, 10, "does not exist: give a checkpoint's step-NNNNNNNN directory, or --checkpoint-dir DIR --resume auto"},
		{root, "checkpoints", 10, root + " is a directory of checkpoints, not a checkpoint: give --checkpoint-dir " + root + " --resume auto to resume its newest committed one, or --resume " + four},
		{ckpt.StepDir(root, 6), root, 10, "the checkpoint was never committed"},
		{other, root, 10, `is a checkpoint of plan "p" (p.sync, hash bbbb), not of this program's`},
		{four, root, 4, "holds the state after 4 steps (steps 0 to 3), and this run has 4 steps (steps 0 to 3, warm-up included): nothing is left to run"},
	} {
		if _, err := FindResume(c.value, c.root, p, c.total); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--resume %s (--checkpoint-dir %s): %v, want %q", c.value, c.root, err, c.want)
		}
	}
}

// --resume since:TIME takes the newest checkpoint of the plan committed
// since TIME, never another plan's or an earlier one's, and starts from
// step 0 when there is none.
func TestFindResumeSince(t *testing.T) {
	root := t.TempDir()
	p := &plan.Plan{Name: "p", Source: "p.sync", Hash: "aaaa"}
	commitFake(t, root, "aaaa", 8) // an earlier job's
	since := time.Now()
	value := SincePrefix + since.UTC().Format(time.RFC3339Nano)
	if rp, err := FindResume(value, root, p, 10); err != nil || rp.MD != nil || !strings.HasPrefix(rp.Note, "starting from step 0: "+root+` holds no checkpoint of plan "p" committed since `) {
		t.Errorf("nothing since: %+v %v", rp, err)
	}
	four := commitFake(t, root, "aaaa", 4)
	commitFake(t, root, "bbbb", 9) // another plan's
	rp, err := FindResume(value, root, p, 10)
	if err != nil || rp.Dir != four || rp.Steps() != 4 || !strings.HasPrefix(rp.Note, "resuming from "+four+`, the newest checkpoint of plan "p" committed since `) {
		t.Errorf("since: %+v %v, want %s", rp, err, four)
	}
	if _, err := FindResume(SincePrefix+"yesterday", root, p, 10); err == nil {
		t.Error("since:yesterday was taken")
	}
}

// A restart of a job that the user started with --resume DIR or auto
// (since:TIME,else:VALUE) resumes from what VALUE took at the first
// launch when the job committed nothing since: never from step 0, whose
// pruning would remove the user's checkpoints.
func TestFindResumeSinceElse(t *testing.T) {
	root := t.TempDir()
	p := &plan.Plan{Name: "p", Source: "p.sync", Hash: "aaaa"}
	eight := commitFake(t, root, "aaaa", 8) // the user's
	ten := commitFake(t, root, "aaaa", 10)
	since := time.Now()
	value := SincePrefix + since.UTC().Format(time.RFC3339Nano)
	for _, c := range []struct{ fallback, want string }{{eight, eight}, {"auto", ten}} {
		rp, err := FindResume(value+ElseSep+c.fallback, root, p, 14)
		if err != nil || rp.Dir != c.want || !strings.HasPrefix(rp.Note, "resuming from "+c.want+", what the job's own --resume "+c.fallback+" took: "+root+" holds no checkpoint") {
			t.Errorf("else:%s: %+v %v, want %s", c.fallback, rp, err, c.want)
		}
	}
	// A restart's flags given again: the first launch's fallback.
	if rp, err := FindResume(value+ElseSep+value+ElseSep+eight, root, p, 14); err != nil || rp.Dir != eight {
		t.Errorf("nested: %+v %v", rp, err)
	}
	// auto among those committed before the job began: another plan's
	// checkpoint at a later step since is not what the first launch took.
	later := time.Now()
	commitFake(t, root, "bbbb", 12)
	if rp, err := FindResume(SincePrefix+later.UTC().Format(time.RFC3339Nano)+ElseSep+"auto", root, p, 14); err != nil || rp.Dir != ten {
		t.Errorf("auto before TIME: %+v %v, want %s", rp, err, ten)
	}
	for _, bad := range []string{SincePrefix + "garbage", value + ElseSep} {
		if _, err := FindResume(bad, root, p, 14); err == nil || !strings.Contains(err.Error(), "want since:TIME") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// A checkpoint directory that cannot be written gives every rank the same
// error (the probe's random name left out), so rank 0 prints it once, with
// what to do; so does one that cannot be made.
func TestCheckDirSameOnEveryRank(t *testing.T) {
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc")
	}
	c := Checkpointing{Every: 1, Dir: "/proc"} // no file can be made there, even by root
	e1, e2 := c.CheckDir(), c.CheckDir()
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() || !strings.Contains(e1.Error(), "the checkpoint directory /proc cannot be written (") ||
		!strings.HasSuffix(e1.Error(), "): give --checkpoint-dir a directory that every rank can write") {
		t.Errorf("two ranks' errors:\n%v\n%v", e1, e2)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	c.Dir = filepath.Join(file, "ck")
	if err := c.CheckDir(); err == nil || !strings.Contains(err.Error(), "cannot be made (mkdir "+file+": not a directory): give --checkpoint-dir") {
		t.Errorf("under a file: %v", err)
	}
}

// --resume auto in a directory that other plans' runs share takes this
// plan's newest checkpoint, passing over another plan's at a later step;
// with none of this plan it names what the directory holds.
func TestFindResumeAutoSharedDirectory(t *testing.T) {
	root := t.TempDir()
	p := &plan.Plan{Name: "p", Source: "p.sync", Hash: "aaaa"}
	four := commitFake(t, root, "aaaa", 4)
	commitFake(t, root, "bbbb", 9)
	if rp, err := FindResume("auto", root, p, 10); err != nil || rp.Dir != four || rp.Note != "" {
		t.Errorf("auto past another plan's: %+v %v, want %s", rp, err, four)
	}
	q := &plan.Plan{Name: "q", Source: "q.sync", Hash: "cccc"}
	want := `auto: no committed checkpoint of plan "q" in ` + root + `, which holds those of other plans: step-00000009 (plan "p"), step-00000004 (plan "p"): run without --resume`
	if _, err := FindResume("auto", root, q, 10); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("auto with none of the plan: %v, want %q", err, want)
	}
	// The same plan edited since: the name alone would read as this
	// plan's, so both hashes are named.
	edited := &plan.Plan{Name: "p", Source: "p.sync", Hash: "dddd"}
	want = `step-00000004 (plan "p" as it was then, hash aaaa: this program's plan "p", hash dddd, differs)`
	if _, err := FindResume("auto", root, edited, 10); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("auto with the plan edited: %v, want %q", err, want)
	}
}

// A failed save's error groups the ranks that failed alike, without their
// own files (failure keeps the system's error alone), and says every rank
// when all did; a rank alone is named with its host.
func TestDescribeFailures(t *testing.T) {
	full := failure("writing its shard into ck/step-00000004", &os.PathError{Op: "write", Path: "ck/step-00000004/rank-00003.safetensors", Err: syscall.ENOSPC})
	other := &saveFailure{Doing: "copying its state to the host", Cause: "a device error"}
	got := describeFailures(4, []shardRecord{{Host: "a", Failed: full}, {Host: "b"}, {Host: "c", Failed: other}, {Host: "d", Failed: full}})
	want := "the checkpoint after 4 steps (after step 3) failed:\n" +
		"  ranks 0, 3: writing its shard into ck/step-00000004: no space left on device (the disk is full: free space there or give another --checkpoint-dir, or a smaller --checkpoint-keep; the checkpoints committed before this one are whole, and --resume auto takes the newest of them)\n" +
		"  rank 2 (c): copying its state to the host: a device error\n" +
		"  it is left uncommitted; the checkpoints committed before it are whole, and --resume auto takes the newest of them"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	got = describeFailures(4, []shardRecord{{Host: "a", Failed: full}, {Host: "b", Failed: full}})
	if want := "the checkpoint after 4 steps (after step 3) failed on every rank: writing its shard into ck/step-00000004: no space left on device (the disk is full: "; !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want %q...", got, want)
	}
	if got := describeFailures(4, []shardRecord{{Host: "a"}, {Host: "b"}}); got != "" {
		t.Errorf("no failure: %q", got)
	}
}

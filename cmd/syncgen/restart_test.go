package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// restartPlan is a small training step with a loss scaler: state that a
// restart must carry over exactly.
const restartPlan = `tensor emb.weight f32[64, 32]
for i in 0..2 {
    tensor h.{i}.w f16[32, 32]
    tensor h.{i}.b f16[32]
}
stream compute
stream comm priority high
scaler dynamic init 64 interval 3
bucket blocks { h.* } wire f16 divide before
bucket emb { emb.* }
step {
    backward 2ms on compute
    allreduce blocks, emb op avg on comm after ready
    unscale blocks, emb on compute after synced
    update blocks adamw lr 1e-3 master f32 on compute after synced
    update emb sgd lr 0.01 momentum 0.9 on compute after synced
}
`

// checkpointSums returns the shards' checksums of a committed checkpoint.
func checkpointSums(t *testing.T, dir string) []string {
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

// A rank killed at step 5, and a rank killed in the middle of the
// checkpoint after step 6 (which is then never committed): syncgen run
// --restarts 1 resumes from the newest committed checkpoint, and the
// parameters after step 8 are those of a run that never failed, byte for
// byte on every rank.
func TestRunRestartsFromCheckpoint(t *testing.T) {
	needToolchain(t)
	needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	plan := writeFile(t, dir, "restart.sync", restartPlan)
	bin := filepath.Join(dir, "restart_sync")
	// run runs the plan with its checkpoints in ckpt, syncgen run's flags
	// runFlags and the program's extra flags.
	run := func(ckpt string, runFlags []string, extra ...string) (int, string) {
		args := append([]string{"run", "-np", "2", "-o", bin}, runFlags...)
		args = append(args, plan, "--", "--steps", "8", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", ckpt, "--quiet",
			"--flight-dir", ckpt+".flightrec")
		code, out, errOut := syncgen(t, append(args, extra...)...)
		return code, out + errOut
	}
	straight := filepath.Join(dir, "straight")
	if code, out := run(straight, nil); code != 0 {
		t.Fatalf("straight: exit %d\n%s", code, out)
	}
	want := checkpointSums(t, filepath.Join(straight, "step-00000008"))
	for _, c := range []struct{ name, fault, from string }{
		{"crash", "crash:1:5", "step-00000004"},
		{"crash-in-save", "crash-in-save:1:6", "step-00000004"},
	} {
		ckpt := filepath.Join(dir, c.name)
		code, out := run(ckpt, []string{"--restarts", "1"}, "--fault", c.fault)
		if code != 0 || !strings.Contains(out, "restart 1 of 1, from the newest checkpoint that this job committed") ||
			!strings.Contains(out, "resuming from "+filepath.Join(ckpt, c.from)+", the newest checkpoint of plan") {
			t.Fatalf("%s: exit %d\n%s", c.name, code, out)
		}
		if got := checkpointSums(t, filepath.Join(ckpt, "step-00000008")); !slices.Equal(got, want) {
			t.Errorf("%s: shards after step 8 %v, a run that never failed %v", c.name, got, want)
		}
	}
	// Without restarts the failure is the job's exit status.
	if code, out := run(filepath.Join(dir, "norestart"), nil, "--fault", "crash:0:3"); code != 137 {
		t.Errorf("no restarts: exit %d, want 137\n%s", code, out)
	}
}

// A restart resumes from the plan's own checkpoint directory (its run
// line's `checkpoint ... to DIR`, no --checkpoint-dir given), and only from
// a checkpoint of this plan that this job committed: another plan's at a
// later step in the same directory is left alone, by the restart and by
// the pruning.
func TestRunRestartsFromThePlansCheckpointDir(t *testing.T) {
	needToolchain(t)
	needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	ck := filepath.Join(dir, "myck")
	other := writeFile(t, dir, "other.sync", restartPlan)
	if code, out, errOut := syncgen(t, "run", "-np", "2", "-o", filepath.Join(dir, "other_sync"), other, "--",
		"--steps", "2", "--warmup", "0", "--checkpoint-every", "2", "--checkpoint-dir", filepath.Join(dir, "o"), "--quiet"); code != 0 {
		t.Fatalf("other plan: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.CopyFS(filepath.Join(ck, "step-00000010"), os.DirFS(filepath.Join(dir, "o", "step-00000002"))); err != nil {
		t.Fatal(err)
	}
	plan := writeFile(t, dir, "mine.sync", restartPlan+"run steps 8 warmup 0 check every 1 checkpoint every 2 to \""+ck+"\" keep 2\n")
	code, out, errOut := syncgen(t, "run", "-np", "2", "--restarts", "1", "-o", filepath.Join(dir, "mine_sync"), plan, "--",
		"--fault", "crash:1:5", "--quiet", "--flight-dir", filepath.Join(dir, "fr"))
	if code != 0 || !strings.Contains(errOut, "resuming from "+filepath.Join(ck, "step-00000004")+", the newest checkpoint of plan \"mine\"") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ck, "step-00000010", "metadata.json")); err != nil {
		t.Errorf("the other plan's checkpoint was removed: %v", err)
	}
}

// A rank count far above the machine's cores is refused unless insisted on.
func TestRunRefusesFarTooManyRanks(t *testing.T) {
	code, _, errOut := syncgen(t, "run", "-np", "99999", "x.sync")
	if code != 2 || !strings.Contains(errOut, "-np 99999 is far more ranks than this machine's") || !strings.Contains(errOut, "--oversubscribe") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// The run line's checkpoint part is the program's default: checkpoints
// appear where it says, as many as it keeps.
func TestRunLineCheckpoint(t *testing.T) {
	needToolchain(t)
	needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	ck := filepath.Join(dir, "ck")
	plan := writeFile(t, dir, "line.sync", restartPlan+"run steps 6 warmup 0 checkpoint every 2 to \""+ck+"\" keep 2\n")
	if code, out, errOut := syncgen(t, "run", "-np", "2", "-o", filepath.Join(dir, "line_sync"), plan, "--", "--quiet"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	entries, _ := os.ReadDir(ck)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"step-00000004", "step-00000006"}) {
		t.Errorf("checkpoints: %v", names)
	}
}

// A rank that is killed, stopped (SIGSTOP) or hung: the job ends non-zero
// within the timeout, no process of it is left, and the merged flight
// record names that rank and the collective the others wait in.
func TestFlightRecordNamesTheMissingRank(t *testing.T) {
	needToolchain(t)
	needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	plan := writeFile(t, dir, "fr.sync", restartPlan)
	bin := filepath.Join(dir, "fr_sync")
	for _, c := range []struct{ fault, want string }{
		{"crash:1:3", `rank 1 \([^)]+\) wrote no flight record \(killed, stopped or unreachable\)`},
		{"stop:1:3", `rank 1 \([^)]+\) was stopped or frozen`},
		{"hang:1:3", `rank 1 \([^)]+\) never issued it`},
	} {
		// Each rank is named with its host.
		want := regexp.MustCompile(c.want)
		fr := filepath.Join(dir, strings.Split(c.fault, ":")[0])
		code, _, errOut := syncgen(t, "run", "-np", "3", "-o", bin, plan, "--", "--steps", "6", "--warmup", "0",
			"--fault", c.fault, "--timeout", "2s", "--flight-dir", fr, "--quiet")
		if code == 0 {
			t.Fatalf("%s: exit 0\n%s", c.fault, errOut)
		}
		if out, err := exec.Command("pgrep", "-f", bin).Output(); err == nil && len(out) > 0 {
			t.Errorf("%s: processes of the job remain: %s", c.fault, out)
		}
		// syncgen run itself says it, from the records.
		if !strings.Contains(errOut, "syncgen run: the ranks' flight records ("+fr+") say:") || !want.MatchString(errOut) {
			t.Errorf("%s: syncgen run did not merge the flight records:\n%s", c.fault, errOut)
		}
		code, out, errOut := syncgen(t, "flightrec", fr)
		if code != 0 || !strings.Contains(out, "stream comm #") || !want.MatchString(out) {
			t.Errorf("%s: flightrec exit %d:\n%s%s", c.fault, code, out, errOut)
		}
	}
	// Another job into the crash's directory, which keeps rank 0's record
	// of the job before: the merge is this job's, which killed rank 0.
	fr := filepath.Join(dir, "crash")
	_, _, errOut := syncgen(t, "run", "-np", "3", "-o", bin, plan, "--", "--steps", "6", "--warmup", "0",
		"--fault", "crash:0:2", "--timeout", "2s", "--flight-dir", fr, "--quiet")
	if !regexp.MustCompile(`rank 0 \([^)]+\) wrote no flight record`).MatchString(errOut) || regexp.MustCompile(`rank 0 \([^)]+\): step 3`).MatchString(errOut) {
		t.Errorf("a second job into the same directory: syncgen run merged another job's record:\n%s", errOut)
	}
	if code, _, errOut := syncgen(t, "flightrec", filepath.Join(dir, "none")); code != 1 || !strings.Contains(errOut, "none: no such file or directory: give the directory") {
		t.Errorf("a directory that does not exist: exit %d: %s", code, errOut)
	}
}

// SIGTERM to syncgen run reaches mpirun, which stops the ranks; syncgen
// run waits for it and leaves no process of the job behind. Killed with
// SIGKILL, which it cannot pass on, it leaves none either: mpirun is told
// by the kernel that its parent died (it once ran the job on, orphaned).
func TestRunPassesSIGTERMOn(t *testing.T) {
	needToolchain(t)
	needMPIRun(t)
	dir := t.TempDir()
	sg := filepath.Join(dir, "syncgen")
	if out, err := exec.Command("go", "build", "-o", sg, ".").CombinedOutput(); err != nil {
		t.Fatalf("building syncgen: %v\n%s", err, out)
	}
	plan := writeFile(t, dir, "long.sync", restartPlan)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		// A program of its own, so that pgrep finds this case's job alone.
		bin := filepath.Join(dir, "long_"+strings.ToLower(sig.String()[:4])+"_sync")
		cmd := exec.Command(sg, "run", "-np", "2", "-o", bin, plan, "--", "--steps", "100000", "--check", "off", "--flight-dir", filepath.Join(dir, "fr"))
		cmd.Env = append(os.Environ(), "SYNCGEN_CACHE="+filepath.Join(dir, "cache"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		// An orphaned mpirun keeps the pipe open: Wait returns once
		// syncgen run has ended all the same.
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the ranks run.
		for i := 0; i < 300; i++ {
			if out, err := exec.Command("pgrep", "-f", bin).Output(); err == nil && len(strings.Fields(string(out))) >= 2 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second)
		cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			killJob(bin)
			t.Fatalf("%v: syncgen run did not end within 30 s:\n%s", sig, stderr.String())
		}
		// Stopped on the user's signal, it exits as the signal would have
		// (mpirun's own status, 1, would read as a failed rank).
		if code := cmd.ProcessState.ExitCode(); sig == syscall.SIGTERM && code != 128+int(sig) || code == 0 {
			t.Errorf("%v: exit %d, want %d:\n%s", sig, code, 128+int(sig), stderr.String())
		}
		// A stop the user asked for is said as such, with no blame analysis
		// of the flight records the ranks left mid-step.
		if sig == syscall.SIGTERM && (!strings.Contains(stderr.String(), "the job was stopped on your signal") || strings.Contains(stderr.String(), "flight records")) {
			t.Errorf("after SIGTERM, want the stop said and no flight-record merge:\n%s", stderr.String())
		}
		// After SIGKILL nothing waits for mpirun: give it the time it takes
		// to stop the ranks.
		var left []byte
		for i := 0; i < 100; i++ {
			time.Sleep(100 * time.Millisecond)
			out, err := exec.Command("pgrep", "-f", bin).Output()
			if left = out; err != nil || len(out) == 0 {
				break
			}
		}
		if len(left) > 0 {
			t.Errorf("%v: processes of the job remain: %s", sig, left)
			killJob(bin)
		}
	}
	// calibrate passes the signal on the same way and says the run was
	// stopped, not that it failed. Its launcher here only waits.
	started := filepath.Join(dir, "launched")
	launcher := writeFile(t, dir, "waiting-mpirun", "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\ntouch '"+started+"'\nexec sleep 60\n")
	sweep := writeFile(t, dir, "sweep_sync", "#!/bin/sh\n")
	for _, f := range []string{launcher, sweep} {
		if err := os.Chmod(f, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(sg, "calibrate", "--np", "2", "--mpirun", launcher, "--program", sweep, "-o", filepath.Join(dir, "p.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(started); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 143 || !strings.Contains(stderr.String(), "calibrate: stopped on your signal (SIGTERM") {
		t.Errorf("calibrate after SIGTERM: exit %d, want 143 and the stop said:\n%s", code, stderr.String())
	}
}

// killJob kills, by their ids, the processes whose command line names the
// test's own program bin (a path in the test's temporary directory).
func killJob(bin string) {
	out, _ := exec.Command("pgrep", "-f", bin).Output()
	for _, pid := range strings.Fields(string(out)) {
		exec.Command("kill", "-KILL", pid).Run()
	}
}

// The repro of a restart that lost the user's checkpoints: a job resumed
// by the user from an older checkpoint (--resume DIR) crashes before it
// commits one of its own. The restart resumes from the user's checkpoint
// again, not from step 0, whose pruning removed the user's checkpoints.
func TestRunRestartKeepsTheUsersResume(t *testing.T) {
	needToolchain(t)
	needMPIRun(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	ck := filepath.Join(dir, "myck")
	plan := writeFile(t, dir, "zd.sync", restartPlan+"run steps 4 warmup 2 checkpoint every 2 to \""+ck+"\" keep 2\n")
	bin := filepath.Join(dir, "zd_sync")
	if code, out, errOut := syncgen(t, "run", "-np", "2", "-o", bin, plan, "--", "--quiet"); code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	four := filepath.Join(ck, "step-00000004")
	code, out, errOut := syncgen(t, "run", "-np", "2", "--restarts", "1", "-o", bin, plan, "--", "--quiet", "--steps", "6",
		"--resume", four, "--fault", "crash:1:5", "--flight-dir", filepath.Join(dir, "fr"))
	if code != 0 || !strings.Contains(errOut, "--resume since:") || !strings.Contains(errOut, ",else:"+four) ||
		!strings.Contains(errOut, "resuming from "+four+", what the job's own --resume "+four+" took") ||
		strings.Contains(errOut, "starting from step 0") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// A --resume that finds nothing to take fails the same way every time:
	// status 2, and no restart.
	code, out, errOut = syncgen(t, "run", "-np", "2", "--restarts", "2", "-o", bin, plan, "--", "--quiet",
		"--resume", "auto", "--checkpoint-dir", filepath.Join(dir, "empty"), "--flight-dir", filepath.Join(dir, "fr"))
	if code != 2 || !strings.Contains(out+errOut, "auto: no committed checkpoint") || strings.Contains(errOut, "restart 1 of 2") ||
		!strings.Contains(errOut, "syncgen run: not restarted: the job cannot run as it was started (exit 2;") {
		t.Errorf("--resume auto with no checkpoint: exit %d, want 2 and no restart\n%s%s", code, out, errOut)
	}
	// A failure that every launch repeats (a damaged shard, status 1) is
	// restarted until none is left, and syncgen run says so.
	flipped := filepath.Join(dir, "flipped")
	if err := os.CopyFS(flipped, os.DirFS(filepath.Join(ck, "step-00000008"))); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(flipped, "rank-00000.safetensors")
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = syncgen(t, "run", "-np", "2", "--restarts", "1", "-o", bin, plan, "--", "--quiet", "--steps", "8",
		"--resume", flipped, "--flight-dir", filepath.Join(dir, "fr"))
	if code != 1 || strings.Count(errOut, "sha256") != 2 || !strings.Contains(errOut, "restart 1 of 1") ||
		!strings.HasSuffix(errOut, "syncgen run: the job failed (exit 1), and no restart is left (--restarts 1)\n") {
		t.Errorf("a damaged shard at every launch: exit %d, want 1 after 1 restart\n%s%s", code, out, errOut)
	}
}

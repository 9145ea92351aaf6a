package runtime

import (
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/ckpt"
	"github.com/syncgen/syncgen/runtime/internal/engine"
)

// A --fault or --overflow that the run never reaches is refused, saying
// why: a step a resumed run does not run, a crash-in-save after a step
// that no checkpoint follows.
func TestFaultsThatNeverFire(t *testing.T) {
	faults := func(specs ...string) []engine.Fault {
		t.Helper()
		fs, err := resolveFaults(specs, 10)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	every := func(n int) engine.Checkpointing { return engine.Checkpointing{Every: n, Dir: "ck", Keep: 2} }
	for _, c := range []struct {
		faults []engine.Fault
		ck     engine.Checkpointing
		first  int
		want   string // "": accepted
	}{
		{faults("crash-in-save:1:3"), every(0), 0, `--fault "crash-in-save:1:3": this run writes no checkpoint`},
		{faults("crash-in-save:1:3"), every(2), 0, `no checkpoint is written after 3 steps (one every 2 steps: after 2, 4, ... steps)`},
		{faults("crash-in-save:1:0"), every(2), 0, `no checkpoint is written after 0 steps`},
		{faults("crash-in-save:1:4"), every(2), 4, `this run resumes from the checkpoint after 4 steps and writes its next one after 6 steps (one every 2 steps), so it would never fire; give crash-in-save:1:6 or a later multiple of 2`},
		{faults("crash:1:2"), every(0), 4, `--fault "crash:1:2": step 2 is before this run's first: it resumes from the checkpoint after 4 steps (steps 0 to 3) and starts at step 4; give step 4 or later`},
		{faults("delay:0:3:1s"), every(0), 4, `step 3 is before this run's first: it resumes from the checkpoint after 4 steps (steps 0 to 3) and starts at step 4`},
		{faults("crash-in-save:1:6", "crash:1:4", "hang:0:9", "stop:1:start"), every(2), 4, ""},
		{faults("crash-in-save:1:10"), every(5), 0, ""},
	} {
		err := checkFaultsFire(c.faults, c.ck, c.first)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v, every %d, from step %d: %v, want %q", c.faults, c.ck.Every, c.first, err, c.want)
		}
	}
	in := []engine.Injection{{Step: 7, Spec: "7:1:w"}, {Step: 2, Spec: "2:1:w"}}
	if err := checkInjectionsAfter(in, 4); err == nil || !strings.Contains(err.Error(), `--overflow "2:1:w": step 2 is before this run's first: it resumes from the checkpoint after 4 steps (steps 0 to 3) and starts at step 4; give step 4 or later`) {
		t.Errorf("an overflow before the resume: %v", err)
	}
	if err := checkInjectionsAfter(in[:1], 4); err != nil {
		t.Errorf("an overflow after the resume: %v", err)
	}
}

// A crash-in-save after more steps than the run has names the most it
// can take: STEP counts the steps before the checkpoint, so all of them
// is the last (the last step's number is one less).
func TestCrashInSavePastTheRun(t *testing.T) {
	if _, err := resolveFaults([]string{"crash-in-save:1:10"}, 10); err != nil {
		t.Errorf("after every step: %v", err)
	}
	_, err := resolveFaults([]string{"crash-in-save:1:11"}, 10)
	if want := `--fault "crash-in-save:1:11": the run has 10 steps, so no checkpoint follows 11 steps; give at most 10`; err == nil || err.Error() != want {
		t.Errorf("after more steps than the run has: %v, want %q", err, want)
	}
}

// A rank that times out in resume's agreement without a checkpoint to
// read is waiting for the others to set up, and says so, not that it is
// reading a checkpoint the run does not have.
func TestResumePhase(t *testing.T) {
	if got := resumePhase(engine.ResumePoint{}); got != "waiting for every rank to finish setting up" {
		t.Errorf("without a checkpoint: %q", got)
	}
	if got := resumePhase(engine.ResumePoint{Dir: "ck/step-00000004", MD: &ckpt.Metadata{Steps: 4}}); got != "reading the checkpoint" {
		t.Errorf("with one: %q", got)
	}
}

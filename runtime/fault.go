package runtime

// --fault: failures on demand, to rehearse what a job does when a rank
// crashes, hangs or is late.

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/engine"
	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/proc"
)

// faultFlag collects --fault KIND:RANK:STEP[:DUR] (repeatable).
type faultFlag struct{ specs *[]string }

func (f faultFlag) String() string {
	if f.specs == nil {
		return ""
	}
	return strings.Join(*f.specs, ",")
}

func (f faultFlag) Set(s string) error {
	*f.specs = append(*f.specs, s)
	return nil
}

// resolveFaults parses the --fault values: a known kind, a rank in the
// world (where the launcher says its size before MPI starts), a step the
// run has, and for delay a positive duration.
func resolveFaults(specs []string, totalSteps int) ([]engine.Fault, error) {
	var kinds []string
	for k := range engine.FaultNames {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	form := "want KIND:RANK:STEP (KIND " + strings.Join(kinds, ", ") + "), or delay:RANK:STEP:DUR; e.g. crash:1:37"
	var out []engine.Fault
	for _, spec := range specs {
		parts := strings.Split(spec, ":")
		kind, known := engine.FaultKind(0), false
		if len(parts) > 0 {
			kind, known = engine.FaultNames[parts[0]]
		}
		if !known || len(parts) != 3 && !(kind == engine.FaultDelay && len(parts) == 4) {
			return nil, fmt.Errorf("--fault %q: %s", spec, form)
		}
		f := engine.Fault{Kind: kind, Spec: spec}
		var err error
		if f.Rank, err = strconv.Atoi(parts[1]); err != nil || f.Rank < 0 {
			return nil, fmt.Errorf("--fault %q: rank %q is not a rank number (from 0)", spec, parts[1])
		}
		if size, ok := proc.LauncherSize(); ok && f.Rank >= size {
			return nil, fmt.Errorf("--fault %q: rank %d is outside %s", spec, f.Rank, hetero.World(size))
		}
		if parts[2] == "start" && (kind == engine.FaultStop || kind == engine.FaultCrash) {
			f.Step = -1 // before MPI starts (startFaults)
		} else if f.Step, err = strconv.Atoi(parts[2]); err != nil || f.Step < 0 {
			return nil, fmt.Errorf("--fault %q: step %q is not a step number (counted from 0, warm-up included; start, for crash and stop, before MPI starts)", spec, parts[2])
		}
		if kind == engine.FaultCrashInSave && f.Step > totalSteps {
			// STEP counts the steps before the checkpoint: up to all of them.
			return nil, fmt.Errorf("--fault %q: the run has %s, so no checkpoint follows %s; give at most %d", spec, stepCount(totalSteps), stepCount(f.Step), totalSteps)
		}
		if last := totalSteps - 1; f.Step > last && kind != engine.FaultCrashInSave {
			return nil, fmt.Errorf("--fault %q: step %d is past the run's last step, %d", spec, f.Step, last)
		}
		if kind == engine.FaultDelay {
			if len(parts) != 4 {
				return nil, fmt.Errorf("--fault %q: delay needs a duration: delay:RANK:STEP:DUR, e.g. delay:1:5:200ms", spec)
			}
			if f.Delay, err = time.ParseDuration(parts[3]); err != nil || f.Delay <= 0 {
				return nil, fmt.Errorf("--fault %q: %q is not a positive duration like 200ms", spec, parts[3])
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// checkFaultRanks refuses faults on ranks outside the world of size.
func checkFaultRanks(faults []engine.Fault, size int) error {
	for _, f := range faults {
		if f.Rank >= size {
			return fmt.Errorf("--fault: rank %d is outside %s", f.Rank, hetero.World(size))
		}
	}
	return nil
}

// checkFaultsFire refuses faults that the run would never reach: a step
// that a resumed run does not run (it starts at step first, after its
// checkpoint), and a crash-in-save after a step that no checkpoint follows
// (checkpoints off, a step that is not a multiple of the period, or one
// at or before the resumed checkpoint). The faults before MPI starts are
// always reached.
func checkFaultsFire(faults []engine.Fault, c engine.Checkpointing, first int) error {
	for _, f := range faults {
		switch {
		case f.Step < 0:
		case f.Kind != engine.FaultCrashInSave:
			if f.Step < first {
				return fmt.Errorf("--fault %q: step %d is before this run's first: it resumes from the checkpoint after %s (steps 0 to %d) and starts at step %d; give step %d or later", f.Spec, f.Step, stepCount(first), first-1, first, first)
			}
		case c.Every <= 0:
			return fmt.Errorf("--fault %q: this run writes no checkpoint (no --checkpoint-every, and the plan's run line has no checkpoint every), so it would never fire; add --checkpoint-every N, N dividing %d", f.Spec, f.Step)
		case first > 0 && f.Step <= first:
			next := (first/c.Every + 1) * c.Every
			return fmt.Errorf("--fault %q: this run resumes from the checkpoint after %s and writes its next one after %d steps (one every %d steps), so it would never fire; give crash-in-save:%d:%d or a later multiple of %d",
				f.Spec, stepCount(first), next, c.Every, f.Rank, next, c.Every)
		case f.Step == 0 || f.Step%c.Every != 0:
			return fmt.Errorf("--fault %q: no checkpoint is written after %s (one every %d steps: after %d, %d, ... steps), so it would never fire; give a multiple of %d", f.Spec, stepCount(f.Step), c.Every, c.Every, 2*c.Every, c.Every)
		}
	}
	return nil
}

// startFaults runs the faults of this rank that act before MPI starts
// (STEP start): the rank is known from the launcher's environment.
func startFaults(faults []engine.Fault) {
	rank, err := strconv.Atoi(proc.LauncherRank())
	if err != nil {
		return
	}
	for _, f := range faults {
		if f.Step != -1 || f.Rank != rank {
			continue
		}
		sig := syscall.SIGKILL
		if f.Kind == engine.FaultStop {
			sig = syscall.SIGSTOP
		}
		fmt.Fprintf(os.Stderr, "rank %d: --fault: %s before MPI starts\n", rank, sig)
		syscall.Kill(os.Getpid(), sig)
	}
}

// stepCount is "1 step" or "N steps": a checkpoint after N steps holds
// the state after steps 0 to N-1, and a run resumed from it starts at
// step N.
func stepCount(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}

package runtime

// --resume: the checkpoint is found and checked before the backend starts,
// its shards read once the engine has its memory; a refusal on any rank
// ends every rank cleanly, printed once.

import (
	"fmt"
	"os"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/engine"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// errRecordSize bounds one rank's error in agreeOnErrors.
const errRecordSize = 2048

// agreeOnErrors tells every rank which ranks failed a step that all of
// them take (err: this rank's failure, nil for none). When any did, rank
// 0 prints each distinct error once, naming the ranks that found it when
// not all did, and it returns true: every rank then ends the run itself,
// cleanly, rather than one rank aborting the job for all (MPI_Abort's
// banner and the launcher's noise said more than the error).
func (r *runner) agreeOnErrors(err error) bool {
	rec := make([]byte, errRecordSize)
	if err != nil {
		rec[0] = 1
		copy(rec[1:], text.Clip(err.Error(), errRecordSize-1))
	}
	all, gerr := r.h.Allgather(rec)
	if gerr != nil {
		r.fatal(fmt.Errorf("comparing the ranks' errors: %w", gerr))
	}
	problem := func(x []byte) string {
		if x[0] == 0 {
			return ""
		}
		return strings.TrimRight(string(x[1:]), "\x00")
	}
	groups := groupRanks(all, problem)
	if len(groups) == 1 && problem(all[0]) == "" {
		return false
	}
	if r.h.Rank == 0 {
		for _, g := range groups {
			switch m := problem(all[g[0]]); {
			case m == "":
			case len(g) == r.h.Size:
				fmt.Fprintf(os.Stderr, "%s: error: %s\n", proc.Name(), m)
			default:
				fmt.Fprintf(os.Stderr, "%s: %s: error: %s\n", proc.Name(), text.RankList(g), m)
			}
		}
	}
	return true
}

// findResume checks that the checkpoint directory can be written, when
// checkpoints are due, and resolves --resume (engine.FindResume) on every
// rank: the checkpoint, and what its metadata says against this run. The ranks read
// the same files, so they find the same; they agree all the same (every
// rank, as in resume), so that none goes on while another stops. Then it
// refuses the faults and overflows that the run would never reach (a usage
// error). It returns the exit status when the run must end here, else -1.
func (r *runner) findResume() (engine.ResumePoint, int) {
	var rp engine.ResumePoint
	err := r.opts.checkpoint.CheckDir()
	if err == nil && r.opts.resume != "" {
		rp, err = engine.FindResume(r.opts.resume, r.opts.checkpoint.Dir, r.tables, r.opts.warmup+r.opts.steps)
		if err != nil {
			err = fmt.Errorf("--resume: %w", err)
		}
	}
	// No checkpoint to resume is found the same way every time: a usage
	// error, which syncgen run --restarts does not retry.
	if r.agreeOnErrors(err) {
		_ = r.h.Finalize()
		return rp, 2
	}
	if rp.Note != "" && r.h.Rank == 0 {
		// A restart's choice, which syncgen run leaves to the program,
		// or the damaged checkpoints that auto passed over.
		fmt.Fprintf(os.Stderr, "%s: %s\n", proc.Name(), rp.Note)
	}
	// A restart (--resume since:TIME, which syncgen run --restarts gives)
	// passes on the job's flags: its overflows before the checkpoint it
	// resumes from were injected by the launch that ran those steps, so
	// they are left out rather than refused.
	if strings.HasPrefix(r.opts.resume, engine.SincePrefix) {
		var before []string
		r.opts.injections, before = injectionsFrom(r.opts.injections, rp.Steps())
		if len(before) > 0 && r.h.Rank == 0 {
			fmt.Fprintf(os.Stderr, "%s: --overflow %s left out: this restart resumes at step %d, and the steps before it ran, with their overflows, in an earlier launch\n",
				proc.Name(), strings.Join(before, ", "), rp.Steps())
		}
	}
	// A --fault or --overflow that the run never reaches would pass
	// without a word: a usage error, once the resumed step is known.
	err = checkFaultsFire(r.opts.faults, r.opts.checkpoint, rp.Steps())
	if err == nil {
		err = checkInjectionsAfter(r.opts.injections, rp.Steps())
	}
	if r.agreeOnErrors(err) {
		_ = r.h.Finalize()
		return rp, 2
	}
	return rp, -1
}

// resumePhase names the phase of resume for the phase watch: reading the
// checkpoint, or without one only the ranks' agreement, where a rank
// waits for the others to finish setting up.
func resumePhase(rp engine.ResumePoint) string {
	if rp.MD != nil {
		return "reading the checkpoint"
	}
	return "waiting for every rank to finish setting up"
}

// resume restores the state of checkpoint rp on e (nothing for none).
// Each rank reads its own shards, so one rank may refuse (a changed shard)
// where the others do not: they agree before any goes on, every rank,
// with a checkpoint or without (--resume is not among the flags the ranks
// compare, and a rank that skipped the agreement would leave the others
// in it). It returns the exit status when the run must end here, else -1.
func (r *runner) resume(e *engine.Engine, rp engine.ResumePoint) int {
	var err error
	if rp.MD != nil {
		if err = e.Resume(rp); err != nil {
			err = fmt.Errorf("--resume: %w", err)
		}
	}
	if r.agreeOnErrors(err) {
		_ = r.be.Close()
		_ = r.h.Finalize()
		return 1
	}
	return -1
}

package runtime

// Main: what a generated program runs.

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"
	"unsafe"
)

// Main runs plan: it parses the program's flags, initialises MPI, checks
// that every rank runs the same plan, selects the backend, runs the init
// block, the warm-up and the measured steps, reports on rank 0 and
// finalises. It exits the process: with status 0 when every check passed,
// 1 when an element was wrong or something failed, 2 for bad flags. An
// error or panic on one rank aborts the whole job (MPI_Abort) after
// printing it, so that no rank hangs.
func Main(plan *Plan) {
	os.Exit(mainArgs(plan, os.Args))
}

var progNameValue = "syncgen"

// progName is the program's name for messages.
func progName() string { return progNameValue }

func mainArgs(p *Plan, args []string) int {
	if len(args) > 0 {
		progNameValue = filepath.Base(args[0])
	}
	// --help prints to stdout, so that `./NAME_sync --help | less` works.
	opts, err := parseOptions(p, progName(), args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", progName(), err)
		return 2
	}
	procNote := adjustGOMAXPROCS()
	h, err := startMPI()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", progName(), err)
		return 1
	}
	r := &runner{p: p, opts: opts, h: h, procNote: procNote}
	defer func() {
		if v := recover(); v != nil {
			r.fatal(fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
		}
	}()
	return r.run()
}

// commonOrigin returns rank 0's wall-clock time, the zero of every rank's
// trace timestamps: ranks on one host share the clock, so their timelines
// line up exactly; across hosts they are as close as the hosts' clocks.
func commonOrigin(h *mpiHost) (time.Time, error) {
	buf := make([]byte, 8)
	binary.LittleEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
	if err := h.Bcast(0, buf); err != nil {
		return time.Time{}, fmt.Errorf("agreeing on the time origin: %w", err)
	}
	return time.Unix(0, int64(binary.LittleEndian.Uint64(buf))), nil
}

// runner is one run of Main on one rank.
type runner struct {
	p        *Plan
	opts     *options
	h        *mpiHost
	procNote string
	e        *engine
	phase    *phaseWatch
}

// fatal prints err naming this rank and aborts the whole job.
func (r *runner) fatal(err error) {
	fmt.Fprintf(os.Stderr, "%s: rank %d (%s): error: %v\n", progName(), r.h.rank, r.h.host, err)
	if r.e != nil {
		abortBackend(r.e.be)
	}
	r.h.abort(1)
	os.Exit(1)
}

// agreedFailure ends a run that every rank knows failed the same way: rank
// 0 prints why, every rank finalises and exits 1.
func (r *runner) agreedFailure(err error) int {
	if r.h.rank == 0 {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", progName(), err)
	}
	_ = r.h.finalize()
	return 1
}

func (r *runner) run() int {
	p, h := r.p, r.h
	r.phase = &phaseWatch{r: r, timeout: r.opts.timeout}
	defer r.phase.enter("")
	// Rank 0 writes the output files: a path it cannot write is a usage
	// error, which every rank learns from it and ends with, like a bad flag
	// (exit status 2), rather than an abort of the job.
	var outErr error
	if h.rank == 0 {
		outErr = checkOutputs(r.opts)
	}
	failed := []byte{0}
	if outErr != nil {
		failed[0] = 1
	}
	if err := h.Bcast(0, failed); err != nil {
		r.fatal(fmt.Errorf("checking the output files: %w", err))
	}
	if failed[0] != 0 {
		r.agreedFailure(outErr)
		return 2
	}
	// Compare plans first: only when every rank runs the same plan do they
	// all reach the same verdict on it.
	r.phase.enter("comparing the plan across ranks")
	prog, err := record(p)
	tune := cpuTuningFromEnv()
	if err := checkSamePlan(h, p, prog, tune, r.opts); err != nil {
		return r.agreedFailure(err)
	}
	if err == nil {
		err = prog.validate(p, h.size)
	}
	if err != nil {
		return r.agreedFailure(fmt.Errorf("the plan cannot run on %d rank%s:\n%v", h.size, plural(h.size), err))
	}
	// Every rank has the same flags and plan by now, so all agree on this.
	res := newResults(p, prog)
	if err := checkStepsFit(r.opts.steps, len(res.rows)); err != nil {
		r.agreedFailure(err)
		return 2
	}
	r.phase.enter("choosing and starting the backend")
	be, why, err := selectBackend(h, p, r.opts, tune)
	var same *agreedError
	if errors.As(err, &same) {
		return r.agreedFailure(err)
	}
	if err != nil {
		r.fatal(err)
	}
	r.phase.setBackend(be)
	r.phase.enter("setting up the streams and buffers")
	testHooksFromEnv().duringSetup(h.rank)
	e, err := newEngine(p, prog, r.opts, h, be)
	if err != nil {
		r.fatal(fmt.Errorf("setting up the %s backend: %w", be.Name(), err))
	}
	r.e = e
	r.phase.enter("agreeing on a clock and gathering the run's information")
	origin, err := commonOrigin(h)
	if err != nil {
		r.fatal(err)
	}
	res.origin = origin
	info := gatherInfo(h, be, why, r.procNote, tune)
	if h.rank == 0 && !r.opts.quiet {
		printHeader(os.Stdout, p, e, r.opts, info)
	}
	r.phase.enter("")
	wd := startWatchdog(e, r.opts.timeout)
	progress := newProgress(h.rank == 0 && !r.opts.quiet)
	if err := e.runAll(res, progress); err != nil {
		r.fatal(err)
	}
	progress.done()
	wd.close()
	awaitTimeoutAbort()
	// The warm-up may have resized the pieces of large collectives: the
	// JSON file shows the size the measured steps used.
	info.versions = be.Versions()
	r.phase.enter("gathering and writing the results")
	rep, err := gatherReport(e, res)
	if err != nil {
		r.fatal(fmt.Errorf("gathering the results: %w", err))
	}
	if err := writeTrace(e, res); err != nil {
		r.fatal(fmt.Errorf("writing the trace: %w", err))
	}
	if h.rank == 0 {
		printReport(os.Stdout, e, rep, r.opts)
		if r.opts.json != "" {
			if err := writeJSON(r.opts.json, e, rep, info); err != nil {
				r.fatal(fmt.Errorf("writing %s: %w", r.opts.json, err))
			}
		}
	}
	awaitTimeoutAbort()
	r.phase.enter("closing the backend and MPI")
	if err := be.Close(); err != nil {
		r.fatal(fmt.Errorf("closing the %s backend: %w", be.Name(), err))
	}
	if err := h.finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: rank %d: %v\n", progName(), h.rank, err)
		return 1
	}
	if rep.wrong > 0 {
		return 1
	}
	return 0
}

// maxStepResultBytes bounds the per-step results a rank keeps: the engine
// allocates them, and writes their memory, before the first step (run.go),
// so "--steps 2000000000" asked for 64 GB at once and died in Go's
// out-of-memory crash, or in the kernel's OOM killer, with no word of why.
const maxStepResultBytes = 256 << 20

// checkStepsFit refuses a --steps whose per-step results (the step's times
// and one time per table row) would pass maxStepResultBytes.
func checkStepsFit(steps, rows int) error {
	per := int64(unsafe.Sizeof(stepStats{})) + int64(rows)*int64(unsafe.Sizeof(time.Duration(0)))
	if int64(steps)*per <= maxStepResultBytes {
		return nil
	}
	return fmt.Errorf("--steps %d is too many: every rank keeps each measured step's times (%d bytes a step for this plan's %d table row%s), at most %s; run at most %d steps",
		steps, per, rows, plural(rows), formatBytes(maxStepResultBytes), maxStepResultBytes/per)
}

// checkOutputs makes sure that rank 0 can write the files --json and
// --trace name, before the run rather than after it. A file that did not
// exist is removed again.
func checkOutputs(o *options) error {
	for _, f := range []struct{ flag, path string }{{"--json", o.json}, {"--trace", o.trace}} {
		if f.path == "" {
			continue
		}
		_, statErr := os.Stat(f.path)
		file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("%s %s: cannot write the file: %w", f.flag, f.path, err)
		}
		file.Close()
		if os.IsNotExist(statErr) {
			os.Remove(f.path)
		}
	}
	return nil
}

// abortBackend lets a backend that holds communicators of its own (NCCL)
// abort them before MPI_Abort ends the job, so that no rank stays blocked
// inside a collective whose peer is gone.
func abortBackend(be Backend) {
	if a, ok := be.(interface{ Abort() }); ok {
		a.Abort()
	}
}

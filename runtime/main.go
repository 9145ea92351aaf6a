package runtime

// Main: what a generated program runs.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/backend/cpu"
	"github.com/syncgen/syncgen/runtime/internal/engine"
	"github.com/syncgen/syncgen/runtime/internal/forecast"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/report"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"

	// The NCCL backend registers itself with package backend (an init
	// function), so that --backend auto and nccl find it.
	_ "github.com/syncgen/syncgen/runtime/internal/backend/nccl"
)

// Main runs plan: it parses the program's flags, initialises MPI, checks
// that every rank runs the same plan, selects the backend, runs the init
// block, the warm-up and the measured steps, reports on rank 0 and
// finalises. It exits the process: with status 0 when every check passed,
// 1 when an element was wrong or something failed, 2 for bad flags. An
// error or panic on one rank aborts the whole job (MPI_Abort) after
// printing it, so that no rank hangs; a checkpoint's save that fails ends
// every rank together instead, with status 1 and one error from rank 0.
func Main(plan *Plan) {
	// A rank that the Go runtime ends (a fatal signal such as a SIGSEGV in
	// C code or one sent with kill, SIGQUIT, a fatal error such as running
	// out of memory) would exit with status 2, which is the status of a job
	// that cannot run as started, which syncgen run --restarts does not
	// restart: after its stack dump it dies by a signal instead, so that
	// mpirun exits with 128 + the signal.
	debug.SetTraceback("crash")
	os.Exit(mainArgs(plan, os.Args))
}

func mainArgs(p *Plan, args []string) int {
	if len(args) > 0 {
		proc.SetName(args[0])
	}
	// --help prints to stdout, so that `./NAME_sync --help | less` works;
	// under mpirun only the first rank prints it.
	helpOut := io.Writer(os.Stdout)
	if !proc.FirstRank() {
		helpOut = io.Discard
	}
	tables := p.tables()
	opts, err := parseOptions(tables, proc.Name(), args[1:], helpOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	// A bad flag is reported once the ranks have compared their flags
	// (agreeOnFlags), not here: under mpirun every rank would print it.
	var usage string
	if err != nil {
		usage = err.Error()
		opts = &options{timeout: defaultTimeout}
	}
	procNote := adjustGOMAXPROCS()
	startFaults(opts.faults)
	// Starting MPI is covered by --timeout too: a rank that never arrives
	// in MPI_Init leaves the others there for good.
	startLimit := max(opts.timeout, minStartTimeout)
	startWatch := time.AfterFunc(startLimit, func() {
		fmt.Fprintf(os.Stderr, "%s: rank %s: timeout: starting MPI (MPI_Init and the ranks' local communicator) has taken %s (--timeout %s, at least %s for the start): "+
			"a rank did not start or is stopped, or the launcher's network between hosts is blocked\n",
			proc.Name(), cmp.Or(proc.LauncherRank(), "?"), startLimit, opts.timeout, minStartTimeout)
		os.Exit(3)
	})
	h, err := mpihost.Start()
	startWatch.Stop()
	if err != nil {
		if usage != "" {
			fmt.Fprintf(os.Stderr, "%s: error: %s\n", proc.Name(), usage)
			return 2
		}
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", proc.Name(), err)
		return 1
	}
	r := &runner{p: p, tables: tables, opts: opts, h: h, procNote: procNote, usage: usage}
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
func commonOrigin(h *mpihost.Host) (time.Time, error) {
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
	tables   *plan.Plan
	opts     *options
	h        *mpihost.Host
	procNote string
	// net counts the network's bytes over the measured steps
	// (SYNCGEN_NET_IFACE), or nil.
	net *report.NetCounter
	// usage is this rank's flag error, reported by agreeOnFlags.
	usage string
	be    backend.Backend
	// e is the engine, once set up (setUp).
	e     *engine.Engine
	phase *engine.PhaseWatch
	// partial is what a run that ends early writes its JSON from, once
	// the steps run (writePartial).
	partial struct {
		run  *report.Run
		res  *result.Results
		info *report.Info
	}
}

// writePartial writes rank 0's JSON of a run that is ending early (a
// timeout, another rank's failure): what the steps done so far measured on
// this rank, marked incomplete with reason. The other ranks cannot be
// asked for theirs any more.
func (r *runner) writePartial(reason string) {
	pr := r.partial
	if r.h.Rank != 0 || r.opts.json == "" || r.opts.json == "-" || pr.res == nil {
		return
	}
	rep := report.Local(pr.run, pr.res)
	rep.MarkIncomplete(reason)
	if err := report.WriteJSON(r.opts.json, r.opts.jsonPipe, pr.run, rep, pr.info); err == nil {
		fmt.Fprintf(os.Stderr, "%s: rank 0: wrote %s with what the steps done so far measured on rank 0, marked incomplete\n", proc.Name(), r.opts.json)
	}
}

// fatal prints err naming this rank and aborts the whole job. Once the
// steps run, it first writes this rank's flight record with err (and rank
// 0's partial JSON), so that the records name this rank as the one that
// failed rather than the ranks that mpirun then terminates.
func (r *runner) fatal(err error) {
	fmt.Fprintf(os.Stderr, "%s: rank %d (%s): error: %v\n", proc.Name(), r.h.Rank, r.h.Name, err)
	if r.e != nil {
		r.e.RecordFailure(err)
	}
	if r.be != nil {
		engine.AbortBackend(r.be)
	}
	r.h.Abort(1)
	os.Exit(1)
}

// agreedFailure ends a run that every rank knows failed the same way before
// its first step: rank 0 prints why, every rank finalises, and the status
// is 2, as for a usage error: the job cannot run as it was started, so
// starting it again (syncgen run --restarts) would fail the same way.
func (r *runner) agreedFailure(err error) int {
	if r.h.Rank == 0 {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", proc.Name(), err)
	}
	_ = r.h.Finalize()
	return 2
}

// run is Main on this rank once MPI is up: the phases below, each watched
// by the phase watch, then the steps, watched by the engine's watchdog. It
// returns the exit status.
func (r *runner) run() int {
	r.phase = &engine.PhaseWatch{H: r.h, Timeout: r.opts.timeout}
	defer r.phase.Enter("")
	r.phase.Enter("comparing the flags and checking the output files")
	if stop := r.agreeOnFlags(); stop {
		return 2
	}
	r.phase.Enter("comparing the plan across ranks")
	prog, res, tune, status := r.agreeOnPlan()
	if status >= 0 {
		return status
	}
	r.phase.Enter("checking the checkpoint directory and finding the checkpoint to resume")
	from, status := r.findResume()
	if status >= 0 {
		return status
	}
	r.phase.Enter("choosing and starting the backend")
	hierNote := r.setNCCLAlgo(prog)
	why, status := r.startBackend(tune)
	if status >= 0 {
		return status
	}
	r.phase.Enter("setting up the streams and buffers")
	e, mem := r.setUp(prog)
	r.phase.Enter(resumePhase(from))
	if status := r.resume(e, from); status >= 0 {
		return status
	}
	r.phase.Enter("agreeing on a clock and gathering the run's information")
	origin, err := commonOrigin(r.h)
	if err != nil {
		r.fatal(err)
	}
	res.Origin = origin
	info := report.GatherInfo(r.h, r.be, why, r.procNote)
	e.SetHosts(info.RankHosts())
	if r.be.Name() != "cpu" && hierNote != "" {
		info.Warn(hierNote)
	}
	for _, w := range e.Warnings() {
		info.Warn(w)
	}
	rep := r.reportRun(prog, mem)
	rep.Hosts, rep.Backend, rep.HierRan, rep.Net = info.RankHosts(), r.be.Name(), info.RanHierarchical(), r.net
	rep.Predicted = r.predict(prog, info)
	r.partial.run, r.partial.res, r.partial.info = rep, res, info
	if r.h.Rank == 0 && !r.opts.quiet {
		report.PrintHeader(r.reportTo(), rep, info)
	}
	r.phase.Enter("")
	if status := r.runSteps(e, res); status >= 0 {
		return status
	}
	if err := r.net.Err(); err != nil {
		info.Warn(fmt.Sprintf("bytes across hosts not counted: %v", err))
		if r.h.Rank == 0 {
			fmt.Fprintf(os.Stderr, "%s: warning: bytes across hosts not counted: %v\n", proc.Name(), err)
		}
	}
	r.phase.Enter("gathering and writing the results")
	wrong, outErrs := r.writeResults(rep, res, info)
	r.phase.Enter("closing the backend and MPI")
	if err := r.be.Close(); err != nil {
		r.fatal(fmt.Errorf("closing the %s backend: %w", r.be.Name(), err))
	}
	if err := r.h.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: rank %d: error: %v\n", proc.Name(), r.h.Rank, err)
		return 1
	}
	if wrong > 0 {
		return 1
	}
	if outErrs > 0 {
		return 2
	}
	return 0
}

// agreeOnPlan records the plan and compares it, the tuning and the flags
// across ranks, then validates it against the world size and the limits of
// --steps and --trace. Plans are compared first: only when every rank runs
// the same plan do they all reach the same verdict on it. It returns the
// recorded program, the run's empty results and the CPU tuning, and the
// exit status when the run must end here, else -1.
func (r *runner) agreeOnPlan() (*plan.Program, *result.Results, cpu.Tuning, int) {
	p, h := r.tables, r.h
	prog, err := r.p.record()
	p.StateHash = plan.StateDigest(p, prog)
	tune := cpu.TuningFromEnv().WithHierarchical(prog.Hierarchical())
	if err := checkSamePlan(h, p, prog, tune, r.opts); err != nil {
		return nil, nil, tune, r.agreedFailure(err)
	}
	if err == nil {
		err = prog.Validate(p, h.Size)
	}
	if err == nil {
		plan.SizeOutputs(p, h.Size)
	}
	if err == nil {
		err = usePlanSpeeds(&r.opts.hetero, r.opts.planSpeeds, h.Size)
	}
	if err != nil {
		return nil, nil, tune, r.agreedFailure(fmt.Errorf("the plan cannot run on %d rank%s:\n%v", h.Size, text.Plural(h.Size), err))
	}
	// Every rank has the same flags and plan by now, so all agree on these.
	err = checkInjectionRanks(r.opts.injections, h.Size)
	if err == nil {
		err = checkFaultRanks(r.opts.faults, h.Size)
	}
	if err == nil {
		err = r.opts.hetero.Check(h.Size)
	}
	if err == nil {
		err = r.opts.hetero.CheckStretch(h.Size, stepCompute(prog.Step, p.Micro()))
	}
	if err != nil {
		return nil, nil, tune, r.agreedFailure(err)
	}
	res := result.New(p, prog)
	if err := checkStepsFit(r.opts.steps, len(res.Rows)+len(res.TrainRows), len(res.TrainRows) > 0, r.opts.hetero.Active()); err != nil {
		return nil, nil, tune, r.agreedFailure(err)
	}
	if r.opts.tracing {
		if err := report.CheckTraceFits(p, prog, r.opts.steps, r.opts.warmup, h.Size); err != nil {
			return nil, nil, tune, r.agreedFailure(err)
		}
	}
	return prog, res, tune, -1
}

// setNCCLAlgo sets NCCL_ALGO for a plan's `algo hierarchical` allreduces
// (ncclHierAlgo) while no NCCL communicator has started, unless the run
// is on the CPU backend, which runs them itself; it returns the header's
// note on NCCL.
func (r *runner) setNCCLAlgo(prog *plan.Program) string {
	if r.opts.backend == "cpu" || !prog.Hierarchical() {
		return ""
	}
	hosts, err := countHosts(r.h)
	if err != nil {
		r.fatal(fmt.Errorf("counting the hosts: %w", err))
	}
	set, note := ncclHierAlgo(prog, os.Getenv("NCCL_ALGO"), hosts)
	if set != "" {
		if err := os.Setenv("NCCL_ALGO", set); err != nil {
			r.fatal(fmt.Errorf("setting NCCL_ALGO: %w", err))
		}
	}
	return note
}

// startBackend selects and starts the backend that --backend asks for
// (r.be), and says why it took it. It returns the exit status when the
// run must end here, else -1.
func (r *runner) startBackend(tune cpu.Tuning) (why string, status int) {
	h := r.h
	env := &backend.Env{Rank: h.Rank, Size: h.Size, LocalRank: h.LocalRank, LocalSize: h.LocalSize, Host: h.Name, Boot: h, Plan: r.tables}
	be, why, err := backend.Select(env, r.opts.backend, func() backend.Backend { return cpu.New(h, tune) })
	var same *backend.AgreedError
	if errors.As(err, &same) {
		// A device or library missing here may be there when the job is
		// started again elsewhere: a failure (1), not a usage error.
		r.agreedFailure(err)
		return "", 1
	}
	if err != nil {
		r.fatal(err)
	}
	r.be = be
	r.phase.SetBackend(be)
	return why, -1
}

// setUp creates the engine, which runs the plan's own functions, handed a
// Step that issues their statements on it. The Step is made once: the
// steps allocate nothing.
func (r *runner) setUp(prog *plan.Program) (*engine.Engine, *backend.Layout) {
	s := &Step{}
	cfg := engine.Config{Steps: r.opts.steps, Warmup: r.opts.warmup, CheckEvery: r.opts.checkEvery,
		Tracing: r.opts.tracing, Settle: r.opts.settle, Step: func() {}, Injections: r.opts.injections,
		Checkpoint: r.opts.checkpoint, Faults: r.opts.faults, FlightDir: r.opts.flightDir, OnAbort: r.writePartial,
		Hetero: r.opts.hetero}
	if iface := os.Getenv(report.NetIfaceEnv); iface != "" {
		r.net = report.NewNetCounter(iface)
		cfg.Measure = func(begin bool) {
			if begin {
				r.net.Begin()
			} else {
				r.net.End()
			}
		}
	}
	if r.p.Init != nil {
		cfg.Init = func() { r.p.Init(s) }
	}
	if r.p.Step != nil {
		cfg.Step = func() { r.p.Step(s) }
	}
	e, err := engine.New(cfg, r.tables, prog, r.h, r.be)
	if err != nil {
		r.fatal(fmt.Errorf("setting up the %s backend: %w", r.be.Name(), err))
	}
	s.e, r.e = e, e
	return e, e.Memory()
}

// runSteps runs the init block and every step under the watchdog, with the
// progress bar on rank 0. It returns the exit status when the run must end
// here, else -1.
func (r *runner) runSteps(e *engine.Engine, res *result.Results) int {
	wd := e.StartWatchdog(r.opts.timeout)
	progress := report.NewProgress(r.h.Rank == 0 && !r.opts.quiet)
	err := e.Run(res, progress.Update)
	var failed *engine.FailedSave
	if errors.As(err, &failed) {
		progress.Done()
		wd.Close()
		return r.failedSave(failed)
	}
	if err != nil {
		r.fatal(err)
	}
	progress.Done()
	wd.Close()
	engine.AwaitTimeoutAbort()
	return -1
}

// failedSave ends a run whose checkpoint's save failed, which every rank
// knows alike at the same point of the run (engine.FailedSave): rank 0
// writes its partial JSON and prints why once, naming the ranks that
// failed, and every rank closes the backend and finalises MPI, without
// MPI_Abort. The status is 1: a failure, which a restart may get past
// (space freed, the file system back), unlike a usage error.
func (r *runner) failedSave(f *engine.FailedSave) int {
	engine.AwaitTimeoutAbort()
	if r.h.Rank == 0 {
		r.writePartial("error: " + f.Msg)
		fmt.Fprintf(os.Stderr, "%s: error: %s\n", proc.Name(), f.Msg)
	}
	if err := r.be.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: rank %d: error: closing the %s backend: %v\n", proc.Name(), r.h.Rank, r.be.Name(), err)
	}
	_ = r.h.Finalize()
	return 1
}

// reportRun is what the report is told of this run.
func (r *runner) reportRun(prog *plan.Program, mem *backend.Layout) *report.Run {
	return &report.Run{Plan: r.tables, Prog: prog, Mem: mem, Rank: r.h.Rank, Ranks: r.h.Size, Host: r.h.Name,
		Steps: r.opts.steps, Warmup: r.opts.warmup, CheckEvery: r.opts.checkEvery, Quiet: r.opts.quiet,
		Tracing: r.opts.tracing, Trace: r.opts.trace, TracePipe: r.opts.tracePipe, Comm: r.h}
}

// predict returns the prediction of --profile for the report, nil
// without one. A profile that cannot predict this plan (it lacks a
// collective the plan uses) is a warning: the run is worth its
// measurements.
func (r *runner) predict(prog *plan.Program, info *report.Info) *report.Predicted {
	if r.opts.profile == "" {
		return nil
	}
	prof, warning, err := costmodel.Resolve(r.opts.profile, r.h.Size)
	if err == nil {
		var pr *costmodel.Prediction
		if pr, err = forecast.Predict(r.tables, prog, r.h.Size, prof); err == nil {
			if warning != "" {
				info.Warn(warning)
			}
			return report.NewPredicted(cmp.Or(prof.Name, r.opts.profile), pr)
		}
	}
	info.Warn(fmt.Sprintf("--profile %s: no prediction: %v", r.opts.profile, err))
	return nil
}

// reportTo is where rank 0 prints the report: standard output, or standard
// error when --json - or --trace - make standard output the file's.
func (r *runner) reportTo() *os.File {
	if r.opts.json == "-" || r.opts.trace == "-" {
		return os.Stderr
	}
	return os.Stdout
}

// writeResults gathers every rank's figures, writes the trace and, on rank
// 0, prints the report and writes the JSON. It returns the wrong elements
// over all ranks and how many output files could not be written: such a
// file (a full disk, a file that takes no data) loses that file, not the
// run: the report is printed, every rank closes normally, and rank 0 exits
// with status 2.
func (r *runner) writeResults(run *report.Run, res *result.Results, info *report.Info) (wrong int64, outErrs int) {
	rep, err := report.Gather(run, res)
	if err != nil {
		r.fatal(fmt.Errorf("gathering the results: %w", err))
	}
	var errs []error
	if err := report.WriteTrace(run, res); err != nil {
		var oe *report.OutputError
		if !errors.As(err, &oe) {
			r.fatal(fmt.Errorf("writing the trace: %w", err))
		}
		errs = append(errs, err)
	}
	if r.h.Rank == 0 {
		report.Print(r.reportTo(), run, rep)
		if r.opts.json != "" {
			if err := report.WriteJSON(r.opts.json, r.opts.jsonPipe, run, rep, info); err != nil {
				errs = append(errs, err)
			}
		}
		for _, err := range errs {
			fmt.Fprintf(os.Stderr, "%s: error: %v (the report above is complete)\n", proc.Name(), err)
		}
	}
	engine.AwaitTimeoutAbort()
	return rep.Wrong(), len(errs)
}

// The first exchange of a run: every rank's flag error, rank 0's output
// files, and whether rank 0 writes a trace. Under mpirun every rank parses
// the same flags, and each printed the same error, N times; a rank started
// with other flags (mpirun's "A : B" form) may be the only one with an
// error, so the errors are gathered rather than left to rank 0. Rank 0
// writes the output files, so a path it cannot write is a usage error that
// every rank ends with (exit status 2), rather than an abort of the job.
const (
	flagRecordSize = 1024
	flagUsage      = 1 // the record holds a usage error
	flagTracing    = 2 // rank 0 writes a trace
	flagOutput     = 4 // the usage error is rank 0's output file's
)

// agreeOnFlags runs the exchange; when a rank had a usage error, rank 0
// prints each distinct one once, every rank finalises MPI, and it returns
// true (the run ends with status 2).
func (r *runner) agreeOnFlags() bool {
	h := r.h
	msg := r.usage
	rec := make([]byte, flagRecordSize)
	if msg == "" && h.Rank == 0 {
		if err := checkOutputs(r.opts); err != nil {
			msg = err.Error()
			rec[0] |= flagOutput
		}
	}
	if msg != "" {
		rec[0] |= flagUsage
		copy(rec[1:], text.Clip(msg, flagRecordSize-1))
	}
	if h.Rank == 0 && r.opts.trace != "" {
		rec[0] |= flagTracing
	}
	all, err := h.Allgather(rec)
	if err != nil {
		r.fatal(fmt.Errorf("comparing the flags between ranks: %w", err))
	}
	// Only rank 0 writes the trace, but every rank must send its events:
	// a rank started without --trace (mpirun's "A : B" form) left rank 0
	// waiting for them for good.
	r.opts.tracing = all[0][0]&flagTracing != 0
	problem := func(x []byte) string {
		if x[0]&flagUsage == 0 {
			return ""
		}
		return strings.TrimRight(string(x[1:]), "\x00")
	}
	groups := groupRanks(all, problem)
	if len(groups) == 1 && problem(all[0]) == "" {
		return false
	}
	if h.Rank == 0 {
		for _, g := range groups {
			m := problem(all[g[0]])
			switch {
			case m == "":
			case len(g) == h.Size || all[g[0]][0]&flagOutput != 0:
				fmt.Fprintf(os.Stderr, "%s: error: %s\n", proc.Name(), m)
			default:
				fmt.Fprintf(os.Stderr, "%s: %s: error: %s\n", proc.Name(), text.RankList(g), m)
			}
		}
	}
	_ = h.Finalize()
	return true
}

// stepCompute is the simulated compute of a step of micro micro-batches
// with statements ss: its backward and compute durations, added up for
// each micro-batch (saturating).
func stepCompute(ss []plan.Stmt, micro int) time.Duration {
	var sum time.Duration
	for _, s := range ss {
		if s.Kind == plan.StmtBackward || s.Kind == plan.StmtCompute {
			if s.Dur > math.MaxInt64-sum {
				return math.MaxInt64
			}
			sum += s.Dur
		}
	}
	if micro > 1 && sum > math.MaxInt64/time.Duration(micro) {
		return math.MaxInt64
	}
	return sum * time.Duration(max(micro, 1))
}

// maxStepResultBytes bounds the per-step results a rank keeps: the engine
// allocates them, and writes their memory, before the first step (run.go),
// so "--steps 2000000000" asked for 64 GB at once and died in Go's
// out-of-memory crash, or in the kernel's OOM killer, with no word of why.
const maxStepResultBytes = 256 << 20

// checkStepsFit refuses a --steps whose per-step results (the step's times
// and one time per table row, and the training step's figures when train)
// would pass maxStepResultBytes.
func checkStepsFit(steps, rows int, train, hetero bool) error {
	per := int64(unsafe.Sizeof(result.StepStats{})) + int64(rows)*int64(unsafe.Sizeof(time.Duration(0)))
	if train {
		per += int64(unsafe.Sizeof(result.TrainStepStats{}))
	}
	if hetero {
		per += int64(unsafe.Sizeof(result.RankStep{}))
	}
	// Divided, not multiplied: 4611686018427387904 steps times 112 bytes
	// overflowed to a small number, passed, and the allocation panicked.
	if int64(steps) <= maxStepResultBytes/per {
		return nil
	}
	return fmt.Errorf("--steps %d is too many: every rank keeps each measured step's times (%d bytes a step for this plan's %d table row%s), at most %s; run at most %d steps",
		steps, per, rows, text.Plural(rows), text.Bytes(maxStepResultBytes), maxStepResultBytes/per)
}

// checkOutputs makes sure that rank 0 can write the files --json and
// --trace name, before the run rather than after it, and that they are two
// files (two names of one file, through a link, would leave only the JSON,
// written last). A file that did not exist is removed again. A named pipe
// (a FIFO, or bash's `--json >(jq .)`) is opened without blocking and kept
// open until its file is written (openPipe).
func checkOutputs(o *options) (err error) {
	var created []string
	defer func() {
		for _, path := range created {
			os.Remove(path)
		}
		if err != nil {
			for _, p := range []**os.File{&o.jsonPipe, &o.tracePipe} {
				if *p != nil {
					(*p).Close()
					*p = nil
				}
			}
		}
	}()
	type opened struct {
		flag, path string
		info       os.FileInfo
	}
	var seen []opened
	for _, f := range []struct {
		flag, path string
		pipe       **os.File
	}{{"--json", o.json, &o.jsonPipe}, {"--trace", o.trace, &o.tracePipe}} {
		if f.path == "" || f.path == "-" {
			continue
		}
		st, statErr := os.Stat(f.path)
		var info os.FileInfo
		if statErr == nil && st.Mode()&os.ModeNamedPipe != 0 {
			file, err := openPipe(f.flag, f.path)
			if err != nil {
				return err
			}
			*f.pipe = file
			info = st
		} else {
			file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("%s %s: cannot write the file: %w", f.flag, f.path, err)
			}
			if os.IsNotExist(statErr) {
				created = append(created, f.path)
			}
			info, err = file.Stat()
			file.Close()
			if err != nil {
				continue
			}
		}
		for _, s := range seen {
			if os.SameFile(s.info, info) {
				return fmt.Errorf("%s %s and %s %s are the same file: give them different files", s.flag, s.path, f.flag, f.path)
			}
		}
		seen = append(seen, opened{f.flag, f.path, info})
	}
	return nil
}

// openPipe opens the named pipe at path for writing. A plain open blocks
// until a process opens the pipe for reading, so a FIFO nobody reads held
// rank 0 in the start-up check until --timeout; opened with O_NONBLOCK it
// fails at once (ENXIO) instead. The file stays open until the run writes
// it: closed after the check, the reader would see the end of its input
// and go (jq prints nothing and exits) before the data came.
func openPipe(flag, path string) (*os.File, error) {
	file, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("%s %s: cannot write the file: it is a named pipe (FIFO) that no process reads; start its reader first (for example `jq . < %s &`)", flag, path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: cannot write the file: %w", flag, path, err)
	}
	return file, nil
}

package runtime

// The generated program's command line.

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/engine"
	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// options are the parsed flags.
type options struct {
	steps      int
	warmup     int
	checkEvery int // 0: off
	backend    string
	json       string // "-": standard output
	trace      string // "-": standard output
	// jsonPipe and tracePipe are the named pipes that --json and --trace
	// name, opened by rank 0's check before the run and kept open until
	// their data is written (checkOutputs); nil for other files.
	jsonPipe, tracePipe *os.File
	// tracing is rank 0's --trace, which every rank learns before the run
	// (agreeOnFlags): only rank 0 writes the trace, but every rank keeps
	// and sends its events.
	tracing bool
	timeout time.Duration
	quiet   bool
	// settle is how long the ranks settle before the measured steps
	// (SYNCGEN_SETTLE, settle.go).
	settle time.Duration
	// overflows are the --overflow values; injections what they resolve
	// to against the plan.
	overflows  []string
	injections []engine.Injection
	// checkpoint is --checkpoint-every, --checkpoint-dir and
	// --checkpoint-keep; resume is --resume (a directory, or auto).
	checkpoint engine.Checkpointing
	resume     string
	// faultSpecs are the --fault values; faults what they resolve to.
	faultSpecs []string
	faults     []engine.Fault
	// flightDir is --flight-dir.
	flightDir string
	// profile is --profile: a cost-model profile's file or a built-in
	// profile's name, whose prediction the report sets beside the
	// measurements ("": none).
	profile string
	// heteroFlags are --speed, --straggler, --jitter, --batch and
	// --balance; hetero what they resolve to.
	heteroFlags heteroFlags
	hetero      hetero.Spec
	// planSpeeds are the speeds of the plan's ranks declaration when no
	// --speed replaced them: checked against the world and put into
	// hetero once MPI has started (usePlanSpeeds).
	planSpeeds []plan.RankSpeed
}

// defaultTimeout is --timeout's default.
const defaultTimeout = 5 * time.Minute

// minStartTimeout is the least time MPI's start-up is given, whatever
// --timeout says: MPI_Init alone can take seconds on a loaded host, and
// a short --timeout meant for the steps must not end a healthy start.
const minStartTimeout = 10 * time.Second

// checkFlag parses --check: a number of steps or "off".
type checkFlag struct{ every *int }

func (c checkFlag) String() string {
	if c.every == nil || *c.every == 0 {
		return "off"
	}
	return strconv.Itoa(*c.every)
}

func (c checkFlag) Set(s string) error {
	if text.IsOff(s) {
		*c.every = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a number of steps or off, got %q", s)
	}
	*c.every = n
	return nil
}

// durationFlag parses --timeout. The flag package's own duration flag says
// only "parse error" for a value without a unit ("--timeout 30"); this one
// says what it wants.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration with a unit, like 90s, 5m or 1h30m")
	}
	*f.d = d
	return nil
}

// countFlag parses --steps and --warmup: a number of steps, 0 or more
// (with keep, --checkpoint-keep's number of checkpoints, 1 or more). The
// flag package's int flag says only "parse error" for "--steps 1e3".
type countFlag struct {
	n    *int
	keep bool
}

func (f countFlag) String() string {
	if f.n == nil {
		return "0"
	}
	return strconv.Itoa(*f.n)
}

func (f countFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if f.keep && (err != nil || n < 1) {
		return fmt.Errorf("want a number of checkpoints, 1 or more (the newest is never removed; to write none, leave out --checkpoint-every)")
	}
	if err != nil || n < 0 {
		return fmt.Errorf("want a number of steps, 0 or more")
	}
	*f.n = n
	return nil
}

// outputFlag parses --json and --trace: a FILE, given at most once. The
// flag package lets the last of "--json a.json --json b.json" win without a
// word, and only one of the two files would then be written.
type outputFlag struct {
	name string
	path *string
	set  bool
	// twice is the error of a second value, which parseOptions reports in
	// place of the flag package's longer wording of it.
	twice error
}

func (f *outputFlag) String() string {
	if f == nil || f.path == nil {
		return ""
	}
	return *f.path
}

func (f *outputFlag) Set(s string) error {
	if f.set {
		f.twice = fmt.Errorf("--%s given twice (%q, then %q): give it once", f.name, *f.path, s)
		return f.twice
	}
	f.set = true
	*f.path = s
	return nil
}

// parseOptions parses args (without the program name) with the plan's run
// line as defaults.
func parseOptions(p *plan.Plan, prog string, args []string, out io.Writer) (*options, error) {
	o := &options{steps: p.Run.Steps, warmup: p.Run.Warmup, checkEvery: p.Run.CheckEvery, timeout: defaultTimeout, settle: settleFromEnv(),
		checkpoint: engine.Checkpointing{Every: p.Run.CheckpointEvery, Dir: cmp.Or(p.Run.CheckpointDir, "checkpoints"), Keep: cmp.Or(p.Run.CheckpointKeep, 2)}}
	o.heteroFlags.batch, o.heteroFlags.balance = planHeteroDefaults(p.Ranks)
	fs, outputs := newFlagSet(o, prog)
	// The flag package prints its error and the whole help text on a bad
	// flag; the error alone, in the program's own words, says more.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(out, fs, p, prog)
			return nil, err
		}
		return nil, flagError(err, outputs, prog)
	}
	if fs.NArg() > 0 {
		if a := fs.Arg(0); strings.HasPrefix(a, "-") {
			// Only a "--" before it keeps a flag from being parsed.
			return nil, fmt.Errorf("unexpected argument %q: the \"--\" before it ends the flags; remove the \"--\"", a)
		}
		return nil, fmt.Errorf("unexpected argument %q: the program takes only flags (%s --help lists them)", fs.Arg(0), prog)
	}
	given := map[string]bool{}
	var empty []*flag.Flag
	fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		// --flight-dir "" is the documented way to write no flight record.
		if f.Value.String() == "" && f.Name != "flight-dir" {
			empty = append(empty, f)
		}
	})
	if err := o.check(prog); err != nil {
		return nil, err
	}
	// An empty value is most likely an unset variable (--json "$OUT"):
	// taken as no flag, the run would go on without a word and leave out
	// what was asked for (o.check has said so of --checkpoint-dir). An
	// empty --resume would start from step 0, and its checkpoints would
	// then prune the ones it was meant to resume from.
	for _, f := range empty {
		if f.Name == "resume" {
			return nil, fmt.Errorf("--resume is empty: give a checkpoint's directory, auto or since:TIME; to start from step 0, leave --resume out")
		}
		what, _ := flag.UnquoteUsage(f)
		return nil, fmt.Errorf("--%s is empty: give %s, or leave --%s out (%s --help lists the flags)", f.Name, what, f.Name, prog)
	}
	var err error
	if o.injections, err = resolveInjections(p, o.overflows, o.warmup+o.steps); err != nil {
		return nil, err
	}
	if o.faults, err = resolveFaults(o.faultSpecs, o.warmup+o.steps); err != nil {
		return nil, err
	}
	if p.Ranks != nil && !given["balance"] {
		o.heteroFlags.balanceFrom = string(p.Ranks.At)
	}
	if o.hetero, err = resolveHetero(o.heteroFlags); err != nil {
		return nil, err
	}
	o.planSpeeds = fromPlanRanks(&o.hetero, p.Ranks, given)
	if p.Ranks != nil && p.Ranks.Batch > 0 && !given["batch"] {
		o.hetero.BatchAt = string(p.Ranks.At)
	}
	return o, nil
}

// newFlagSet defines the program's flags on o. It returns the flags of
// --json and --trace too, which remember a second value (flagError).
func newFlagSet(o *options, prog string) (*flag.FlagSet, []*outputFlag) {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.Var(countFlag{n: &o.steps}, "steps", "run `N` measured steps")
	fs.Var(countFlag{n: &o.warmup}, "warmup", "run `N` warm-up steps before the measured ones (checked, not timed)")
	fs.Var(checkFlag{&o.checkEvery}, "check", "verify every element every `N` steps (and the last); off or 0: never")
	fs.StringVar(&o.backend, "backend", "auto", "`auto`, cpu or nccl: auto takes NCCL when every rank has a GPU of its own and libnccl loads")
	jsonFlag, traceFlag := &outputFlag{name: "json", path: &o.json}, &outputFlag{name: "trace", path: &o.trace}
	fs.Var(jsonFlag, "json", "write the figures and the environment as JSON to `FILE` (rank 0; - for standard output, the report then goes to standard error)")
	fs.Var(traceFlag, "trace", "write a Chrome trace of every rank's timeline to `FILE` (rank 0; opens in Perfetto; - for standard output, as --json)")
	fs.Var(durationFlag{&o.timeout}, "timeout", "abort the job when one step, or a phase before or after the steps, takes longer than `DUR`, printing on every rank what it waits for")
	fs.BoolVar(&o.quiet, "quiet", false, "print only errors and the summary lines")
	fs.Var(countFlag{n: &o.checkpoint.Every}, "checkpoint-every", "write a checkpoint after every `N` steps (warm-up included; 0: never)")
	fs.StringVar(&o.checkpoint.Dir, "checkpoint-dir", o.checkpoint.Dir, "write checkpoints into `DIR`/step-NNNNNNNN (every rank must reach it: a shared file system across hosts)")
	fs.Var(countFlag{n: &o.checkpoint.Keep, keep: true}, "checkpoint-keep", "keep the newest `N` committed checkpoints (at least 1)")
	fs.BoolVar(&o.checkpoint.Async, "checkpoint-async", false, "write each checkpoint in the background while the next step runs (from a copy taken at the save), committing it at the end of that step")
	fs.StringVar(&o.resume, "resume", "", "continue from the checkpoint in `DIR` (step-N: the state after N steps; the run starts at step N); auto: the newest committed one in --checkpoint-dir; since:TIME[,else:DIR|auto] (what syncgen run --restarts gives): the newest of this plan committed since TIME (RFC 3339), else what DIR or auto took when the job began, else step 0")
	fs.StringVar(&o.flightDir, "flight-dir", "flightrec", "on a timeout, every rank that can writes its flight record (its streams' collectives of the step) into `DIR`; syncgen flightrec DIR names the rank missing from which collective; \"\" for none")
	fs.Var(faultFlag{&o.faultSpecs}, "fault", "rehearse a failure: `KIND:RANK:STEP` with KIND crash (SIGKILL at the step's start), hang, stop (SIGSTOP), crash-in-save (in the checkpoint after STEP steps), or delay:RANK:STEP:DUR; may be repeated")
	fs.StringVar(&o.profile, "profile", "", "print the step's prediction from a cost-model profile beside what the run measures: a `FILE` from syncgen calibrate, or a built-in profile's name (syncgen predict --help lists them)")
	fs.Var(overflowFlag{&o.overflows}, "overflow", "put inf (or =-inf, =nan) into the first element of a gradient on one rank at one step, `STEP:RANK:TENSOR[=inf|-inf|nan]`, to watch the loss scaler skip the step; may be repeated")
	fs.Var(listFlag{&o.heteroFlags.speeds}, "speed", "give ranks a relative speed, `R=S[,R=S]` (R a rank or FIRST..LAST; 1 is the plan's durations): a rank's simulated backward and compute take their duration times its share of the batch over an even share, over its speed; may be repeated, but a rank takes one speed; given, replaces all the speeds of the plan's ranks declaration")
	straggler, jitter, balance, batch := o.heteroFlags.onceFlags()
	o.heteroFlags.steps, o.heteroFlags.warmup = &o.steps, &o.warmup
	fs.Var(straggler, "straggler", "slow one rank, `RANK:FACTOR[:FROMSTEP]`: its compute takes FACTOR times as long from step FROMSTEP on (warm-up counted; default 0; within the run); at most once")
	fs.Var(jitter, "jitter", "add to every rank's compute a random delay a step of up to MAXDUR, drawn from SEED (the same every run), `SEED:MAXDUR`; at most once")
	fs.Var(batch, "batch", "the global batch in samples, shared among the ranks (`N`, at least one a rank, at most 2147483647; 0: one a rank); replaces the plan's `ranks batch`; at most once")
	fs.Var(balance, "balance", "share the batch by speed, `RULE`: off (even shares), static (from --speed), or dynamic[:K] (every K steps, default 5, from each rank's compute per sample in the last K steps); needs --batch; replaces the plan's `ranks balance`; at most once")
	return fs, []*outputFlag{jsonFlag, traceFlag}
}

// printHelp prints --help: what the program is, how to run it, its flags.
func printHelp(out io.Writer, fs *flag.FlagSet, p *plan.Plan, prog string) {
	fmt.Fprintf(out, `%s runs the gradient synchronisation plan %q (from %s) with the syncgen runtime.

Each step simulates the backward pass of the model's gradients and runs the
plan's collectives on them, overlapping where the plan says so; results are
checked exactly and rank 0 reports step time, overlap and per-bucket
bandwidth. Run it under MPI, or alone as a single rank:

    mpirun -np 4 --bind-to none ./%s [flags]

As root add --allow-run-as-root; with more ranks than cores, --oversubscribe.
--bind-to none leaves Go's threads free to run the streams in parallel.

Flags (one or two dashes):
`, prog, p.Name, p.Source, prog)
	printFlags(out, fs)
}

// flagError rewrites the flag package's error in the program's words: a
// FILE flag given twice says so, and flags are named with two dashes, as
// the help and the documentation write them.
func flagError(err error, outputs []*outputFlag, prog string) error {
	for _, f := range outputs {
		if f.twice != nil {
			return f.twice
		}
	}
	msg := strings.Replace(err.Error(), "flag -", "flag --", 1)
	msg = strings.Replace(msg, "defined: -", "defined: --", 1)
	msg = strings.Replace(msg, "\" for -", "\" for --", 1)       // a bool flag's: invalid boolean value "x" for -quiet
	msg = strings.Replace(msg, "argument: -", "argument: --", 1) // flag needs an argument: -steps
	return fmt.Errorf("%s (%s --help lists the flags)", msg, prog)
}

// check refuses what the flags cannot mean together or at all.
func (o *options) check(prog string) error {
	switch o.backend {
	case "auto", "cpu", "nccl":
	default:
		known := false
		for _, f := range backend.Registered() {
			known = known || f.Name == o.backend
		}
		if !known {
			return fmt.Errorf("--backend %q: want auto, cpu or nccl", o.backend)
		}
	}
	// A flag that takes a FILE takes the next argument whatever it is:
	// "--json --quiet" would write the JSON to a file named "--quiet". A
	// lone "-" is standard output.
	for _, f := range []struct{ name, value string }{{"--json", o.json}, {"--trace", o.trace}} {
		if strings.HasPrefix(f.value, "-") && f.value != "-" {
			return fmt.Errorf("%s %q: want a FILE after %s, not a flag (for a file whose name starts with \"-\", write ./%s)", f.name, f.value, f.name, f.value)
		}
	}
	// A plan is never an output: "--trace model.sync" is a slip of the
	// command line, and writing would replace the plan (or a module that
	// plans import) with JSON. syncgen's own outputs follow the same
	// rule (docs/cli.md, "Where the output goes").
	for _, f := range []struct{ name, value string }{{"--json", o.json}, {"--trace", o.trace}} {
		if strings.EqualFold(filepath.Ext(f.value), ".sync") {
			if fi, err := os.Stat(f.value); err == nil && fi.Mode().IsRegular() {
				return fmt.Errorf("%s %s is a .sync file, a plan: the %s would overwrite it; give %s another path, such as %s",
					f.name, f.value, strings.TrimPrefix(f.name, "--"), f.name, strings.TrimSuffix(f.value, filepath.Ext(f.value))+".json")
			}
		}
	}
	if o.json == "-" && o.trace == "-" {
		return fmt.Errorf("--json - and --trace - both name standard output: give one of them a file")
	}
	// Rank 0 writes the JSON after the trace: one path for both would
	// leave only the JSON, and the trace lost without a word. (Two names
	// of one file, a link, are caught when rank 0 opens them:
	// checkOutputs.)
	if o.json != "" && o.trace != "" && o.json != "-" && o.trace != "-" {
		j, _ := filepath.Abs(o.json)
		t, _ := filepath.Abs(o.trace)
		if j == t {
			return fmt.Errorf("--json and --trace both name %s: give them different files", o.json)
		}
	}
	if o.profile != "" {
		// Read now, so that a missing or broken profile is a usage error
		// before anything runs; the prediction needs the world size.
		if _, ok := costmodel.Builtin(o.profile, 1); !ok {
			if _, err := costmodel.ReadProfile(o.profile); err != nil {
				return fmt.Errorf("--profile: %v (the built-in profiles are %s)", err, strings.Join(costmodel.BuiltinNames(), ", "))
			}
		}
	}
	if o.checkpoint.Dir == "" {
		return fmt.Errorf("--checkpoint-dir is empty: give the directory that checkpoints go to and --resume auto reads (default checkpoints)")
	}
	if _, _, _, err := engine.ParseSince(o.resume); err != nil {
		return err
	}
	if o.checkpoint.Keep < 1 {
		return fmt.Errorf("--checkpoint-keep %d: keep at least 1 checkpoint (the newest is never removed); to write none, leave out --checkpoint-every", o.checkpoint.Keep)
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout %v must be positive: want a duration like 90s, 5m or 1h30m (%s --help lists the flags)", o.timeout, prog)
	}
	// The fill pattern numbers the steps with 32 bits, the last number
	// marking the init block; "--warmup 9223372036854775807 --steps 1"
	// overflowed the count of steps, ran none and passed.
	if total := uint64(o.warmup) + uint64(o.steps); total > maxTotalSteps {
		return fmt.Errorf("--warmup %d and --steps %d make %d steps, more than a run can number (at most %d, warm-up included)",
			o.warmup, o.steps, total, uint64(maxTotalSteps))
	}
	return nil
}

// maxTotalSteps is the most steps, warm-up included, that a run can have:
// steps are numbered from 0 in 32 bits, and 0xffffffff is the init block's
// number (InitStep).
const maxTotalSteps = elem.InitStep // steps 0 .. InitStep-1

// printFlags prints the flags as flag.PrintDefaults does, but named with
// two dashes, as the rest of the help and the documentation write them.
func printFlags(out io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if strings.HasPrefix(line, "  -") {
			line = "  --" + line[len("  -"):]
		}
		io.WriteString(out, line)
	}
}

// settleFromEnv reads SYNCGEN_SETTLE.
func settleFromEnv() time.Duration {
	v := strings.TrimSpace(os.Getenv("SYNCGEN_SETTLE"))
	switch strings.ToLower(v) {
	case "":
		return engine.DefaultSettle
	case "0", "off":
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > time.Minute {
		proc.WarnEnv("SYNCGEN_SETTLE=%q: want a duration like 50ms, at most 1m, or off", v)
		return engine.DefaultSettle
	}
	return d
}

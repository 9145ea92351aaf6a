package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/tune"
)

func tuneCommand() *cli.Command {
	return &cli.Command{
		Name:      "tune",
		Usage:     "search bucket plans by predicted step time, optionally run the best, write the winner",
		ArgsUsage: "FILE.sync",
		Description: `tune searches the options of one bucket declaration (by default the one
holding the most gradient bytes): every cap of --caps (and none), first
bucket of --firsts, order of --orders and wire dtype of --wire, its pieces
dealt over --streams communication streams (1 and 2; 1 only with a CPU
profile, whose backend runs every stream's collectives one at a time) with
consecutive pieces below
--group-below issued as one group (where the step has one collective of
the whole declaration). Each
candidate is written through the formatter, checked and predicted like
'syncgen predict' (nothing is built); candidates whose buckets come out the
same as a better-placed one's are left out. The table ranks them by
predicted step time, the plan as written among them.

--run K builds and runs the best K (and the plan as written) for real at
--np ranks, every result checked: a candidate with a wrong element is not
eligible, and the winner is the fastest measured p50. --args, the runs'
program flags, is split into words as a shell splits them (nothing is
expanded): quote or backslash-escape a space inside an argument. Without
--run the winner is the best predicted. --out writes the winner as a formatted .sync
file; --plot an SVG of the predicted (and measured) step time against the
cap. Both are checked before anything runs, and never write over the plan
or a file it imports (nor --plot over any .sync file); docs/cli.md has the
rule for every output.

Examples:
   syncgen tune --np 8 --profile nvlink-h100 examples/resnet50.sync
   syncgen tune --np 2 --profile cpu2.json --run 2 --args "--steps 10 --flight-dir 'my runs/fr'" model.sync
   syncgen tune --np 4 --profile cpu4.json --run 3 --out tuned.sync --plot caps.svg examples/bert_large.sync`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "np", Value: 2, Usage: "number of ranks"},
			profileFlag(),
			&cli.StringFlag{Name: "bucket", Usage: "tune the bucket declaration `NAME` (default: the one with the most bytes)"},
			&cli.StringFlag{Name: "caps", Value: "1M,2M,4M,8M,16M,25M,32M,64M,128M,256M,none", Usage: "caps to try, comma-separated `SIZES` (none: no cap)"},
			&cli.StringFlag{Name: "firsts", Value: "none,1M", Usage: "first-bucket caps to try, comma-separated `SIZES` (none: no first)"},
			&cli.StringFlag{Name: "orders", Value: "reverse,declared", Usage: "orders to try, comma-separated: reverse, declared"},
			&cli.StringFlag{Name: "wire", Value: "keep", Usage: "wire dtypes to try, comma-separated (keep: the declaration's; e.g. keep,bf16 — a narrower wire changes the gradients' precision)"},
			&cli.StringFlag{Name: "streams", Usage: "numbers of communication streams to deal the pieces over, comma-separated `N`s (default 1,2; 1 with a CPU profile)"},
			&cli.StringFlag{Name: "group-below", Value: "none,1M", Usage: "issue a stream's consecutive pieces smaller than `SIZE` as one group, comma-separated (none: no groups)"},
			&cli.IntFlag{Name: "run", Usage: "run the best `K` candidates (and the plan as written) for real, checked, and pick the winner by measurement"},
			&cli.StringFlag{Name: "out", Usage: "write the winning plan to `FILE.sync`"},
			&cli.StringFlag{Name: "plot", Usage: "write the step time against the cap as SVG to `FILE.svg`"},
			&cli.StringFlag{Name: "args", Value: "--steps 20 --warmup 3", Usage: "the program's flags for --run, split into words as a shell does: quote or backslash-escape a space inside one (not --json, --profile or --check off: tune sets the first two, and picks among checked runs)"},
			&cli.StringFlag{Name: "mpirun", Value: "mpirun", Usage: "the MPI launcher `PATH`"},
			&cli.BoolFlag{Name: "oversubscribe", Usage: "with --run, run more than " + strconv.Itoa(maxRanksPerCore) + " ranks a core (refused otherwise, as a likely typo)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("tune: give exactly one .sync file; usage: syncgen tune --np N --profile FILE|NAME FILE.sync", 2)
			}
			if err := needProfile(c); err != nil {
				return err
			}
			path := c.Args().First()
			if path == "-" {
				return cli.Exit("tune: give the plan's file, not standard input: candidates are written and built beside it (its imports are relative to it)", 2)
			}
			np := c.Int("np")
			if err := checkNP("tune", np); err != nil {
				return err
			}
			if c.Int("run") > 0 {
				// --run launches the candidates on this machine, as run does.
				if err := checkRanksPerCore("tune", "--np", np, c.Bool("oversubscribe")); err != nil {
					return err
				}
			}
			if k := c.Int("run"); k < 0 {
				return cli.Exit(fmt.Sprintf("tune: --run %d: want the number of best candidates to run, 0 (none, the default) or more", k), 2)
			}
			args, err := splitWords(c.String("args"))
			if err != nil {
				return cli.Exit("tune: --args: "+err.Error(), 2)
			}
			if err := checkTuneArgs(args); err != nil {
				return cli.Exit("tune: --args: "+err.Error(), 2)
			}
			grid, err := tuneGrid(c)
			if err != nil {
				return cli.Exit("tune: "+err.Error(), 2)
			}
			prog, err := loadOrReport(c, path)
			if err != nil {
				return err
			}
			// Before anything runs: a target that cannot be written
			// would otherwise fail after every candidate ran.
			if err := checkTuneTargets(c, path, prog.Imports); err != nil {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return cli.Exit(fmt.Sprintf("tune: %v", err), 1)
			}
			prof, warning, err := costmodel.Resolve(c.String("profile"), np)
			if err != nil {
				return cli.Exit(fmt.Sprintf("tune: --profile: %v", err), 1)
			}
			if warning != "" {
				fmt.Fprintf(c.App.ErrWriter, "tune: warning: %s\n", warning)
			}
			if len(grid.Streams) == 0 {
				grid.Streams = defaultStreams(prof)
			}
			t, err := tune.Tune(path, src, np, prof, grid)
			if err != nil {
				return cli.Exit("tune: "+err.Error(), 1)
			}
			winner := t.Candidates[0]
			if k := c.Int("run"); k > 0 {
				if winner, err = runCandidates(c, t, path, np, k); err != nil {
					return err
				}
			}
			if err := t.WriteTable(c.App.Writer); err != nil {
				return err
			}
			how := "best predicted"
			switch {
			case c.Int("run") > 0 && winner.Unchecked:
				how = "fastest measured; unchecked: its run checked no element"
			case c.Int("run") > 0:
				how = "fastest measured with 0 wrong"
			}
			fmt.Fprintf(c.App.Writer, "# winner (%s): %s, predicted step %.3f ms\n", how, candidateLabel(winner), float64(winner.Step)/1e6)
			// What its prediction left out or took from elsewhere, as
			// predict says it: the ranking rests on the same figures.
			for _, n := range winner.Notes {
				fmt.Fprintf(c.App.Writer, "# note on the winner's prediction: %s\n", n)
			}
			if out := c.String("out"); out != "" {
				// The plan's imports are relative to its directory: the
				// winner names the same files from --out's.
				src, err := dsl.RelocateImports(out, winner.Src, filepath.Dir(path), filepath.Dir(out))
				if err != nil {
					return cli.Exit(fmt.Sprintf("tune: --out: %v", err), 1)
				}
				if err := writeAtomic(out, src); err != nil {
					return cli.Exit(fmt.Sprintf("tune: --out: %v", err), 1)
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", out)
			}
			if p := c.String("plot"); p != "" {
				var buf bytes.Buffer
				if err := t.WriteSVG(&buf); err != nil {
					return err
				}
				if err := writeAtomic(p, buf.Bytes()); err != nil {
					return cli.Exit(fmt.Sprintf("tune: --plot: %v", err), 1)
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", p)
			}
			return nil
		},
	}
}

// checkTuneTargets checks --out and --plot, where given, before any
// candidate is predicted or run (checkTargets): the winner must not
// overwrite the plan or a module, such as one from syncgen import, that
// other plans share.
func checkTuneTargets(c *cli.Context, plan string, imports []string) error {
	return checkTargets("tune", plan, imports,
		target{flag: "--out", path: c.String("out"), what: "the winning plan", example: "tuned.sync", plan: true},
		target{flag: "--plot", path: c.String("plot"), what: "the plot", example: "caps.svg"})
}

// checkTuneArgs refuses the program flags of --args that --run cannot
// take: --json and --profile, which tune gives each run itself (the
// program would refuse them given twice, after the candidate is built),
// and --check off, which would leave every candidate unchecked and so
// eligible to win with wrong elements uncounted.
func checkTuneArgs(args []string) error {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		switch name {
		case "json", "profile":
			return fmt.Errorf("%s: tune --run gives each run its own --%s; leave it out", a, name)
		case "check":
			if !hasValue && i+1 < len(args) {
				value = args[i+1]
			}
			if value == "off" {
				return fmt.Errorf("--check off: tune --run picks its winner among checked runs, and unchecked ones would count 0 wrong; check every step or every N (--check N)")
			}
		}
	}
	return nil
}

// defaultStreams is --streams when it is not given: 1 and 2 streams, but
// only 1 with a profile of the CPU backend, which runs the collectives of
// all streams one at a time in one global order (so that blocking MPI
// calls cannot deadlock): a second stream there adds a hand-over between
// threads per collective and no overlap, which the model does not see.
func defaultStreams(prof *costmodel.Profile) []int {
	if prof.Backend == "cpu" {
		return []int{1}
	}
	return []int{1, 2}
}

// tuneGrid reads the grid's flags.
func tuneGrid(c *cli.Context) (tune.Grid, error) {
	g := tune.Grid{Bucket: c.String("bucket")}
	sizes := func(flag string) ([]int64, error) {
		var out []int64
		for _, s := range strings.Split(c.String(flag), ",") {
			s = strings.TrimSpace(s)
			if s == "none" {
				out = append(out, 0)
				continue
			}
			v, err := parseByteSize(s)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("--%s: %q is not a size (such as 25M) or none", flag, s)
			}
			out = append(out, v)
		}
		return out, nil
	}
	var err error
	if g.Caps, err = sizes("caps"); err != nil {
		return g, err
	}
	if g.Firsts, err = sizes("firsts"); err != nil {
		return g, err
	}
	if g.GroupBelow, err = sizes("group-below"); err != nil {
		return g, err
	}
	for _, v := range strings.Split(c.String("streams"), ",") {
		if !c.IsSet("streams") {
			break // defaultStreams, once the profile is read
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 8 {
			return g, fmt.Errorf("--streams: %q: want a number of streams from 1 to 8", v)
		}
		g.Streams = append(g.Streams, n)
	}
	for _, o := range strings.Split(c.String("orders"), ",") {
		o = strings.TrimSpace(o)
		if o != "reverse" && o != "declared" {
			return g, fmt.Errorf("--orders: %q: want reverse or declared", o)
		}
		g.Orders = append(g.Orders, o)
	}
	for _, w := range strings.Split(c.String("wire"), ",") {
		w = strings.TrimSpace(w)
		if w == "keep" {
			w = ""
		} else if _, ok := ir.ParseDType(w); !ok {
			return g, fmt.Errorf("--wire: %q: want keep or a dtype: %s", w, strings.Join(dtypeNames(), ", "))
		}
		g.Wires = append(g.Wires, w)
	}
	return g, nil
}

// candidateLabel names a candidate in tune's messages: its grid options,
// or "the plan as written", whose options are the plan's (Label would
// say "no cap" of a plan with a cap).
func candidateLabel(c *tune.Candidate) string {
	if c.Current() {
		return "the plan as written"
	}
	return c.Label()
}

// dtypeNames lists the language's dtypes in ir's order: "f64", "f32", ...
func dtypeNames() []string {
	var out []string
	for d := ir.DType(1); ; d++ {
		if got, ok := ir.ParseDType(d.String()); !ok || got != d {
			return out
		}
		out = append(out, d.String())
	}
}

// runCandidates builds and runs the best k candidates and the plan as
// written, each checked, and returns the fastest by measured p50 among
// those with no wrong element.
func runCandidates(c *cli.Context, t *tune.Tuning, path string, np, k int) (*tune.Candidate, error) {
	launcher, err := exec.LookPath(c.String("mpirun"))
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("tune: %s not found: install Open MPI or pass --mpirun PATH", c.String("mpirun")), 1)
	}
	dir, err := os.MkdirTemp("", "syncgen-tune-")
	if err != nil {
		return nil, cli.Exit("tune: "+err.Error(), 1)
	}
	defer os.RemoveAll(dir)
	// Checked in the command's action before anything ran.
	extra, err := splitWords(c.String("args"))
	if err != nil {
		return nil, cli.Exit("tune: --args: "+err.Error(), 2)
	}
	var winner *tune.Candidate
	for i, cand := range t.Candidates {
		if i >= k && !cand.Current() {
			continue
		}
		// Imports are relative to the plan's directory: the candidate
		// goes beside a copy named after the plan, in a directory of its
		// own.
		cdir := filepath.Join(dir, fmt.Sprintf("c%d", i))
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			return nil, cli.Exit("tune: "+err.Error(), 1)
		}
		plan := filepath.Join(filepath.Dir(path), fmt.Sprintf(".tune-%d-%d-%s", os.Getpid(), i, filepath.Base(path)))
		if err := os.WriteFile(plan, cand.Src, 0o644); err != nil {
			return nil, cli.Exit("tune: "+err.Error(), 1)
		}
		fmt.Fprintf(c.App.ErrWriter, "tune: running candidate %d (%s)\n", i+1, candidateLabel(cand))
		what := fmt.Sprintf("candidate %d (%s) with --args %q", i+1, candidateLabel(cand), c.String("args"))
		report, err := buildAndRun(c, launcher, plan, what, filepath.Join(cdir, "cand_sync"), np, append(slices.Clip(extra), "--profile", c.String("profile"))...)
		os.Remove(plan)
		if err != nil {
			return nil, err
		}
		var r struct {
			Summary struct {
				P50    float64 `json:"step_p50_ms"`
				Wrong  int64   `json:"wrong"`
				Checks int     `json:"checks"`
			} `json:"summary"`
		}
		if err := json.Unmarshal(report, &r); err != nil {
			return nil, cli.Exit(fmt.Sprintf("tune: reading the run's report: %v", err), 1)
		}
		cand.Ran, cand.Wrong, cand.Unchecked = true, r.Summary.Wrong, r.Summary.Checks == 0
		cand.Measured = time.Duration(r.Summary.P50 * 1e6)
		if cand.Wrong == 0 && (winner == nil || cand.Measured < winner.Measured) {
			winner = cand
		}
	}
	if winner == nil {
		return nil, cli.Exit("tune: every candidate that ran had wrong elements; no plan is eligible", 1)
	}
	return winner, nil
}

package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/calibrate"
	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

func calibrateCommand() *cli.Command {
	return &cli.Command{
		Name:      "calibrate",
		Usage:     "measure this cluster's collectives and write a cost-model profile",
		ArgsUsage: " ",
		Description: `calibrate builds a plan that runs each collective that --plan uses (else an
f32 sum allreduce) alone on a communication stream over a sweep of sizes,
runs it under mpirun like 'syncgen run' (every result checked), and fits
each collective's times, the median of --reps steps, to an alpha-beta
cost model: latency plus bytes over bus bandwidth, in up to three pieces
where the library changes algorithm. It writes the profile (JSON, with
the machine, ranks, backend and library versions, the measured points and
the fitted pieces) for 'syncgen predict', 'syncgen tune' and a run's
--profile. Keep one per cluster and world size.

The default sweep is 4 B to 64 MiB in steps of 4; --full sweeps 4 B to
256 MiB in steps of 2.

On a machine without Go, --emit writes the sweep's plan to build where Go
is, and --program runs the program built from it. The program measures
the sweep it was emitted with: leave --plan, --max and --full out to take
it as it is; given, they must match it, else no profile is written. The
profile's source says what was measured.

Examples:
   syncgen calibrate --np 4 -o cpu4.json
   syncgen calibrate --np 8 --plan examples/bert_large.sync --full -o h200x8.json`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "np", Value: 2, Usage: "number of ranks"},
			&cli.StringFlag{Name: "o", Usage: "write the profile to `FILE` (required, but with --emit)"},
			&cli.StringFlag{Name: "plan", Usage: "measure the collectives, operators and wire dtypes that the plan `FILE.sync` uses"},
			&cli.BoolFlag{Name: "full", Usage: "sweep 4 B to 256 MiB in steps of 2 (slower)"},
			&cli.StringFlag{Name: "max", Usage: "the sweep's largest `SIZE` in bytes (suffixes K, M, G: binary, either case), at least the second size: 16, or 8 with --full"},
			&cli.IntFlag{Name: "reps", Value: 10, Usage: "measured steps: each size's time is the median over them"},
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "the program's --backend: auto, cpu or nccl"},
			&cli.StringFlag{Name: "mpirun", Value: "mpirun", Usage: "the MPI launcher `PATH`"},
			&cli.BoolFlag{Name: "oversubscribe", Usage: "run more than " + strconv.Itoa(maxRanksPerCore) + " ranks a core (refused otherwise, as a likely typo)"},
			&cli.StringFlag{Name: "emit", Usage: "write the sweep's plan to `FILE.sync` and stop (to build it where Go is, for --program); runs nothing, so takes no -o or --program"},
			&cli.StringFlag{Name: "program", Usage: "run this sweep program `PATH`, built from --emit, instead of building one (a machine without Go); it measures the sweep it was emitted with"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cli.Exit("calibrate: takes no arguments; the plan goes to --plan FILE", 2)
			}
			np := c.Int("np")
			if err := checkNP("calibrate", np); err != nil {
				return err
			}
			if c.String("emit") == "" {
				// It launches the sweep on this machine, as run does.
				if err := checkRanksPerCore("calibrate", "--np", np, c.Bool("oversubscribe")); err != nil {
					return err
				}
			}
			if c.String("o") == "" && c.String("emit") == "" {
				return cli.Exit("calibrate: no -o FILE: give the file to write the profile to", 2)
			}
			// --emit writes the sweep's plan and stops: nothing is run,
			// so there is no program to take and no profile to write.
			if c.String("emit") != "" {
				for _, f := range []string{"o", "program"} {
					if c.String(f) != "" {
						return cli.Exit(fmt.Sprintf("calibrate: --emit and %s: --emit writes the sweep's plan and stops, running nothing, so %s would be ignored; calibrate with --emit first, build the plan, then calibrate --program PATH -o PROFILE",
							flagName(f), flagName(f)), 2)
					}
				}
			}
			switch b := c.String("backend"); b {
			case "auto", "cpu", "nccl":
			default:
				return cli.Exit(fmt.Sprintf("calibrate: --backend %q: want auto, cpu or nccl (the program's --backend)", b), 2)
			}
			if prog := c.String("program"); prog != "" && c.String("emit") == "" {
				// Before mpirun starts ranks that cannot exec it.
				if err := checkProgram(prog); err != nil {
					return cli.Exit(fmt.Sprintf("calibrate: --program %s: %v", prog, err), 2)
				}
			}
			maxBytes, factor := int64(64<<20), int64(4)
			if c.Bool("full") {
				maxBytes, factor = 256<<20, 2
			}
			if s := c.String("max"); s != "" {
				v, err := parseByteSize(s)
				if err != nil {
					return cli.Exit(fmt.Sprintf("calibrate: --max %s: not a size: want a whole number of bytes, with K, M or G for binary multiples, such as 64M", s), 2)
				}
				// The fit needs two sizes: 4 B and the next step's.
				if least := 4 * factor; v < least {
					return cli.Exit(fmt.Sprintf("calibrate: --max %s: want a size of at least %d bytes, such as 64M: the sweep goes from 4 B in steps of %d, and the fit needs at least 2 sizes",
						s, least, factor), 2)
				}
				maxBytes = v
			}
			var prog *ir.Program
			var imports []string
			if path := c.String("plan"); path != "" {
				var err error
				if prog, err = loadOrReport(c, path); err != nil {
					return err
				}
				imports = prog.Imports
			}
			// Before the sweep is built and run: the profile is written
			// only at the end.
			out := target{flag: "-o", path: c.String("o"), what: "the profile", example: "profile.json"}
			if c.String("emit") != "" {
				out = target{flag: "--emit", path: c.String("emit"), what: "the sweep's plan", example: "sweep.sync", plan: true}
			}
			if err := checkTargets("calibrate", c.String("plan"), imports, out); err != nil {
				return err
			}
			kinds, sizes := calibrate.Kinds(prog), calibrate.Sizes(maxBytes, factor)
			src, err := calibrate.SweepPlan(kinds, sizes, np, c.Int("reps"))
			if err != nil {
				return cli.Exit("calibrate: "+err.Error(), 2)
			}
			if emit := c.String("emit"); emit != "" {
				if err := writeAtomic(emit, src); err != nil {
					return cli.Exit("calibrate: --emit: "+err.Error(), 1)
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", emit)
				return nil
			}
			launcher, err := exec.LookPath(c.String("mpirun"))
			if err != nil {
				return cli.Exit(fmt.Sprintf("calibrate: %s not found: install Open MPI or pass --mpirun PATH", c.String("mpirun")), 1)
			}
			dir, err := os.MkdirTemp("", "syncgen-calibrate-")
			if err != nil {
				return cli.Exit("calibrate: "+err.Error(), 1)
			}
			defer os.RemoveAll(dir)
			var report []byte
			if prog := c.String("program"); prog != "" {
				extra := []string{"--backend", c.String("backend")}
				if c.IsSet("reps") {
					// The program's run line has the --reps it was
					// emitted with; --steps replaces it.
					extra = append(extra, "--steps", strconv.Itoa(c.Int("reps")))
				}
				report, err = runProgram(c, launcher, prog, "the sweep program "+prog, filepath.Join(dir, "sweep.json"), np, extra...)
			} else {
				report, err = runSweep(c, launcher, dir, src, np, "--backend", c.String("backend"))
			}
			if err != nil {
				return err
			}
			source := fmt.Sprintf("syncgen calibrate --np %d", np)
			for _, f := range []string{"plan", "max", "reps", "backend", "program"} {
				if c.IsSet(f) {
					source += fmt.Sprintf(" --%s %s", f, c.String(f))
				}
			}
			if c.Bool("full") {
				source += " --full"
			}
			prof, err := calibrate.FromRun(report, source)
			if err != nil {
				return cli.Exit("calibrate: "+err.Error(), 1)
			}
			if c.String("program") != "" {
				if err := checkProgramSweep(c, prof, kinds, sizes, np); err != nil {
					return err
				}
			}
			// The flags describe the sweep that calibrate built; with
			// --program the program's own was measured: the source says
			// which sizes were.
			prof.Source = fmt.Sprintf("%s (measured: %s; syncgen %s)", source, measuredSweep(prof), version)
			if prof.Backend == "cpu" {
				// The CPU backend's casts and updates run on the host.
				prof.MemGBs = math.Round(calibrate.MemBandwidth(64<<20, 5)*10) / 10
			}
			data, err := prof.Encode()
			if err == nil {
				err = writeAtomic(c.String("o"), data)
			}
			if err != nil {
				return cli.Exit("calibrate: -o: "+err.Error(), 1)
			}
			writeProfileSummary(c, prof)
			fmt.Fprintf(c.App.Writer, "wrote %s (%d ranks, %s backend)\n", c.String("o"), prof.Ranks, prof.Backend)
			return nil
		},
	}
}

// measuredSweep describes what a profile's points measured: "allreduce
// sum f32 at 8 sizes, 4 B to 64.0 KiB", a curve after another.
func measuredSweep(p *costmodel.Profile) string {
	var parts []string
	for i := range p.Curves {
		cv := &p.Curves[i]
		parts = append(parts, cv.Key()+" at "+sizeRange(pointBytes(cv)))
	}
	return strings.Join(parts, "; ")
}

// pointBytes lists a curve's measured sizes in bytes.
func pointBytes(cv *costmodel.Curve) []int64 {
	out := make([]int64, len(cv.Points))
	for i, pt := range cv.Points {
		out[i] = pt.Bytes
	}
	return out
}

// sizeRange describes a list of sizes: "8 sizes, 4 B to 64.0 KiB".
func sizeRange(sizes []int64) string {
	switch len(sizes) {
	case 0:
		return "no sizes"
	case 1:
		return "1 size, " + humanBytes(sizes[0])
	}
	return fmt.Sprintf("%d sizes, %s to %s", len(sizes), humanBytes(slices.Min(sizes)), humanBytes(slices.Max(sizes)))
}

// checkProgramSweep compares what the sweep program of --program measured
// with the sweep that the flags describing one ask for: --plan (its
// collectives, operators and wire dtypes) and --max and --full (the
// sizes). A program carries the sweep it was emitted with, whatever the
// flags say now, so a flag that disagrees is a usage error and no profile
// is written: one labelled with the flags would describe sizes that were
// not measured. Flags left out take the program's sweep as it is.
func checkProgramSweep(c *cli.Context, p *costmodel.Profile, kinds []calibrate.Kind, sizes []int64, np int) error {
	var given []string
	if c.IsSet("plan") {
		given = append(given, "--plan "+c.String("plan"))
	}
	if c.IsSet("max") {
		given = append(given, "--max "+c.String("max"))
	}
	if c.IsSet("full") {
		given = append(given, "--full")
	}
	if len(given) == 0 {
		return nil
	}
	got := map[calibrate.Kind][]int64{}
	var gotKinds []string
	for i := range p.Curves {
		cv := &p.Curves[i]
		k := calibrate.Kind{Collective: cv.Collective, Op: cv.Op, DType: cv.DType}
		got[k] = pointBytes(cv)
		gotKinds = append(gotKinds, k.String())
	}
	var wantKinds []string
	for _, k := range kinds {
		wantKinds = append(wantKinds, k.String())
	}
	slices.Sort(gotKinds)
	slices.Sort(wantKinds)
	same := !c.IsSet("plan") || slices.Equal(gotKinds, wantKinds)
	if c.IsSet("max") || c.IsSet("full") {
		for k, b := range got {
			want, err := calibrate.SweepBytes(k, sizes, np)
			switch {
			case err != nil || len(want) != len(b):
				same = false
			case k.Collective == "allgather" || k.Collective == "reducescatter":
				// Padded to the ranks the program was emitted for, which
				// the report does not say: the count of sizes is
				// compared, and the sizes themselves on the other
				// collectives, which a sweep measures at the same ones.
			case !slices.Equal(want, b):
				same = false
			}
		}
	}
	if same {
		return nil
	}
	asked := "each collective"
	if c.IsSet("plan") {
		asked = strings.Join(wantKinds, ", ")
	}
	if c.IsSet("max") || c.IsSet("full") {
		asked += " at " + sizeRange(sizes)
	} else {
		asked += " at the program's sizes"
	}
	return cli.Exit(fmt.Sprintf("calibrate: %s: the program %s measured %s, but %s asks for %s: a sweep program measures the sweep it was emitted with (--emit). "+
		"Emit and build the sweep again with these flags, or leave %s out to take the program's sweep as it is; no profile written",
		strings.Join(given, " "), c.String("program"), measuredSweep(p), strings.Join(given, " "), asked, strings.Join(given, " ")), 2)
}

// runSweep writes the plan src into dir, builds it, runs it at np ranks
// with the program flags extra and returns its JSON report.
func runSweep(c *cli.Context, launcher, dir string, src []byte, np int, extra ...string) ([]byte, error) {
	plan := filepath.Join(dir, "calibrate.sync")
	if err := os.WriteFile(plan, src, 0o644); err != nil {
		return nil, cli.Exit(fmt.Sprintf("%s: %v", c.Command.Name, err), 1)
	}
	return buildAndRun(c, launcher, plan, "the sweep", filepath.Join(dir, "calibrate_sync"), np, extra...)
}

// buildAndRun builds the plan at path into out, runs it at np ranks with
// the program flags extra (every result checked as the plan says) and
// returns its JSON report. what names the run in messages ("the sweep"):
// out is a temporary file that means nothing to the user.
func buildAndRun(c *cli.Context, launcher, path, what, out string, np int, extra ...string) ([]byte, error) {
	res, err := buildPlan(c, path, out, false)
	if err != nil {
		return nil, err
	}
	return runProgram(c, launcher, res.Output, what, out+".json", np, extra...)
}

// runProgram runs the program at prog at np ranks with the program flags
// extra, its JSON report to jsonPath, and returns the report. what names
// the run in messages.
func runProgram(c *cli.Context, launcher, prog, what, jsonPath string, np int, extra ...string) ([]byte, error) {
	args := append(mpirunFlags(launcher, np, nil, false), prog, "--quiet", "--json", jsonPath)
	args = append(args, extra...)
	fmt.Fprintf(c.App.ErrWriter, "+ %s\n", shellJoin(append([]string{launcher}, args...)))
	code, stopped, err := launch(c, launcher, args)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("%s: %v", c.Command.Name, err), 1)
	}
	if code != 0 && stopped != 0 {
		// As syncgen run says it: the user's wish, not a failed run.
		return nil, cli.Exit(fmt.Sprintf("%s: stopped on your signal (%s; mpirun exited %d)", c.Command.Name, signalName(stopped), code), 128+int(stopped))
	}
	if code != 0 {
		return nil, cli.Exit(fmt.Sprintf("%s: the run of %s failed (exit status %d); see its output above", c.Command.Name, what, code), 1)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("%s: the run wrote no report: %v", c.Command.Name, err), 1)
	}
	return data, nil
}

// writeProfileSummary prints each curve's fitted pieces and how far the
// fit is from the points.
func writeProfileSummary(c *cli.Context, p *costmodel.Profile) {
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "collective\tfrom(B)\talpha(us)\tbusbw(GB/s)\tpoints\tfit rms err(%)\t")
	for i := range p.Curves {
		cv := &p.Curves[i]
		var se float64
		for _, pt := range cv.Points {
			r := (cv.Us(pt.Bytes, p.Ranks) - pt.Us) / pt.Us
			se += r * r
		}
		rms := 0.0
		if n := len(cv.Points); n > 0 {
			rms = 100 * math.Sqrt(se/float64(n))
		}
		for j, s := range cv.Segments {
			name, pts, err := cv.Key(), strconv.Itoa(len(cv.Points)), fmt.Sprintf("%.1f", rms)
			if j > 0 {
				name, pts, err = "", "", ""
			}
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.3f\t%s\t%s\t\n", name, s.FromBytes, s.AlphaUs, s.BusGBs, pts, err)
		}
	}
	tw.Flush()
}

// flagName writes the flag name as a user types it: -o, --program.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// parseByteSize reads a size such as 4096, 64K, 64M or 1G (binary
// multiples, in either case; a trailing B or iB is allowed: 64MiB, 64mb).
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, strings.TrimSuffix(t, "K")
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, strings.TrimSuffix(t, "M")
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, strings.TrimSuffix(t, "G")
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<50)/mult {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return v * mult, nil
}

// checkProgram says why the sweep program at path cannot be run, or nil:
// it must be a regular file that someone may execute.
func checkProgram(path string) error {
	fi, err := os.Stat(path)
	switch {
	case notThere(err):
		return fmt.Errorf("no such file; build the sweep of --emit (syncgen build -o PATH sweep.sync) and give its path")
	case err != nil:
		return unwrapPathError(err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("is %s, not a program; give the path of the program built from --emit's plan", fileKind(fi.Mode()))
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("is not executable (mode %v); chmod +x it, or give the program built from --emit's plan", fi.Mode().Perm())
	}
	return nil
}

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/ir"
)

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "parse and check .sync plans, reporting every error at once",
		ArgsUsage: "FILE.sync...",
		Description: `check reads each plan, resolves its imports and checks it: unknown or
duplicate names, patterns that match nothing, mixed dtypes in a bucket,
streams that race on a bucket, roots out of range and more. Every error is
reported with file:line:col, the source line and a caret under the subject;
warnings (a tensor that nothing synchronises, a plan without a step block)
do not fail the check.

On success it prints a one-line summary of each plan: tensors, parameters,
gradient bytes and buckets.

A FILE of - reads the plan from standard input (named <stdin> in the
diagnostics; its imports are found from the current directory).

Exit status: 0 when no file has errors, 1 when one has, 2 for a usage error
(no file given, an unknown flag or format).

Examples:
   syncgen check examples/resnet50.sync
   syncgen check --format json model.sync    # diagnostics for editors
   syncgen check --format json - < model.sync  # the same, from an editor's buffer`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "text", Usage: "diagnostics as `text` or json"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("check: no files given; usage: syncgen check FILE.sync...", 2)
			}
			format := c.String("format")
			if format != "text" && format != "json" {
				return cli.Exit(fmt.Sprintf("check: unknown --format %q: use text or json", format), 2)
			}
			if n := slices.Index(c.Args().Slice(), "-"); n >= 0 && slices.Contains(c.Args().Slice()[n+1:], "-") {
				// The second would read nothing, and report on an empty plan.
				return cli.Exit("check: - (standard input) is given twice: it holds one plan; give it once", 2)
			}
			failed := false
			var all dsl.Diagnostics
			for _, path := range c.Args().Slice() {
				prog, diags := loadPlan(c, path)
				if diags.HasErrors() {
					failed = true
				}
				if format == "json" {
					all = append(all, diags...)
					continue
				}
				diags.Render(c.App.ErrWriter)
				if prog != nil {
					fmt.Fprintf(c.App.Writer, "%s: ok: %s\n", displayName(path), summary(prog))
				}
			}
			if format == "json" {
				out, err := all.JSON()
				if err != nil {
					return cli.Exit(fmt.Sprintf("check: %v", err), 1)
				}
				fmt.Fprintf(c.App.Writer, "%s\n", out)
			}
			if failed {
				return cli.Exit("", 1)
			}
			return nil
		},
	}
}

// summary describes a checked plan in one line: all tensors and their
// parameters (frozen ones included), and the bytes of the gradients (frozen
// tensors have none), as the generated program's header counts them. The
// checker keeps the totals below 2^63; were they not, the sums stop at
// the largest int64 and the summary says "at least" rather than wrap.
func summary(p *ir.Program) string {
	var params, bytes int64
	for _, t := range p.Tensors {
		params = addSat(params, t.Elems)
		if !t.Frozen {
			bytes = addSat(bytes, t.Bytes())
		}
	}
	var outputs int64 // the output buffers of `into`, counted apart
	for _, b := range p.Buckets {
		if b.Output != nil {
			outputs++
		}
	}
	buckets := count(int64(len(p.Buckets))-outputs, "bucket")
	if outputs > 0 {
		buckets += ", " + count(outputs, "output buffer")
	}
	paramsText, bytesText := count(params, "parameter"), humanBytes(bytes)
	if params == math.MaxInt64 {
		paramsText = "at least " + paramsText
	}
	if bytes == math.MaxInt64 {
		bytesText = "at least " + bytesText
	}
	return fmt.Sprintf("%s, %s, %s, %s, %s",
		count(int64(len(p.Tensors)), "tensor"), paramsText, bytesText,
		buckets, count(int64(len(p.Streams)), "stream"))
}

// addSat returns a+b for counts (never negative), or math.MaxInt64 where
// the sum would pass it.
func addSat(a, b int64) int64 {
	if b < 0 || a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// count says "1 bucket" or "6 buckets", with thousands separators:
// "200,000 tensors".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return commas(n) + " " + noun + "s"
}

// commas formats n with thousands separators: 25,557,032.
func commas(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// loadOrReport loads a plan and renders its diagnostics; it returns nil
// (and an exit error) when the plan has errors.
func loadOrReport(c *cli.Context, path string) (*ir.Program, error) {
	prog, diags := loadPlan(c, path)
	diags.Render(c.App.ErrWriter)
	if len(diags) == 1 && diags[0].Pos.Line == 0 && diags[0].Severity == dsl.Error {
		// The file could not be read: the diagnostic says so, with a
		// hint; "has errors" would add nothing. (A warning about the
		// whole file, such as a missing step block, has line 0 too.)
		return nil, cli.Exit("", 1)
	}
	if diags.HasErrors() || prog == nil {
		return nil, cli.Exit(fmt.Sprintf("%s has errors; fix them and try again", displayName(path)), 1)
	}
	return prog, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// loadPlan loads the plan at path, or from standard input when path is
// "-" (an editor checking an unsaved buffer).
func loadPlan(c *cli.Context, path string) (*ir.Program, dsl.Diagnostics) {
	if path != "-" {
		return dsl.Load(path)
	}
	src, err := readSource(c, path)
	if err != nil {
		return nil, dsl.Diagnostics{{Severity: dsl.Error, Message: fmt.Sprintf("cannot read standard input: %v", err)}}
	}
	return dsl.Check(stdinName, src)
}

// stdinName names a plan read from standard input in messages.
const stdinName = "<stdin>"

// displayName is how messages name the plan at path: "-" is standard input.
func displayName(path string) string {
	if path == "-" {
		return stdinName
	}
	return path
}

// loadForOutput loads the plan at path for gen or build (cmd), which name
// what they write (what: "output directory", "program") after the plan's
// file. A plan on standard input has none: it needs -o (flag: "-o DIR"),
// and is named after it.
func loadForOutput(c *cli.Context, cmd, path, out, what, flag string) (*ir.Program, error) {
	if path == "-" && out == "" {
		return nil, cli.Exit(fmt.Sprintf("%s: a plan on standard input has no file name to name the %s after; pass %s", cmd, what, flag), 2)
	}
	prog, err := loadOrReport(c, path)
	if err != nil {
		return nil, err
	}
	if path == "-" {
		prog.Name = nameFromOutput(out)
	}
	return prog, nil
}

// nameFromOutput names a plan read from standard input, which has no file
// stem, after where gen or build writes it: -o bin/resnet names it resnet
// (and bin/resnet_sync too), so that the program's help and reports do not
// say "<stdin>". A directory written `.` or `..` names it after the
// directory it is (`gen -o . -` in ~/resnet: resnet); the root, which
// has no name, gives "program".
func nameFromOutput(out string) string {
	clean := filepath.Clean(out)
	if base := filepath.Base(clean); base == "." || base == ".." {
		if abs, err := filepath.Abs(clean); err == nil {
			clean = abs
		}
	}
	base := filepath.Base(clean)
	if base == "." || base == ".." || base == string(filepath.Separator) {
		return "program"
	}
	if name := strings.TrimSuffix(base, "_sync"); name != "" {
		return name
	}
	return base
}

// readSource reads the plan at path, or standard input when path is "-".
func readSource(c *cli.Context, path string) ([]byte, error) {
	if path != "-" {
		return dsl.ReadPlanFile(path)
	}
	in := c.App.Reader
	if in == nil {
		in = os.Stdin
	}
	return dsl.ReadPlan(in)
}

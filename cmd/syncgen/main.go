// Command syncgen plans, checks and measures the gradient synchronisation
// of data-parallel training.
//
// It compiles a .sync plan (the model's gradient tensors, buckets, streams
// and collectives) into a Go program that runs the plan under mpirun, on
// GPUs through NCCL or on CPUs through MPI, checks every result exactly and
// reports bandwidth and overlap. See README.md and docs/.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is the syncgen release; set with -ldflags "-X main.version=...".
// --version prints it, and the header of every generated file names it.
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the process exit status. Tests call it
// directly.
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.Run(permuteArgs(app, args))
	if app.Metadata["unknown command"] == true {
		return 2
	}
	if err == nil {
		return 0
	}
	var exit cli.ExitCoder
	if errors.As(err, &exit) {
		if msg := exit.Error(); msg != "" {
			fmt.Fprintln(stderr, "syncgen:", msg)
		}
		return exit.ExitCode()
	}
	fmt.Fprintln(stderr, "syncgen:", err)
	return 1
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:    "syncgen",
		Version: version,
		Usage:   "plan, check and measure the gradient synchronisation of data-parallel training",
		Description: `syncgen compiles a .sync plan - your model's gradient tensors, how they are
grouped into buckets, which streams the work runs on and which collectives
move them - into a program that runs the plan for real under mpirun: NCCL on
GPUs, MPI's own collectives on CPUs. Every result is checked exactly and the
program reports per-bucket bandwidth (like nccl-tests), step time and how
much communication overlapped the backward pass.

A first session:

   syncgen check examples/hello.sync        # parse and check the plan
   syncgen build examples/hello.sync        # writes ./hello_sync
   mpirun -np 2 ./hello_sync                # run it (or: syncgen run -np 2 examples/hello.sync)

The language is described in docs/language.md; the generated program's flags
in docs/runtime.md (or ./hello_sync --help).`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		// urfave/cli gives the app its --help flag only when the app has
		// no command named help; ours replaces urfave/cli's, so without
		// this `syncgen --help` and `syncgen -h` failed with "flag: help
		// requested". The commands get the flag from urfave/cli.
		Flags: []cli.Flag{cli.HelpFlag},
		// The commands print their own errors; keep urfave/cli from
		// printing them a second time and exiting behind our back.
		ExitErrHandler: func(*cli.Context, error) {},
		// Without this, urfave/cli answers an unknown command with "No help
		// topic for 'x'" and exit status 3. It cannot return an error, so it
		// leaves a note for run.
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "syncgen: unknown command %q: the commands are %s (syncgen --help)\n", name, commandNames(c.App))
			c.App.Metadata["unknown command"] = true
		},
		Commands: []*cli.Command{
			checkCommand(),
			fmtCommand(),
			genCommand(),
			buildCommand(),
			runCommand(),
			importCommand(),
			flightrecCommand(),
			calibrateCommand(),
			predictCommand(),
			tuneCommand(),
			helpCommand(),
		},
		OnUsageError: usageError,
	}
	for _, c := range app.Commands {
		c.OnUsageError = usageError
	}
	return app
}

// usageError answers a wrong or incomplete flag with one line that names
// the flag and where to read about the flags, and exit status 2 like the
// other usage errors. urfave/cli's default prints the whole help text after
// the error, which scrolls the error itself out of sight.
func usageError(c *cli.Context, err error, _ bool) error {
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		msg := fmt.Sprintf("%s: %v; see 'syncgen %s --help'", c.Command.Name, err, c.Command.Name)
		if c.Command.Name == "run" && strings.Contains(err.Error(), "not defined") {
			// Most likely a flag of the program given without the `--`
			// that separates them from run's own.
			msg += "; the program's own flags go after --, e.g. syncgen run -np 2 model.sync -- --steps 100"
		}
		return cli.Exit(msg, 2)
	}
	return cli.Exit(fmt.Sprintf("%v; see 'syncgen --help'", err), 2)
}

// helpCommand is `syncgen help [COMMAND]`, what a new user types first. It
// replaces urfave/cli's own help command, which is hidden because it
// answered an unknown topic with exit status 3.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show the help of syncgen or of one command",
		ArgsUsage: "[COMMAND]",
		Action: func(c *cli.Context) error {
			switch c.NArg() {
			case 0:
				return cli.ShowAppHelp(c)
			case 1:
				name := c.Args().First()
				cmd := c.App.Command(name)
				if cmd == nil {
					return cli.Exit(fmt.Sprintf("help: unknown command %q: the commands are %s", name, commandNames(c.App)), 2)
				}
				// What `syncgen NAME --help` prints. (cli.ShowCommandHelp
				// looks among the help command's own subcommands.)
				cli.HelpPrinter(c.App.Writer, cli.CommandHelpTemplate, cmd)
				return nil
			}
			return cli.Exit("help: give at most one command; usage: syncgen help [COMMAND]", 2)
		},
	}
}

// commandNames lists the app's commands for messages: "check, fmt, gen,
// build, run and help".
func commandNames(app *cli.App) string {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

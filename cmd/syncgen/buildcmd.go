package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/build"
	"github.com/syncgen/syncgen/codegen"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "check a plan and compile it into a program that runs under mpirun",
		ArgsUsage: "FILE.sync",
		Description: `build checks the plan, generates its Go program and compiles it with the
local Go toolchain into ./NAME_sync (NAME being the file's stem). It needs no
network: the runtime's source travels inside syncgen. It does need Go on PATH
and Open MPI's development files (Debian/Ubuntu: openmpi-bin libopenmpi-dev).

Binaries are cached by everything that goes into them ($SYNCGEN_CACHE, else
the user cache directory), so rebuilding an unchanged plan is instant.

build never writes the program over the plan's file, a file it imports or
any other existing .sync file, nor over anything that is not a regular file
(/dev/null, a named pipe): an -o that names one (through any path or link)
is a usage error.

Then run it:
   mpirun -np 4 ./NAME_sync [--steps N --warmup N --check N|off --backend auto|cpu|nccl
                             --json FILE --trace FILE --timeout DUR --quiet]

Examples:
   syncgen build examples/resnet50.sync
   syncgen build -o bin/resnet examples/resnet50.sync
   syncgen build -o bin/plan - < plan.sync       # the plan from standard input`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "write the program to `PATH` (default ./NAME_sync; into PATH/NAME_sync when PATH is a directory)"},
			&cli.BoolFlag{Name: "no-cache", Usage: "compile even if a cached binary exists"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("build: give exactly one .sync file; usage: syncgen build FILE.sync [-o PATH]", 2)
			}
			res, err := buildPlan(c, c.Args().First(), c.String("o"), c.Bool("no-cache"))
			if err != nil {
				return err
			}
			_ = res
			return nil
		},
	}
}

// buildPlan checks, generates and compiles one plan, printing one line
// about what it did. Its errors name the command, build or run.
func buildPlan(c *cli.Context, path, out string, noCache bool) (*build.Result, error) {
	start := time.Now()
	cmd := c.Command.Name
	if out == "-" {
		return nil, cli.Exit(fmt.Sprintf("%s: -o - would name the program \"-\": a program cannot go to standard output; give -o a file path", cmd), 2)
	}
	prog, err := loadForOutput(c, cmd, path, out, "program", "-o PATH")
	if err != nil {
		return nil, err
	}
	flagO := out // -o as given; out becomes the program's path below
	files, err := codegen.Generate(prog, codegen.Options{Version: version})
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("%s: %v", cmd, err), 1)
	}
	if out == "" {
		out = "." + string(filepath.Separator) + stem(path) + "_sync"
		if fi, err := os.Stat(out); err == nil && fi.IsDir() {
			// ./NAME_sync/ is also where `syncgen gen` writes the source.
			return nil, cli.Exit(fmt.Sprintf("%s: %s is a directory (written by `syncgen gen`?); remove it or pass -o PATH", cmd, out), 1)
		}
	} else if fi, err := os.Stat(out); err == nil && fi.IsDir() || strings.HasSuffix(out, string(filepath.Separator)) {
		// Like go build -o DIR/: the program goes into the directory.
		if path == "-" {
			return nil, cli.Exit(fmt.Sprintf("%s: -o %s is a directory, and a plan on standard input has no file name to name the program after; pass -o %s", cmd, out, filepath.Join(out, "NAME")), 2)
		}
		out = filepath.Join(out, stem(path)+"_sync")
	}
	if err := checkOutputNotPlan(cmd, path, prog.Imports, out, flagO); err != nil {
		return nil, err
	}
	res, err := build.Build(files, build.Options{Output: out, NoCache: noCache})
	if err != nil {
		var ce *build.CompileError
		switch {
		case errors.Is(err, build.ErrNoGo), errors.Is(err, build.ErrNoMPI):
			return nil, cli.Exit(cmd+": "+err.Error(), 1)
		case errors.As(err, &ce):
			return nil, cli.Exit(cmd+": "+ce.Error(), 3)
		}
		return nil, cli.Exit(cmd+": "+strings.TrimPrefix(err.Error(), "build: "), 1)
	}
	how := "compiled"
	if res.Cached {
		how = "cached"
	}
	fmt.Fprintf(c.App.Writer, "built %s from %s (%s, %s, %s)\n", res.Output, displayName(path), summary(prog), how,
		time.Since(start).Round(time.Millisecond))
	return res, nil
}

// checkOutputNotPlan refuses to write the program at out over anything
// that is not a regular file (a device such as /dev/null, a named pipe),
// over the plan's own file (also when it comes on standard input), over
// a file that it imports, directly or through other imports (imports, as
// the loader lists them), or over any existing file whose name ends in
// .sync: the program would silently replace it. cmd is the command (build or run), plan the FILE
// argument ("-" for standard input) and flagO the -o flag as given (""
// when out is the default). The files are compared with os.SameFile, so
// another spelling of the path, a symbolic link to the file and a hard
// link are refused too. The exit status is 2, as for the other -o that
// does not fit FILE.
func checkOutputNotPlan(cmd, plan string, imports []string, out, flagO string) error {
	outInfo, err := os.Stat(out)
	if err != nil {
		// Nothing there yet, so nothing of the plan's to overwrite.
		return nil
	}
	where, fix := out, "pass -o PATH to write the program elsewhere"
	if flagO != "" {
		where, fix = "-o "+flagO, "give -o another path"
		if filepath.Clean(flagO) != filepath.Clean(out) {
			where += " (" + out + ")"
		}
	}
	// refuse names the file as the plan has it when out spells it
	// otherwise (or is a link to it).
	refuse := func(what, file string) error {
		if filepath.Clean(file) != filepath.Clean(out) {
			what += " (" + file + ")"
		}
		return cli.Exit(fmt.Sprintf("%s: %s is %s: the program would overwrite it; %s", cmd, where, what, fix), 2)
	}
	if !outInfo.Mode().IsRegular() {
		// Writing the program means replacing what is there: a device
		// such as /dev/null, a named pipe or a socket would be gone.
		return cli.Exit(fmt.Sprintf("%s: %s is %s, not a regular file: the program would replace it; give -o the path of a file", cmd, where, fileKind(outInfo.Mode())), 2)
	}
	if plan != "-" {
		if fi, err := os.Stat(plan); err == nil && os.SameFile(outInfo, fi) {
			return refuse("the plan's own file", plan)
		}
	} else if fi, err := os.Stdin.Stat(); err == nil && fi.Mode().IsRegular() && os.SameFile(outInfo, fi) {
		// `build - -o model.sync < model.sync`: standard input is the
		// file. (A pipe cannot be traced back to a file.)
		return refuse("the plan's own file (on standard input)", out)
	}
	for _, file := range imports {
		if fi, err := os.Stat(file); err == nil && os.SameFile(outInfo, fi) {
			return refuse("a file the plan imports", file)
		}
	}
	if strings.EqualFold(filepath.Ext(out), ".sync") {
		// Another plan: a mistyped command line (`build b.sync a.sync -o
		// b.sync`), never a program's name.
		return cli.Exit(fmt.Sprintf("%s: %s is a .sync file, another plan: the program would overwrite it; %s", cmd, where, fix), 2)
	}
	return nil
}

// fileKind names what a file that is not a regular file is, for messages.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

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
	t := target{flag: "-o", path: flagO, file: out, what: "the program"}
	if flagO == "" {
		t.flag = ""
	}
	if err := checkTargets(cmd, path, prog.Imports, t); err != nil {
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

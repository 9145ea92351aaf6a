package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/build"
	"github.com/syncgen/syncgen/codegen"
)

func genCommand() *cli.Command {
	return &cli.Command{
		Name:      "gen",
		Usage:     "write the Go source generated from a plan, for reading or for go:generate",
		ArgsUsage: "FILE.sync",
		Description: `gen checks the plan and writes the generated Go program to a directory
(default: NAME_sync/ in the current directory, NAME being the file's stem).
The program imports github.com/syncgen/syncgen/runtime; with --module the
directory also gets a go.mod and a copy of the runtime, so that
'go build' there works offline.

Examples:
   syncgen gen examples/resnet50.sync -o /tmp/resnet50
   syncgen gen -o /tmp/plan - < plan.sync                                    # the plan from standard input
   syncgen gen --module examples/hello.sync && (cd hello_sync && go build)   # makes hello_sync/hello_sync`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "write into `DIR`"},
			&cli.BoolFlag{Name: "module", Usage: "also write go.mod and the runtime's source, making DIR buildable"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("gen: give exactly one .sync file; usage: syncgen gen FILE.sync [-o DIR]", 2)
			}
			path := c.Args().First()
			prog, err := loadForOutput(c, "gen", path, c.String("o"), "output directory", "-o DIR")
			if err != nil {
				return err
			}
			files, err := codegen.Generate(prog, codegen.Options{Version: version})
			if err != nil {
				return cli.Exit(fmt.Sprintf("gen: %v", err), 1)
			}
			dir := c.String("o")
			if dir == "" {
				dir = stem(path) + "_sync"
			}
			if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
				// ./NAME_sync is also where `syncgen build` puts the program.
				return cli.Exit(fmt.Sprintf("gen: %s exists and is not a directory (a program built by `syncgen build`?); remove it or pass -o DIR", dir), 1)
			}
			runtimeFiles := 0
			if c.Bool("module") {
				if runtimeFiles, err = build.WriteModule(dir, files); err != nil {
					return cli.Exit(fmt.Sprintf("gen: %v", err), 1)
				}
			} else {
				if err := writeFiles(dir, files); err != nil {
					return cli.Exit(fmt.Sprintf("gen: %v", err), 1)
				}
			}
			names := make([]string, 0, len(files)+1)
			for n := range files {
				names = append(names, filepath.Join(dir, n))
			}
			if c.Bool("module") {
				names = append(names, filepath.Join(dir, "go.mod"))
			}
			sort.Strings(names)
			msg := "wrote " + strings.Join(names, " ")
			if c.Bool("module") {
				msg += fmt.Sprintf(" and the runtime's source, %d files in %s", runtimeFiles, filepath.Join(dir, build.RuntimeDir))
			}
			fmt.Fprintln(c.App.Writer, msg)
			return nil
		},
	}
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// stem returns a file's name without directory and extension.
func stem(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

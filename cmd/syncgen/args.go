package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// permuteArgs moves a subcommand's flags in front of its file arguments, so
// that `syncgen run model.sync -np 4` works like `syncgen run -np 4
// model.sync`. urfave/cli, like Go's flag package, stops parsing flags at
// the first argument that is not one. Everything after "--" is left alone:
// it belongs to the generated program.
//
// A -h or --help among a command's flags asks for the command's help, and
// only it is kept: urfave/cli takes the arguments that follow --help for a
// help topic, so that `syncgen build model.sync --help` answered "unknown
// command model.sync". (`syncgen help build -h` keeps its topic.)
//
// A flag that takes a value takes the argument after it, whatever it is
// (`-o -`, `--restarts -1`), except "--", which ends syncgen's flags. A
// flag with no value after it, or with "--" after it, is left last and
// alone, so that the flag parser reports that it needs a value (a usage
// error): passed on where it was, it would take the next argument of the
// permuted order, a plan's file, for its value (`build b.sync a.sync -o`
// would build a.sync into b.sync), or "--".
func permuteArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, positional, rest []string
	tail := args[2:]
	for i := 0; i < len(tail); i++ {
		a := tail[i]
		if a == "--" {
			rest = tail[i:]
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		if (name == "h" || name == "help") && cmd.Name != "help" {
			return []string{args[0], args[1], a}
		}
		flags = append(flags, a)
		if strings.Contains(name, "=") {
			continue
		}
		if takesValue[name] {
			if i+1 >= len(tail) || tail[i+1] == "--" {
				return []string{args[0], args[1], a}
			}
			flags = append(flags, tail[i+1])
			i++
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	out = append(out, positional...)
	return append(out, rest...)
}

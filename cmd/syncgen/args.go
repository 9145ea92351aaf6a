package main

import (
	"errors"
	"fmt"
	"math"
	"runtime"
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
		if n, v, ok := strings.Cut(name, "="); ok {
			if v == "" && takesValue[n] && !emptyValueOK[n] {
				return failFlag(args, cmd, n, fmt.Sprintf("%s: an empty value; give %s a value, or leave it out", a, strings.TrimSuffix(a, "=")))
			}
			continue
		}
		if takesValue[name] {
			if i+1 >= len(tail) || tail[i+1] == "--" {
				return failFlag(args, cmd, name, "flag needs an argument: "+a)
			}
			if tail[i+1] == "" && !emptyValueOK[name] {
				return failFlag(args, cmd, name, fmt.Sprintf("%s '': an empty value; give %s a value, or leave it out", a, a))
			}
			flags = append(flags, tail[i+1])
			i++
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	out = append(out, positional...)
	return append(out, rest...)
}

// maxRanks is the most ranks a job can have: the language numbers ranks
// in 32 bits (2^31-1), as MPI does with its int; mpirun read
// -np 3000000000 as -1294967296.
const maxRanks = math.MaxInt32

// checkNP refuses an --np outside 1..maxRanks as a usage error (status 2),
// before anything is built or run.
func checkNP(cmd string, np int) error {
	switch {
	case np < 1:
		return cli.Exit(fmt.Sprintf("%s: --np %d: need at least one rank", cmd, np), 2)
	case np > maxRanks:
		return cli.Exit(fmt.Sprintf("%s: --np %d: more ranks than a job can have (at most %d, 2^31-1, as MPI numbers them)", cmd, np, maxRanks), 2)
	}
	return nil
}

// maxRanksPerCore bounds the ranks a command starts on one machine
// without --oversubscribe: more is far more often a typo (-np 99999) than
// a plan.
const maxRanksPerCore = 8

// checkRanksPerCore refuses, as a usage error, far more ranks on this
// machine than it has cores, unless oversubscribe: mpirun would start them
// all, oversubscribed, and spin (deaf to SIGTERM) while they start. run,
// calibrate and tune --run apply it; flag is the rank count's flag as the
// command spells it (-np, --np).
func checkRanksPerCore(cmd, flag string, np int, oversubscribe bool) error {
	if limit := maxRanksPerCore * runtime.NumCPU(); np > limit && !oversubscribe {
		return cli.Exit(fmt.Sprintf("%s: %s %d is far more ranks than this machine's %d cores (at most %d here, %d a core); "+
			"run on more hosts or a machine with more cores, or pass --oversubscribe to insist", cmd, flag, np, runtime.NumCPU(), limit, maxRanksPerCore), 2)
	}
	return nil
}

// emptyValueOK are the flags whose empty value means something: tune's
// --args "" runs the candidates without program flags. Any other flag
// given an empty value (`build -o ""`, `-o=`) is a usage error: it would
// be taken for the flag left out (build would write ./NAME_sync).
var emptyValueOK = map[string]bool{"args": true}

// failFlag returns the arguments that make the flag parser reject the
// flag name (given without its value) and has the command report msg, in
// which the flag is named as the user wrote it ("--json", not the flag
// package's "-json").
func failFlag(args []string, cmd *cli.Command, name, msg string) []string {
	prev := cmd.OnUsageError
	cmd.OnUsageError = func(c *cli.Context, err error, isSub bool) error {
		err = errors.New(msg)
		if prev != nil {
			return prev(c, err, isSub)
		}
		return err
	}
	return []string{args[0], args[1], "-" + name}
}

// splitWords splits s into words as a POSIX shell does, without expanding
// anything: white space (space, tab, newline) separates words; a
// backslash outside quotes takes the next character literally (a
// backslash and a newline vanish); single quotes take everything up to
// the next single quote literally; double quotes take everything up to the
// next unescaped double quote, a backslash escaping only ", \, $, ` and
// newline in them. An empty pair of quotes is an empty word. $VAR, ~ and
// globs are left as written: --args is one string the user's shell has
// already expanded. An unterminated quote or a trailing backslash is an
// error that says where it started.
func splitWords(s string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case ch == '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("a backslash at the end of %q escapes nothing; write \\\\ for a backslash", s)
			}
			i++
			if s[i] != '\n' {
				word.WriteByte(s[i])
			}
			inWord = true
		case ch == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("the single quote at byte %d of %q is not closed", i, s)
			}
			word.WriteString(s[i+1 : i+1+end])
			i += 1 + end
			inWord = true
		case ch == '"':
			start := i
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
					if s[i] != '\n' {
						word.WriteByte(s[i])
					}
					continue
				}
				word.WriteByte(s[i])
			}
			if !closed {
				return nil, fmt.Errorf("the double quote at byte %d of %q is not closed", start, s)
			}
			inWord = true
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

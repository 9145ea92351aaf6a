package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
)

// One rule decides where every command may write its output: build's and
// run's -o (the program), calibrate's -o (the profile) and --emit (the
// sweep's plan), predict's --json, tune's --out (the winning plan) and
// --plot. checkTargets applies it before anything is built, run or
// written, and writeAtomic then writes the file (creating missing
// directories). import's -o has its own check of the files it reads
// (checkOutputNotInput), and gen's -o is a directory that gen refuses to
// write into unless syncgen wrote what is there. docs/cli.md, "Where the
// output goes", describes the rule.

// target is a file that a command writes, as a flag names it.
type target struct {
	flag    string // "--out", "-o"; "" when the file is the command's default
	path    string // as the flag gives it; "" when the flag is not given
	file    string // where the file goes when that is not path (build -o DIR/: DIR/NAME_sync); "" for path
	what    string // what is written: "the winning plan"
	example string // a file name to suggest when path is a directory; "": a directory is not a regular file
	// plan marks a target that writes a plan (calibrate --emit, tune
	// --out): it may replace a .sync file that is not the plan or one
	// of its imports. Any other output never replaces a .sync file.
	plan bool
	// stdout allows "-", standard output (predict --json -).
	stdout bool
}

// checkTargets checks, before anything runs, that each target can be
// written. It is refused when it is
//   - a directory, a device, a named pipe or anything else that is not a
//     regular file;
//   - the plan's own file (plan; "-" when it comes on standard input, ""
//     for none) or a file it imports (imports, as the loader lists them),
//     however spelt or linked (os.SameFile);
//   - any other existing .sync file, unless the target writes a plan;
//   - another target's file;
//   - under something that is not a directory.
//
// A command that checked only when it writes would fail after its work is
// done. Each refusal is a usage error (status 2) that names the flag.
func checkTargets(cmd, plan string, imports []string, targets ...target) error {
	type input struct {
		name string
		fi   os.FileInfo
		what string
	}
	var inputs []input
	switch plan {
	case "":
	case "-":
		// `build - -o model.sync < model.sync`: standard input is the
		// file. (A pipe cannot be traced back to a file.)
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode().IsRegular() {
			inputs = append(inputs, input{"", fi, "the plan's own file (on standard input)"})
		}
	default:
		if fi, err := os.Stat(plan); err == nil {
			inputs = append(inputs, input{plan, fi, "the plan's own file"})
		}
	}
	for _, f := range imports {
		if fi, err := os.Stat(f); err == nil {
			inputs = append(inputs, input{f, fi, "a file the plan imports"})
		}
	}
	for i, t := range targets {
		if t.path == "" && t.flag != "" || t.path == "-" && t.stdout {
			continue
		}
		file := t.file
		if file == "" {
			file = t.path
		}
		where, fix := t.flag+" "+t.path, "give "+t.flag+" another path"
		if t.flag == "" {
			where, fix = file, "pass -o PATH to write "+t.what+" elsewhere"
		} else if filepath.Clean(file) != filepath.Clean(t.path) {
			where += " (" + file + ")"
		}
		refuse := func(format string, args ...any) error {
			msg := fmt.Sprintf(format, args...)
			if !strings.HasPrefix(msg, ":") {
				msg = " " + msg
			}
			return cli.Exit(fmt.Sprintf("%s: %s%s", cmd, where, msg), 2)
		}
		var earlier []target
		for _, o := range targets[:i] {
			if o.path != "" {
				earlier = append(earlier, o)
			}
		}
		fi, err := os.Stat(file)
		switch {
		case err == nil && fi.IsDir() && t.example != "":
			return refuse("is a directory; give %s the path of a file in it, such as %s", t.flag, filepath.Join(t.path, t.example))
		case err == nil && !fi.Mode().IsRegular():
			return refuse("is %s, not a regular file: %s would replace it; give %s the path of a file", fileKind(fi.Mode()), t.what, orO(t.flag))
		case err == nil:
			for _, in := range inputs {
				if os.SameFile(fi, in.fi) {
					what := in.what
					if in.name != "" && filepath.Clean(in.name) != filepath.Clean(file) {
						what += " (" + in.name + ")"
					}
					return refuse("is %s: %s would overwrite it; %s", what, t.what, fix)
				}
			}
			if !t.plan && strings.EqualFold(filepath.Ext(file), ".sync") {
				// Another plan: a mistyped command line (`predict
				// a.sync --json b.sync`), never a program, a profile,
				// a prediction or a plot.
				return refuse("is a .sync file, another plan: %s would overwrite it; %s", t.what, fix)
			}
			for _, o := range earlier {
				if fo, err := os.Stat(o.path); err == nil && os.SameFile(fi, fo) {
					return refuse("is also %s's file; give them different paths", o.flag)
				}
			}
		default:
			if err := checkCreatable(filepath.Dir(file)); err != nil {
				return refuse(": %v", err)
			}
			if !notThere(err) {
				return refuse(": %v", unwrapPathError(err))
			}
			for _, o := range earlier {
				if filepath.Clean(o.path) == filepath.Clean(t.path) {
					return refuse("is also %s's file; give them different paths", o.flag)
				}
			}
		}
	}
	return nil
}

// orO is the flag to name in a fix: flag, or -o for a default output.
func orO(flag string) string {
	if flag == "" {
		return "-o"
	}
	return flag
}

// checkCreatable returns an error unless dir is a directory or can be
// created: its nearest existing ancestor must be a directory.
func checkCreatable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is %s, not a directory, so the file cannot be written under it", d, describeKind(fi.Mode()))
			}
			return nil
		}
		if !notThere(err) {
			return fmt.Errorf("%s: %v", d, unwrapPathError(err))
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// notThere reports whether err, from os.Stat, says that nothing is at the
// path: it does not exist, or a file stands where a directory of it would
// be (which checkCreatable then names).
func notThere(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// describeKind names a file's kind for messages: "a regular file", or
// fileKind's.
func describeKind(m os.FileMode) string {
	if m.IsRegular() {
		return "a file"
	}
	return fileKind(m)
}

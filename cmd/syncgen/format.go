package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/dsl"
)

func fmtCommand() *cli.Command {
	return &cli.Command{
		Name:      "fmt",
		Usage:     "format .sync files canonically, keeping comments",
		ArgsUsage: "FILE.sync...",
		Description: `fmt prints each file in canonical form: one declaration per line, four
spaces inside blocks, options in a fixed order, comments kept where they were.
Formatting formatted output changes nothing.

   syncgen fmt model.sync          # print the formatted file
   syncgen fmt -w model.sync       # rewrite the file in place
   syncgen fmt -d model.sync       # show what would change, as a diff
   syncgen fmt -l *.sync           # list the files that are not formatted
   syncgen fmt - < model.sync      # format standard input (an editor's buffer)

Exit status: 0; 1 when a file cannot be read or has syntax errors (it is
then left alone); 2 for a usage error (no file given, an unknown flag, -w
with - for standard input, which has nowhere to be written back).`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "w", Usage: "write the result back to the file"},
			&cli.BoolFlag{Name: "d", Usage: "print a diff instead of the formatted file"},
			&cli.BoolFlag{Name: "l", Usage: "list files whose formatting differs"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("fmt: no files given; usage: syncgen fmt [-w|-d|-l] FILE.sync...", 2)
			}
			// A usage error like the others: refused before any file is
			// rewritten.
			if c.Bool("w") && slices.Contains(c.Args().Slice(), "-") {
				return cli.Exit("fmt: -w cannot write back standard input; give the file's path instead of -, or leave out -w to print the result", 2)
			}
			failed := false
			for _, path := range c.Args().Slice() {
				if err := formatFile(c, path); err != nil {
					// Prefixed like the errors of the other commands.
					fmt.Fprintln(c.App.ErrWriter, "syncgen:", err)
					failed = true
				}
			}
			if failed {
				return cli.Exit("", 1)
			}
			return nil
		},
	}
}

// formatFile formats the file at path, or standard input for "-" (never
// with -w: the command refuses that first), as the flags say.
func formatFile(c *cli.Context, path string) error {
	src, err := readSource(c, path)
	if err != nil {
		if fi, e := os.Stat(path); e == nil && fi.IsDir() {
			// `syncgen fmt .`, as with gofmt: say how to name the files.
			return fmt.Errorf("fmt: %s is a directory: give .sync files, e.g. syncgen fmt -l %s", path, filepath.Join(path, "*.sync"))
		}
		return fmt.Errorf("fmt: %s: %w", path, unwrapPathError(err))
	}
	name := displayName(path)
	out, diags := dsl.Format(name, src)
	if diags.HasErrors() {
		diags.Render(c.App.ErrWriter)
		return fmt.Errorf("fmt: %s not formatted: fix the syntax errors first", name)
	}
	changed := !bytes.Equal(src, out)
	// As with gofmt, -l, -d and -w combine; the formatted file is printed
	// only without any of them.
	if !c.Bool("l") && !c.Bool("d") && !c.Bool("w") {
		c.App.Writer.Write(out)
		return nil
	}
	if c.Bool("l") && changed {
		fmt.Fprintln(c.App.Writer, name)
	}
	if c.Bool("d") && changed {
		writeDiff(c.App.Writer, name, src, out)
	}
	if c.Bool("w") {
		if changed {
			info, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("fmt: %w", err)
			}
			if err := os.WriteFile(path, out, info.Mode().Perm()); err != nil {
				return fmt.Errorf("fmt: %w", err)
			}
		}
	}
	return nil
}

// maxDiffCells bounds the table of the longest-common-subsequence diff
// (lines removed times lines added, after the common head and tail): 4M
// cells are 32 MiB. Beyond it the changed middle is shown as removed, then
// added, as a whole.
const maxDiffCells = 1 << 22

// diffLine is one line of a diff: ' ' kept, '-' removed, '+' added.
type diffLine struct {
	op   byte
	text string
}

// writeDiff prints a unified diff of two versions of a file. Plans are
// small, so a quadratic longest-common-subsequence diff of the lines
// between the common head and tail is fine; a file too large for it (a
// 10,000-tensor model written one declaration a line, all reindented)
// gets a coarser diff rather than gigabytes of table.
func writeDiff(w io.Writer, path string, a, b []byte) {
	x := splitLines(a)
	y := splitLines(b)
	head := 0
	for head < len(x) && head < len(y) && x[head] == y[head] {
		head++
	}
	tail := 0
	for tail < len(x)-head && tail < len(y)-head && x[len(x)-1-tail] == y[len(y)-1-tail] {
		tail++
	}
	var lines []diffLine
	for _, t := range x[:head] {
		lines = append(lines, diffLine{' ', t})
	}
	lines = append(lines, diffMiddle(x[head:len(x)-tail], y[head:len(y)-tail])...)
	for _, t := range x[len(x)-tail:] {
		lines = append(lines, diffLine{' ', t})
	}
	writeHunks(w, path, lines)
}

// diffMiddle diffs the lines between the common head and tail of two
// files.
func diffMiddle(x, y []string) []diffLine {
	var lines []diffLine
	if len(x)*len(y) > maxDiffCells {
		for _, t := range x {
			lines = append(lines, diffLine{'-', t})
		}
		for _, t := range y {
			lines = append(lines, diffLine{'+', t})
		}
		return lines
	}
	// lcs[i][j]: length of the LCS of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			lines = append(lines, diffLine{' ', x[i]})
			i++
			j++
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			// Removed lines before added ones, as diff -u has them.
			lines = append(lines, diffLine{'-', x[i]})
			i++
		default:
			lines = append(lines, diffLine{'+', y[j]})
			j++
		}
	}
	return lines
}

// writeHunks prints the lines of a diff as unified-diff hunks with three
// lines of context.
func writeHunks(w io.Writer, path string, lines []diffLine) {
	fmt.Fprintf(w, "--- %s\n+++ %s (formatted)\n", path, path)
	const context = 3
	for k := 0; k < len(lines); {
		if lines[k].op == ' ' {
			k++
			continue
		}
		// A hunk: from context lines before the change to context lines
		// after the last change that is within 2*context of the next.
		start := max(0, k-context)
		end := k
		for end < len(lines) {
			if lines[end].op != ' ' {
				end++
				continue
			}
			next := end
			for next < len(lines) && lines[next].op == ' ' {
				next++
			}
			if next == len(lines) || next-end > 2*context {
				break
			}
			end = next
		}
		stop := min(len(lines), end+context)
		aStart, bStart, aLen, bLen := 1, 1, 0, 0
		for _, l := range lines[:start] {
			if l.op != '+' {
				aStart++
			}
			if l.op != '-' {
				bStart++
			}
		}
		for _, l := range lines[start:stop] {
			if l.op != '+' {
				aLen++
			}
			if l.op != '-' {
				bLen++
			}
		}
		fmt.Fprintf(w, "@@ -%d,%d +%d,%d @@\n", aStart, aLen, bStart, bLen)
		for _, l := range lines[start:stop] {
			if text, ok := strings.CutSuffix(l.text, "\n"); ok {
				fmt.Fprintf(w, "%c%s\n", l.op, text)
			} else {
				fmt.Fprintf(w, "%c%s\n\\ No newline at end of file\n", l.op, l.text)
			}
		}
		k = stop
	}
}

// splitLines splits a file into lines, each with its "\n": a last line
// without one differs from the same text with one, so that a file that
// only lacks its final newline still gets a hunk (with diff's "\ No
// newline at end of file").
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

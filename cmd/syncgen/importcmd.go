package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/importer"
	"github.com/syncgen/syncgen/ir"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "write a model's tensors as a .sync module, from safetensors or a parameter list",
		ArgsUsage: "FILE|DIR",
		Description: `import reads a model's parameter names, dtypes and shapes, without reading
any tensor data, and writes them as a .sync module of tensor declarations that
plans import (import "model.sync"). Repeated layers are written as templates
(for i in 0..47 { ... }), single repeated tensors as brace ranges.

FILE|DIR is one of:
   model.safetensors                a safetensors file (its JSON header)
   model.safetensors.index.json     a Hugging Face index and the shards it names
   DIR                              a Hugging Face model directory (its index, or its one .safetensors)
   params.json                      what scripts/dump-params.py writes for a PyTorch module:
                                    registration order and requires_grad, which safetensors lack

Order matters: declaration order is the reverse of the backward's. A parameter
list is in registration order and kept so. safetensors writers sort tensors by
dtype and name, so by default their names are ordered with numbers compared as
numbers (layers.2 before layers.10); --order file keeps the file's order.

--frozen and --exclude take the language's bucket patterns, matched as a
bucket matches them: * any run of characters ('/' included), ? one, brace
ranges (l.{0..3}.w) in a bare pattern. A pattern in double quotes ('"a{b}.w"')
is a quoted one, taken literally but for * and ?, and so is one with characters
a bare pattern lacks (h/0/w, h[0].w); a brace range needs the bare form.

The language has no scalars: a tensor of shape [] is declared as shape [1]. A
tensor without elements (a dimension 0) has no gradient bytes and is left out,
with a note on standard error that names it. An integer or bool tensor, or a
normalisation layer's running_mean or running_var, whose input does not say
requires_grad (every safetensors file) is declared frozen, with a note: in a
PyTorch checkpoint it is a buffer (num_batches_tracked, position_ids,
BatchNorm's statistics), which has no gradient. A dtype the language lacks needs
--cast; the error lists every such dtype with its cast.

A summary goes to standard error: tensors, parameters, bytes by dtype, the
check against the index's total size, tied weights that appear once, and for
safetensors which order the module took (the file does not record the model's).

Exit status: 0; 1 when the input cannot be read or is not valid (the error
names the file and the byte offset or the tensor), or the module cannot be
written (nothing is left half-written: it is written to a temporary name and
renamed; missing directories are created); 2 for a usage error, such as an
-o that is a directory, lies under a file or names a file the import reads
(the safetensors file, the index or a shard, the parameter list), or a
--cast whose FROM is no dtype.

Examples:
   syncgen import gpt2/model.safetensors -o models/gpt2.sync
   syncgen import ~/hf/Llama-3-8B -o llama3_8b.sync --frozen 'rotary_emb.*'
   python3 scripts/dump-params.py torchvision.models:resnet50 > rn50.json && syncgen import rn50.json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "write the module to `FILE` (default: standard output)"},
			&cli.StringFlag{Name: "order", Usage: "`natural` (numbers as numbers) or file (the input's order); default: file for a parameter list, natural for safetensors"},
			&cli.StringSliceFlag{Name: "frozen", Usage: "mark the tensors matching `PATTERN` frozen (no gradient), a bucket's pattern (h.*, l.{0..3}.w, \"a{b}.w\"); may be repeated"},
			&cli.StringSliceFlag{Name: "exclude", Usage: "leave out the tensors matching `PATTERN`, a bucket's pattern; may be repeated"},
			&cli.StringSliceFlag{Name: "cast", Usage: "declare tensors of file dtype FROM as the language's TO, `FROM=TO` (I16=i32, BOOL=u8, torch.bool=u8); may be repeated"},
		},
		Action: runImport,
	}
}

func runImport(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("import: want one FILE or DIR; usage: syncgen import FILE|DIR [-o model.sync]", 2)
	}
	in := c.Args().First()
	opts := importer.Options{Order: c.String("order"), Frozen: c.StringSlice("frozen"), Exclude: c.StringSlice("exclude"),
		Cast: map[string]string{}, Source: filepath.Base(in), Match: dsl.MatchNames}
	if o := opts.Order; o != "" && o != "natural" && o != "file" {
		return cli.Exit(fmt.Sprintf("import: --order %q: want natural or file", o), 2)
	}
	for _, kv := range c.StringSlice("cast") {
		// Both sides in either case: the file's dtypes are upper case,
		// the language's lower.
		from, to, ok := strings.Cut(kv, "=")
		to = strings.ToLower(strings.TrimSpace(to))
		if _, valid := ir.ParseDType(to); !ok || !valid {
			return cli.Exit(fmt.Sprintf("import: --cast %q: want FROM=TO with TO one of f64 f32 f16 bf16 i64 i32 i8 u8, e.g. I16=i32", kv), 2)
		}
		from, known := importer.FileDType(strings.TrimSpace(from))
		if !known {
			return cli.Exit(fmt.Sprintf("import: --cast %q: FROM is not a dtype of safetensors (%s) or torch's name of one (torch.bool)", kv, strings.Join(importer.DTypes(), " ")), 2)
		}
		if prev, twice := opts.Cast[from]; twice && prev != to {
			return cli.Exit(fmt.Sprintf("import: --cast %s=%s and --cast %s=%s: give one cast a dtype", from, prev, from, to), 2)
		}
		opts.Cast[from] = to
	}
	out := c.String("o")
	if out != "" && out != "-" {
		if why := notAFile(out); why != "" {
			fix := "give -o the path of a file, or leave it out for standard output"
			if fi, err := os.Stat(out); err == nil && fi.IsDir() || os.IsPathSeparator(out[len(out)-1]) {
				fix = "give -o the path of the module's file, such as " + filepath.Join(out, "model.sync")
			}
			return cli.Exit(fmt.Sprintf("import: -o %s %s: %s", out, why, fix), 2)
		}
		// Before the model is read: the module could not be written.
		if _, err := os.Stat(out); notThere(err) {
			if err := checkCreatable(filepath.Dir(out)); err != nil {
				return cli.Exit(fmt.Sprintf("import: -o %s: %v; give -o another path", out, err), 2)
			}
		}
	}
	m, err := importer.Read(in)
	if err != nil {
		return cli.Exit("import: "+err.Error(), 1)
	}
	if out != "" && out != "-" {
		if err := checkOutputNotInput(out, m.Files); err != nil {
			return err
		}
	}
	prep, err := importer.Prepare(m, opts)
	var bad *importer.PatternError
	switch {
	case errors.As(err, &bad):
		return cli.Exit("import: "+err.Error(), 2)
	case err != nil:
		return cli.Exit(fmt.Sprintf("import: %s: %v", in, err), 1)
	}
	text := importer.Module(prep.Tensors, opts.Source)
	if err := checkModule(text, prep.Tensors); err != nil {
		return cli.Exit(fmt.Sprintf("import: %s: %v", in, err), 1)
	}
	printImportSummary(c, m, prep, opts.Order)
	if out == "" || out == "-" {
		_, err := fmt.Fprint(c.App.Writer, text)
		return err
	}
	if err := writeAtomic(out, []byte(text)); err != nil {
		return cli.Exit("import: "+err.Error(), 1)
	}
	fmt.Fprintf(c.App.ErrWriter, "wrote %s\n", out)
	return nil
}

// checkOutputNotInput refuses an -o that names a file the import read
// (the safetensors file, the index or one of its shards, the parameter
// list): the module would replace the checkpoint. The files are compared
// with os.SameFile, so another spelling of the path, a symbolic link and a
// hard link are refused too. The exit status is 2, as for build's -o over
// its plan.
func checkOutputNotInput(out string, files []string) error {
	outInfo, err := os.Stat(out)
	if err != nil {
		return nil // nothing there yet, so no input to overwrite
	}
	for _, file := range files {
		if fi, err := os.Stat(file); err == nil && os.SameFile(outInfo, fi) {
			what := "a file this import reads"
			if filepath.Clean(file) != filepath.Clean(out) {
				what += " (" + file + ")"
			}
			return cli.Exit(fmt.Sprintf("import: -o %s is %s: the module would overwrite it; give -o another path, such as model.sync", out, what), 2)
		}
	}
	return nil
}

// checkModule checks the module with the language's own checker and that
// it declares exactly the tensors asked for, in their order: the templates
// and brace ranges must expand back to the list.
func checkModule(text string, want []importer.Tensor) error {
	prog, diags := dsl.Check("imported.sync", []byte(text))
	if diags.HasErrors() {
		var b strings.Builder
		diags.Render(&b)
		return fmt.Errorf("the module does not check (a bug in syncgen import; please report it):\n%s", b.String())
	}
	if len(prog.Tensors) != len(want) {
		return fmt.Errorf("the module declares %d tensors, not %d (a bug in syncgen import)", len(prog.Tensors), len(want))
	}
	for i, t := range prog.Tensors {
		w := want[i]
		if t.Name != w.Name || t.DType.String() != w.DType || !slices.Equal(t.Shape, w.Shape) || t.Frozen != w.Frozen {
			return fmt.Errorf("tensor %d of the module is %s %s%v, not %s %s%v (a bug in syncgen import)", i, t.Name, t.DType, t.Shape, w.Name, w.DType, w.Shape)
		}
	}
	return nil
}

// printImportSummary prints the summary on standard error; order is
// --order as given.
func printImportSummary(c *cli.Context, m *importer.Model, prep *importer.Prepared, order string) {
	w := c.App.ErrWriter
	st := importer.StatsOf(m.Params)
	fmt.Fprintf(w, "read %s\n", st)
	if n := len(prep.Empty); n > 0 {
		fmt.Fprintf(w, "note: left out %s without elements (a dimension 0, so no gradient bytes; the language's dimensions are at least 1): %s\n",
			tensorCount(n), quoteSome(prep.Empty, 10))
	}
	if n := len(prep.Gradless); n > 0 {
		fmt.Fprintf(w, "note: declared %s frozen (no gradient): integer and bool tensors and normalisation layers' running_mean and running_var are buffers in a PyTorch checkpoint, not parameters whose gradients training synchronises: %s\n",
			tensorCount(n), quoteSome(prep.Gradless, 10))
	}
	if len(prep.Tensors) != len(m.Params) {
		var why []string
		if n := len(prep.Excluded); n > 0 {
			why = append(why, fmt.Sprintf("--exclude left %d out", n))
		}
		if n := len(prep.Empty); n > 0 {
			why = append(why, fmt.Sprintf("%d without elements left out", n))
		}
		fmt.Fprintf(w, "declared %d of them (%s)\n", len(prep.Tensors), strings.Join(why, ", "))
	}
	if m.TotalSize > 0 {
		if m.TotalSize == st.Total {
			fmt.Fprintf(w, "the index's total_size, %d bytes, matches the tensors'\n", m.TotalSize)
		} else {
			fmt.Fprintf(w, "warning: the index's total_size is %d bytes, the tensors hold %d (%+d)\n", m.TotalSize, st.Total, st.Total-m.TotalSize)
		}
	}
	for _, group := range m.Tied {
		verb := "shares"
		if len(group) > 2 {
			verb = "share"
		}
		fmt.Fprintf(w, "tied: %s %s the storage of %s, declared once\n", strings.Join(group[1:], ", "), verb, group[0])
	}
	if !m.FileOrder {
		// The order sets when each gradient is ready: a silent guess
		// would shift every bucket's start.
		how := "the names' order, numbers as numbers (layers.2 before layers.10)"
		if order == "file" {
			how = "the file's order (writers sort by dtype and name)"
		}
		fmt.Fprintf(w, "note: declared in %s: safetensors files do not record the model's own order, which sets when each gradient is ready in the backward; check the module's order, or import the parameter list of scripts/dump-params.py, which has it\n", how)
	}
}

// quoteSome quotes the first max of names, comma-separated, and says how
// many more there are: a note stays one line for a model of any size.
func quoteSome(names []string, max int) string {
	more := ""
	if len(names) > max {
		names, more = names[:max], fmt.Sprintf(" and %d more", len(names)-max)
	}
	quoted := make([]string, len(names))
	for i, name := range names {
		quoted[i] = strconv.Quote(name)
	}
	return strings.Join(quoted, ", ") + more
}

// tensorCount writes n tensors, singular for one: "1 tensor", "2 tensors".
func tensorCount(n int) string {
	if n == 1 {
		return "1 tensor"
	}
	return fmt.Sprintf("%d tensors", n)
}

// writeAtomic writes data to path through a temporary file in the same
// directory, renamed over path once complete: a failed write leaves no
// half-written file. Missing directories of path are created. A path that
// is not a file to write (a directory, a device, a named pipe, a path
// ending in /) is refused, since the rename would fail or replace it.
// Errors name path, never the temporary file.
func writeAtomic(path string, data []byte) error {
	if why := notAFile(path); why != "" {
		return fmt.Errorf("%s %s: give the path of a file to write", path, why)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("%s: creating its directory: %v", path, err)
	}
	fail := func(err error) error {
		// The temporary file's name means nothing to the user: keep the
		// operating system's reason only.
		var pe *os.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		}
		return fmt.Errorf("writing %s: %v", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	return nil
}

// notAFile says why path cannot be written as a file, or "": it ends in
// a separator, or something other than a regular file is there (following
// symbolic links).
func notAFile(path string) string {
	if path == "" || os.IsPathSeparator(path[len(path)-1]) {
		return "names a directory"
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return "is " + fileKind(fi.Mode()) + ", not a file"
	}
	return ""
}

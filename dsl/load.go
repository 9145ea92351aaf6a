package dsl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/stdlib"
)

// Load reads the .sync file at path, resolves its imports (the embedded
// standard library, or files relative to the importing file) and checks
// the whole program. The program is nil whenever there is an error; the
// diagnostics (errors and warnings) are sorted by position.
func Load(path string) (*ir.Program, Diagnostics) {
	src, err := ReadPlanFile(path)
	if err != nil {
		return nil, Diagnostics{fileDiag(Error, path, fmt.Sprintf("cannot read %s: %v", path, unwrapPathError(err)), readHint(path, err))}
	}
	return Check(path, src)
}

// readHint says what to do when the plan at path cannot be read: a
// directory was given, the .sync extension was left out, or the path is
// empty or wrong.
func readHint(path string, err error) string {
	switch {
	case path == "":
		return "the file name is empty: give the path of a .sync file"
	case errors.Is(err, fs.ErrNotExist):
		if _, e := os.Stat(path + ".sync"); e == nil {
			return "did you mean " + code(path+".sync") + "?"
		}
		return "check the path; it is relative to the current directory"
	}
	if fi, e := os.Stat(path); e == nil && fi.IsDir() {
		return "give a .sync file, not a directory; to check every plan in it: syncgen check " + filepath.Join(path, "*.sync")
	}
	return ""
}

// Check is Load for a file already in memory: filename names it in
// diagnostics, gives the program its name (its stem) and is the directory
// that relative imports start from.
func Check(filename string, src []byte) (*ir.Program, Diagnostics) {
	c := newChecker()
	main := c.addModule(filename, src, moduleKey(filename), filepath.Dir(filename), false)
	c.main = main
	c.loadModule(main, nil)
	// Diagnostics of imported files come first: their errors are often the
	// cause of the main file's.
	c.fileOrder[main.file.name] = len(c.fileOrder)
	prog := c.check(filename)
	diags := sortDiagnostics(c.diags, c.fileOrder)
	if diags.HasErrors() {
		return nil, diags
	}
	for _, m := range c.modules {
		if m != main && !m.inStdlib {
			prog.Imports = append(prog.Imports, m.file.name)
		}
	}
	sort.Strings(prog.Imports)
	return prog, diags
}

// fileDiag is a diagnostic about a whole file (one that cannot be read,
// or a plan without a step block): no line to point at.
func fileDiag(sev Severity, name, msg, hint string) Diagnostic {
	at := ir.Pos{File: name}
	return Diagnostic{Severity: sev, Pos: at, End: at, Message: printable(msg), Hint: printable(hint)}
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// module is one loaded .sync file.
type module struct {
	file *sourceFile
	ast  *File // nil when the file has syntax errors
	key  string
	// dir is where relative imports start: a directory on disk, or a
	// directory inside stdlib.FS when inStdlib.
	dir      string
	inStdlib bool
	loaded   bool
}

// moduleKey identifies a file on disk for cycle and repeat detection.
func moduleKey(name string) string {
	abs, err := filepath.Abs(name)
	if err != nil {
		return "file:" + filepath.Clean(name)
	}
	// One file reached through a symbolic link (a linked directory of
	// shared modules) is one module: a diamond through it is included
	// once, and a file that imports itself through a link is a cycle.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return "file:" + real
	}
	return "file:" + abs
}

// addModule parses a file and registers it.
func (c *checker) addModule(name string, src []byte, key, dir string, inStdlib bool) *module {
	f := newSourceFile(name, src)
	if _, ok := c.fileOrder[name]; !ok {
		c.fileOrder[name] = len(c.fileOrder)
	}
	ast, diags := parseFile(f)
	if len(diags) > 0 {
		c.diags = append(c.diags, diags...)
		c.incomplete = true
	}
	m := &module{file: f, ast: ast, key: key, dir: dir, inStdlib: inStdlib}
	c.modules[key] = m
	return m
}

// loadModule walks a module's declarations in order, loading each import
// depth-first at the point where it appears, so that the declarations of
// the whole program are collected in the order that defines tensor order.
// stack holds the keys of the modules being loaded, for cycle detection.
func (c *checker) loadModule(m *module, stack []*module) {
	m.loaded = true
	if m.ast == nil {
		return
	}
	stack = append(stack, m)
	imported := map[string]int{} // module key -> line of its import in this file
	for _, d := range m.ast.Decls {
		switch {
		case d.Import != nil:
			c.loadImport(m, d.Import, stack, imported)
		case d.Tensor != nil, d.For != nil:
			c.tensorDecls = append(c.tensorDecls, declIn[*Decl]{m.file, d})
		case d.Stream != nil:
			c.streamDecls = append(c.streamDecls, declIn[*StreamDecl]{m.file, d.Stream})
		case d.Bucket != nil:
			c.bucketDecls = append(c.bucketDecls, declIn[*BucketDecl]{m.file, d.Bucket})
		case d.Block != nil:
			c.addBlock(m, d.Block)
		case d.Run != nil:
			c.addRun(m, d.Run)
		case d.Scaler != nil:
			c.addScaler(m, d.Scaler)
		case d.Ranks != nil:
			c.addRanks(m, d.Ranks)
		}
	}
}

// declIn is a declaration with the file it is in.
type declIn[T any] struct {
	file *sourceFile
	decl T
}

// addBlock records an init or step block of the main file.
func (c *checker) addBlock(m *module, b *BlockDecl) {
	sp := spanOf(b.Pos, b.Open.Pos)
	if m != c.main {
		c.errorf(m.file, sp, "an imported file declares tensors, streams and buckets; the program's init, step and run belong in the main file",
			"%s block in an imported file", b.Kind)
		return
	}
	prev := &c.stepBlock
	if b.Kind == "init" {
		prev = &c.initBlock
	}
	if *prev != nil {
		c.errorf(m.file, sp, "put all of its statements in one block", "second %s block (the first is on line %d)", b.Kind, (*prev).Pos.Line)
		return
	}
	*prev = b
}

// addRun records the run declaration of the main file.
func (c *checker) addRun(m *module, r *RunDecl) {
	sp := spanOf(r.Pos, r.Pos)
	sp.end = sp.start + len("run")
	if m != c.main {
		c.errorf(m.file, sp, "an imported file declares tensors, streams and buckets; the program's init, step and run belong in the main file",
			"run declaration in an imported file")
		return
	}
	if c.runDecl != nil {
		c.errorf(m.file, sp, "put all run settings on one line", "second run declaration (the first is on line %d)", c.runDecl.Pos.Line)
		return
	}
	c.runDecl = r
}

// loadImport resolves, loads and walks one import.
func (c *checker) loadImport(from *module, imp *ImportDecl, stack []*module, imported map[string]int) {
	f := from.file
	sp := spanOf(imp.Path.Pos, imp.Path.EndPos)
	if imp.Path.Quoted == "" {
		c.errorf(f, sp, fmt.Sprintf("write import %q", imp.Path.Bare), "import path must be a quoted string")
		return
	}
	p, why := imp.Path.unquoted()
	if why != "" || p == "" {
		c.errorf(f, sp, why, "invalid import path %s", imp.Path.Quoted)
		return
	}
	target, err := c.resolveImport(from, p, sp)
	if err != nil {
		c.diags = append(c.diags, *err)
		c.incomplete = true
		return
	}
	if line, dup := imported[target.key]; dup {
		c.errorf(f, sp, "remove this import", "%s is already imported on line %d", code(p), line)
		return
	}
	imported[target.key] = imp.Pos.Line
	for i, s := range stack {
		if s.key == target.key {
			var chain []string
			for _, x := range stack[i:] {
				chain = append(chain, x.file.name)
			}
			chain = append(chain, target.file.name)
			c.errorf(f, sp, "a module cannot import itself, directly or through others; move the shared declarations into a module both import",
				"import cycle: %s", strings.Join(chain, " -> "))
			c.incomplete = true
			return
		}
	}
	if target.loaded {
		// Imported before by another file (a diamond): its declarations
		// are already in the program once.
		return
	}
	c.loadModule(target, stack)
}

// resolveImport finds (and parses, once) the module an import path names.
func (c *checker) resolveImport(from *module, p string, sp span) (*module, *Diagnostic) {
	f := from.file
	// A file: a path that starts with ./, ../ or / (absolute), or ends in
	// .sync; anything else names a standard library module.
	relative := strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") || strings.HasSuffix(p, ".sync") || path.IsAbs(p)
	if relative && from.inStdlib {
		// A standard library module importing a sibling module.
		name := path.Clean(path.Join(from.dir, p))
		return c.stdlibModule(f, name, p, sp)
	}
	if relative {
		name := p
		if !filepath.IsAbs(p) {
			name = filepath.Join(from.dir, filepath.FromSlash(p))
		}
		key := moduleKey(name)
		if m, ok := c.modules[key]; ok {
			return m, nil
		}
		src, err := readImport(name)
		if err != nil {
			d := f.errorAt(sp.start, sp.end, fmt.Sprintf("cannot import %s: %v", code(p), unwrapPathError(err)), importHint(p, name, from.dir))
			return nil, &d
		}
		return c.addModule(name, src, key, filepath.Dir(name), false), nil
	}
	return c.stdlibModule(f, p+".sync", p, sp)
}

// importHint says what to do about an import of path p (the file name on
// disk) that cannot be read: add the missing `.sync`, name a file rather
// than a directory, or how relative paths are resolved.
func importHint(p, name, dir string) string {
	fi, err := os.Stat(name)
	switch {
	case err == nil && !fi.IsDir() && !fi.Mode().IsRegular():
		return "an import names a .sync file; a named pipe or a device is never read as one (it could wait for a writer, or never end)"
	case err == nil && fi.IsDir():
		files, _ := filepath.Glob(filepath.Join(name, "*.sync"))
		hint := "an import names one .sync file, not a directory"
		if len(files) > 0 {
			hint += "; import each file you need, e.g. " + code("import \""+strings.TrimSuffix(p, "/")+"/"+filepath.Base(files[0])+"\"")
		}
		return hint
	case err != nil && !strings.HasSuffix(p, ".sync"):
		if fi, err := os.Stat(name + ".sync"); err == nil && !fi.IsDir() {
			return "did you mean " + code(p+".sync") + "? a file is imported by its whole name"
		}
	case err != nil:
		// `models/resnet50.sync` or `stdlib/models/resnet50.sync`, as
		// diagnostics name the module's file: the module is imported by
		// its name.
		if m := stdlibModuleNamed(strings.TrimSuffix(path.Base(filepath.ToSlash(p)), ".sync")); m != "" {
			return "did you mean " + code("import "+strconv.Quote(m)) + "? a module of the standard library is imported by its name, without .sync"
		}
	}
	return fmt.Sprintf("a path that starts with ./ or ../ or ends in .sync is relative to the importing file's directory (here %s); one that starts with / is absolute", dir)
}

// stdlibModuleNamed returns the standard library module whose last path
// element is base (`models/resnet50` for `resnet50`), or "".
func stdlibModuleNamed(base string) string {
	for _, m := range stdlib.Modules() {
		if path.Base(m) == base {
			return m
		}
	}
	return ""
}

// stdlibModule loads the standard library file name (models/x.sync).
func (c *checker) stdlibModule(f *sourceFile, name, written string, sp span) (*module, *Diagnostic) {
	key := "stdlib:" + name
	if m, ok := c.modules[key]; ok {
		return m, nil
	}
	src, err := fs.ReadFile(stdlib.FS, name)
	if err != nil {
		mods := stdlib.Modules()
		hint := "the standard library has: " + strings.Join(mods, ", ") + "; a path to a file starts with ./ or ../ or ends in .sync"
		s := suggest(strings.TrimSuffix(name, ".sync"), mods)
		if s == "" {
			// `tiny_mlp` for `models/tiny_mlp`: too far for a misspelling.
			s = stdlibModuleNamed(path.Base(written))
		}
		if s != "" {
			hint = "did you mean " + code(s) + "? " + hint
		}
		d := f.errorAt(sp.start, sp.end, fmt.Sprintf("no module %s in the standard library", code(written)), hint)
		return nil, &d
	}
	return c.addModule("stdlib/"+name, src, key, path.Dir(name), true), nil
}

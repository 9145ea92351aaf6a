package dsl

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/ir"
)

// checker turns the declarations of a program's files into an
// ir.Program, collecting every error on the way.
type checker struct {
	diags Diagnostics
	// nameBytes counts the bytes of the tensor names that brace ranges
	// have expanded to so far (maxNameBytes).
	nameBytes int64
	// wireBytes counts the wire bytes of the buckets laid out so far,
	// which must stay below 2^63.
	wireBytes int64
	fileOrder map[string]int
	modules   map[string]*module
	main      *module
	// incomplete is set when a file could not be parsed or an import could
	// not be loaded: declarations are missing, so "no such name" errors
	// would only be echoes of the first error and are not reported.
	incomplete bool

	// The declarations of all files, imports first (depth-first, at the
	// point of the import).
	tensorDecls []declIn[*Decl] // a tensor or a template (`for`)
	streamDecls []declIn[*StreamDecl]
	bucketDecls []declIn[*BucketDecl]
	initBlock   *BlockDecl
	stepBlock   *BlockDecl
	runDecl     *RunDecl
	scalerDecl  *ScalerDecl
	ranksDecl   *RanksDecl

	prog *ir.Program
	// tensorIndex maps a tensor name to its index in prog.Tensors.
	tensorIndex map[string]int
	// tensorDecl is, for each tensor, the declaration it came from.
	tensorDecl  []declIn[*TensorDecl]
	streamIndex map[string]int
	// implicitStreams is set when no stream is declared.
	implicitStreams bool
	buckets         map[string]*bucketInfo
	bucketOrder     []*bucketInfo
	// inBucket marks the tensors that a bucket declaration took (even
	// when an error kept the bucket from being laid out).
	inBucket []bool
	// targeted marks the tensors that a collective's target matched, even
	// one with an error: they are not "in no collective".
	targeted []bool
	// synced marks the bucket pieces (Program.Buckets) that a collective
	// names, even one with an error: the others are never synchronised.
	synced map[int]bool
	// implicitBucket maps a tensor index to its implicit bucket.
	implicitBucket map[int]int
	// badTensorDecl marks the tensor declarations that had an error: no
	// "in no bucket" warning for their tensors, which would only be noise.
	badTensorDecl map[*TensorDecl]bool
	// badNames holds the names, as written and unquoted, of tensors,
	// buckets and streams whose declaration was rejected for its name:
	// a statement that uses one gets no "no such name" error, which would
	// only echo the first.
	badNames map[string]bool
	// tensorNameRejected is set when a tensor declaration was rejected for
	// its name (`tensor "a*"`, a range of too many tensors): its tensors
	// are missing, and a glob pattern that matches nothing may have been
	// meant for them.
	tensorNameRejected bool
	// repeats holds the errors reported once for all the uses of one
	// unknown name (errorOnce), by key.
	repeats     map[string]*repeatedError
	repeatOrder []*repeatedError
	// into holds the output buffers of out-of-place collectives (into.go).
	into intoState
}

// repeatedError is an error about an unknown name that is reported once,
// at its first use, however many statements or declarations use the name.
type repeatedError struct {
	diag int // index of the error in checker.diags
	uses int
	// many is the note for more than one use, with a %d for their count:
	// "used %d times; first here".
	many string
}

func newChecker() *checker {
	return &checker{
		fileOrder:      map[string]int{},
		modules:        map[string]*module{},
		tensorIndex:    map[string]int{},
		streamIndex:    map[string]int{},
		buckets:        map[string]*bucketInfo{},
		implicitBucket: map[int]int{},
		badTensorDecl:  map[*TensorDecl]bool{},
		badNames:       map[string]bool{},
		repeats:        map[string]*repeatedError{},
	}
}

// errorf records an error about the span sp of file f.
func (c *checker) errorf(f *sourceFile, sp span, hint, format string, args ...any) {
	c.diags = append(c.diags, f.diag(Error, sp.start, sp.end, fmt.Sprintf(format, args...), hint))
}

// usedTimes is errorOnce's usual note for a name used more than once.
const usedTimes = "used %d times; first here"

// errorOnce records an error about an unknown name (a misspelt stream,
// bucket, dtype, ...) once per key and file: a later use with the same key
// only counts, and the first error's message ends with many, filled in with
// the number of uses, `no stream `comms` (used 3 times; first here)`. So a
// misspelling used in N statements is one error, not N identical ones, and
// each distinct misspelling keeps an error of its own. The error stays at
// the use that comes first in the file.
func (c *checker) errorOnce(key, many string, f *sourceFile, sp span, hint, format string, args ...any) {
	key = f.name + "\x00" + key
	if r, ok := c.repeats[key]; ok {
		r.uses++
		if first := &c.diags[r.diag]; sp.start < first.Pos.Offset {
			// A use earlier in the file (a step block resolved before the
			// init block below it) becomes the one shown.
			*first = f.diag(Error, sp.start, sp.end, first.Message, first.Hint)
		}
		return
	}
	r := &repeatedError{diag: len(c.diags), uses: 1, many: many}
	c.repeats[key] = r
	c.repeatOrder = append(c.repeatOrder, r)
	c.errorf(f, sp, hint, format, args...)
}

// noteRepeats adds the number of uses to each error that errorOnce
// reported for a name used more than once.
func (c *checker) noteRepeats() {
	for _, r := range c.repeatOrder {
		if r.uses > 1 {
			d := &c.diags[r.diag]
			d.Message += " (" + fmt.Sprintf(r.many, r.uses) + ")"
		}
	}
}

// warnf records a warning.
func (c *checker) warnf(f *sourceFile, sp span, hint, format string, args ...any) {
	c.diags = append(c.diags, f.diag(Warning, sp.start, sp.end, fmt.Sprintf(format, args...), hint))
}

// wordSpan is the span of a word.
func wordSpan(w *Word) span { return spanOf(w.Pos, w.EndPos) }

// nameSpan is the span of a name.
func nameSpan(n *Name) span { return spanOf(n.Pos, n.EndPos) }

// keywordSpan is the span of a keyword of length n at pos.
func keywordSpan(off, n int) span { return span{off, off + n} }

// check resolves and checks everything that was loaded and returns the
// program (meaningful only when there are no errors).
func (c *checker) check(filename string) *ir.Program {
	base := filepath.Base(filename)
	c.prog = &ir.Program{
		Source: filename,
		Name:   strings.TrimSuffix(base, filepath.Ext(base)),
		Run:    ir.Run{Steps: ir.DefaultSteps, Warmup: ir.DefaultWarmup, CheckEvery: ir.DefaultCheckEvery},
	}
	if c.main.ast == nil {
		return c.prog // syntax errors: nothing to check
	}
	c.declareTensors()
	c.checkTotal()
	c.declareStreams()
	c.declareBuckets()
	c.targeted = make([]bool, len(c.prog.Tensors))
	c.synced = map[int]bool{}
	c.declareScaler()
	c.declareRanks()
	c.scanInto()
	if c.initBlock != nil {
		c.prog.Init = c.resolveBlock(c.initBlock)
	}
	if c.stepBlock != nil {
		c.prog.Step = c.resolveBlock(c.stepBlock)
	}
	c.resolveAccumulate()
	c.checkAccumulated()
	c.checkRaces(c.initBlock, c.prog.Init)
	c.checkRaces(c.stepBlock, c.prog.Step)
	c.resolveRun()
	c.noteRepeats()
	c.warnUncovered()
	c.warnUnsynced()
	c.warnOverwritten()
	c.warnNothingToRun()
	return c.prog
}

// warnNothingToRun warns when the main file has neither a step nor an init
// block and no errors: valid (a module, or a plan being written), but a
// program built from it runs and checks nothing, which a user who built
// it is unlikely to mean.
func (c *checker) warnNothingToRun() {
	if c.stepBlock != nil || c.initBlock != nil || c.incomplete || Diagnostics(c.diags).HasErrors() {
		return // a program with errors builds nothing anyway
	}
	c.diags = append(c.diags, fileDiag(Warning, c.main.file.name,
		"the program has no step block: a program built from it synchronises nothing",
		"add a `step { ... }` block with the step's statements; a file that other files import needs none"))
}

// declareTensors expands and checks every tensor declaration and template
// (`for`), in order.
func (c *checker) declareTensors() {
	// Room for a tensor per declaration up front: ir.Tensor is large, and
	// growing the slice declaration by declaration copied a big model's
	// table several times over.
	c.prog.Tensors = slices.Grow(c.prog.Tensors, min(len(c.tensorDecls), maxTensors))
	for _, td := range c.tensorDecls {
		if td.decl.For != nil {
			if !c.declareTemplate(td.file, td.decl.For) {
				return
			}
			continue
		}
		f, d := td.file, td.decl.Tensor
		errs := len(c.diags)
		names := c.expandTensorName(f, d.Name)
		if names == nil {
			c.markBadName(d.Name)
			c.tensorNameRejected = true
		}
		typ := c.tensorType(f, d)
		c.prog.Tensors = slices.Grow(c.prog.Tensors, len(names))
		var dups dupSet
		if !c.addTensors(declIn[*TensorDecl]{f, d}, names, typ, &dups, nil) {
			return
		}
		c.reportDups(f, d, &dups, "")
		// dtype == InvalidDType too: a repeated unknown dtype adds no error.
		if len(c.diags) > errs || typ.dtype == ir.InvalidDType {
			c.badTensorDecl[d] = true
		}
	}
}

// tensorType is what a tensor declaration says of each of its tensors.
type tensorType struct {
	dtype ir.DType
	shape []int64
	elems int64
}

// tensorType checks the dtype and shape of a tensor declaration.
func (c *checker) tensorType(f *sourceFile, d *TensorDecl) tensorType {
	dtype := c.dtype(f, d.DType, "tensor")
	shape, elems, ok := c.shape(f, d)
	if ok && dtype != ir.InvalidDType {
		if elems > math.MaxInt64/dtype.Size() {
			c.errorf(f, spanOf(d.DType.Pos, d.EndPos), "a tensor's size in bytes (elements times the dtype's size) is at most 2^63-1; check the shape",
				"tensor of %d %s elements is 2^63 bytes or more", elems, dtype)
		}
	}
	return tensorType{dtype: dtype, shape: shape, elems: elems}
}

// checkTotal reports a program whose tensors, frozen ones included, add up
// to 2^63 bytes or more (and so, possibly, to as many parameters): every
// count of the program (the summary's parameters and bytes, the runtime's
// buffers) must fit in an int64, as each tensor's does. The error stands
// at the declaration of the tensor that passes the limit. Tensors whose
// own size was an error are left out: they are reported already.
func (c *checker) checkTotal() {
	var total int64
	for i, t := range c.prog.Tensors {
		size := t.DType.Size()
		if t.DType == ir.InvalidDType || size <= 0 || t.Elems <= 0 || t.Elems > math.MaxInt64/size {
			continue
		}
		b := t.Elems * size
		if total > math.MaxInt64-b {
			td := c.tensorDecl[i]
			c.badTensorDecl[td.decl] = true // no "in no bucket" warning besides
			c.errorf(td.file, nameSpan(td.decl.Name),
				"a program's tensors, added up, have at most 2^63-1 bytes (and parameters); check the shapes, or declare fewer tensors",
				"the program's tensors add up to 2^63 bytes or more, from tensor %s on", code(t.Name))
			return
		}
		total += b
	}
}

// dupSet is what addTensors found of the names of one declaration that
// were declared before: how many, and the first.
type dupSet struct {
	count    int
	first    string
	firstPos ir.Pos
	// sameDecl: the first was declared by the same declaration (another
	// iteration of a template).
	sameDecl bool
	// iter is the template iteration of the first repeat ("i = 3"), or "".
	iter string
}

// addTensors declares the tensors names of declaration td, each of type
// typ, collecting the names declared before in dups. iter, when not nil,
// says which iteration of a template they come from. It returns false when
// the program has too many tensors: the declarations after are not checked.
func (c *checker) addTensors(td declIn[*TensorDecl], names []string, typ tensorType, dups *dupSet, iter func() string) bool {
	f, d := td.file, td.decl
	for _, name := range names {
		if prev, dup := c.tensorIndex[name]; dup {
			if dups.count == 0 {
				dups.first, dups.firstPos = name, c.prog.Tensors[prev].Pos
				dups.sameDecl = c.tensorDecl[prev].decl == d
				if iter != nil {
					dups.iter = iter()
				}
			}
			dups.count++
			continue
		}
		if len(c.prog.Tensors) >= maxTensors {
			c.errorf(f, nameSpan(d.Name), fmt.Sprintf("a program has at most %d tensors (2^20); this declaration and the ones after it are not checked", maxTensors),
				"too many tensors (at most %d)", maxTensors)
			c.badTensorDecl[d] = true
			// The tensors of the declarations after it are missing.
			c.incomplete = true
			return false
		}
		c.tensorIndex[name] = len(c.prog.Tensors)
		c.tensorDecl = append(c.tensorDecl, td)
		c.prog.Tensors = append(c.prog.Tensors, ir.Tensor{
			Name: name, DType: typ.dtype, Shape: typ.shape, Elems: typ.elems, Frozen: d.Frozen,
			Bucket: -1, Pos: f.pos(d.Name.Pos.Offset),
		})
	}
	return true
}

// reportDups reports the repeated names of a declaration, once however
// many names of a range or iterations of a template repeat. hint, when not
// empty, replaces the usual one.
func (c *checker) reportDups(f *sourceFile, d *TensorDecl, dups *dupSet, hint string) {
	if dups.count == 0 {
		return
	}
	more := ""
	if dups.count > 1 {
		more = fmt.Sprintf(" and %d more", dups.count-1)
	}
	iter := ""
	if dups.iter != "" {
		iter = " in iteration " + dups.iter
	}
	if hint == "" {
		hint = "tensor names are unique across the program and its imports"
	}
	c.errorf(f, nameSpan(d.Name), hint, "duplicate tensor %s%s (first declared at %s)%s", code(dups.first), iter, dups.firstPos, more)
}

// mayMatchRejected reports whether a pattern that matches no tensor may
// have been meant for tensors that are missing because of an error
// reported already: a declaration rejected for its name, or a file that
// did not load. Saying that it matches nothing would only echo that error.
func (c *checker) mayMatchRejected(p pattern) bool {
	return c.incomplete || c.badNames[p.text] || c.tensorNameRejected && !p.literal
}

// expandTensorName validates a tensor name and expands its brace ranges.
func (c *checker) expandTensorName(f *sourceFile, n *Name) []string {
	if c.loopRefOutside(f, n) {
		return nil
	}
	form, ok := c.checkTensorName(f, n, n.source())
	if !ok {
		return nil
	}
	if n.Quoted != "" {
		s, _ := n.unquoted()
		return []string{s}
	}
	// A long name times a wide range would take gigabytes: bound the bytes
	// too (each number adds at most 19 digits to the name's length).
	bytes := form.count * int64(len(n.Bare)+19*len(form.rs))
	if c.nameBytes+bytes > maxNameBytes {
		c.errorf(f, nameSpan(n), "shorten the names or declare fewer tensors",
			"the tensor names of this program would take more than %d MiB", maxNameBytes>>20)
		return nil
	}
	c.nameBytes += bytes
	return expand(n.Bare, form.rs)
}

// nameForm is a valid tensor name's form: its brace ranges, and how many
// names it stands for.
type nameForm struct {
	rs    []braceRange
	count int64
}

// checkTensorName validates the tensor name n. text is the name as
// written (n.source()), with every reference to a loop variable, `{i}`,
// replaced by as many digits: so it has the form of every name that an
// iteration of a template gives, at the same offsets as the source.
// Messages quote n as written.
func (c *checker) checkTensorName(f *sourceFile, n *Name, text string) (nameForm, bool) {
	sp := nameSpan(n)
	if n.Quoted != "" {
		s, why := unquote(text)
		switch {
		case why != "":
			c.errorf(f, sp, why, "invalid quoted name %s", n.Quoted)
			return nameForm{}, false
		case s == "":
			c.errorf(f, sp, "a quoted tensor name has at least one character", "empty tensor name")
			return nameForm{}, false
		case isGlob(s):
			c.errorf(f, sp, "`*` and `?` are glob characters in patterns", "tensor name %s contains a glob character", n.Quoted)
			return nameForm{}, false
		}
		return nameForm{count: 1}, true
	}
	if c.badRangeError(f, n, text) {
		return nameForm{}, false
	}
	if !isBareName(text) {
		hint := "a bare name is dot-separated letters, digits and _ (brace ranges like {0..3} allowed); quote other names: \"" + n.Bare + "\""
		if isGlob(text) {
			hint = "a tensor declaration names tensors; patterns with * and ? are for buckets and collectives"
		}
		c.errorf(f, sp, hint, "invalid tensor name %s", code(n.Bare))
		return nameForm{}, false
	}
	rs, bad := ranges(text)
	if bad != nil {
		c.reportRangeError(f, n, bad)
		return nameForm{}, false
	}
	count := expansionCount(rs)
	if count < 0 {
		c.errorf(f, sp, "one declaration declares at most 100000 tensors; split it into several", "%s stands for more than %d tensors", code(n.Bare), maxExpansion)
		return nameForm{}, false
	}
	return nameForm{rs: rs, count: count}, true
}

// badRangeError reports braces in a bare name or pattern that are not a
// brace range (`c.{a..b}`, `c.{0..}`, `c.{-1..3}`), pointing at them, and
// returns whether it did.
func (c *checker) badRangeError(f *sourceFile, n *Name, text string) bool {
	start, end, ok := badRange(text)
	if !ok {
		return false
	}
	hint := rangeSyntaxHint
	if !rangeRE.MatchString(text) {
		// Quoting would also make the name's valid ranges literal.
		hint += "; a quoted name takes braces literally: " + strconv.Quote(n.Bare)
	}
	c.errorf(f, span{n.Pos.Offset + start, n.Pos.Offset + end}, hint, "invalid brace range %s", code(n.Bare[start:end]))
	return true
}

// reportRangeError reports a descending or oversized brace range of the
// bare name n, pointing at its braces.
func (c *checker) reportRangeError(f *sourceFile, n *Name, e *rangeError) {
	c.errorf(f, span{n.Pos.Offset + e.start, n.Pos.Offset + e.end}, rangeHint, "%s", e.msg)
}

// dtypeAliases are the names other tools give the dtypes (PyTorch's
// torch.float16, NumPy's float32, C's double), by the dtype they mean.
var dtypeAliases = byAlias(map[string][]string{
	"f64":  {"float64", "fp64", "double"},
	"f32":  {"float32", "fp32", "float"},
	"f16":  {"float16", "fp16", "half"},
	"bf16": {"bfloat16"},
	"i64":  {"int64", "long"},
	"i32":  {"int32", "int"},
	"i8":   {"int8"},
	"u8":   {"uint8", "byte"},
})

// unsupportedDTypes are other tools' dtypes that syncgen has no equivalent
// of: a "did you mean" for them would name a dtype of another kind (`i8`
// for `f8`, `i64` for `i16`).
var unsupportedDTypes = map[string]bool{
	"f8": true, "fp8": true, "float8": true, "e4m3": true, "e5m2": true, "f128": true,
	"i16": true, "int16": true, "short": true, "u16": true, "uint16": true,
	"u32": true, "uint32": true, "u64": true, "uint64": true,
	"bool": true, "c64": true, "c128": true, "complex64": true, "complex128": true,
}

// foreignDType returns a dtype word as another tool would mean it: in
// lower case, without the module that PyTorch, NumPy, JAX or TensorFlow
// write before it (`torch.float16`, `np.float32`, `torch.half`).
func foreignDType(w string) string {
	w = strings.ToLower(w)
	for _, m := range []string{"torch.", "numpy.", "np.", "jnp.", "jax.numpy.", "tf."} {
		if rest, ok := strings.CutPrefix(w, m); ok {
			return rest
		}
	}
	return w
}

// byAlias turns lists of aliases by name into a map from alias to name.
func byAlias(aliases map[string][]string) map[string]string {
	out := map[string]string{}
	for name, as := range aliases {
		for _, a := range as {
			out[a] = name
		}
	}
	return out
}

// dtype interprets a dtype word.
func (c *checker) dtype(f *sourceFile, w *Word, what string) ir.DType {
	dt, ok := ir.ParseDType(w.Text)
	if !ok {
		all := []string{"f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"}
		hint := "dtypes are " + strings.Join(all, " ")
		name := foreignDType(w.Text)
		if s, ok := dtypeAliases[name]; ok {
			hint = "did you mean " + code(s) + "? " + hint
		} else if _, ok := ir.ParseDType(name); ok && name != w.Text {
			hint = "did you mean " + code(name) + "? " + hint
		} else if unsupportedDTypes[name] {
			// A close name (`i8` for `f8`) would mean something else.
			hint = "syncgen has no dtype of that kind; " + hint
		} else if s := suggest(w.Text, all); s != "" {
			hint = "did you mean " + code(s) + "? " + hint
		}
		c.errorOnce(what+" dtype "+w.Text, usedTimes, f, wordSpan(w), hint, "unknown %s dtype %s", what, code(w.Text))
	}
	return dt
}

// shape interprets a tensor's dimensions and returns its element count;
// ok is false when a dimension is invalid or the count overflows.
func (c *checker) shape(f *sourceFile, d *TensorDecl) ([]int64, int64, bool) {
	if len(d.Dims) == 0 {
		c.errorf(f, spanOf(d.DType.Pos, d.EndPos), "a scalar is f32[1]", "tensor needs at least one dimension")
		return nil, 0, false
	}
	shape := make([]int64, 0, len(d.Dims))
	elems := int64(1)
	ok := true
	for i, w := range d.Dims {
		n, msg := parseInt64(w.Text, "dimension")
		switch {
		case msg != "":
			c.errorf(f, wordSpan(w), dimensionHint(w.Text), "%s", msg)
			ok = false
			continue
		case n <= 0:
			c.errorf(f, wordSpan(w), "every dimension is at least 1", "dimension %d is not positive", n)
			ok = false
			continue
		case w.Text[0] == '0':
			// `f32[1,024]` is two dimensions, 1 and 24: most likely a
			// thousands separator, so a leading zero is an error.
			hint := "write " + code(strconv.FormatInt(n, 10))
			// Whether or not a space follows the comma: `fmt` adds one, and
			// must not change what the checker says.
			if i > 0 {
				prev := d.Dims[i-1].Text
				hint = fmt.Sprintf("`%s,%s` is two dimensions, %s and %d; for one, write it without the comma, `%s%s`; for two, %s",
					prev, w.Text, prev, n, prev, w.Text, hint)
			}
			c.errorf(f, wordSpan(w), hint, "dimension %s is written with a leading zero", code(w.Text))
			ok = false
			continue
		}
		shape = append(shape, n)
		if ok && elems > math.MaxInt64/n {
			c.errorf(f, spanOf(d.Dims[0].Pos, d.Dims[len(d.Dims)-1].EndPos),
				"the product of the dimensions is at most 2^63-1 (9223372036854775807)",
				"element count of shape overflows int64")
			ok = false
		}
		if ok {
			elems *= n
		}
	}
	if !ok {
		return shape, 0, false
	}
	return shape, elems, true
}

// dimensionHint says how to fix a dimension that is not an integer or
// does not fit in an int64.
func dimensionHint(text string) string {
	switch {
	case isDigits(strings.TrimPrefix(text, "-")):
		return "a dimension is at most 2^63-1 (9223372036854775807), and the tensor's size in bytes must stay below 2^63 too"
	case hexRE.MatchString(text):
		// Not a product `0x10` (a zero dimension times 10).
		if n, err := strconv.ParseInt(text[2:], 16, 64); err == nil {
			return "dimensions are decimal numbers: write " + code(strconv.FormatInt(n, 10))
		}
		return "dimensions are decimal numbers"
	case exponentRE.MatchString(text):
		full, ok := withoutExponent(text)
		if !ok {
			return noExponent
		}
		// Only a dimension that is valid written in full (`1e19` is too
		// large, `1e-1` not whole, `0e3` zero).
		n, msg := parseInt64(full, "dimension")
		switch {
		case msg == "" && n >= 1:
			return writeInFull(full)
		case isDigits(full) && msg != "":
			return noExponent + ", and " + code(text) + " is too large: a dimension is at most 2^63-1 (9223372036854775807)"
		}
		return noExponent + "; a dimension counts elements: a whole number of at least 1, e.g. `f32[2, 3]`"
	case fractionalRE.MatchString(text):
		return "a dimension counts elements, so it is a whole number of at least 1, e.g. `f32[2, 3]`"
	case productRE.MatchString(text):
		return "dimensions are separated by commas, e.g. `f32[" + strings.NewReplacer("x", ", ", "X", ", ", "*", ", ").Replace(text) + "]`"
	case groupedRE.MatchString(text):
		return "numbers are written without digit separators: write " + code(strings.ReplaceAll(text, "_", ""))
	}
	return "a dimension counts elements: a whole number of at least 1, e.g. `f32[2, 3]`"
}

// hexRE matches a hexadecimal number (`0x10`); fractionalRE a decimal
// number with a fraction (`1.5`); productRE a shape written as a product
// (`4x4`, `3*224*224`); groupedRE a number with digit separators (`1_024`).
var (
	hexRE        = regexp.MustCompile(`^0[xX][0-9a-fA-F]+$`)
	fractionalRE = regexp.MustCompile(`^-?[0-9]*\.[0-9]+$`)
	productRE    = regexp.MustCompile(`^[0-9]+([xX*][0-9]+)+$`)
	groupedRE    = regexp.MustCompile(`^[0-9]+(_[0-9]+)+$`)
)

// declareStreams checks the stream declarations, or creates the implicit
// compute and comm streams when there are none.
func (c *checker) declareStreams() {
	if len(c.streamDecls) == 0 {
		c.implicitStreams = true
		at := c.main.file.pos(0)
		c.addStream(ir.Stream{Name: "compute", Priority: ir.PriorityDefault, Pos: at})
		c.addStream(ir.Stream{Name: "comm", Priority: ir.PriorityHigh, Pos: at})
		return
	}
	for _, sd := range c.streamDecls {
		f, d := sd.file, sd.decl
		name, ok := c.identName(f, d.Name, "stream")
		if !ok {
			continue
		}
		if name == "ready" || name == "synced" {
			c.errorf(f, nameSpan(d.Name), "`after "+name+"` would be ambiguous; choose another name", "a stream cannot be called %s", code(name))
			continue
		}
		prio := ir.PriorityDefault
		if d.Priority != nil {
			switch d.Priority.Text {
			case "high":
				prio = ir.PriorityHigh
			case "low":
				prio = ir.PriorityLow
			default:
				c.errorf(f, wordSpan(d.Priority), "priority is high or low", "unknown priority %s", code(d.Priority.Text))
			}
		}
		if i, dup := c.streamIndex[name]; dup {
			c.errorf(f, nameSpan(d.Name), "stream names are unique across the program and its imports", "duplicate stream %s (first declared at %s)", code(name), c.prog.Streams[i].Pos)
			continue
		}
		c.addStream(ir.Stream{Name: name, Priority: prio, Pos: f.pos(d.Name.Pos.Offset)})
	}
}

func (c *checker) addStream(s ir.Stream) {
	c.streamIndex[s.Name] = len(c.prog.Streams)
	c.prog.Streams = append(c.prog.Streams, s)
}

// identName checks a stream or bucket name: a bare identifier.
func (c *checker) identName(f *sourceFile, n *Name, what string) (string, bool) {
	if n.Quoted != "" || !identRE.MatchString(n.Bare) || slices.Contains(reservedWords, n.Bare) {
		c.markBadName(n)
	}
	if n.Quoted != "" || !identRE.MatchString(n.Bare) {
		c.errorf(f, nameSpan(n), "it is used as an identifier: letters, digits and _, not starting with a digit",
			"invalid %s name %s", what, code(n.source()))
		return "", false
	}
	if slices.Contains(reservedWords, n.Bare) {
		c.errorf(f, nameSpan(n), "choose another name", "%s is a keyword and cannot name a %s", code(n.Bare), what)
		return "", false
	}
	return n.Bare, true
}

// markBadName records the name of a declaration rejected for its name,
// as written and unquoted (see badNames).
func (c *checker) markBadName(n *Name) {
	c.badNames[n.source()] = true
	if s, why := n.unquoted(); why == "" {
		c.badNames[s] = true
	}
}

// streamNames returns the names of the streams, for suggestions.
func (c *checker) streamNames() []string {
	out := make([]string, len(c.prog.Streams))
	for i, s := range c.prog.Streams {
		out[i] = s.Name
	}
	return out
}

// implicitStreamNote explains a use of `compute` or `comm` that no
// stream declaration provides: the implicit streams exist only in a
// program that declares none, and the first declaration, perhaps in an
// imported module, is named. It returns "" for other names.
func (c *checker) implicitStreamNote(name string) string {
	if name != "compute" && name != "comm" || c.implicitStreams || len(c.prog.Streams) == 0 {
		return ""
	}
	first := c.prog.Streams[0]
	return fmt.Sprintf("; the implicit streams compute and comm exist only in a program that declares no stream, and %s declares %s",
		first.Pos, code(first.Name))
}

// lookupStream resolves a stream name used in a statement.
func (c *checker) lookupStream(f *sourceFile, w *Word) (int, bool) {
	if i, ok := c.streamIndex[w.Text]; ok {
		return i, true
	}
	if c.badNames[w.Text] {
		return 0, false
	}
	hint := didYouMean(w.Text, c.streamNames())
	if hint == "" {
		hint = "declared streams: " + strings.Join(c.streamNames(), ", ")
		if len(c.prog.Streams) == 0 {
			// Every stream declaration was rejected.
			hint = "declare it with `stream " + w.Text + "`"
		}
		if c.implicitStreams {
			hint = "with no stream declarations there are two implicit streams, compute and comm; declare `stream " + w.Text + "` to use it"
		}
		hint += c.implicitStreamNote(w.Text)
	}
	c.errorOnce("stream "+w.Text, usedTimes, f, wordSpan(w), hint, "no stream %s", code(w.Text))
	return 0, false
}

// resolveRun reads the run declaration over the defaults.
func (c *checker) resolveRun() {
	r := c.runDecl
	if r == nil {
		return
	}
	f := c.main.file
	seen := map[string]bool{}
	for _, o := range r.Options {
		key := "check"
		switch {
		case o.Count != nil:
			key = o.Count.Key
		case o.Checkpoint != nil:
			key = "checkpoint"
		}
		if seen[key] {
			c.errorf(f, spanOf(o.Pos, o.EndPos), "each part is given at most once: remove one of them", "duplicate %s in run", code(key))
			continue
		}
		seen[key] = true
		switch {
		case o.Count != nil:
			n, msg := parseInt(o.Count.Value.Text, key)
			switch {
			case msg != "":
				c.errorf(f, wordSpan(o.Count.Value), intHint(o.Count.Value.Text, msg, key+" 10"), "%s", msg)
			case n < 0:
				c.errorf(f, wordSpan(o.Count.Value), "write `"+key+" 0` for none", "%s must not be negative", key)
			case key == "steps":
				c.prog.Run.Steps = n
			default:
				c.prog.Run.Warmup = n
			}
		case o.Checkpoint != nil:
			c.resolveCheckpoint(f, o.Checkpoint)
		case o.Check.Off:
			c.prog.Run.CheckEvery = 0
		default:
			n, msg := parseInt(o.Check.Every.Text, "check every")
			switch {
			case msg != "":
				c.errorf(f, wordSpan(o.Check.Every), intHint(o.Check.Every.Text, msg, "check every 10"), "%s", msg)
			case n <= 0:
				c.errorf(f, wordSpan(o.Check.Every), "write `check off` to turn checking off", "check every %d: the interval must be at least 1", n)
			default:
				c.prog.Run.CheckEvery = n
			}
		}
	}
}

// resolveCheckpoint reads `checkpoint every N [to DIR] [keep N]`.
func (c *checker) resolveCheckpoint(f *sourceFile, cp *RunCheckpoint) {
	positive := func(w *Word, what, example string) int {
		n, msg := parseInt(w.Text, what)
		switch {
		case msg != "":
			c.errorf(f, wordSpan(w), intHint(w.Text, msg, example), "%s", msg)
		case n <= 0:
			c.errorf(f, wordSpan(w), "leave out the checkpoint part for none", "%s %d: it must be at least 1", what, n)
		default:
			return n
		}
		return 0
	}
	c.prog.Run.CheckpointEvery = positive(cp.Every, "checkpoint every", "checkpoint every 50")
	if cp.Keep != nil {
		c.prog.Run.CheckpointKeep = positive(cp.Keep, "keep", "keep 3")
	}
	if cp.Dir != nil {
		dir, why := cp.Dir.unquoted()
		if why != "" || dir == "" {
			c.errorf(f, nameSpan(cp.Dir), "write the directory as a string, e.g. `to \"ckpt/\"`", "invalid checkpoint directory %s", cp.Dir.source())
			return
		}
		c.prog.Run.CheckpointDir = dir
	}
}

// warnUncovered warns about non-frozen tensors that no bucket holds and no
// collective names: their gradients are never synchronised. A tensor that
// a collective's target matches is named, even when the target has an
// error (the error says what is wrong with it). One warning per
// declaration; many declarations are summarised in one warning.
func (c *checker) warnUncovered() {
	type group struct {
		decl  declIn[*TensorDecl]
		names []string
	}
	var groups []*group
	byDecl := map[*TensorDecl]*group{}
	for i, t := range c.prog.Tensors {
		d := c.tensorDecl[i]
		if t.Frozen || t.Bucket >= 0 || c.inBucket[i] || c.targeted[i] || c.badTensorDecl[d.decl] {
			continue
		}
		g := byDecl[d.decl]
		if g == nil {
			g = &group{decl: d}
			byDecl[d.decl] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, t.Name)
	}
	const hint = "add it to a bucket, name it in a collective, or mark it `frozen`"
	if len(groups) > 5 {
		total := 0
		for _, g := range groups {
			total += len(g.names)
		}
		g := groups[0]
		c.warnf(g.decl.file, nameSpan(g.decl.decl.Name), "add them to buckets (`bucket rest { * }` takes every remaining tensor), or mark them `frozen`",
			"%d tensors (%s, ...) are in no bucket and no collective synchronises them", total, code(g.names[0]))
		return
	}
	for _, g := range groups {
		if len(g.names) == 1 {
			h := hint
			if _, shadowed := c.buckets[g.names[0]]; shadowed {
				// A collective that names it takes the bucket of that name
				// (§5), so naming it is no fix.
				h = fmt.Sprintf("a collective that names %s takes the bucket of that name: add the tensor to a bucket, rename the tensor or the bucket, or mark the tensor `frozen`", code(g.names[0]))
			}
			c.warnf(g.decl.file, nameSpan(g.decl.decl.Name), h, "tensor %s is in no bucket and no collective synchronises it", code(g.names[0]))
		} else {
			c.warnf(g.decl.file, nameSpan(g.decl.decl.Name), "add them to a bucket, name them in a collective, or mark them `frozen`",
				"%d tensors declared here (%s, ...) are in no bucket and no collective synchronises them", len(g.names), code(g.names[0]))
		}
	}
}

// warnUnsynced warns about each declared bucket that no collective names,
// by itself, a piece or a tensor of it: its tensors are in a bucket, so
// warnUncovered does not name them, yet their gradients are never
// synchronised. Only for a program without errors: an error in a
// collective or a bucket may be why (and is fixed first); nor without an
// init or step block, which warnNothingToRun covers. A duplicate or
// invalid bucket name has its error.
func (c *checker) warnUnsynced() {
	if c.diags.HasErrors() || c.initBlock == nil && c.stepBlock == nil {
		return
	}
	for _, b := range c.bucketOrder {
		if c.buckets[b.name] != b {
			continue
		}
		var unused []string // the pieces no collective names
		for i := range b.count {
			if !c.synced[b.first+i] {
				unused = append(unused, c.prog.Buckets[b.first+i].Name)
			}
		}
		switch {
		case b.count == 0 || len(unused) == 0:
		case len(unused) == b.count:
			c.warnf(b.file, nameSpan(b.decl.Name), fmt.Sprintf("name it in a collective, e.g. `allreduce %s`, or remove it", b.name),
				"bucket %s is used by no collective: its gradients are never synchronised", code(b.name))
		default:
			// Some pieces of a capped bucket: the tensors of the others
			// are synchronised, theirs never (the pieces follow from
			// `cap`, so which tensors they hold is easy to miss).
			c.warnUnsyncedPieces(b, unused)
		}
	}
}

// warnUnsyncedPieces warns about the pieces of bucket b, unused, that no
// collective names while others of b are.
func (c *checker) warnUnsyncedPieces(b *bucketInfo, unused []string) {
	const shown = 4
	list := make([]string, 0, shown)
	for _, n := range unused[:min(len(unused), shown)] {
		list = append(list, code(n))
	}
	names := strings.Join(list, ", ")
	if len(unused) > shown {
		names += ", ..."
	}
	hint := fmt.Sprintf("name it in a collective too, e.g. `allreduce %s`, or the whole bucket, `allreduce %s`", unused[0], b.name)
	if len(unused) == 1 {
		others := "its other piece is"
		if b.count > 2 {
			others = fmt.Sprintf("its other %d are", b.count-1)
		}
		c.warnf(b.file, nameSpan(b.decl.Name), hint,
			"piece %s of bucket %s is used by no collective (%s): its gradients are never synchronised",
			names, code(b.name), others)
		return
	}
	hint = fmt.Sprintf("name them in collectives too, e.g. `allreduce %s`, or the whole bucket, `allreduce %s`", strings.Join(unused[:min(len(unused), 2)], ", "), b.name)
	c.warnf(b.file, nameSpan(b.decl.Name), hint,
		"%d of the %d pieces of bucket %s (%s) are used by no collective: their gradients are never synchronised",
		len(unused), b.count, code(b.name), names)
}

// warnOverwritten warns about collectives that a later backward of the
// step overwrites: a backward refills every gradient, so the runtime can
// check only what the collectives after the step's last backward leave
// (runtime/check.go), and a collective before a backward is never checked
// (before the first one, it also works on the previous step's results).
// One warning per backward, at the first collective it overwrites.
func (c *checker) warnOverwritten() {
	if c.stepBlock == nil || Diagnostics(c.diags).HasErrors() {
		return
	}
	body := stmts(c.stepBlock.Body)
	var pending []*Stmt // the collectives since the previous backward
	for i, s := range c.prog.Step {
		if i >= len(body) {
			return
		}
		switch s.Kind {
		case ir.StmtCollective:
			if s.Into == nil { // an output buffer keeps its result
				pending = append(pending, body[i])
			}
		case ir.StmtGroup:
			if body[i].Group != nil {
				pending = append(pending, stmts(body[i].Group.Body)...)
			}
		case ir.StmtBackward:
			if s.Tensors != nil {
				// A piece refills only its own tensors, each once a
				// step (pieces.go): the collectives before it are
				// those of other buckets, or waited for by `after
				// ready` checks.
				continue
			}
			if len(pending) > 0 {
				c.warnOverwrittenBy(pending, s.Pos.Line)
			}
			pending = pending[:0]
		}
	}
}

// warnOverwrittenBy reports the collectives before the backward on line.
func (c *checker) warnOverwrittenBy(colls []*Stmt, line int) {
	first := colls[0]
	what := "collective"
	if first.Collective != nil {
		what = first.Collective.Kind
	}
	more := ""
	if n := len(colls) - 1; n == 1 {
		more = fmt.Sprintf(" (and so is that of the collective on line %d)", colls[1].Pos.Line)
	} else if n > 1 {
		more = fmt.Sprintf(" (and so are those of the %d other collectives before it, lines %d to %d)", n, colls[1].Pos.Line, colls[n].Pos.Line)
	}
	c.warnf(c.main.file, spanOf(first.Pos, first.EndPos),
		fmt.Sprintf("a backward refills every gradient, so only what the collectives after a step's last backward leave is checked; move it after the backward on line %d, or make each micro-batch a step of its own", line),
		"the result of this %s is overwritten by the backward on line %d before any check reads it%s", what, line, more)
}

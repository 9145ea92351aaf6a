package importer

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Param is one tensor of a model.
type Param struct {
	// Name is the parameter's name ("h.0.attn.c_attn.weight").
	Name string
	// DType is the file's dtype as safetensors spells it ("F32", "BF16");
	// parameter lists are mapped to these names too.
	DType string
	Shape []int64
	// Frozen: no gradient (requires_grad false, or --frozen).
	Frozen bool
	// GradKnown: the input says whether the tensor has a gradient (a
	// parameter list's requires_grad); safetensors files do not.
	GradKnown bool
	// Source is where it came from, for messages ("model-00001.safetensors").
	Source string
}

// Elems returns the number of elements.
func (p *Param) Elems() int64 {
	n := int64(1)
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Model is a model's parameters in declaration order (the reverse of the
// backward's order), and what the reader noticed.
type Model struct {
	Params []Param
	// Tied lists the names that share another parameter's storage and
	// appear once (the first name of each group is the one kept).
	Tied [][]string
	// TotalSize is the index's metadata.total_size (0 without an index).
	TotalSize int64
	// FileOrder: the reader's order is the model's own (registration
	// order, from a parameter list), not a file layout's.
	FileOrder bool
	// Files are the files the reader read (an index, its shards, a
	// safetensors file or a parameter list), so that a caller can refuse to
	// write over one of them.
	Files []string
}

// dtypeBits are the element sizes, in bits, of the dtypes safetensors
// knows: the reference implementation's, where the FP4 and FP6 formats
// take 4 and 6 bits an element, packed.
var dtypeBits = map[string]int64{
	"F64": 64, "F32": 32, "F16": 16, "BF16": 16, "I64": 64, "I32": 32, "I16": 16, "I8": 8, "U8": 8,
	"U16": 16, "U32": 32, "U64": 64, "BOOL": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
	"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "C64": 64,
}

// DTypes returns the dtypes safetensors knows, as it spells them, in
// order.
func DTypes() []string { return sortedKeys(dtypeBits) }

// FileDType returns the dtype that name means as safetensors spells it:
// a safetensors dtype in either case ("bool", "BF16") or torch's name of
// one ("torch.bool"), as a parameter list has it; false for neither.
func FileDType(name string) (string, bool) {
	if dt, ok := torchDTypes[name]; ok {
		return dt, true
	}
	up := strings.ToUpper(name)
	_, ok := dtypeBits[up]
	return up, ok
}

// maxElems bounds a tensor's element count so that its size in bits
// fits in an int64, whatever its dtype.
const maxElems = math.MaxInt64 / 64

// tensorBytes is the size in bytes of elems elements of dtype, and false
// when their bits do not make a whole number of bytes (an odd count of
// F4 elements), which the format does not allow. elems is at most
// maxElems.
func tensorBytes(dtype string, elems int64) (int64, bool) {
	bits := elems * dtypeBits[dtype]
	return bits / 8, bits%8 == 0
}

// satAdd returns a+b for counts (0 or more), saturating at
// math.MaxInt64 rather than wrapping around to a negative count.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// languageBytes are the element sizes of the language's dtypes.
var languageBytes = map[string]int64{"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "u8": 1}

// languageDTypes maps the dtypes the language has.
var languageDTypes = map[string]string{
	"F64": "f64", "F32": "f32", "F16": "f16", "BF16": "bf16", "I64": "i64", "I32": "i32", "I8": "i8", "U8": "u8",
}

// gradlessDTypes are the file dtypes that PyTorch never gives a
// gradient (only floating-point and complex tensors can require one): in
// a checkpoint they are buffers (BatchNorm's num_batches_tracked, BERT's
// position_ids, masks), never parameters that training synchronises.
var gradlessDTypes = map[string]bool{
	"I64": true, "I32": true, "I16": true, "I8": true, "U8": true, "U16": true, "U32": true, "U64": true, "BOOL": true,
}

// runningStats are the last name components of the floating-point
// buffers that PyTorch's normalisation layers (BatchNorm, InstanceNorm)
// keep beside their parameters: statistics the forward updates, which
// have no gradient and which DDP broadcasts instead of averaging. A
// checkpoint holds them, and their name is the only sign.
var runningStats = map[string]bool{"running_mean": true, "running_var": true}

// bufferWithoutGradient says whether p, read from an input that does not
// say which tensors have gradients, is a buffer that PyTorch gives none:
// an integer or bool tensor, or a normalisation layer's running
// statistics.
func bufferWithoutGradient(p Param) bool {
	if p.GradKnown {
		return false
	}
	last := p.Name[strings.LastIndexAny(p.Name, "./")+1:]
	return gradlessDTypes[p.DType] || runningStats[last]
}

// Options say how to turn a Model into a module.
type Options struct {
	// Order: "natural" (names with numbers in numeric order: layers.2
	// before layers.10), "file" (the reader's order) or "" (file for a
	// parameter list, which carries registration order; natural for
	// safetensors, whose writers sort by dtype and name).
	Order string
	// Frozen marks the tensors matching any of these patterns frozen;
	// Exclude leaves them out. A pattern must match a tensor read.
	Frozen, Exclude []string
	// Match reports which of names pattern matches, or why the pattern is
	// invalid. Prepare needs it when there are patterns. The CLI passes
	// the language's own bucket patterns, through its checker: this
	// package imports only the standard library.
	Match func(pattern string, names []string) ([]bool, error)
	// Cast maps a file dtype the language lacks (or any) to a language
	// dtype: {"I16": "i32"}.
	Cast map[string]string
	// Source names the input in the module's header comment.
	Source string
}

// Stats sum up a model for the summary on stderr.
type Stats struct {
	Tensors, Frozen int
	Params          int64
	// Bytes by the file's dtype, sorted by name.
	Bytes []DTypeBytes
	Total int64
}

// DTypeBytes is the bytes of one dtype.
type DTypeBytes struct {
	DType string
	Bytes int64
}

// StatsOf sums up params.
func StatsOf(params []Param) Stats {
	var s Stats
	by := map[string]int64{}
	for i := range params {
		p := &params[i]
		s.Tensors++
		if p.Frozen {
			s.Frozen++
		}
		s.Params = satAdd(s.Params, p.Elems())
		b, _ := tensorBytes(p.DType, p.Elems())
		by[p.DType] = satAdd(by[p.DType], b)
		s.Total = satAdd(s.Total, b)
	}
	for dt, b := range by {
		s.Bytes = append(s.Bytes, DTypeBytes{dt, b})
	}
	sort.Slice(s.Bytes, func(i, j int) bool { return s.Bytes[i].DType < s.Bytes[j].DType })
	return s
}

// String is the summary's line.
func (s Stats) String() string {
	var parts []string
	for _, b := range s.Bytes {
		parts = append(parts, fmt.Sprintf("%s %s", b.DType, humanBytes(b.Bytes)))
	}
	return fmt.Sprintf("%s (%d frozen), %s, %s (%s)", count(s.Tensors, "tensor"), s.Frozen, paramCount(s.Params), humanBytes(s.Total), strings.Join(parts, ", "))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<60:
		return fmt.Sprintf("%.2f EiB", float64(n)/(1<<60))
	case n >= 1<<50:
		return fmt.Sprintf("%.2f PiB", float64(n)/(1<<50))
	case n >= 1<<40:
		return fmt.Sprintf("%.2f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// paramCount writes n parameters with its digits grouped, singular for
// one: "1 parameter", "124,439,808 parameters".
func paramCount(n int64) string {
	if n == 1 {
		return "1 parameter"
	}
	return groupDigits(n) + " parameters"
}

func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

package importer

import (
	"fmt"
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

// dtypeSizes are the element sizes of the dtypes safetensors knows.
var dtypeSizes = map[string]int64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
	"U16": 2, "U32": 4, "U64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F4": 1, "F6_E2M3": 1, "F6_E3M2": 1, "C64": 8,
}

// languageDTypes maps the dtypes the language has.
var languageDTypes = map[string]string{
	"F64": "f64", "F32": "f32", "F16": "f16", "BF16": "bf16", "I64": "i64", "I32": "i32", "I8": "i8", "U8": "u8",
}

// Options say how to turn a Model into a module.
type Options struct {
	// Order: "natural" (names with numbers in numeric order: layers.2
	// before layers.10), "file" (the reader's order) or "" (file for a
	// parameter list, which carries registration order; natural for
	// safetensors, whose writers sort by dtype and name).
	Order string
	// Frozen marks the tensors matching any of these patterns frozen;
	// Exclude leaves them out.
	Frozen, Exclude []string
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
		s.Params += p.Elems()
		b := p.Elems() * dtypeSizes[p.DType]
		by[p.DType] += b
		s.Total += b
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
	return fmt.Sprintf("%d tensors (%d frozen), %s parameters, %s (%s)", s.Tensors, s.Frozen, groupDigits(s.Params), humanBytes(s.Total), strings.Join(parts, ", "))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

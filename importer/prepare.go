package importer

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tensor is one declaration of the module: a name and what follows it.
type Tensor struct {
	Name   string
	DType  string // the language's ("f32")
	Shape  []int64
	Frozen bool
}

// decl is what follows the name: "f32[64, 3, 7, 7] frozen".
func (t *Tensor) decl() string {
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = fmt.Sprint(d)
	}
	s := t.DType + "[" + strings.Join(dims, ", ") + "]"
	if t.Frozen {
		s += " frozen"
	}
	return s
}

// Prepared is what Prepare makes of a model: the tensors to declare, in
// order, and the names it left out.
type Prepared struct {
	Tensors []Tensor
	// Excluded are the tensors --exclude left out, in the reader's order.
	Excluded []string
	// Empty are the tensors without elements (a dimension 0), left out:
	// they have no gradient bytes, and a dimension of the language is at
	// least 1. In the reader's order.
	Empty []string
}

// Prepare applies opts to m's parameters: it leaves out the excluded
// ones and those without elements, marks the frozen ones, maps the dtypes
// to the language's (with the casts asked for), declares a scalar (shape
// []) as shape [1], the language having no scalars, and orders them. A
// dtype the language lacks, a name it cannot hold, or a pattern that
// matches nothing is an error naming the tensor or the pattern.
func Prepare(m *Model, opts Options) (*Prepared, error) {
	for _, pats := range [][]string{opts.Exclude, opts.Frozen} {
		for _, p := range pats {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("pattern %q: %v", p, err)
			}
		}
	}
	used := map[string]bool{}
	out := &Prepared{}
	var params []Param
	for _, p := range m.Params {
		switch {
		case matchAny(opts.Exclude, p.Name, used):
			out.Excluded = append(out.Excluded, p.Name)
		case p.Elems() == 0:
			matchAny(opts.Frozen, p.Name, used) // a pattern that takes only these matches still
			out.Empty = append(out.Empty, p.Name)
		default:
			params = append(params, p)
		}
	}
	order := opts.Order
	if order == "" {
		order = "natural"
		if m.FileOrder {
			order = "file"
		}
	}
	switch order {
	case "natural":
		sort.SliceStable(params, func(i, j int) bool { return naturalLess(params[i].Name, params[j].Name) })
	case "file":
	default:
		return nil, fmt.Errorf("order %q: want natural or file", order)
	}
	for _, p := range params {
		dt, ok := opts.Cast[p.DType]
		if !ok {
			dt, ok = languageDTypes[p.DType]
		}
		if !ok {
			return nil, fmt.Errorf("tensor %q: dtype %s has no counterpart in the language (f64 f32 f16 bf16 i64 i32 i8 u8); cast it (--cast %s=%s) or leave it out (--exclude %q)",
				p.Name, p.DType, p.DType, suggestCast(p.DType), p.Name)
		}
		if why := nameProblem(p.Name); why != "" {
			return nil, fmt.Errorf("tensor %q: %s; leave it out (--exclude %q)", p.Name, why, p.Name)
		}
		shape := p.Shape
		if len(shape) == 0 {
			shape = []int64{1} // a scalar: the language's shapes have a dimension at least
		}
		out.Tensors = append(out.Tensors, Tensor{Name: p.Name, DType: dt, Shape: shape, Frozen: p.Frozen || matchAny(opts.Frozen, p.Name, used)})
	}
	for _, pats := range [][]string{opts.Exclude, opts.Frozen} {
		for _, p := range pats {
			if !used[p] {
				return nil, fmt.Errorf("pattern %q matches no tensor", p)
			}
		}
	}
	if len(out.Tensors) == 0 {
		if len(out.Empty) > 0 {
			return nil, fmt.Errorf("no tensor is left to declare: the %s without elements cannot be declared", count(len(out.Empty), "tensor"))
		}
		return nil, fmt.Errorf("no tensor is left to declare")
	}
	return out, nil
}

// count writes n and noun, plural unless n is 1: "1 tensor", "2 tensors".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// suggestCast is the language dtype that holds dt's values.
func suggestCast(dt string) string {
	switch dt {
	case "I16", "U16":
		return "i32"
	case "U32", "U64":
		return "i64"
	case "BOOL":
		return "u8"
	case "C64":
		return "f64"
	}
	return "bf16"
}

// matchAny reports whether name matches one of pats, noting which did.
// The language's `*` (any run, dots included) and `?` are path.Match's
// for names without '/' (whose `*` stops at a '/').
func matchAny(pats []string, name string, used map[string]bool) bool {
	hit := false
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok && !strings.Contains(name, "/") {
			used[p], hit = true, true
		}
	}
	return hit
}

// bareName is a name the language takes without quotes.
var bareName = regexp.MustCompile(`^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$`)

// nameProblem says why the language cannot hold name, or "".
func nameProblem(name string) string {
	if bareName.MatchString(name) {
		return ""
	}
	if strings.ContainsAny(name, "*?") {
		return "a name with * or ? would be read as a pattern"
	}
	if !utf8.ValidString(name) {
		return "the name is not UTF-8 text"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Sprintf("the name holds the control character %q, which a quoted name cannot", r)
		}
	}
	return ""
}

// quote writes a name of the module as the language reads it: bare when
// it can be (template placeholders and brace ranges included), quoted
// otherwise.
func quote(name string) string {
	if bareName.MatchString(name) || bareName.MatchString(stripBraces(name)) {
		return name
	}
	return quoted(name)
}

// quoted writes name as a quoted name, which the language takes
// literally (outside templates, braces included), with its only escapes
// \" and \\.
func quoted(name string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
}

// naturalLess orders names with their runs of digits compared as
// numbers: layers.2 before layers.10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			if da != db {
				return da < db // fewer leading zeros first
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digitPrefix is the length of s's leading run of digits.
func digitPrefix(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// stripBraces removes template placeholders and brace ranges ({i},
// {0..47}) so that the rest can be tested as a bare name.
func stripBraces(name string) string {
	var b strings.Builder
	depth := 0
	for _, r := range name {
		switch {
		case r == '{':
			depth++
			b.WriteByte('0')
		case r == '}':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

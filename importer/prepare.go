package importer

import (
	"errors"
	"fmt"
	"math"
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
	// Gradless are the tensors declared frozen because the input does not
	// say whether they have a gradient and PyTorch gives them none: integer
	// and bool tensors, and normalisation layers' running statistics
	// (bufferWithoutGradient). In the reader's order.
	Gradless []string
}

// PatternError is an --exclude or --frozen pattern that is not valid:
// a usage error.
type PatternError struct {
	Flag    string // "exclude" or "frozen"
	Pattern string
	Err     error
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("--%s %s: %v", e.Flag, ShellQuote(e.Pattern), e.Err)
}

func (e *PatternError) Unwrap() error { return e.Err }

// Prepare applies opts to m's parameters: it leaves out the excluded
// ones and those without elements, marks the frozen ones (and the
// buffers of an input that does not say which tensors have gradients:
// Prepared.Gradless), maps the dtypes
// to the language's (with the casts asked for), declares a scalar (shape
// []) as shape [1], the language having no scalars, and orders them. A
// dtype the language lacks, a name it cannot hold, or a pattern that
// matches no tensor read is an error naming the tensor or the pattern; an
// invalid pattern is a *PatternError.
func Prepare(m *Model, opts Options) (*Prepared, error) {
	names := make([]string, len(m.Params))
	for i := range m.Params {
		names[i] = m.Params[i].Name
	}
	excluded, err := matchPatterns("exclude", opts.Exclude, names, opts.Match)
	if err != nil {
		return nil, err
	}
	frozen, err := matchPatterns("frozen", opts.Frozen, names, opts.Match)
	if err != nil {
		return nil, err
	}
	out := &Prepared{}
	var params []Param
	for i, p := range m.Params {
		switch {
		case excluded[i]:
			out.Excluded = append(out.Excluded, p.Name)
		case p.Elems() == 0:
			out.Empty = append(out.Empty, p.Name)
		default:
			p.Frozen = p.Frozen || frozen[i]
			if !p.Frozen && bufferWithoutGradient(p) {
				p.Frozen = true
				out.Gradless = append(out.Gradless, p.Name)
			}
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
	if err := checkDTypes(params, opts.Cast); err != nil {
		return nil, err
	}
	for _, p := range params {
		dt, ok := opts.Cast[p.DType]
		if !ok {
			dt = languageDTypes[p.DType]
		}
		if why := nameProblem(p.Name); why != "" {
			return nil, fmt.Errorf("tensor %q: %s; leave it out (--exclude %s)", p.Name, why, ShellQuote(NamePattern(p.Name)))
		}
		shape := p.Shape
		if len(shape) == 0 {
			shape = []int64{1} // a scalar: the language's shapes have a dimension at least
		}
		out.Tensors = append(out.Tensors, Tensor{Name: p.Name, DType: dt, Shape: shape, Frozen: p.Frozen})
	}
	if err := checkTotals(out.Tensors); err != nil {
		return nil, err
	}
	if len(out.Tensors) == 0 {
		if len(out.Empty) > 0 {
			return nil, fmt.Errorf("no tensor is left to declare: the %s without elements cannot be declared", count(len(out.Empty), "tensor"))
		}
		return nil, fmt.Errorf("no tensor is left to declare")
	}
	return out, nil
}

// checkDTypes returns an error when a tensor of params has a dtype that
// the language lacks and cast does not map: it names the first such
// tensor, with both fixes, and every other dtype without a counterpart,
// so that one run shows every --cast needed.
func checkDTypes(params []Param, cast map[string]string) error {
	var first *Param
	var others []string
	tensors := map[string]int{}
	for i := range params {
		p := &params[i]
		if _, ok := cast[p.DType]; ok {
			continue
		}
		if _, ok := languageDTypes[p.DType]; ok {
			continue
		}
		if first == nil {
			first = p
		}
		if tensors[p.DType] == 0 && p.DType != first.DType {
			others = append(others, p.DType)
		}
		tensors[p.DType]++
	}
	if first == nil {
		return nil
	}
	msg := fmt.Sprintf("tensor %q: dtype %s has no counterpart in the language (f64 f32 f16 bf16 i64 i32 i8 u8); cast it (--cast %s=%s) or leave it out (--exclude %s)",
		first.Name, first.DType, first.DType, suggestCast(first.DType), ShellQuote(NamePattern(first.Name)))
	if n := tensors[first.DType]; n > 1 {
		msg += fmt.Sprintf(" (%d tensors of %s in all)", n, first.DType)
	}
	if len(others) > 0 {
		var what, casts []string
		for _, dt := range others {
			what = append(what, fmt.Sprintf("%s (%s)", dt, count(tensors[dt], "tensor")))
			casts = append(casts, fmt.Sprintf("--cast %s=%s", dt, suggestCast(dt)))
		}
		msg += fmt.Sprintf("; other dtypes without a counterpart: %s: cast them too (%s)", strings.Join(what, ", "), strings.Join(casts, " "))
	}
	return errors.New(msg)
}

// checkTotals refuses tensors whose elements or bytes (in the language's
// dtypes, after casts) add up to more than 2^63-1, which no program
// holds: the checker would refuse the module.
func checkTotals(tensors []Tensor) error {
	var elems, bytes int64
	for _, t := range tensors {
		n := int64(1)
		for _, d := range t.Shape {
			n *= d // each tensor's count fits: shapeBytes checked it
		}
		size := int64(math.MaxInt64)
		if n <= math.MaxInt64/languageBytes[t.DType] {
			size = n * languageBytes[t.DType]
		}
		elems, bytes = satAdd(elems, n), satAdd(bytes, size)
		if elems == math.MaxInt64 || bytes == math.MaxInt64 {
			return fmt.Errorf("the tensors add up to 2^63 bytes or more from tensor %q on (%s), more than a program holds: check the shapes, or leave tensors out (--exclude)",
				t.Name, t.decl())
		}
	}
	return nil
}

// matchPatterns returns which of names any of pats matches, through
// match. A pattern that matches none of them is an error; an invalid one
// a *PatternError.
func matchPatterns(flag string, pats, names []string, match func(string, []string) ([]bool, error)) ([]bool, error) {
	hit := make([]bool, len(names))
	for _, p := range pats {
		if match == nil {
			return nil, fmt.Errorf("--%s %s: Options.Match is needed to match patterns", flag, ShellQuote(p))
		}
		got, err := match(p, names)
		if err != nil {
			return nil, &PatternError{Flag: flag, Pattern: p, Err: err}
		}
		matched := false
		for i, ok := range got {
			if ok {
				hit[i], matched = true, true
			}
		}
		if !matched {
			return nil, fmt.Errorf("--%s: pattern %q matches no tensor of the %s read; patterns match whole names, and `*` matches any run of characters (`h.*`)",
				flag, p, count(len(names), "tensor"))
		}
	}
	return hit, nil
}

// NamePattern is a pattern, as --exclude and --frozen read them, that
// matches name: the name itself, or, when braces in it (or a leading
// quote) would be read otherwise, the name as a quoted pattern, which
// is taken literally. A * or ? in a name still matches any run or any
// one character, as the language has no escape for them.
func NamePattern(name string) string {
	if strings.ContainsAny(name, "{}") || strings.HasPrefix(name, `"`) {
		return QuotedName(name)
	}
	return name
}

// ShellQuote writes s for a POSIX shell, so that a hint's text works
// when pasted: 'single quoted', or $'...' with escapes when s holds a
// character that does not print (a tab, a newline, a byte that is not
// UTF-8), which single quotes would keep but not show.
func ShellQuote(s string) string {
	plain := utf8.ValidString(s)
	for _, r := range s {
		if !unicode.IsPrint(r) {
			plain = false
		}
	}
	if plain {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			// Every byte of the character, escaped.
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		}
		i += n
	}
	b.WriteString("'")
	return b.String()
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
	return QuotedName(name)
}

// QuotedName writes name as a quoted name or pattern of the language,
// which takes it literally (outside templates, braces included; a
// pattern's * and ? still match), with its only escapes \" and \\.
func QuotedName(name string) string {
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

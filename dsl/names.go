package dsl

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// identRE is what stream and bucket names look like: they become
// identifiers in generated code and appear inside piece names (grads[3]).
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// bareNameRE is a bare tensor name: dot-separated segments of letters,
// digits and underscores (segments may start with a digit, as in
// layer1.0.conv1.weight), where brace ranges may stand for digits.
var bareNameRE = regexp.MustCompile(`^(?:[A-Za-z0-9_]|\{[0-9]+\.\.[0-9]+\})+(?:\.(?:[A-Za-z0-9_]|\{[0-9]+\.\.[0-9]+\})+)*$`)

// isBareName reports whether s matches bareNameRE. Names without brace
// ranges, nearly all of them, are checked byte by byte: the regular
// expression took a tenth of the front end's time on a 10,000-tensor model.
func isBareName(s string) bool {
	if strings.IndexByte(s, '{') >= 0 {
		return bareNameRE.MatchString(s)
	}
	segment := 0 // bytes in the current dot-separated segment
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if segment == 0 {
				return false
			}
			segment = 0
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_':
			segment++
		default:
			return false
		}
	}
	return segment > 0
}

// barePatternRE is a bare pattern: like a bare name, with the globs * and ?.
var barePatternRE = regexp.MustCompile(`^(?:[A-Za-z0-9_*?]|\{[0-9]+\.\.[0-9]+\})+(?:\.(?:[A-Za-z0-9_*?]|\{[0-9]+\.\.[0-9]+\})+)*$`)

// rangeRE finds the brace ranges of a name.
var rangeRE = regexp.MustCompile(`\{([0-9]+)\.\.([0-9]+)\}`)

// maxTensors bounds the tensors of a program and maxExpansion the names
// one brace-range name stands for, so that `{0..999999999}` is an error,
// not minutes of work and an out-of-memory. Real models have hundreds to
// tens of thousands of parameter tensors.
// maxNameBytes bounds the bytes of the names that brace ranges expand to,
// over the whole program: a 500 KB name with `{0..99999}` would otherwise
// ask for 50 GB.
const (
	maxTensors   = 1 << 20
	maxExpansion = 100_000
	maxNameBytes = 256 << 20
)

// unquoted returns the name as the program means it: a bare name as
// written, a quoted one unquoted; or, for a malformed quoted string, why.
func (n *Name) unquoted() (string, string) {
	if n.Quoted == "" {
		return n.Bare, ""
	}
	return unquote(n.Quoted)
}

// unquote interprets a quoted string as docs/language.md §1 has it: `\"` and
// `\\` are the only escapes, every other character stands for itself. The
// text must be UTF-8 without control characters (it names tensors in the
// generated program, its reports and traces). It returns the text, or why
// the string is invalid.
func unquote(q string) (string, string) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", "a string is written between double quotes"
	}
	body := q[1 : len(q)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\\' {
			if i+1 < len(body) && (body[i+1] == '"' || body[i+1] == '\\') {
				b.WriteByte(body[i+1])
				i++
				continue
			}
			r, _ := utf8.DecodeRuneInString(body[i+1:])
			return "", fmt.Sprintf("unknown escape %s: a string's only escapes are \\\" and \\\\ (write a backslash as \\\\)", code("\\"+string(r)))
		}
		b.WriteByte(c)
	}
	s := b.String()
	if !utf8.ValidString(s) {
		return "", "it is not UTF-8 text: save the file as UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "", fmt.Sprintf("it contains the control character %q", r)
		}
	}
	return s, ""
}

// source returns the name as written.
func (n *Name) source() string {
	if n.Quoted != "" {
		return n.Quoted
	}
	return n.Bare
}

// braceRange is one `{lo..hi}` of a name.
type braceRange struct {
	start, end int // byte range of the braces in the name
	lo, hi     int64
	// width is the number of digits every number of the range is written
	// with, zero-padded, or 0 for numbers without leading zeros: as in
	// bash, an endpoint written with a leading zero pads every number to
	// the width of the wider endpoint ({08..11} is 08 09 10 11).
	width int
}

// rangeHint is the hint for an invalid brace range.
const rangeHint = "a brace range {N..M} runs from N up to M (N <= M) and stands for at most 100000 names"

// rangeSyntaxHint is the hint for braces that are not a brace range.
const rangeSyntaxHint = "a brace range is {FIRST..LAST} with non-negative integers FIRST <= LAST, e.g. {0..3} or {00..15}"

// parseRange interprets the endpoints of a brace range, lo and hi as
// written (decimal digits), and returns the range; msg says why it is
// invalid: descending, or too large. text is the range as written, for
// messages.
func parseRange(text, loText, hiText string) (braceRange, string) {
	lo, err1 := strconv.ParseInt(loText, 10, 64)
	hi, err2 := strconv.ParseInt(hiText, 10, 64)
	if err1 != nil || err2 != nil || hi-lo >= maxExpansion {
		return braceRange{}, fmt.Sprintf("range %s is too large (at most %d names)", code(text), maxExpansion)
	}
	if lo > hi {
		return braceRange{}, fmt.Sprintf("range %s is descending; write {%s..%s}", code(text), hiText, loText)
	}
	r := braceRange{lo: lo, hi: hi}
	if hasLeadingZero(loText) || hasLeadingZero(hiText) {
		r.width = max(len(loText), len(hiText))
	}
	return r, ""
}

// hasLeadingZero reports whether a number is written with a leading zero
// (`01`, `00`; not `0`).
func hasLeadingZero(digits string) bool { return len(digits) > 1 && digits[0] == '0' }

// rangeError is a descending or oversized brace range of a name: why, and
// the byte range of its braces in the name, for the caret.
type rangeError struct {
	msg        string
	start, end int
}

// ranges returns the brace ranges of a bare name, or the first descending
// or oversized range.
func ranges(name string) ([]braceRange, *rangeError) {
	var out []braceRange
	for _, m := range rangeRE.FindAllStringSubmatchIndex(name, -1) {
		r, msg := parseRange(name[m[0]:m[1]], name[m[2]:m[3]], name[m[4]:m[5]])
		if msg != "" {
			return nil, &rangeError{msg: msg, start: m[0], end: m[1]}
		}
		r.start, r.end = m[0], m[1]
		out = append(out, r)
	}
	return out, nil
}

// badRange returns the byte range in a bare name of the first braces that
// are not a brace range (`{a..b}`, `{0..}`, `{-1..3}`: the lexer makes
// them part of the name so that they can be reported as such), or ok false.
func badRange(name string) (start, end int, ok bool) {
	for i := 0; i < len(name); i++ {
		if name[i] != '{' {
			continue
		}
		if n := braceRangeLen(name, i); n > 0 {
			i += n - 1
			continue
		}
		if n := braceGroupLen(name, i); n > 0 {
			return i, i + n, true
		}
	}
	return 0, 0, false
}

// expansionCount returns how many names a name with these ranges stands
// for, or -1 when it is more than maxExpansion.
func expansionCount(rs []braceRange) int64 {
	n := int64(1)
	for _, r := range rs {
		n *= r.hi - r.lo + 1
		if n > maxExpansion {
			return -1
		}
	}
	return n
}

// expand returns the names a bare name stands for, the leftmost range
// varying slowest (h.{0..1}.x{0..1}: h.0.x0 h.0.x1 h.1.x0 h.1.x1), each
// number zero-padded to its range's width. The caller has checked the
// count with expansionCount.
func expand(name string, rs []braceRange) []string {
	if len(rs) == 0 {
		return []string{name}
	}
	out := []string{""}
	prev := 0
	for _, r := range rs {
		lit := name[prev:r.start]
		next := make([]string, 0, len(out)*int(r.hi-r.lo+1))
		for _, p := range out {
			for i := r.lo; i <= r.hi; i++ {
				next = append(next, p+lit+r.format(i))
			}
		}
		out = next
		prev = r.end
	}
	tail := name[prev:]
	for i := range out {
		out[i] += tail
	}
	return out
}

// format writes a number of the range as the range expands it: in
// decimal, zero-padded to the range's width.
func (r braceRange) format(i int64) string {
	s := strconv.FormatInt(i, 10)
	if len(s) < r.width {
		s = strings.Repeat("0", r.width-len(s)) + s
	}
	return s
}

// isGlob reports whether a pattern has glob characters.
func isGlob(p string) bool { return strings.ContainsAny(p, "*?") }

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent
// characters each cost 1, so `wiat` is one edit from `wait`.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j]; three rows suffice.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// suggest returns the candidate closest to s, if it is close enough to be
// a likely typo (distance at most a third of the length, at least 1, or
// equal ignoring case), or "".
func suggest(s string, candidates []string) string {
	best, bestD := "", -1
	limit := max(1, len([]rune(s))/3)
	sorted := slices.Clone(candidates)
	slices.Sort(sorted) // ties resolve the same way every time
	for _, c := range sorted {
		if c == s {
			continue
		}
		if strings.EqualFold(c, s) {
			return c
		}
		if d := len(c) - len(s); d > limit || -d > limit {
			continue
		}
		d := editDistance(s, c)
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// didYouMean returns the hint for a suggestion, or "".
func didYouMean(s string, candidates []string) string {
	if c := suggest(s, candidates); c != "" {
		return "did you mean " + code(c) + "?"
	}
	return ""
}

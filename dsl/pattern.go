package dsl

import (
	"math"
	"unicode/utf8"
)

// pattern is a compiled tensor name pattern: literal characters, `*` (any
// run of characters, dots included), `?` (one character) and, in bare
// patterns, brace ranges {lo..hi} (a decimal number in the range, written
// as brace expansion of tensor names writes it: without leading zeros, or
// zero-padded to the range's width when an endpoint has a leading zero).
// Patterns are matched directly rather than by expanding their ranges, so
// `h.{0..99999}.*` costs no more than `h.*`.
type pattern struct {
	text  string // the pattern as the program means it (unquoted)
	parts []patPart
	// literal is set when the pattern has no glob and no range: it names
	// one tensor and is looked up rather than scanned.
	literal bool
	// simple is set when the only special character is `*`: it is then
	// matched byte by byte without allocating (the common case, `h.*`).
	simple bool
}

// patPart is one element of a pattern.
type patPart struct {
	kind   byte // 'c' character, '*', '?', 'r' range
	r      rune
	lo, hi int64
	width  int // of a range: its numbers' zero-padded width, or 0
}

// compilePattern compiles a pattern; withRanges interprets brace ranges
// (bare patterns), otherwise braces are literal (quoted patterns). The
// caller has validated the ranges.
func compilePattern(s string, withRanges bool) pattern {
	p := pattern{text: s, literal: true, simple: true}
	for i := 0; i < len(s); {
		if withRanges {
			if n := braceRangeLen(s, i); n > 0 {
				m := rangeRE.FindStringSubmatch(s[i : i+n])
				r, _ := parseRange(m[0], m[1], m[2])
				p.parts = append(p.parts, patPart{kind: 'r', lo: r.lo, hi: r.hi, width: r.width})
				p.literal = false
				p.simple = false
				i += n
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch r {
		case '*', '?':
			p.parts = append(p.parts, patPart{kind: byte(r)})
			p.literal = false
			p.simple = p.simple && r == '*'
		default:
			p.parts = append(p.parts, patPart{kind: 'c', r: r})
		}
	}
	return p
}

// match reports whether name matches the pattern. It is a dynamic program
// over (pattern part, name position), so it takes at most
// O(len(parts) * len(name) * digits) steps whatever the pattern.
func (p *pattern) match(name string) bool {
	if p.literal {
		return name == p.text
	}
	if p.simple {
		return starMatch(p.text, name)
	}
	rs := []rune(name)
	// ok[j] is true when parts[:i] can match rs[:j]; one row per part.
	ok := make([]bool, len(rs)+1)
	next := make([]bool, len(rs)+1)
	ok[0] = true
	for _, part := range p.parts {
		clear(next)
		switch part.kind {
		case '*':
			reach := false
			for j := 0; j <= len(rs); j++ {
				reach = reach || ok[j]
				next[j] = reach
			}
		case '?':
			for j := 0; j < len(rs); j++ {
				next[j+1] = ok[j]
			}
		case 'c':
			for j := 0; j < len(rs); j++ {
				next[j+1] = ok[j] && rs[j] == part.r
			}
		case 'r':
			for j := 0; j < len(rs); j++ {
				if ok[j] {
					part.matchNumbers(rs, j, next)
				}
			}
		}
		ok, next = next, ok
	}
	return ok[len(rs)]
}

// matchNumbers sets next[k] for every k such that rs[j:k] is a number of
// the range part, written as the range writes it: with exactly width
// digits for a zero-padded range, otherwise without leading zeros (or
// "0").
func (part patPart) matchNumbers(rs []rune, j int, next []bool) {
	var v int64
	for k := j; k < len(rs) && rs[k] >= '0' && rs[k] <= '9'; k++ {
		if part.width == 0 && k > j && rs[j] == '0' {
			return // a leading zero
		}
		if part.width > 0 && k-j == part.width {
			return // wider than the range writes its numbers
		}
		d := int64(rs[k] - '0')
		if v > (math.MaxInt64-d)/10 {
			return // beyond any range's hi
		}
		v = v*10 + d
		if v > part.hi {
			return
		}
		if v >= part.lo && (part.width == 0 || k+1-j == part.width) {
			next[k+1] = true
		}
	}
}

// starMatch matches a pattern whose only special character is `*`, byte by
// byte: the classic iterative matcher that backtracks to the last star
// only, linear in practice and never exponential.
func starMatch(pat, name string) bool {
	pi, ni := 0, 0
	starP, starN := -1, 0
	for ni < len(name) {
		switch {
		case pi < len(pat) && pat[pi] == '*':
			starP, starN = pi, ni
			pi++
		case pi < len(pat) && pat[pi] == name[ni]:
			pi++
			ni++
		case starP >= 0:
			starN++
			pi, ni = starP+1, starN
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

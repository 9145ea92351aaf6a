package dsl

import (
	"fmt"
	"regexp"
)

// MatchNames reports which of names a tensor pattern matches, as a
// bucket's pattern matches tensor names (docs/language.md): `*` any run of
// characters, `?` one character. A pattern between double quotes is the
// language's quoted form, taken literally but for the globs. Otherwise it
// is read as a bare pattern, with brace ranges ({0..3}), when it is one;
// text that is not (a slash, brackets, spaces) is taken as if quoted, so
// that a command line can name such tensors without quoting the language's
// quotes for the shell as well; brace ranges need the bare form. An
// invalid pattern (an empty one, a malformed quoted string, a descending
// range, a range outside a bare pattern) is an error saying why.
func MatchNames(text string, names []string) ([]bool, error) {
	p, err := compileCommandLinePattern(text)
	if err != nil {
		return nil, err
	}
	hit := make([]bool, len(names))
	for i, n := range names {
		hit[i] = p.match(n)
	}
	return hit, nil
}

// rangeLikeRE finds braces meant as a brace range: {a..b}, {0..}, {3..x}.
var rangeLikeRE = regexp.MustCompile(`\{[^{}]*\.\.[^{}]*\}`)

// compileCommandLinePattern compiles text as MatchNames reads it.
func compileCommandLinePattern(text string) (pattern, error) {
	switch {
	case text == "":
		return pattern{}, fmt.Errorf("an empty pattern matches no tensor")
	case len(text) >= 2 && text[0] == '"' && text[len(text)-1] == '"':
		s, why := unquote(text)
		if why == "" && s == "" {
			why = "it is empty"
		}
		if why != "" {
			return pattern{}, fmt.Errorf("invalid quoted pattern: %s", why)
		}
		return compilePattern(s, false), nil
	case barePatternRE.MatchString(text):
		if _, bad := ranges(text); bad != nil {
			return pattern{}, fmt.Errorf("%s (%s)", bad.msg, rangeHint)
		}
		return compilePattern(text, true), nil
	}
	if r := rangeLikeRE.FindString(text); r != "" {
		return pattern{}, fmt.Errorf("invalid brace range %s: %s, in a bare pattern (letters, digits, _, * and ? in dotted parts: h.{0..3}.w); a pattern in double quotes takes braces literally", code(r), rangeSyntaxHint)
	}
	return compilePattern(text, false), nil
}

package dsl

import (
	"strings"
	"testing"
)

// TestIsBareName checks the byte-by-byte check of bare names against the
// regular expression it stands in for.
func TestIsBareName(t *testing.T) {
	names := []string{
		"", ".", "..", "a", "a.", ".a", "a..b", "a.b", "A_9.b_c.0", "layer1.0.conv1.weight", "_", "a-b", "a*", "a?",
		"a b", "ü", "a.ü", "a/b", "h.{0..3}.w", "h.{0..3}", "{0..3}", "h.{0..}.w", "h.{a..3}", "h.{0..3}{4..5}", "a.{1..2}.", "a{",
	}
	for _, tok := range lex("t.sync", []byte(string(program10k())+inlineSeeds[3]+inlineSeeds[10])) {
		names = append(names, tok.Value)
	}
	for _, n := range names {
		if got, want := isBareName(n), bareNameRE.MatchString(n); got != want {
			t.Errorf("isBareName(%q) = %v, want %v", n, got, want)
		}
	}
}

// TestUnquote checks that strings have the two escapes of the language
// (\" and \\), not Go's, and name UTF-8 text without control characters.
func TestUnquote(t *testing.T) {
	for _, tc := range []struct{ q, want, why string }{
		{`"odd name/with:chars"`, "odd name/with:chars", ""},
		{`"a\"b\\c"`, `a"b\c`, ""},
		{`"é ü"`, "é ü", ""},
		{`"a\qb"`, "", "unknown escape `\\q`"},
		{`"n\nl"`, "", "unknown escape `\\n`"},
		{`"\u00e9"`, "", "unknown escape `\\u`"},
		{`"\x41"`, "", "unknown escape `\\x`"},
		{"\"x\xffy\"", "", "not UTF-8"},
		{"\"tab\there\"", "", "control character"},
	} {
		got, why := unquote(tc.q)
		if got != tc.want || tc.why == "" && why != "" || !strings.Contains(why, tc.why) {
			t.Errorf("unquote(%s) = %q, %q; want %q, %q", tc.q, got, why, tc.want, tc.why)
		}
	}
	errs := checkErrors("tensor \"\\u00e9\" f32[1]\ntensor \"é\" f32[1]\nbucket b { * }\n")
	if len(errs) != 1 || !strings.Contains(errs[0], "invalid quoted name") {
		t.Errorf("errors %q, want one invalid quoted name (not a duplicate of é)", errs)
	}
}

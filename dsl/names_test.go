package dsl

import "testing"

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

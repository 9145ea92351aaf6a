package main

import (
	"slices"
	"strings"
	"testing"
)

// TestSplitWords: tune --args is split as a POSIX shell splits words,
// without expansion; an unclosed quote or a trailing backslash is an
// error.
func TestSplitWords(t *testing.T) {
	for in, want := range map[string][]string{
		"":                           nil,
		"  \t\n ":                    nil,
		"--steps 20  --warmup\t3":    {"--steps", "20", "--warmup", "3"},
		`--trace 'my dir/t.json'`:    {"--trace", "my dir/t.json"},
		`--trace "my dir/t.json"`:    {"--trace", "my dir/t.json"},
		`--trace my\ dir/t.json`:     {"--trace", "my dir/t.json"},
		`a'b c'"d e"f`:               {"ab cd ef"},
		`'' ""`:                      {"", ""},
		`'a\b' "a\b" "a\"b" "\\$\x"`: {`a\b`, `a\b`, `a"b`, `\$\x`},
		`"it's" 'say "hi"'`:          {"it's", `say "hi"`},
		"a\\\nb \"c\\\nd\"":          {"ab", "cd"},
		`$HOME ~ *.json`:             {"$HOME", "~", "*.json"},
	} {
		got, err := splitWords(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		`--trace 'a b`:  "the single quote at byte 8",
		`--trace "a b`:  "the double quote at byte 8",
		`a "b\"`:        "the double quote at byte 2",
		`--trace a\`:    "a backslash at the end",
		`x "y" 'z'"w`:   "the double quote at byte 9",
		`'it'\''s' "a'`: "the double quote at byte 10",
	} {
		if got, err := splitWords(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("splitWords(%q) = %q, %v; want an error with %q", in, got, err, want)
		}
	}
}

// FuzzSplitWords: splitting never panics, and the words it returns, each
// quoted in single quotes and joined by spaces, split back into the same
// words.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"--steps 20 --warmup 3", `--trace 'a b' "c \"d\"" e\ f`, `'' "" \`, "a\\\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := splitWords(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("%q split into %q; quoted back, into %q, %v", s, words, again, err)
		}
	})
}

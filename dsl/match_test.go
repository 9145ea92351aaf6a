package dsl

import (
	"fmt"
	"strings"
	"testing"
)

// MatchNames matches a bare or quoted pattern exactly as a bucket line
// does: each pattern here is checked both ways over the same names.
func TestMatchNamesAsBuckets(t *testing.T) {
	names := []string{"h.0.w", "h.1.w", "h.10.w", "h.02.w", "emb", "a{b}.w", "x.y.z"}
	for _, pattern := range []string{"h.*", "h.{0..1}.w", "h.{00..02}.w", "h.?.w", "*", "*.w", "emb", `"a{b}.w"`, `"h.*"`, "x.*.z"} {
		hit, err := MatchNames(pattern, names)
		if err != nil {
			t.Errorf("%s: %v", pattern, err)
			continue
		}
		var src strings.Builder
		for _, n := range names {
			fmt.Fprintf(&src, "tensor %q f32[1]\n", n)
		}
		fmt.Fprintf(&src, "bucket b { %s }\n", pattern)
		prog, diags := Check("m.sync", []byte(src.String()))
		want := make([]bool, len(names))
		if prog != nil {
			for _, ti := range prog.Buckets[0].Tensors {
				want[ti] = true
			}
		} else if !strings.Contains(fmt.Sprint(diags), "matches no tensor") {
			t.Fatalf("%s: %v", pattern, diags)
		}
		if fmt.Sprint(hit) != fmt.Sprint(want) {
			t.Errorf("%s: MatchNames %v, a bucket takes %v", pattern, hit, want)
		}
	}
}

// Text that is not a bare pattern is taken literally but for the globs;
// brace ranges outside a bare pattern, descending ones and bad quoting are
// errors.
func TestMatchNamesCommandLine(t *testing.T) {
	names := []string{"h/0/w", "h/1/w", "h[0].w", "a b", "l.{0..1}.w"}
	for _, c := range []struct {
		pattern string
		want    string
		err     string
	}{
		{"h/0/w", "[true false false false false]", ""},
		{"h/*", "[true true false false false]", ""},
		{"h[0].w", "[false false true false false]", ""},
		{"a b", "[false false false true false]", ""},
		{`"l.{0..1}.w"`, "[false false false false true]", ""},
		{"l.{2..1}.w", "", "descending"},
		{"h/{0..1}/w", "", "invalid brace range `{0..1}`"},
		{`"a\q"`, "", "unknown escape"},
		{`""`, "", "empty"},
		{"", "", "empty"},
	} {
		hit, err := MatchNames(c.pattern, names)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one saying %q", c.pattern, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.pattern, err)
		case c.err == "" && fmt.Sprint(hit) != c.want:
			t.Errorf("%s: %v, want %s", c.pattern, hit, c.want)
		}
	}
}

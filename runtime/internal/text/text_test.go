package text

import "testing"

// TestTableCell pins the padding and the cut of Cell.
func TestTableCell(t *testing.T) {
	for _, c := range []struct {
		in    string
		width int
		want  string
	}{
		{"abc", 5, "abc  "},
		{"abcdef", 5, "ab..."},
		{"日本", 5, "日本 "},
		{"日本語", 5, "日..."}, // 6 columns: cut before the second wide character
		{"a\u202e", 8, `a\u202e `},
		{"ab\u202ecd", 6, "ab... "}, // an escape is not cut in two
		{"x\xffy", 7, `x\xffy `},
		{"\U000e0001", 10, `\U000e0001`},
	} {
		if got := Cell(c.in, c.width); got != c.want {
			t.Errorf("Cell(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
	}
}

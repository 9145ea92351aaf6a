package text

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bytes renders n bytes with a binary unit ("1.5 MiB").
func Bytes(n int64) string {
	const k = 1024
	switch {
	case n >= k*k*k*k*k:
		return fmt.Sprintf("%.1f PiB", float64(n)/(k*k*k*k*k))
	case n >= k*k*k*k:
		return fmt.Sprintf("%.1f TiB", float64(n)/(k*k*k*k))
	case n >= k*k*k:
		return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
	case n >= k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	case n >= k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	}
	return fmt.Sprintf("%d B", n)
}

// Num renders x for a message: whole numbers in full ("4294967296",
// not "4.294967296e+09"), others as %g.
func Num(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e21 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// Count renders a count with a decimal suffix ("25.6M").
func Count(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}

// Dur renders a duration in ms with 2 decimals, or us below 1 ms.
func Dur(d time.Duration) string {
	if d < time.Millisecond && d > -time.Millisecond {
		return fmt.Sprintf("%.1f us", float64(d)/1e3)
	}
	return fmt.Sprintf("%.2f ms", float64(d)/1e6)
}

// The report's table is read on a terminal, where a name's width is what
// lines its columns up: Go's fmt pads to a number of runes, but an East
// Asian wide character takes two columns, a combining mark none, and a
// bidirectional control (U+202E) reorders the rest of the line. Names may
// hold any of them (quoted names in .sync are any UTF-8 text without C0
// and C1 controls). The table escapes what does not print, as
// strconv.Quote and the compiler's messages do, and pads by columns; the
// JSON file keeps the names as they are.

// runeColumns is how many terminal columns r takes when printed: 2 for the
// East Asian wide and fullwidth ranges (Hangul Jamo, CJK, Hangul
// syllables, CJK compatibility, fullwidth forms, the emoji blocks, the
// supplementary ideographic planes), 0 for combining marks, 1 otherwise.
// The ranges are the compiler's (dsl/diag.go), which the runtime does not
// import, plus the emoji.
func runeColumns(r rune) int {
	switch {
	case r >= 0x1100 && r <= 0x115f, r >= 0x2e80 && r <= 0xa4cf && r != 0x303f,
		r >= 0xac00 && r <= 0xd7a3, r >= 0xf900 && r <= 0xfaff, r >= 0xfe30 && r <= 0xfe4f,
		r >= 0xff00 && r <= 0xff60, r >= 0xffe0 && r <= 0xffe6,
		r >= 0x1f300 && r <= 0x1f64f, r >= 0x1f900 && r <= 0x1f9ff, r >= 0x20000 && r <= 0x3fffd:
		return 2
	case unicode.In(r, unicode.Mn, unicode.Me):
		return 0
	}
	return 1
}

// textColumns is how many terminal columns s takes (s Printable, see
// Printable).
func textColumns(s string) int {
	n := 0
	for _, r := range s {
		n += runeColumns(r)
	}
	return n
}

// escapeRune returns r as it shows in the table: itself when it prints,
// else an escape (\u202e, \U000e0001, or \xff for a byte that is not
// UTF-8), so that control and format characters neither act on the
// terminal nor hide.
func escapeRune(r rune, size int, s string) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return fmt.Sprintf(`\x%02x`, s[0])
	case unicode.IsGraphic(r):
		return s[:size]
	case r < 0x10000:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// Printable returns s with every character that does not print escaped
// (see escapeRune).
func Printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(escapeRune(r, size, s[i:]))
		i += size
	}
	return b.String()
}

// Cell returns s Printable (see Printable) and padded with spaces to
// width terminal columns; longer than width, it is cut to width-3 columns
// or fewer, between characters or escapes, and ends in "...".
func Cell(s string, width int) string {
	p := Printable(s)
	if textColumns(p) > width {
		var b strings.Builder
		cols := 0
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			e := escapeRune(r, size, s[i:])
			if cols+textColumns(e) > width-3 {
				break
			}
			b.WriteString(e)
			cols += textColumns(e)
			i += size
		}
		b.WriteString("...")
		p = b.String()
	}
	return p + strings.Repeat(" ", max(width-textColumns(p), 0))
}

// Plural is "s" unless n is 1.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// JoinErrors joins errors one per line, or returns nil.
func JoinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msg := errs[0].Error()
	for _, e := range errs[1:] {
		msg += "\n" + e.Error()
	}
	return fmt.Errorf("%s", msg)
}

// RankList renders ranks as "rank 3" or "ranks 0, 2".
func RankList(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprint(r)
	}
	return "ranks " + strings.Join(parts, ", ")
}

// Clip cuts s to at most n bytes, at a character boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// IsOff reports whether s turns something off: off, no, false or 0, in
// any case (--check, SYNCGEN_MPI_TUNING).
func IsOff(s string) bool {
	switch strings.ToLower(s) {
	case "off", "no", "false", "0":
		return true
	}
	return false
}

// IsOn reports whether s leaves something on: empty (the default), on,
// yes, true or 1, in any case.
func IsOn(s string) bool {
	switch strings.ToLower(s) {
	case "", "on", "yes", "true", "1":
		return true
	}
	return false
}

// KV is a name and a value, for reports.
type KV struct {
	Key   string
	Value string
}

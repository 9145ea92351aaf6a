package dsl

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sizeUnits are the byte units of sizes: binary (KiB) and decimal (KB).
var sizeUnits = map[string]int64{
	"B":   1,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	"KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000,
}

// durationUnits are the units of durations.
var durationUnits = map[string]int64{
	"us": int64(time.Microsecond), "ms": int64(time.Millisecond), "s": int64(time.Second),
}

// numberUnit splits a quantity such as "1.5MiB" or "60ms".
var numberUnit = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)$`)

// parseQuantity interprets text as a non-negative decimal number with a
// unit from units and returns number*unit, which must be a whole number
// that fits in an int64. what names the quantity in messages ("size").
// The returned error message and hint are ready for a diagnostic.
func parseQuantity(text, what string, units map[string]int64, unitList string) (int64, string, string) {
	if strings.HasPrefix(text, "-") {
		return 0, fmt.Sprintf("negative %s %s", what, code(text)), "a " + what + " is not negative, e.g. " + example(what)
	}
	m := numberUnit.FindStringSubmatch(text)
	if m == nil {
		hint := "write a number and a unit (" + unitList + "), e.g. " + example(what)
		if full, ok := withoutExponent(text); ok {
			hint = writeInFull(full)
			if p := fullQuantityProblem(full, what, units); p != "" {
				// Written in full, it would still be rejected.
				hint = noExponent + ", and " + code(text) + " " + p
			} else if strings.TrimLeft(full, "0123456789.") == "" {
				hint += " and a unit (" + unitList + ")"
			}
		} else if exponentRE.MatchString(text) {
			hint = noExponent + "; " + hint
		}
		return 0, fmt.Sprintf("invalid %s %s", what, code(text)), hint
	}
	num, unit := m[1], m[2]
	if unit == "" {
		return 0, fmt.Sprintf("%s %s has no unit", what, code(text)), "add one of " + unitList + ", e.g. " + code(num+firstUnit(unitList))
	}
	mult, ok := units[unit]
	if !ok {
		hint := "units are " + unitList
		if s := unitSuggestion(num, unit, what, units); s != "" {
			hint = s + " " + hint
		}
		return 0, fmt.Sprintf("unknown unit %s in %s %s", code(unit), what, code(text)), hint
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Sprintf("invalid %s %s", what, code(text)), ""
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if r.Cmp(maxQuantity) > 0 {
		// Before the whole-number check: a rounded value would be too
		// large too.
		return 0, fmt.Sprintf("%s %s is too large", what, code(text)), largestHint(what, units)
	}
	if !r.IsInt() {
		if what == "duration" {
			return 0, fmt.Sprintf("%s %s is not a whole number of nanoseconds", what, code(text)),
				"durations are whole nanoseconds: at most 3 decimals with us, 6 with ms, 9 with s"
		}
		return 0, fmt.Sprintf("%s %s is not a whole number of bytes", what, code(text)), fractionalSizeHint(r, num, unit)
	}
	return r.Num().Int64(), "", ""
}

// maxQuantity is the largest size in bytes and duration in nanoseconds.
var maxQuantity = new(big.Rat).SetInt64(math.MaxInt64)

// quantityProblem says why a quantity of value bytes or nanoseconds
// cannot be written: it is too large, or not a whole number. It returns
// "" when it can. A hint must never suggest a value that is rejected in
// turn.
func quantityProblem(value *big.Rat, what string, units map[string]int64) string {
	switch {
	case value.Cmp(maxQuantity) > 0:
		return "is too large: " + largestHint(what, units)
	case !value.IsInt():
		if what == "duration" {
			return "is not a whole number of nanoseconds"
		}
		return "is not a whole number of bytes"
	}
	return ""
}

// fullQuantityProblem says why full, a number written without an exponent
// and its unit, if any, would be rejected, or returns "". A number without
// a unit is rejected when it is too large even in the smallest unit.
func fullQuantityProblem(full, what string, units map[string]int64) string {
	m := numberUnit.FindStringSubmatch(full)
	if m == nil {
		return "" // an unknown unit: its own error will say so
	}
	r, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return ""
	}
	if m[2] == "" {
		smallest := int64(math.MaxInt64)
		for _, mult := range units {
			smallest = min(smallest, mult)
		}
		if r.Mul(r, new(big.Rat).SetInt64(smallest)).Cmp(maxQuantity) > 0 {
			return "is too large: " + largestHint(what, units)
		}
		return ""
	}
	mult, ok := units[m[2]]
	if !ok {
		return ""
	}
	return quantityProblem(r.Mul(r, new(big.Rat).SetInt64(mult)), what, units)
}

// exponentRE matches a number in scientific notation (`1e6`, `2.5E-3ms`),
// with its mantissa, exponent and unit.
var exponentRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)[eE]([+-]?[0-9]+)([A-Za-z]*)$`)

// noExponent is the hint for a number in scientific notation; writeInFull
// adds the number written out.
const noExponent = "numbers are written without an exponent"

func writeInFull(full string) string { return noExponent + ": write " + code(full) }

// withoutExponent writes a number in scientific notation in full
// (`1e6B` is `1000000B`), when the result is short enough to suggest.
func withoutExponent(text string) (string, bool) {
	m := exponentRE.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	exp, err := strconv.Atoi(m[2])
	if err != nil || exp < -9 || exp > 18 {
		return "", false
	}
	r, ok := new(big.Rat).SetString(m[1] + "e" + m[2])
	if !ok {
		return "", false
	}
	full, ok := decimalText(r)
	if !ok {
		return "", false
	}
	return full + m[3], true
}

// intHint says how to write an integer, text, that parseInt rejected with
// msg; example is one written right.
func intHint(text, msg, example string) string {
	if strings.HasSuffix(msg, " is too large") {
		return fmt.Sprintf("the largest is %d", math.MaxInt32)
	}
	if full, ok := withoutExponent(text); ok {
		// Only a number that parseInt takes: `1e10` in full is too large,
		// `1e-1` is not whole.
		switch _, fullMsg := parseInt(full, "number"); {
		case fullMsg == "":
			return writeInFull(full)
		case isDigits(full):
			return fmt.Sprintf("%s, and %s is too large: the largest is %d", noExponent, code(text), math.MaxInt32)
		}
		return noExponent + "; write a whole number, e.g. " + code(example)
	}
	return "write a whole number, e.g. " + code(example)
}

// unitAlias is a unit that the language does not have, written as a
// multiple of one it has: `1TiB` is `1024GiB`, `5ns` is `0.005us`.
type unitAlias struct {
	unit   string
	factor *big.Rat
}

// unitAliases are the units people write that the language spells
// otherwise, or does not have, by the quantity they measure.
var unitAliases = map[string]map[string]unitAlias{
	"size": {
		"byte": {"B", big.NewRat(1, 1)}, "bytes": {"B", big.NewRat(1, 1)},
		"TiB": {"GiB", big.NewRat(1024, 1)}, "TB": {"GB", big.NewRat(1000, 1)},
	},
	"duration": {
		"ns": {"us", big.NewRat(1, 1000)}, "nsec": {"us", big.NewRat(1, 1000)},
		"usec": {"us", big.NewRat(1, 1)}, "usecs": {"us", big.NewRat(1, 1)},
		"msec": {"ms", big.NewRat(1, 1)}, "msecs": {"ms", big.NewRat(1, 1)}, "millis": {"ms", big.NewRat(1, 1)},
		"sec": {"s", big.NewRat(1, 1)}, "secs": {"s", big.NewRat(1, 1)},
		"second": {"s", big.NewRat(1, 1)}, "seconds": {"s", big.NewRat(1, 1)},
		"min": {"s", big.NewRat(60, 1)}, "mins": {"s", big.NewRat(60, 1)}, "minutes": {"s", big.NewRat(60, 1)},
		"h": {"s", big.NewRat(3600, 1)}, "hr": {"s", big.NewRat(3600, 1)}, "hours": {"s", big.NewRat(3600, 1)},
	},
}

// unitSuggestion says how to write num with the unknown unit in a unit of
// the language, or returns "". It only ever suggests the same quantity:
// the same unit in other letter case (`25mib`, `60S`), a spelling of it
// (`60sec`, `10bytes`), or the number converted (`1TiB` is `1024GiB`,
// `5ns` is `0.005us`). Nearest-spelling guesses would change the value a
// thousandfold (`5ns` is not `5ms`, nor `1TiB` `1GiB`). Nor does it suggest
// a value that would be rejected in turn (`999999999h` is more than the
// largest duration): it says what is wrong with the value instead.
func unitSuggestion(num, unit, what string, units map[string]int64) string {
	n, ok := new(big.Rat).SetString(num)
	if !ok {
		return ""
	}
	// problem says what is wrong with num in units of factor times mult
	// (bytes or nanoseconds), or "".
	problem := func(factor *big.Rat, mult int64) string {
		v := new(big.Rat).Mul(n, factor)
		return quantityProblem(v.Mul(v, new(big.Rat).SetInt64(mult)), what, units)
	}
	one := big.NewRat(1, 1)
	for _, u := range keys(units) {
		if strings.EqualFold(u, unit) {
			if p := problem(one, units[u]); p != "" {
				return code(num+unit) + " " + p + ";"
			}
			return "did you mean " + code(num+u) + "?"
		}
	}
	if a, ok := unitAliases[what][unit]; ok {
		if p := problem(a.factor, units[a.unit]); p != "" {
			return code(num+unit) + " " + p + ";"
		}
		if text, ok := decimalText(new(big.Rat).Mul(n, a.factor)); ok {
			return "did you mean " + code(text+a.unit) + "?"
		}
		return ""
	}
	switch strings.ToUpper(unit) {
	case "K", "M", "G":
		if what == "size" {
			u := strings.ToUpper(unit)
			binary, decimal := num+u+"iB", num+u+"B"
			pb, pd := problem(one, units[u+"iB"]), problem(one, units[u+"B"])
			switch {
			case pb == "" && pd == "":
				return "did you mean " + code(binary) + " (powers of 1024) or " + code(decimal) + " (powers of 1000)?"
			case pd == "":
				// Only one of them: say briefly what is wrong with the other.
				short, _, _ := strings.Cut(pb, ":")
				return "did you mean " + code(decimal) + " (powers of 1000; " + code(binary) + " " + short + ")?"
			case pb == "":
				short, _, _ := strings.Cut(pd, ":")
				return "did you mean " + code(binary) + " (powers of 1024; " + code(decimal) + " " + short + ")?"
			}
			return code(num+unit) + " " + pd + ";"
		}
	}
	other, is, isNot := durationUnits, "time", "size"
	if what == "duration" {
		other, is, isNot = sizeUnits, "size", "time"
	}
	if _, ok := other[unit]; ok {
		return code(unit) + " is a unit of " + is + ", not of " + isNot + ";"
	}
	return ""
}

// decimalText writes r exactly as a decimal number without trailing
// zeros (1024, 0.005), or returns false when r has no finite decimal
// expansion (its denominator has a prime factor other than 2 and 5).
func decimalText(r *big.Rat) (string, bool) {
	// r has as many decimals as the larger power of 2 or 5 in its
	// denominator.
	d := new(big.Int).Set(r.Denom())
	twos := int(d.TrailingZeroBits())
	d.Rsh(d, uint(twos))
	fives := 0
	five, q, m := big.NewInt(5), new(big.Int), new(big.Int)
	for {
		q.QuoRem(d, five, m)
		if m.Sign() != 0 {
			break
		}
		d.Set(q)
		fives++
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		return "", false
	}
	s := r.FloatString(max(twos, fives))
	if strings.Contains(s, ".") {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	return s, true
}

// fractionalSizeHint says how to write a size that is not a whole number
// of bytes (bytes is the rational number of bytes it stands for): round
// it, or, for a number of `B` (which some read as billions), use GB.
func fractionalSizeHint(bytes *big.Rat, num, unit string) string {
	rounded := new(big.Int).Quo(new(big.Int).Add(new(big.Int).Mul(bytes.Num(), big.NewInt(2)), bytes.Denom()),
		new(big.Int).Mul(bytes.Denom(), big.NewInt(2))) // round half up
	if rounded.Sign() == 0 {
		rounded.SetInt64(1) // a size of 0 is not allowed either
	}
	hint := "a size is a whole number of bytes; round it, e.g. `" + rounded.String() + "B`"
	if unit == "B" {
		hint += "; `B` means bytes, so for " + num + " billion bytes write `" + num + "GB`"
	}
	return hint
}

// largestHint says what the largest size or duration is, in the largest
// of units, e.g. "the largest size is about 8589934591GiB (2^63-1 bytes)".
func largestHint(what string, units map[string]int64) string {
	name, mult := "", int64(0)
	for n, m := range units {
		if m > mult || m == mult && n < name {
			name, mult = n, m
		}
	}
	smallest := "bytes"
	if what == "duration" {
		smallest = "nanoseconds"
	}
	return fmt.Sprintf("the largest %s is about %d%s (2^63-1 %s)", what, int64(math.MaxInt64)/mult, name, smallest)
}

func example(what string) string {
	if what == "duration" {
		return "`60ms`"
	}
	return "`25MiB`"
}

func firstUnit(list string) string {
	if strings.HasPrefix(list, "us") {
		return "ms"
	}
	return "B"
}

// sizeUnitList and durationUnitList are the units as the messages list them.
const (
	sizeUnitList     = "B, KiB, MiB, GiB, KB, MB, GB"
	durationUnitList = "us, ms, s"
)

// parseSize parses a size such as 25MiB into bytes.
func parseSize(text string) (int64, string, string) {
	return parseQuantity(text, "size", sizeUnits, sizeUnitList)
}

// parseDuration parses a duration such as 60ms.
func parseDuration(text string) (time.Duration, string, string) {
	n, msg, hint := parseQuantity(text, "duration", durationUnits, durationUnitList)
	return time.Duration(n), msg, hint
}

// parseInt parses a decimal integer (with an optional minus sign) that
// fits in an int32: ranks, step counts and dimensions beyond that are
// nonsense, and int32 keeps the generated code portable. Dimensions use
// parseInt64.
func parseInt(text, what string) (int, string) {
	n, msg := parseInt64(text, what)
	if msg != "" {
		return 0, msg
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, fmt.Sprintf("%s %s is too large", what, code(text))
	}
	return int(n), ""
}

// parseInt64 parses a decimal integer with an optional minus sign.
func parseInt64(text, what string) (int64, string) {
	digits := strings.TrimPrefix(text, "-")
	if !isDigits(digits) {
		return 0, fmt.Sprintf("%s must be an integer, not %s", what, code(text))
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("%s %s is too large", what, code(text))
	}
	return n, ""
}

// keys returns the keys of a map in order (for suggestions: hints must not
// depend on map iteration).
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

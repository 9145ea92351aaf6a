package dsl

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
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
		return 0, fmt.Sprintf("negative %s %s", what, code(text)), ""
	}
	m := numberUnit.FindStringSubmatch(text)
	if m == nil {
		return 0, fmt.Sprintf("invalid %s %s", what, code(text)), "write a number and a unit (" + unitList + "), e.g. " + example(what)
	}
	num, unit := m[1], m[2]
	if unit == "" {
		return 0, fmt.Sprintf("%s %s has no unit", what, code(text)), "add one of " + unitList + ", e.g. " + code(num+firstUnit(unitList))
	}
	mult, ok := units[unit]
	if !ok {
		hint := "units are " + unitList
		if s := suggest(unit, keys(units)); s != "" {
			hint = "did you mean " + code(num+s) + "? " + hint
		}
		return 0, fmt.Sprintf("unknown unit %s in %s %s", code(unit), what, code(text)), hint
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Sprintf("invalid %s %s", what, code(text)), ""
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		if what == "duration" {
			return 0, fmt.Sprintf("%s %s is not a whole number of nanoseconds", what, code(text)),
				"durations are whole nanoseconds: at most 3 decimals with us, 6 with ms, 9 with s"
		}
		return 0, fmt.Sprintf("%s %s is not a whole number of bytes", what, code(text)), fractionalSizeHint(r, num, unit)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Sprintf("%s %s is too large", what, code(text)), largestHint(what, units)
	}
	return r.Num().Int64(), "", ""
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
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Sprintf("%s must be an integer, not %s", what, code(text))
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("%s %s is too large", what, code(text))
	}
	return n, ""
}

// keys returns the keys of a map (for suggestions).
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

package costmodel

import (
	"cmp"
	"slices"
	"time"
)

// Interval is a span of time within a step, from A to B. The replay and
// the engine's step figures (runtime/internal/engine) measure overlap with
// the same arithmetic, so that predicted and measured overlap compare.
type Interval struct{ A, B time.Duration }

// Union merges overlapping intervals into sorted disjoint ones and drops
// empty ones. It works in place: it reorders in and returns a prefix of
// it, so a caller can reuse the memory from step to step.
func Union(in []Interval) []Interval {
	slices.SortFunc(in, func(x, y Interval) int { return cmp.Compare(x.A, y.A) })
	out := in[:0]
	for _, v := range in {
		if v.B <= v.A {
			continue
		}
		if n := len(out); n > 0 && v.A <= out[n-1].B {
			out[n-1].B = max(out[n-1].B, v.B)
			continue
		}
		out = append(out, v)
	}
	return out
}

// Intersect appends the overlap of two sorted disjoint interval lists to
// out.
func Intersect(out, x, y []Interval) []Interval {
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		a, b := max(x[i].A, y[j].A), min(x[i].B, y[j].B)
		if a < b {
			out = append(out, Interval{a, b})
		}
		if x[i].B < y[j].B {
			i++
		} else {
			j++
		}
	}
	return out
}

// Length is the total length of disjoint intervals.
func Length(in []Interval) time.Duration {
	var d time.Duration
	for _, v := range in {
		d += v.B - v.A
	}
	return d
}

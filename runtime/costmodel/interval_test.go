package costmodel

import "testing"

func TestIntervals(t *testing.T) {
	u := Union([]Interval{{5, 10}, {0, 3}, {2, 4}, {9, 12}, {7, 7}})
	if len(u) != 2 || u[0] != (Interval{0, 4}) || u[1] != (Interval{5, 12}) {
		t.Fatalf("Union = %v", u)
	}
	x := Intersect(nil, u, []Interval{{3, 6}, {11, 20}})
	if len(x) != 3 || Length(x) != 1+1+1 {
		t.Fatalf("Intersect = %v", x)
	}
}

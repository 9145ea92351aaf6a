package engine

import "testing"

func TestIntervals(t *testing.T) {
	u := union([]interval{{5, 10}, {0, 3}, {2, 4}, {9, 12}})
	if len(u) != 2 || u[0] != (interval{0, 4}) || u[1] != (interval{5, 12}) {
		t.Fatalf("union = %v", u)
	}
	x := intersect(nil, u, []interval{{3, 6}, {11, 20}})
	if length(x) != 1+1+1 {
		t.Fatalf("intersect = %v", x)
	}
}

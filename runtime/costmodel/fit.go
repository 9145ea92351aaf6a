package costmodel

import (
	"fmt"
	"math"
	"sort"
)

// MaxSegments is the most segments Fit splits a curve into: enough for
// the protocol changes of MPI and NCCL (eager, rendezvous, pipelined),
// few enough that noise does not get a segment of its own.
const MaxSegments = 3

// minSegmentPoints is the fewest points a segment is fitted to: a line
// through two points has no residual to judge it by.
const minSegmentPoints = 3

// Fit fits the segments of collective coll, measured at n ranks, to
// points: piecewise time = alpha + bytes*factor(n)/busbw, each piece by
// least squares of the relative error (times span orders of magnitude,
// and a small collective's error matters as much as a large one's), the
// breakpoints chosen among the points to minimise the total error. More
// pieces are taken only where they cut the error clearly (below 70% of
// the error with one piece fewer, and by more than a 5% error on every
// point): a protocol change, not noise.
func Fit(coll string, n int, points []Point) ([]Segment, error) {
	pts := append([]Point(nil), points...)
	sort.Slice(pts, func(i, j int) bool { return pts[i].Bytes < pts[j].Bytes })
	for _, p := range pts {
		if p.Us <= 0 || !finite(p.Us) || p.Bytes < 0 {
			return nil, fmt.Errorf("fit %s: point (%d bytes, %v us) is not a positive time", coll, p.Bytes, p.Us)
		}
	}
	if len(pts) < 2 {
		return nil, fmt.Errorf("fit %s: %d points; need at least 2 sizes", coll, len(pts))
	}
	np := len(pts)
	// cost[i][j]: the error of one segment over points i..j-1.
	type piece struct {
		a, b, err float64
	}
	one := func(i, j int) piece {
		a, b := fitLine(pts[i:j])
		return piece{a, b, relErr(pts[i:j], a, b)}
	}
	// best[k][j]: the least error of k segments over points 0..j-1, and
	// where the last one starts.
	inf := math.Inf(1)
	best := make([][]float64, MaxSegments+1)
	from := make([][]int, MaxSegments+1)
	for k := range best {
		best[k] = make([]float64, np+1)
		from[k] = make([]int, np+1)
		for j := range best[k] {
			best[k][j] = inf
		}
	}
	best[0][0] = 0
	minPts := minSegmentPoints
	if np < minPts {
		minPts = np
	}
	for k := 1; k <= MaxSegments; k++ {
		for j := 1; j <= np; j++ {
			for i := 0; i+minPts <= j; i++ {
				if best[k-1][i] == inf {
					continue
				}
				if e := best[k-1][i] + one(i, j).err; e < best[k][j] {
					best[k][j], from[k][j] = e, i
				}
			}
		}
	}
	k := 1
	for c := 2; c <= MaxSegments; c++ {
		// The error must fall clearly, and by more than a 5% error on
		// every point adds up to: noise gets no segment of its own.
		if best[c][np] < 0.7*best[k][np] && best[k][np]-best[c][np] > 0.0025*float64(np) {
			k = c
		}
	}
	var bounds []int
	for j, c := np, k; c > 0; c-- {
		i := from[c][j]
		bounds = append([]int{i}, bounds...)
		j = i
	}
	bounds = append(bounds, np)
	f := costFactor(coll, n)
	var segs []Segment
	for s := 0; s+1 < len(bounds); s++ {
		pc := one(bounds[s], bounds[s+1])
		seg := Segment{AlphaUs: pc.a}
		if s > 0 {
			seg.FromBytes = pts[bounds[s]].Bytes
		}
		// A bandwidth above MaxGBs is a slope too small to tell from
		// none (noise on sizes that cost alike): no bandwidth term.
		if bw := f / (pc.b * 1e3); pc.b > 0 && bw <= MaxGBs {
			seg.BusGBs = bw
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// fitLine fits t = a + b*bytes to pts by least squares weighted by
// 1/t^2 (relative error), with a and b not negative.
func fitLine(pts []Point) (a, b float64) {
	var sw, sx, sy, sxx, sxy float64
	for _, p := range pts {
		w := 1 / (p.Us * p.Us)
		x := float64(p.Bytes)
		sw += w
		sx += w * x
		sy += w * p.Us
		sxx += w * x * x
		sxy += w * x * p.Us
	}
	det := sw*sxx - sx*sx
	if det > 0 {
		a = (sy*sxx - sx*sxy) / det
		b = (sw*sxy - sx*sy) / det
	}
	switch {
	case det <= 0 || b <= 0:
		// No bandwidth term: the sizes cost alike.
		return sy / sw, 0
	case a < 0:
		// A line through the origin: all bandwidth, no latency.
		return 0, sxy / sxx
	}
	return a, b
}

// relErr is the sum of squared relative errors of t = a + b*bytes.
func relErr(pts []Point, a, b float64) float64 {
	var e float64
	for _, p := range pts {
		r := (a + b*float64(p.Bytes) - p.Us) / p.Us
		e += r * r
	}
	return e
}

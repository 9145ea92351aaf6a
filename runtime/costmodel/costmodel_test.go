package costmodel

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(math.Abs(b), 1e-12) }

// profile1 is a profile whose allreduce costs 10 us plus 1 us per 1000
// bytes of algorithm bandwidth at 2 ranks (busbw 1 GB/s * factor 1).
func profile1() *Profile {
	return &Profile{Format: Format, Ranks: 2, Curves: []Curve{
		{Collective: "allreduce", Segments: []Segment{{AlphaUs: 10, BusGBs: 1}}},
		{Collective: "broadcast", Segments: []Segment{{AlphaUs: 5, BusGBs: 2}, {FromBytes: 1 << 20, AlphaUs: 50, BusGBs: 4}}},
	}}
}

func TestCostByHand(t *testing.T) {
	p := profile1()
	cases := []struct {
		coll  string
		bytes int64
		n     int
		want  float64
	}{
		// 10 + 1e6 * (2*1/2) / (1 * 1e3) = 1010 us.
		{"allreduce", 1_000_000, 2, 1010},
		// 4 ranks: factor 2*3/4 = 1.5: 10 + 1500.
		{"allreduce", 1_000_000, 4, 1510},
		// Below the breakpoint: 5 + 1000/(2e3) = 5.5.
		{"broadcast", 1000, 4, 5.5},
		// Above it: 50 + 2^21/(4e3).
		{"broadcast", 2 << 20, 4, 50 + float64(2<<20)/4e3},
	}
	for _, c := range cases {
		got, err := p.CollectiveUs(c.coll, "sum", "f32", c.bytes, c.n)
		if err != nil || !near(got, c.want, 1e-9) {
			t.Errorf("%s %d bytes on %d ranks: got %v, %v; want %v", c.coll, c.bytes, c.n, got, err, c.want)
		}
	}
	if _, err := p.CollectiveUs("allgather", "", "f32", 1, 2); err == nil || !strings.Contains(err.Error(), "no curve for allgather") {
		t.Errorf("a missing curve: got %v", err)
	}
	// NCCL's ring steps: 2(n-1) for allreduce.
	s := Segment{AlphaUs: 8.4, StepUs: 3.4}
	if got := s.Us("allreduce", 0, 8); !near(got, 8.4+14*3.4, 1e-12) {
		t.Errorf("latency with steps: got %v", got)
	}
}

func TestCurveChoice(t *testing.T) {
	p := &Profile{Format: Format, Curves: []Curve{
		{Collective: "allreduce", Segments: []Segment{{AlphaUs: 1}}},
		{Collective: "allreduce", Op: "sum", DType: "f16", Segments: []Segment{{AlphaUs: 2}}},
		{Collective: "allreduce", DType: "f32", Segments: []Segment{{AlphaUs: 3}}},
	}}
	for _, c := range []struct {
		op, dt string
		want   float64
	}{{"sum", "f16", 2}, {"sum", "f32", 3}, {"max", "f16", 2}, {"avg", "i8", 1}, {"sum", "bf16", 1}} {
		got, _ := p.CollectiveUs("allreduce", c.op, c.dt, 0, 2)
		if got != c.want {
			t.Errorf("%s %s: got the curve of %v, want %v", c.op, c.dt, got, c.want)
		}
	}
	// A curve's name leaves out what it does not narrow.
	for _, c := range []struct {
		c    Curve
		want string
	}{{p.Curves[0], "allreduce"}, {p.Curves[1], "allreduce sum f16"}, {p.Curves[2], "allreduce f32"}, {Curve{Collective: "allgather", DType: "bf16"}, "allgather bf16"}} {
		if got := c.c.Key(); got != c.want {
			t.Errorf("key %q, want %q", got, c.want)
		}
	}
}

func TestFitRecoversSegments(t *testing.T) {
	// Two regimes: 5 us + 2 GB/s algbw below 64 KiB, 40 us + 8 GB/s from it.
	var pts []Point
	for b := int64(4); b <= 64<<20; b *= 4 {
		us := 5 + float64(b)/2e3
		if b >= 64<<10 {
			us = 40 + float64(b)/8e3
		}
		pts = append(pts, Point{b, us})
	}
	segs, err := Fit("allreduce", 2, pts)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[1].FromBytes != 64<<10 {
		t.Fatalf("got segments %+v, want two split at 64 KiB", segs)
	}
	// At 2 ranks the bus factor is 1: busbw = algbw.
	if !near(segs[0].AlphaUs, 5, 1e-6) || !near(segs[0].BusGBs, 2, 1e-6) || !near(segs[1].AlphaUs, 40, 1e-6) || !near(segs[1].BusGBs, 8, 1e-6) {
		t.Errorf("got %+v", segs)
	}
	// One regime with noise stays one segment.
	pts = pts[:0]
	for i, b := 0, int64(4); b <= 64<<20; i, b = i+1, b*4 {
		noise := 1 + 0.03*float64(i%3-1)
		pts = append(pts, Point{b, (10 + float64(b)/4e3) * noise})
	}
	segs, err = Fit("allreduce", 4, pts)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 {
		t.Fatalf("noise got %d segments: %+v", len(segs), segs)
	}
	// busbw = algbw * 1.5 at 4 ranks.
	if !near(segs[0].BusGBs, 6, 0.05) || !near(segs[0].AlphaUs, 10, 0.1) {
		t.Errorf("got %+v, want alpha 10 us, busbw 6 GB/s", segs[0])
	}
	if _, err := Fit("allreduce", 2, []Point{{1, 0}}); err == nil {
		t.Error("a zero time fitted")
	}
}

func TestValidate(t *testing.T) {
	good := `{"format":"syncgen-profile/1","ranks":2,"collectives":[{"collective":"allreduce","segments":[{"from_bytes":0,"alpha_us":3,"busbw_gbs":1}]}]}`
	if _, err := ParseProfile([]byte(good)); err != nil {
		t.Fatalf("a good profile: %v", err)
	}
	bad := map[string]string{
		`{"format":"x","collectives":[]}`:                                                      "format",
		strings.Replace(good, "allreduce", "alltoall", 1):                                      "unknown collective",
		strings.Replace(good, `"from_bytes":0`, `"from_bytes":5`, 1):                           "first segment must start at 0",
		strings.Replace(good, `"alpha_us":3`, `"alpha_us":-3`, 1):                              "segment 0: alpha_us -3: want a finite time",
		strings.Replace(good, `"ranks":2`, `"rank":2`, 1):                                      "unknown field",
		`{"format":"syncgen-profile/1","ranks":2,"collectives":[]}`:                            "no collectives",
		strings.Replace(good, `"segments"`, `"segments":[],"x"`, 1):                            "unknown field",
		strings.Replace(good, `}]}]}`, `},{"from_bytes":0,"alpha_us":1,"busbw_gbs":1}]}]}`, 1): "not after segment",
		good + "\n" + good: fmt.Sprintf("byte %d: more after the profile's JSON object", len(good)+1),
		" \n":              "the file is empty, not a profile",
		strings.Replace(good, `"allreduce"`, `"allreduce","op":"summ"`, 1):    `collectives[0] (allreduce summ): unknown op "summ"; the ops are sum, avg, min, max, prod, wavg`,
		strings.Replace(good, `"allreduce"`, `"allreduce","op":"mean"`, 1):    `unknown op "mean" (did you mean "avg"?)`,
		strings.Replace(good, `"allreduce"`, `"allreduce","dtype":"fp32"`, 1): `collectives[0] (allreduce fp32): unknown dtype "fp32" (did you mean "f32"?); the dtypes are f64, f32, f16, bf16, i64, i32, i8, u8`,
		strings.Replace(good, `"allreduce"`, `"allreduce","dtype":"F16"`, 1):  `unknown dtype "F16" (did you mean "f16"?)`,
		strings.Replace(good, `"allreduce"`, `"allgather","op":"sum"`, 1):     `collectives[0] (allgather sum): op "sum" on allgather, which reduces nothing`,
		// A figure left out or null would decode as a silent 0.
		strings.Replace(good, `"ranks":2,`, ``, 1):                                  "no ranks: give the world size the profile was measured at",
		strings.Replace(good, `"alpha_us":3,`, ``, 1):                               "collectives[0] (allreduce): segment 0: no alpha_us: give the latency in microseconds",
		strings.Replace(good, `"alpha_us":3`, `"alpha_us":null`, 1):                 "segment 0: no alpha_us",
		strings.Replace(good, `,"busbw_gbs":1`, ``, 1):                              "segment 0: no busbw_gbs: give the bus bandwidth in GB/s, 0 for none",
		strings.Replace(good, `"from_bytes":0,`, ``, 1):                             "segment 0: no from_bytes",
		strings.Replace(good, `}]}]}`, `}],"points":[{"bytes":4}]}]}`, 1):           "collectives[0] (allreduce): point 0: a point needs bytes and us",
		strings.Replace(good, `}]}]}`, `}],"points":[{"us":null,"bytes":4}]}]}`, 1): "point 0: a point needs bytes and us",
	}
	for _, in := range []string{
		strings.Replace(good, `"allreduce"`, `"allreduce","op":"wavg","dtype":"bf16"`, 1),
		strings.Replace(good, `"allreduce"`, `"reducescatter","op":"max","dtype":"u8"`, 1),
		strings.Replace(good, `"allreduce"`, `"broadcast","dtype":"i64"`, 1),
		strings.Replace(good, `"ranks":2`, `"ranks":0`, 1),
		strings.Replace(good, `"busbw_gbs":1`, `"busbw_gbs":0,"step_us":0`, 1),
	} {
		if _, err := ParseProfile([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	if _, err := ParseProfile([]byte(good + " \n\t")); err != nil {
		t.Errorf("a profile and white space: %v", err)
	}
	for in, want := range bad {
		if _, err := ParseProfile([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error with %q", in, err, want)
		}
	}
}

// TestValidateBounds: figures that no machine has are refused with an
// error that names the curve, the segment (or point) and the field; the
// bounds themselves are accepted.
func TestValidateBounds(t *testing.T) {
	two := `{"format":"syncgen-profile/1","ranks":2,"mem_gbs":MEM,"collectives":[{"collective":"allreduce","segments":[` +
		`{"from_bytes":0,"alpha_us":3,"busbw_gbs":1},{"from_bytes":1024,"alpha_us":ALPHA,"step_us":STEP,"busbw_gbs":BW}],"points":[{"bytes":4,"us":US}]}]}`
	profile := func(field, v string) string {
		r := map[string]string{"MEM": "0", "ALPHA": "5", "STEP": "0", "BW": "2", "US": "4"}
		r[field] = v
		out := two
		for k, v := range r {
			out = strings.Replace(out, k, v, 1)
		}
		return out
	}
	for _, c := range []struct {
		field, value string
		want         string // "" accepts it
	}{
		{"ALPHA", "1e308", "collectives[0] (allreduce): segment 1: alpha_us 1e+308: more than an hour"},
		{"ALPHA", "3600000001", "segment 1: alpha_us 3.600000001e+09: more than an hour"},
		{"ALPHA", "3.6e9", ""},
		{"STEP", "1e10", "segment 1: step_us 1e+10: more than an hour"},
		{"BW", "1e-300", "segment 1: busbw_gbs 1e-300: below one byte a second"},
		{"BW", "1e-9", ""},
		{"BW", "0", ""},
		{"BW", "1e6", ""},
		{"BW", "1.5e6", "segment 1: busbw_gbs 1.5e+06: above a petabyte a second"},
		{"MEM", "1e-12", "mem_gbs 1e-12: below one byte a second"},
		{"MEM", "1e300", "mem_gbs 1e+300: above a petabyte a second"},
		{"US", "1e20", "point 0: us 1e+20: more than an hour"},
	} {
		_, err := ParseProfile([]byte(profile(c.field, c.value)))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v; want it accepted", c.field, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: got %v, want an error with %q", c.field, c.value, err, c.want)
		}
	}
}

// TestReplaySaturates: a profile that is valid but slow at these sizes
// and ranks, whose times pass what a time.Duration holds, gives an error,
// never a negative or wrapped time; the conversion itself saturates.
func TestReplaySaturates(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want time.Duration
	}{{1e308, Never}, {math.Inf(1), Never}, {math.NaN(), Never}, {-1e308, -Never}, {9.3e15, Never}, {1.5, 1500}} {
		if got := us(c.v); got != c.want {
			t.Errorf("us(%v) = %v, want %v", c.v, got, c.want)
		}
	}
	if add(Never, 1) != Never || add(Never-1, Never) != Never || add(-Never, -5) != -Never || add(2, 3) != 5 {
		t.Error("add does not saturate")
	}
	// 1 TiB at a byte a second is 35,000 years.
	slow := &Profile{Format: Format, Curves: []Curve{{Collective: "allreduce", Segments: []Segment{{AlphaUs: MaxLatencyUs, BusGBs: MinGBs}}}}}
	if err := slow.Validate(); err != nil {
		t.Fatal(err)
	}
	s := sched([]string{"compute", "comm"}, [][2]int64{{1 << 40, 0}}, []int64{1 << 40},
		Op{Kind: OpBackward, Stream: 0, Dur: ms(10)},
		Op{Kind: OpCollective, Stream: 1, Collective: "allreduce", After: AfterReady, Buckets: []int{0}},
		Op{Kind: OpCompute, Stream: 0, Dur: ms(1), After: AfterStream, AfterStream: 1})
	if pr, err := Replay(s, slow); err == nil || !strings.Contains(err.Error(), "does not end within 292 years") {
		t.Errorf("got %+v, %v; want an error", pr, err)
	}
	// The bounds at a size that fits: an hour of latency and a second a
	// byte for a megabyte, 11.6 days, positive.
	s.Tensors[0].Bytes, s.Buckets[0].Bytes = 1_000_000, 1_000_000
	pr, err := Replay(s, slow)
	if err != nil {
		t.Fatal(err)
	}
	if want := ms(10) + us(MaxLatencyUs) + time.Duration(1e15); pr.Rows[0].End != want {
		t.Errorf("row ends at %v, want %v", pr.Rows[0].End, want)
	}
}

func TestBuiltin(t *testing.T) {
	p, ok := Builtin("nvlink-h100", 8)
	if !ok {
		t.Fatal("no nvlink-h100")
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	c, _ := p.Curve("allreduce", "sum", "f32")
	// Small: LL, 3.6 + 14*0.47 us and a quarter of 450 GB/s.
	if got, want := c.Us(8, 8), 3.6+14*0.47+8*1.75/(112.5e3); !near(got, want, 1e-9) {
		t.Errorf("8 bytes: got %v, want %v", got, want)
	}
	// Large: Simple, 8.4 + 14*3.4 us and 450 GB/s.
	if got, want := c.Us(1<<30, 8), 8.4+14*3.4+float64(1<<30)*1.75/450e3; !near(got, want, 1e-9) {
		t.Errorf("1 GiB: got %v, want %v", got, want)
	}
	if _, _, err := Resolve("no-such-fabric", 8); err == nil || !strings.Contains(err.Error(), "built-in profiles are") {
		t.Errorf("an unknown name: %v", err)
	}
}

// sched builds a schedule of tensors (bytes, bucket) over streams.
func sched(streams []string, tensors [][2]int64, buckets []int64, step ...Op) *Schedule {
	s := &Schedule{Ranks: 2, Streams: streams, Step: step}
	for _, t := range tensors {
		s.Tensors = append(s.Tensors, Tensor{Bytes: t[0], Bucket: int(t[1])})
	}
	for i, b := range buckets {
		s.Buckets = append(s.Buckets, Bucket{Name: string(rune('a' + i)), Bytes: b, DType: "f32"})
	}
	return s
}

func ms(v float64) time.Duration { return time.Duration(math.Round(v * 1e6)) }

func TestReplayOneBucket(t *testing.T) {
	// backward 10 ms; one bucket of 1 MB after ready: 10 us + 1000 us.
	s := sched([]string{"compute", "comm"}, [][2]int64{{1_000_000, 0}}, []int64{1_000_000},
		Op{Kind: OpBackward, Stream: 0, Dur: ms(10)},
		Op{Kind: OpCollective, Stream: 1, Collective: "allreduce", Op: "sum", After: AfterReady, Buckets: []int{0}},
		Op{Kind: OpWait, Stream: 1})
	pr, err := Replay(s, profile1())
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Rows) != 1 || pr.Rows[0].Start != ms(10) || pr.Rows[0].Time() != ms(1.01) {
		t.Fatalf("rows %+v", pr.Rows)
	}
	if pr.Step != ms(11.01) || pr.Compute != ms(10) || pr.Exposed != ms(1.01) || pr.Hidden != 0 || pr.Overlap != 0 {
		t.Errorf("got %+v", pr)
	}
}

func TestReplayOverlapTwoStreams(t *testing.T) {
	// Tensors t0 (3 MB) and t1 (1 MB), buckets b0={t0}, b1={t1};
	// backward 8 ms: t1 ready at 2 ms, t0 at 8 ms. Each bucket's
	// allreduce on its own stream, after ready; the bandwidth is shared.
	// b1 runs 2 .. 3.01 ms; b0 8 .. 11.01 ms.
	s := sched([]string{"compute", "c1", "c2"}, [][2]int64{{3_000_000, 0}, {1_000_000, 1}}, []int64{3_000_000, 1_000_000},
		Op{Kind: OpBackward, Stream: 0, Dur: ms(8)},
		Op{Kind: OpCollective, Stream: 1, Collective: "allreduce", After: AfterReady, Buckets: []int{1}, ID: 0},
		Op{Kind: OpCollective, Stream: 2, Collective: "allreduce", After: AfterReady, Buckets: []int{0}, ID: 1},
		Op{Kind: OpWait, Stream: 1}, Op{Kind: OpWait, Stream: 2})
	pr, err := Replay(s, profile1())
	if err != nil {
		t.Fatal(err)
	}
	if pr.Rows[0].Start != ms(2) || pr.Rows[0].End != ms(3.01) || pr.Rows[1].Start != ms(8) || pr.Rows[1].End != ms(11.01) {
		t.Fatalf("rows %+v", pr.Rows)
	}
	// Hidden: b1 wholly (1.01 ms); step 11.01, exposed 3.01.
	if pr.Hidden != ms(1.01) || pr.Comm != ms(4.02) || pr.Step != ms(11.01) || pr.Exposed != ms(3.01) {
		t.Errorf("got %+v", pr)
	}
	if !near(pr.Overlap, 100*1.01/4.02, 1e-9) {
		t.Errorf("overlap %v", pr.Overlap)
	}
}

func TestReplaySharedBandwidth(t *testing.T) {
	// Two 1 MB allreduces on two streams at once, no dependency: the
	// second's bandwidth term waits for the first's: both latencies run at
	// 0, the bandwidth terms one after the other.
	s := sched([]string{"c1", "c2"}, [][2]int64{{1_000_000, 0}, {1_000_000, 1}}, []int64{1_000_000, 1_000_000},
		Op{Kind: OpCollective, Stream: 0, Collective: "allreduce", Buckets: []int{0}},
		Op{Kind: OpCollective, Stream: 1, Collective: "allreduce", Buckets: []int{1}, ID: 1})
	pr, err := Replay(s, profile1())
	if err != nil {
		t.Fatal(err)
	}
	if pr.Rows[0].End != ms(1.01) || pr.Rows[1].Start != 0 || pr.Rows[1].End != ms(2.01) || pr.Step != ms(2.01) {
		t.Errorf("rows %+v step %v", pr.Rows, pr.Step)
	}
}

func TestReplayGroupAndWait(t *testing.T) {
	// compute 1 ms on s0; wait s0 (host at 1 ms); a group of two 1 MB
	// allreduces on s1: both start at 1 ms, pay one latency (10 us) and
	// both bandwidth terms (2 ms): each row the group's span 1 .. 3.01
	// ms; then compute 2 ms on s0 after s1: 3.01 .. 5.01.
	s := sched([]string{"s0", "s1"}, [][2]int64{{1_000_000, 0}, {1_000_000, 1}}, []int64{1_000_000, 1_000_000},
		Op{Kind: OpCompute, Stream: 0, Dur: ms(1)},
		Op{Kind: OpWait, Stream: 0},
		Op{Kind: OpGroup, Body: []Op{
			{Kind: OpCollective, Stream: 1, Collective: "allreduce", Buckets: []int{0}, ID: 0},
			{Kind: OpCollective, Stream: 1, Collective: "allreduce", Buckets: []int{1}, ID: 1},
		}},
		Op{Kind: OpCompute, Stream: 0, Dur: ms(2), After: AfterStream, AfterStream: 1})
	pr, err := Replay(s, profile1())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range pr.Rows {
		if !r.Group || r.Start != ms(1) || r.End != ms(3.01) {
			t.Errorf("group row %+v", r)
		}
	}
	if pr.Step != ms(5.01) || pr.Compute != ms(3) || pr.Comm != ms(2.01) || pr.Hidden != 0 {
		t.Errorf("got %+v", pr)
	}
}

func TestReplayUpdateAndCasts(t *testing.T) {
	// A bucket whose tensors are cast (CastBytes 2 MB each way at
	// 1 GB/s: 2 ms each), then an update after synced of 4 MB (4 ms).
	s := sched([]string{"comm"}, [][2]int64{{1_000_000, 0}}, []int64{500_000},
		Op{Kind: OpCollective, Stream: 0, Collective: "allreduce", Buckets: []int{0}},
		Op{Kind: OpUpdate, Stream: 0, After: AfterSynced, Buckets: []int{0}, Bytes: []int64{4_000_000}})
	s.Buckets[0].CastBytes = 2_000_000
	p := profile1()
	if pr, err := Replay(s, p); err != nil || len(pr.Notes) != 2 || pr.Step != ms(0.51) {
		t.Fatalf("without mem_gbs: %+v %v", pr, err)
	}
	p.MemGBs = 1
	pr, err := Replay(s, p)
	if err != nil {
		t.Fatal(err)
	}
	// cast in 2, allreduce 0.51 (10 us + 500 us), cast out 2, update 4.
	if pr.Rows[0].Start != ms(2) || pr.Rows[0].End != ms(2.51) || pr.Step != ms(8.51) || len(pr.Notes) != 0 {
		t.Errorf("got rows %+v step %v notes %v", pr.Rows, pr.Step, pr.Notes)
	}
}

func TestReplayBadIndex(t *testing.T) {
	s := sched([]string{"s"}, nil, nil, Op{Kind: OpCollective, Stream: 0, Collective: "allreduce", Buckets: []int{3}})
	if _, err := Replay(s, profile1()); err == nil {
		t.Error("a missing bucket replayed")
	}
}

func TestReplayBandwidthInTimeOrder(t *testing.T) {
	// compute 2 ms on s0; a 1 MB allreduce on s1 after s0 (2 .. 3.01
	// ms); then, later in program order, one on s2 with nothing to wait
	// for: it takes the idle bandwidth first (0 .. 1.01 ms) instead of
	// queueing behind the other's transfer.
	s := sched([]string{"s0", "s1", "s2"}, [][2]int64{{1_000_000, 0}, {1_000_000, 1}}, []int64{1_000_000, 1_000_000},
		Op{Kind: OpCompute, Stream: 0, Dur: ms(2)},
		Op{Kind: OpCollective, Stream: 1, Collective: "allreduce", Buckets: []int{0}, After: AfterStream, AfterStream: 0},
		Op{Kind: OpCollective, Stream: 2, Collective: "allreduce", Buckets: []int{1}, ID: 1})
	pr, err := Replay(s, profile1())
	if err != nil {
		t.Fatal(err)
	}
	if pr.Rows[0].Start != ms(2) || pr.Rows[0].End != ms(3.01) || pr.Rows[1].Start != 0 || pr.Rows[1].End != ms(1.01) {
		t.Errorf("rows %+v", pr.Rows)
	}
	// Two transfers that overlap in time: the one issued first (s1's,
	// 2 ms from 0.01 ms) keeps its spans; s2's 1 ms one, ready at 0.51 ms
	// (latency 10 us after a 0.5 ms compute), takes what is left: 2.01 ..
	// 3.01 ms.
	s = sched([]string{"s0", "s1", "s2"}, [][2]int64{{2_000_000, 0}, {1_000_000, 1}}, []int64{2_000_000, 1_000_000},
		Op{Kind: OpCollective, Stream: 1, Collective: "allreduce", Buckets: []int{0}},
		Op{Kind: OpCompute, Stream: 2, Dur: ms(0.5)},
		Op{Kind: OpCollective, Stream: 2, Collective: "allreduce", Buckets: []int{1}, ID: 1})
	if pr, err = Replay(s, profile1()); err != nil {
		t.Fatal(err)
	}
	if pr.Rows[0].End != ms(2.01) || pr.Rows[1].Start != ms(0.5) || pr.Rows[1].End != ms(3.01) {
		t.Errorf("rows %+v", pr.Rows)
	}
}

// TestReplayAccumulate: a step of 3 micro-batches runs its backward three
// times and its collective once, after the last: 30 ms, then 1.01 ms.
func TestReplayAccumulate(t *testing.T) {
	step := []Op{
		{Kind: OpBackward, Stream: 0, Dur: ms(10)},
		{Kind: OpCollective, Stream: 1, Collective: "allreduce", Op: "sum", After: AfterReady, Buckets: []int{0}},
		{Kind: OpWait, Stream: 1},
	}
	if got := Accumulate(step, 1); len(got) != 3 {
		t.Fatalf("one micro-batch: %d ops, want the step's 3", len(got))
	}
	s := sched([]string{"compute", "comm"}, [][2]int64{{1_000_000, 0}}, []int64{1_000_000}, Accumulate(step, 3)...)
	if len(s.Step) != 5 {
		t.Fatalf("3 micro-batches: %d ops, want 2 backwards and the step's 3", len(s.Step))
	}
	pr, err := Replay(s, profile1())
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Rows) != 1 || pr.Rows[0].Start != ms(30) || pr.Step != ms(31.01) || pr.Compute != ms(30) {
		t.Errorf("rows %+v, step %v, compute %v; want the allreduce from 30 ms, a step of 31.01 ms", pr.Rows, pr.Step, pr.Compute)
	}
}

// TestOneRankCost: at one rank a collective is a copy: the cost model
// still pays its bytes at the profile's bandwidth (bus factor 1), though
// the bus bandwidth reported for it is 0 (BusFactor).
func TestOneRankCost(t *testing.T) {
	p := profile1()
	if got, err := p.CollectiveUs("allreduce", "sum", "f32", 1_000_000, 1); err != nil || !near(got, 1010, 1e-9) {
		t.Errorf("1 MB on one rank: %v us, %v; want 1010", got, err)
	}
}

// TestResolveOtherRanksWarning: a profile measured at another number of
// ranks is used with a warning that says what happens to its figures: a
// calibrated profile (no step_us) keeps its latencies as measured, one
// with step_us scales them, one measured at one rank has a copy's figures.
func TestResolveOtherRanksWarning(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ranks int, step float64) string {
		p := &Profile{Format: Format, Ranks: ranks, Curves: []Curve{{Collective: "allreduce", Segments: []Segment{{AlphaUs: 5, StepUs: step, BusGBs: 2}}}}}
		data, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct {
		name      string
		ranks, n  int
		step      float64
		want, not string
	}{
		{"cal2.json", 2, 8, 0, "measured at 2 ranks and is used for 8: its latencies (alpha_us) are used as measured at 2 ranks, unscaled (it has no latency per ring step, step_us, to scale them by), and its bus bandwidths are used as measured, the bytes weighted by the bus factor at 8 ranks", "grow"},
		{"cal1e9.json", 1_000_000_000, 8, 0, "used as measured at 1000000000 ranks, unscaled", "grow"},
		{"steps.json", 2, 8, 3.4, "its latencies grow with the ring's steps at 8 ranks (step_us)", "unscaled"},
		{"one.json", 1, 4, 0, "measured at 1 rank and is used for 4: at one rank a collective moves nothing between ranks, so its latencies and bandwidths are a memory copy's, not the network's", "unscaled"},
		{"same.json", 8, 8, 0, "", ""},
		{"any.json", 0, 8, 0, "", ""},
	} {
		path := write(c.name, c.ranks, c.step)
		_, warning, err := Resolve(path, c.n)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.want == "" && warning != "" || !strings.Contains(warning, c.want) || (c.not != "" && strings.Contains(warning, c.not)) {
			t.Errorf("%s: warning %q; want %q without %q", c.name, warning, c.want, c.not)
		}
	}
}

// TestUpdateBytesSaturates: the bytes of an update of a tensor the checker
// accepts (2e18 elements, AdamW) wrapped around int64 and predicted a
// short update; they saturate, and Replay then refuses to predict them.
func TestUpdateBytesSaturates(t *testing.T) {
	for _, c := range []struct {
		states      int
		elems, grad int64
		want        int64
	}{
		{2, 1000, 4000, 4000 + 1000*4*2*3},
		{0, 1 << 20, 1 << 21, 1<<21 + 1<<23},
		{2, 2e18, 8e18, math.MaxInt64},
		{1, 1 << 62, 0, math.MaxInt64},
		{0, 1e18, math.MaxInt64 - 1, math.MaxInt64},
	} {
		if got := UpdateBytes(c.states, c.elems, c.grad); got != c.want {
			t.Errorf("UpdateBytes(%d, %d, %d) = %d, want %d", c.states, c.elems, c.grad, got, c.want)
		}
	}
	if SatAdd(math.MaxInt64, 1) != math.MaxInt64 || SatAdd(2, 3) != 5 || SatMul(1<<40, 1<<40) != math.MaxInt64 || SatMul(0, 5) != 0 || SatMul(6, 7) != 42 {
		t.Errorf("SatAdd, SatMul")
	}
	s := &Schedule{Ranks: 2, Streams: []string{"s"}, Buckets: []Bucket{{Name: "g", Bytes: 8e18, DType: "f32"}},
		Step: []Op{{Kind: OpUpdate, Buckets: []int{0}, Bytes: []int64{UpdateBytes(2, 2e18, 8e18)}}}}
	p, _ := Builtin("ib-hdr", 2)
	if _, err := Replay(s, p); err == nil || !strings.Contains(err.Error(), "the updates of this step move more than 9223372036854775807 bytes") {
		t.Errorf("Replay of a saturated update: %v", err)
	}
}

// A prediction says where it rests on figures the profile did not measure
// for it: a curve of another operator or dtype, taken for want of one of
// its own, and sizes beyond the largest its points measured. A curve
// measured for the collective, within its points, gives no note; nor does
// a curve without points (a built-in one, a model rather than a sweep).
func TestReplayNotesUnmeasured(t *testing.T) {
	step := func(op string) []Op {
		return []Op{{Kind: OpBackward, Stream: 0, Dur: ms(1)},
			{Kind: OpCollective, Stream: 1, Collective: "allreduce", Op: op, After: AfterReady, Buckets: []int{0, 1}},
			{Kind: OpWait, Stream: 1}}
	}
	measured := &Profile{Format: Format, Ranks: 2, Curves: []Curve{{Collective: "allreduce", Op: "sum", DType: "f32",
		Segments: []Segment{{AlphaUs: 10, BusGBs: 1}}, Points: []Point{{Bytes: 4, Us: 10}, {Bytes: 4096, Us: 14}}}}}
	for _, c := range []struct {
		op    string
		bytes []int64
		p     *Profile
		want  []string
	}{
		{"sum", []int64{4096, 1024}, measured, nil},
		{"sum", []int64{4096, 1024}, profile1(), nil},
		{"avg", []int64{3 << 20, 8192}, measured, []string{
			"allreduce avg f32: the profile has no curve of its own; predicted with allreduce sum f32's (calibrate --plan with this plan measures it)",
			"allreduce sum f32: collectives up to 3.0 MiB, beyond the largest size the profile measured (4.0 KiB): its last segment extrapolated; calibrate with a larger --max"}},
	} {
		s := sched([]string{"compute", "comm"}, [][2]int64{{c.bytes[0], 0}, {c.bytes[1], 1}}, c.bytes, step(c.op)...)
		pr, err := Replay(s, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pr.Notes, c.want) {
			t.Errorf("%s of %v: notes\n%q\nwant\n%q", c.op, c.bytes, pr.Notes, c.want)
		}
	}
}

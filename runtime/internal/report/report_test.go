package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// reportPlan is a small plan for the report's tests: two f32 buckets of
// 10 elements; the step reduces a, then gathers b (padded to 12 elements at
// 3 ranks) and broadcasts a from rank 1 in a group.
func reportPlan(t *testing.T) (*plan.Plan, *plan.Program) {
	t.Helper()
	p := &plan.Plan{
		Name: "r", Source: "r.sync",
		Tensors: []plan.Tensor{{Name: "x", DType: elem.F32, Shape: []int64{10}, Bucket: 0}, {Name: "y", DType: elem.F32, Shape: []int64{10}, Bucket: 1}},
		Streams: []plan.Stream{{Name: "compute"}, {Name: "comm"}},
		Buckets: []plan.Bucket{{Name: "a", Wire: elem.F32, Elems: 10, Tensors: []int{0}}, {Name: "b", Wire: elem.F32, Elems: 10, Tensors: []int{1}}},
		Run:     plan.Run{Steps: 2, Warmup: 0, CheckEvery: 1},
	}
	prog, err := plan.Record(nil, func(s *plan.Recorder) {
		s.Backward("r.sync:1:1", 0, time.Millisecond)
		s.AllReduce("r.sync:2:1", 1, plan.Avg, plan.AfterReady(), 0)
		s.Group("r.sync:3:1", func() {
			s.AllGather("r.sync:4:1", 1, plan.AfterReady(), 1)
			s.Broadcast("r.sync:5:1", 1, 1, plan.AfterReady(), 0)
		})
		s.Wait("r.sync:6:1", 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, prog
}

// TestBuildReportFigures computes a report of two ranks by hand: a row's
// time is the maximum over ranks of the means, algbw its bytes over that
// time, busbw algbw times nccl-tests' factor; a step's time is the maximum
// over ranks; compute, communication and overlap are means over ranks and
// steps; exposed communication is the mean step time minus compute.
func TestBuildReportFigures(t *testing.T) {
	p, prog := reportPlan(t)
	ms := time.Millisecond
	var all [][]byte
	for rank := 0; rank < 2; rank++ {
		res := result.New(p, prog)
		res.Checked = 2
		for i := range res.Rows {
			r := &res.Rows[i]
			r.Bytes = 40
			if r.Coll == plan.CollAllGather {
				r.Bytes = 48
			}
			// rank 0: 1 and 3 ms (mean 2); rank 1: 4 and 4 ms (mean 4).
			if rank == 0 {
				r.Times = []time.Duration{1 * ms, 3 * ms}
			} else {
				r.Times = []time.Duration{4 * ms, 4 * ms}
			}
		}
		res.Wrong[0] = int64(rank) // one wrong element on rank 1
		res.Steps = []result.StepStats{
			{Step: time.Duration(10+rank) * ms, Compute: 8 * ms, Comm: 4 * ms, Hidden: 2 * ms},
			{Step: time.Duration(20-rank) * ms, Compute: 6 * ms, Comm: 2 * ms, Hidden: 0},
		}
		all = append(all, encodeFigures(res, len(p.Buckets)))
	}
	// Rank 0's own results give the shape: rows and the number of steps.
	res := result.New(p, prog)
	res.Checked = 2
	res.Steps = make([]result.StepStats, 2)
	rep := buildReport(p, prog, []int64{10, 10}, res, all)
	if len(rep.rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rep.rows))
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	for _, r := range rep.rows {
		if r.time != 4*ms {
			t.Errorf("row %d: time %v, want the slower rank's mean 4ms", r.ID, r.time)
		}
		alg := float64(r.Bytes) / 4e6 // bytes per ns
		near("algbw", r.algbw, alg)
		factor := 1.0
		if r.Coll == plan.CollAllReduce {
			factor = 2 * 1.0 / 2
		} else if r.Coll == plan.CollAllGather {
			factor = 1.0 / 2
		}
		near("busbw", r.busbw, alg*factor)
	}
	if rep.rows[0].Group || !rep.rows[1].Group || !rep.rows[2].Group {
		t.Errorf("group marks %v %v %v, want false true true", rep.rows[0].Group, rep.rows[1].Group, rep.rows[2].Group)
	}
	// Bucket a's wrong count goes on its last row (the broadcast).
	if rep.rows[0].showWrong || !rep.rows[2].showWrong || rep.rows[2].wrong != 1 || rep.wrong != 1 {
		t.Errorf("wrong: rows %+v, total %d", rep.rows, rep.wrong)
	}
	if rep.stepTimes[0] != 11*ms || rep.stepTimes[1] != 20*ms {
		t.Errorf("step times %v, want the maximum over ranks [11ms 20ms]", rep.stepTimes)
	}
	if rep.mean != 15500*time.Microsecond || rep.p50 != 11*ms || rep.p90 != 20*ms {
		t.Errorf("mean %v p50 %v p90 %v", rep.mean, rep.p50, rep.p90)
	}
	if rep.compute != 7*ms || rep.comm != 3*ms || rep.exposed != 8500*time.Microsecond {
		t.Errorf("compute %v comm %v exposed %v", rep.compute, rep.comm, rep.exposed)
	}
	near("overlap", rep.overlap, 100*4.0/12)
}

// TestReportWithoutMeasuredSteps: --steps 0 still lists the rows with the
// bytes and group marks a measured run shows (padded for allgather), but
// dashes instead of a time and bandwidths of 0; the summary says that no
// step was checked rather than that checks are off.
func TestReportWithoutMeasuredSteps(t *testing.T) {
	p, prog := reportPlan(t)
	var all [][]byte
	for rank := 0; rank < 3; rank++ {
		all = append(all, encodeFigures(result.New(p, prog), len(p.Buckets)))
	}
	rep := buildReport(p, prog, []int64{10, 12}, result.New(p, prog), all)
	if rep.rows[1].Bytes != 48 || rep.rows[0].Bytes != 40 {
		t.Errorf("bytes %d and %d, want 40 and the padded 48", rep.rows[0].Bytes, rep.rows[1].Bytes)
	}
	if !rep.rows[1].Group {
		t.Errorf("the allgather in a group is not marked")
	}
	e := &Run{Plan: p, Prog: prog, Ranks: 3}
	var out bytes.Buffer
	Print(&out, withFlags(e, Run{CheckEvery: 1}), rep)
	text := out.String()
	for _, want := range []string{"allgather*", "0 checks (no step ran)"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range []string{"0.000", "checks off", "step time"} {
		if strings.Contains(text, bad) {
			t.Errorf("report has %q:\n%s", bad, text)
		}
	}
	out.Reset()
	Print(&out, withFlags(e, Run{CheckEvery: 0}), rep)
	if !strings.Contains(out.String(), "# checks off") {
		t.Errorf("--check off: %s", out.String())
	}
	// Steps that ran without a check (a step without collectives) are
	// not "no step ran".
	out.Reset()
	Print(&out, withFlags(e, Run{CheckEvery: 1, Warmup: 2}), rep)
	if !strings.Contains(out.String(), "0 checks (the step has no collective to check)") {
		t.Errorf("warm-up steps without checks: %s", out.String())
	}
}

// TestReportWithoutMeasuredStepsPaddedBucket: with --steps 0, an allreduce
// of a bucket that an allgather pads showed the padded buffer's bytes (48),
// where a measured run shows the bytes it moves (40).
func TestReportWithoutMeasuredStepsPaddedBucket(t *testing.T) {
	p := &plan.Plan{
		Name: "r", Source: "r.sync",
		Tensors: []plan.Tensor{{Name: "y", DType: elem.F32, Shape: []int64{10}, Bucket: 0}},
		Streams: []plan.Stream{{Name: "compute"}, {Name: "comm"}},
		Buckets: []plan.Bucket{{Name: "b", Wire: elem.F32, Elems: 10, Tensors: []int{0}}},
		Run:     plan.Run{Steps: 0, Warmup: 0, CheckEvery: 1},
	}
	prog, err := plan.Record(nil, func(s *plan.Recorder) {
		s.Backward("r.sync:1:1", 0, time.Millisecond)
		s.AllReduce("r.sync:2:1", 1, plan.Sum, plan.AfterReady(), 0)
		s.AllGather("r.sync:3:1", 1, plan.AfterStream(1), 0)
		s.ReduceScatter("r.sync:4:1", 1, plan.Sum, plan.AfterStream(1), 0)
		s.Broadcast("r.sync:5:1", 1, 0, plan.AfterStream(1), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	var all [][]byte
	for rank := 0; rank < 3; rank++ {
		all = append(all, encodeFigures(result.New(p, prog), len(p.Buckets)))
	}
	rep := buildReport(p, prog, []int64{12}, result.New(p, prog), all)
	for i, want := range []int64{40, 48, 48, 40} {
		if rep.rows[i].Bytes != want {
			t.Errorf("row %d (%s): %d bytes, want %d", i, rep.rows[i].Coll, rep.rows[i].Bytes, want)
		}
	}
}

// TestReportGroupFootnote: the footnote says what a grouped row's
// bandwidth is (the bucket's bytes over the group's time).
func TestReportGroupFootnote(t *testing.T) {
	p, prog := reportPlan(t)
	res := result.New(p, prog)
	res.Checked = 1
	for i := range res.Rows {
		res.Rows[i].Times = []time.Duration{time.Millisecond}
	}
	res.Steps = []result.StepStats{{Step: 2 * time.Millisecond}}
	rep := buildReport(p, prog, []int64{10, 10}, res, [][]byte{encodeFigures(res, 2)})
	var out bytes.Buffer
	Print(&out, withFlags(&Run{Plan: p, Prog: prog, Ranks: 1}, Run{CheckEvery: 1}), rep)
	if !strings.Contains(out.String(), "algbw and busbw are this bucket's bytes over that time") {
		t.Errorf("footnote:\n%s", out.String())
	}
}

// TestJSONEmptyLists: lists are [] rather than null when there are no rows
// or no measured steps.
func TestJSONEmptyLists(t *testing.T) {
	p := &plan.Plan{Name: "e", Source: "e.sync", Streams: []plan.Stream{{Name: "compute"}}}
	e := &Run{Plan: p, Ranks: 1}
	data, err := json.Marshal(makeJSON(e, &Report{}, &Info{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"buckets":[]`, `"step_ms":[]`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s: %s", want, data)
		}
	}
}

// TestTraceEventsRoot: a broadcast's or reduce's trace event names its
// root.
func TestTraceEventsRoot(t *testing.T) {
	p, prog := reportPlan(t)
	e := &Run{Plan: p, Prog: prog, Ranks: 2}
	recs := []result.Traced{
		{Step: 0, R: result.Record{Kind: result.Collective, Stream: 1, Name: "a", Bucket: 0, ID: 2, Coll: plan.CollBroadcast, T0: 0, T1: time.Microsecond}},
		{Step: 0, R: result.Record{Kind: result.Collective, Stream: 1, Name: "a", Bucket: 0, ID: 0, Coll: plan.CollAllReduce, Op: plan.Avg, T0: 0, T1: time.Microsecond}},
	}
	evs := traceEvents(e, recs)
	if root, ok := evs[0].Args["root"]; !ok || root != 1 {
		t.Errorf("broadcast event args %v, want root 1", evs[0].Args)
	}
	if _, ok := evs[1].Args["root"]; ok {
		t.Errorf("allreduce event args %v have a root", evs[1].Args)
	}
	// A complete event of duration 0 still has its "dur" (it had none,
	// and the format requires one), and a metadata event has none.
	evs = traceEvents(e, []result.Traced{{Step: 1, R: result.Record{Kind: result.Wait, Stream: 1, Name: "wait comm", Bucket: -1, T0: time.Millisecond, T1: time.Millisecond}}})
	data, err := json.Marshal(append(evs, traceEvent{Name: "thread_name", Ph: "M", Args: map[string]any{"name": "host"}}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"ts":1000,"dur":0,`) || strings.Count(string(data), `"dur"`) != 1 {
		t.Errorf("a wait of duration 0 and a metadata event: %s", data)
	}
}

// TestProgressClearsItsLine: done blanks the whole of the longest line
// drawn, however long it grew.
func TestProgressClearsItsLine(t *testing.T) {
	var out bytes.Buffer
	p := &Progress{on: true, start: time.Now(), out: &out}
	p.Update(123456, 123456)
	drawn := out.Len() - 1 // without the leading \r
	out.Reset()
	p.Done()
	if got := strings.Count(out.String(), " "); got < drawn {
		t.Errorf("done cleared %d columns of a %d-column line", got, drawn)
	}
}

// TestRootOutsideWorldMessage: a root outside the world names the
// statement, its buckets, the root and what to do, before anything runs.
func TestRootOutsideWorldMessage(t *testing.T) {
	p, prog := reportPlan(t)
	if err := prog.Validate(p, 2); err != nil {
		t.Fatalf("root 1 on 2 ranks: %v", err)
	}
	err := prog.Validate(p, 1)
	want := "r.sync:5:1: broadcast of bucket \"a\" from rank 1: root 1 is outside the world of 1 rank (ranks 0..0); run with at least 2 ranks (mpirun -np 2), or change `from 1` in the plan"
	if err == nil || err.Error() != want {
		t.Errorf("root 1 on 1 rank:\n got %v\nwant %s", err, want)
	}
	p.Buckets = append(p.Buckets, plan.Bucket{Name: "c", Wire: elem.F32, Elems: 1}, plan.Bucket{Name: "d", Wire: elem.F32, Elems: 1})
	if got := plan.BucketList(p, []int{1, 0, 2, 3}); got != `buckets "b", "a", "c" and 1 more` {
		t.Errorf("plan.BucketList: %s", got)
	}
}

// TestTraceFits: a --trace is refused at start-up when rank 0 could not
// gather and write it (a huge --warmup kept every warm-up step's events
// too), with the number of steps that fit; that number passes.
func TestTraceFits(t *testing.T) {
	p, prog := reportPlan(t)
	per := traceStepBytes(p, prog)
	// 1 barrier, backward and 2 gradients, 3 collective buckets, 1 wait.
	if per < 8*110 || per > 8*300 {
		t.Errorf("a step of 8 events estimated at %d bytes", per)
	}
	if err := CheckTraceFits(p, prog, 100000, 10, 4); err != nil {
		t.Errorf("100010 steps: %v", err)
	}
	err := CheckTraceFits(p, prog, 20, 2000000000, 4)
	if err == nil || !strings.Contains(err.Error(), "--trace of 2000000020 steps (2000000000 warm-up, 20 measured)") {
		t.Fatalf("2e9 warm-up steps: %v", err)
	}
	fit := maxTraceBytes / (per * 4)
	if !strings.Contains(err.Error(), fmt.Sprintf("trace at most %d steps", fit)) {
		t.Errorf("no limit %d in: %v", fit, err)
	}
	if err := CheckTraceFits(p, prog, int(fit), 0, 4); err != nil {
		t.Errorf("the limit itself: %v", err)
	}
	if err := CheckTraceFits(p, prog, int(elem.InitStep), 0, 1<<20); err == nil {
		t.Errorf("the most steps on 2^20 ranks passed")
	}
}

// TestTraceFileIsJSON: the trace file is JSON whatever the plan's name and
// source hold (Go's %q wrote a control character as \x01).
func TestTraceFileIsJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	p := &plan.Plan{Name: "odd\x01name", Source: "dir/\x7f\xffplan.sync"}
	parts := [][]byte{[]byte(`[{"name":"a","ph":"X","ts":0,"pid":0,"tid":1}]`), []byte(`[]`), []byte(`[{"name":"b","ph":"X","ts":1,"pid":2,"tid":1}]`)}
	if err := writeTraceFile(path, nil, p, 3, parts); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		OtherData   map[string]any   `json:"otherData"`
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	if tr.OtherData["program"] != "odd\x01name" || tr.OtherData["ranks"] != 3.0 || len(tr.TraceEvents) != 2 {
		t.Errorf("trace: %+v", tr)
	}
}

// namesPlan is a plan whose buckets have names that fmt's padding, which
// counts runes, misaligns: East Asian wide characters (two columns each),
// a bidirectional override and an escape sequence (which act on the
// terminal), a combining mark (no column), and a wide name too long for
// the column. Each bucket holds one f32 tensor of 10 elements and is
// all-reduced once a step.
func namesPlan(t *testing.T, names ...string) (*plan.Plan, *plan.Program) {
	t.Helper()
	p := &plan.Plan{Name: "n", Source: "n.sync", Streams: []plan.Stream{{Name: "comm"}}, Run: plan.Run{Steps: 1, CheckEvery: 1}}
	for i, name := range names {
		p.Tensors = append(p.Tensors, plan.Tensor{Name: name, DType: elem.F32, Shape: []int64{10}, Bucket: i})
		p.Buckets = append(p.Buckets, plan.Bucket{Name: name, Wire: elem.F32, Elems: 10, Tensors: []int{i}})
	}
	prog, err := plan.Record(nil, func(s *plan.Recorder) {
		for i := range names {
			s.AllReduce(plan.Src(fmt.Sprintf("n.sync:%d:1", i+1)), 0, plan.Sum, plan.After{}, i)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, prog
}

// TestReportTableNames: the table pads names to 24 terminal columns, not
// runes, escapes characters that do not print (as \u202e), and cuts a name
// wider than the column between characters; the JSON file keeps the
// names as they are.
func TestReportTableNames(t *testing.T) {
	names := []string{"日本語テンソル", "a\u202eb", "\x1b[31mred", "e\u0301", "日本語テンソル日本語テンソル", "plain"}
	p, prog := namesPlan(t, names...)
	res := result.New(p, prog)
	res.Checked = 1
	for i := range res.Rows {
		res.Rows[i].Bytes, res.Rows[i].Times = 40, []time.Duration{time.Millisecond}
	}
	res.Steps = []result.StepStats{{Step: 2 * time.Millisecond}}
	rep := buildReport(p, prog, []int64{10, 10, 10, 10, 10, 10}, res, [][]byte{encodeFigures(res, len(p.Buckets))})
	var out bytes.Buffer
	Print(&out, withFlags(&Run{Plan: p, Prog: prog, Ranks: 1}, Run{CheckEvery: 1}), rep)
	text := out.String()
	// Each cell as a terminal shows it: 24 columns, then the tensor count.
	for _, cell := range []string{
		"  日本語テンソル" + strings.Repeat(" ", 24-14) + "       1 ",
		"  a\\u202eb" + strings.Repeat(" ", 24-8) + "       1 ",
		"  \\u001b[31mred" + strings.Repeat(" ", 24-13) + "       1 ",
		"  e\u0301" + strings.Repeat(" ", 24-1) + "       1 ",
		"  日本語テンソル日本語..." + strings.Repeat(" ", 24-23) + "       1 ",
		"  plain" + strings.Repeat(" ", 24-5) + "       1 ",
	} {
		if !strings.Contains(text, cell) {
			t.Errorf("the table lacks the row that starts %q:\n%s", cell, text)
		}
	}
	for _, r := range text {
		if r != '\n' && !unicode.IsGraphic(r) {
			t.Errorf("the report prints %U raw:\n%s", r, text)
		}
	}
	e := &Run{Plan: p, Prog: prog, Ranks: 1, CheckEvery: 1}
	data, err := json.Marshal(makeJSON(e, rep, &Info{}))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Buckets []struct {
			Bucket string `json:"bucket"`
		} `json:"buckets"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	for i, r := range j.Buckets {
		if r.Bucket != names[i] {
			t.Errorf("JSON row %d: bucket %q, want %q", i, r.Bucket, names[i])
		}
	}
}

// TestReportUncheckedPerBucket: a bucket's unchecked elements, summed over
// ranks, go on its last row and into its JSON row; a bucket without any
// has no unchecked field.
func TestReportUncheckedPerBucket(t *testing.T) {
	p, prog := reportPlan(t)
	var all [][]byte
	for rank := 0; rank < 2; rank++ {
		res := result.New(p, prog)
		res.Checked = 2
		res.Unchecked[1] = int64(3 + rank) // bucket b: 3 on rank 0, 4 on rank 1
		all = append(all, encodeFigures(res, len(p.Buckets)))
	}
	res := result.New(p, prog)
	res.Checked = 2
	rep := buildReport(p, prog, []int64{10, 12}, res, all)
	if rep.unchecked != 7 || rep.rows[1].unchecked != 7 || rep.rows[0].unchecked != 0 || rep.rows[2].unchecked != 0 {
		t.Errorf("unchecked: total %d, rows %d %d %d; want 7 on b's row (the allgather) only",
			rep.unchecked, rep.rows[0].unchecked, rep.rows[1].unchecked, rep.rows[2].unchecked)
	}
	e := &Run{Plan: p, Prog: prog, Ranks: 2, CheckEvery: 1}
	data, err := json.Marshal(makeJSON(e, rep, &Info{}))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Buckets []map[string]any `json:"buckets"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	for i, want := range []any{nil, 7.0, nil} {
		if got := j.Buckets[i]["unchecked"]; got != want {
			t.Errorf("JSON row %d (bucket %v): unchecked %v, want %v", i, j.Buckets[i]["bucket"], got, want)
		}
	}
}
func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if p := percentile(ds, 50); p != 5 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(ds, 90); p != 9 {
		t.Errorf("p90 = %v", p)
	}
}

// withFlags returns a copy of base with the flags' settings of flags.
func withFlags(base *Run, flags Run) *Run {
	r := *base
	r.Steps, r.Warmup, r.CheckEvery, r.Quiet = flags.Steps, flags.Warmup, flags.CheckEvery, flags.Quiet
	return &r
}

// TestReportAccumulate: a step of 4 micro-batches saves 3 times the
// step's collectives and bytes, 75% of syncing every micro-batch, and its
// compute a micro-batch is a quarter of the step's; the table's line and
// the JSON say the same.
func TestReportAccumulate(t *testing.T) {
	p, prog := reportPlan(t)
	p.Accumulate = 4
	res := result.New(p, prog)
	res.Checked = 1
	for i := range res.Rows {
		res.Rows[i].Times = []time.Duration{time.Millisecond}
	}
	res.Steps = []result.StepStats{{Step: 10 * time.Millisecond, Compute: 8 * time.Millisecond}}
	// b is padded to 12 elements: its allgather moves 48 bytes.
	rep := buildReport(p, prog, []int64{10, 12}, res, [][]byte{encodeFigures(res, 2)})
	var colls int
	var bytesPerStep int64
	for _, r := range rep.rows {
		colls++
		bytesPerStep += r.Bytes
	}
	if colls != 3 || bytesPerStep != 40+48+40 {
		t.Fatalf("the step has %d collectives of %d bytes, want 3 of 128", colls, bytesPerStep)
	}
	a := accumulationOf(rep, 4)
	if a.SavedColls != 3*colls || a.SavedBytes != 3*bytesPerStep || a.SavedPct != 75 {
		t.Errorf("saved %d collectives, %d bytes, %v%%; want %d, %d, 75%%", a.SavedColls, a.SavedBytes, a.SavedPct, 3*colls, 3*bytesPerStep)
	}
	var out bytes.Buffer
	run := withFlags(&Run{Plan: p, Prog: prog, Ranks: 1}, Run{Steps: 1, CheckEvery: 1})
	Print(&out, run, rep)
	want := "# accumulate 4: 1 synchronisation every 4 micro-batches; 9 collectives and 384 B a rank saved a step (75% of the communication of syncing every micro-batch); compute 2.00 ms a micro-batch\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant the line\n%s", out.String(), want)
	}
	var j struct {
		Accumulate *jsonAccumulate `json:"accumulate"`
	}
	data, err := json.Marshal(makeJSON(run, rep, &Info{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if x := j.Accumulate; x == nil || x.MicroBatches != 4 || x.CollectivesPerStep != 3 || x.BytesPerStep != 128 ||
		x.SavedCollectives != 9 || x.SavedBytes != 384 || x.SavedPct != 75 || x.ComputePerMicroMs != 2 {
		t.Errorf("JSON accumulate %+v", j.Accumulate)
	}
	// A step of one says nothing of it.
	p.Accumulate = 0
	out.Reset()
	Print(&out, run, rep)
	if strings.Contains(out.String(), "accumulate") {
		t.Errorf("a step of one reports accumulation:\n%s", out.String())
	}
	if data, _ := json.Marshal(makeJSON(run, rep, &Info{})); strings.Contains(string(data), `"accumulate"`) {
		t.Errorf("a step of one's JSON has accumulate: %s", data)
	}
}

// TestTraceEventsMicroBatches: in a step of several micro-batches, each
// backward and compute span names its micro-batch.
func TestTraceEventsMicroBatches(t *testing.T) {
	p, prog := reportPlan(t)
	p.Accumulate = 2
	e := &Run{Plan: p, Prog: prog, Ranks: 1}
	var recs []result.Traced
	for m := range 2 {
		recs = append(recs,
			result.Traced{R: result.Record{Kind: result.Compute, Name: "compute", Bucket: -1, Micro: m}},
			result.Traced{R: result.Record{Kind: result.Backward, Name: "backward", Bucket: -1, Micro: m}})
	}
	var names []string
	for _, ev := range traceEvents(e, recs) {
		names = append(names, fmt.Sprintf("%s [%v]", ev.Name, ev.Args["micro_batch"]))
	}
	want := "compute (micro-batch 1/2) [1], backward (micro-batch 1/2) [1], compute (micro-batch 2/2) [2], backward (micro-batch 2/2) [2]"
	if got := strings.Join(names, ", "); got != want {
		t.Errorf("trace events %s, want %s", got, want)
	}
}

// TestTraceEventsHaveStep: every trace event has args.step; a
// checkpoint's is the step whose end it follows.
func TestTraceEventsHaveStep(t *testing.T) {
	p, prog := reportPlan(t)
	res := result.New(p, prog)
	res.Saves = []result.Save{{Steps: 4, Bytes: 100, Time: time.Millisecond}}
	evs := saveEvents(&Run{Plan: p, Prog: prog, Ranks: 1}, res)
	if len(evs) != 1 || evs[0].Name != "checkpoint after 4 steps" || evs[0].Args["step"] != 3 || evs[0].Args["steps_done"] != 4 {
		t.Errorf("save events %+v, want one named checkpoint after 4 steps with step 3, steps_done 4", evs)
	}
	// The prediction's spans, laid over each measured step, are that
	// step's.
	pr := &costmodel.Prediction{Step: time.Millisecond, Spans: []costmodel.Span{{Kind: costmodel.OpCollective, Stream: 1, Name: "allreduce a", End: time.Millisecond}}}
	run := &Run{Plan: p, Prog: prog, Ranks: 1, Warmup: 1, Predicted: NewPredicted("test", pr)}
	res.Traced = []result.Traced{{Step: 0}, {Step: 1, Base: time.Millisecond}, {Step: 2, Base: 2 * time.Millisecond}}
	var steps []any
	for _, ev := range predictedEvents(run, measuredBases(run, res)) {
		if ev.Ph == "X" {
			steps = append(steps, ev.Args["step"])
		}
	}
	if fmt.Sprint(steps) != "[1 2]" {
		t.Errorf("predicted spans' steps %v, want [1 2]", steps)
	}
}

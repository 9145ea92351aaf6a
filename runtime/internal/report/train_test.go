package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/scaler"
)

// resumedScaling is the scaler's course of a run of steps 0..9 resumed
// after step 4: six steps, of which step 7 overflowed.
func resumedScaling() *result.Scaling {
	return &result.Scaling{First: 4, Scale: []float64{32, 32, 32, 32, 16, 16}, Skipped: []bool{false, false, false, true, false, false}}
}

// TestScalerAfterResume: after a resume the report, the JSON and the
// trace's counter number the steps as --overflow does (from 0, warm-up
// included), not from the resumed run's first step, and the report says
// which steps the run ran.
func TestScalerAfterResume(t *testing.T) {
	p, prog := reportPlan(t)
	p.Scaler = &scaler.Spec{Rule: scaler.Torch}
	res := result.New(p, prog)
	res.Scaling = resumedScaling()
	res.Resumed = 4
	for step := 4; step < 10; step++ {
		res.Traced = append(res.Traced,
			result.Traced{Step: step, Base: time.Duration(step) * time.Millisecond, R: result.Record{Kind: result.Backward, Name: "backward", Bucket: -1}},
			result.Traced{Step: step, Base: time.Duration(step) * time.Millisecond, R: result.Record{Kind: result.Wait, Name: "wait comm", Bucket: -1}})
	}
	run := &Run{Plan: p, Prog: prog, Ranks: 1, Steps: 8, Warmup: 2, CheckEvery: 1, Quiet: true}
	rep := buildReport(p, prog, []int64{10, 12}, res, [][]byte{encodeFigures(res, 2)})
	var out bytes.Buffer
	Print(&out, run, rep)
	want := "# loss scale (torch): 1 of the 6 steps after the resume (steps 4 to 9) skipped on overflow (step 7); scale 32 at the first step, 16 at the last\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant the line\n%s", out.String(), want)
	}
	var j struct {
		Training struct {
			Scaler jsonScaler `json:"scaler"`
		} `json:"training"`
	}
	data, err := json.Marshal(makeJSON(run, rep, &Info{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if sc := j.Training.Scaler; sc.FirstStep != 4 || len(sc.Scale) != 6 || !slices.Equal(sc.Skipped, []int{7}) {
		t.Errorf("JSON scaler %+v, want first_step 4, 6 scales, skipped_steps [7]", sc)
	}
	// One counter event a step, with that step's scale.
	var got []string
	for _, ev := range scaleEvents(run, res) {
		got = append(got, strings.Join([]string{jsonString(ev.Ts), jsonString(ev.Args["step"]), jsonString(ev.Args["scale"]), jsonString(ev.Args["skipped"])}, "/"))
	}
	wantEv := []string{"4000/4/32/0", "5000/5/32/0", "6000/6/32/0", "7000/7/32/1", "8000/8/16/0", "9000/9/16/0"}
	if !slices.Equal(got, wantEv) {
		t.Errorf("loss scale counter (ts/step/scale/skipped) %v, want %v", got, wantEv)
	}
}

// TestScalerLine: the count and the list are those of the steps the run
// ran; one step is one.
func TestScalerLine(t *testing.T) {
	for _, c := range []struct {
		sc      *result.Scaling
		skipped []int
		want    string
	}{
		{&result.Scaling{Scale: []float64{64, 32, 32}, Skipped: []bool{false, true, false}}, []int{1},
			"loss scale (torch): 1 of 3 steps skipped on overflow (step 1); scale 64 at the first step, 32 at the last"},
		{&result.Scaling{First: 7, Scale: []float64{16}, Skipped: []bool{false}}, nil,
			"loss scale (torch): 0 of the one step after the resume (step 7) skipped on overflow; scale 16 at the first step, 16 at the last"},
	} {
		if got := scalerLine("torch", c.sc, c.skipped); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// trainPlan is a plan whose step unscales and updates one bucket, with a
// loss scaler.
func trainPlan(t *testing.T) (*plan.Plan, *plan.Program) {
	t.Helper()
	p := &plan.Plan{
		Name: "u", Source: "u.sync",
		Tensors: []plan.Tensor{{Name: "x", DType: elem.F32, Shape: []int64{1000}, Bucket: 0}},
		Streams: []plan.Stream{{Name: "compute"}, {Name: "comm"}},
		Buckets: []plan.Bucket{{Name: "g", Wire: elem.F32, Elems: 1000, Tensors: []int{0}}},
		Scaler:  &scaler.Spec{Rule: scaler.Torch},
	}
	prog, err := plan.Record(nil, func(s *plan.Recorder) {
		s.Backward("u.sync:1:1", 0, time.Millisecond)
		s.AllReduce("u.sync:2:1", 1, plan.Avg, plan.AfterReady(), 0)
		s.Unscale("u.sync:3:1", 0, false, plan.AfterSynced(), 0)
		s.Update("u.sync:4:1", 0, optim.Spec{Kind: optim.SGD, LR: 0.1}, plan.AfterSynced(), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, prog
}

// TestUpdateTimeLeavesOutSkippedSteps: a step skipped on overflow runs the
// update's kernels without their work, so the update's row, its line and
// the JSON average over the measured steps that applied it; with none, the
// update is not timed, rather than given a bandwidth it never had.
func TestUpdateTimeLeavesOutSkippedSteps(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		skipped   []bool // warm-up step 0, then measured steps 1 to 3
		row, line string
		wantUs    float64
		wantSteps int
	}{
		{[]bool{true, false, true, false}, "g sgd compute 12000 10.0 1.200 0",
			"# update 10.0 us a step, 50.0% of it while communication ran (over the 2 of 3 measured steps that applied it); unscale and overflow check 4.0 us\n", 10, 2},
		{[]bool{false, true, true, true}, "g sgd compute 12000 - - 0",
			"# update not timed: every measured step skipped it on overflow; unscale and overflow check 4.0 us\n", 0, 0},
	} {
		p, prog := trainPlan(t)
		res := result.New(p, prog)
		res.Checked = 4
		res.Scaling = &result.Scaling{Scale: []float64{64, 32, 32, 16}, Skipped: c.skipped}
		for i := 1; i < 4; i++ {
			upd := result.TrainStepStats{Update: 10 * us, UpdateHidden: 5 * us, Unscale: 4 * us}
			if c.skipped[i] {
				upd.Update, upd.UpdateHidden = us/2, 0
			}
			res.Steps = append(res.Steps, result.StepStats{Step: time.Millisecond})
			res.TrainSteps = append(res.TrainSteps, upd)
			for k := range res.TrainRows {
				r := &res.TrainRows[k]
				r.Times = append(r.Times, upd.Unscale)
				r.Bytes = 8000
				if r.Kind == result.Update {
					r.Times[len(r.Times)-1] = upd.Update
					r.Bytes = 12000
				}
			}
		}
		run := &Run{Plan: p, Prog: prog, Ranks: 1, Steps: 3, Warmup: 1, CheckEvery: 1}
		rep := buildReport(p, prog, []int64{1000}, res, [][]byte{encodeFigures(res, 1)})
		var out bytes.Buffer
		printTrain(&out, run, rep)
		rowFound := slices.ContainsFunc(strings.Split(out.String(), "\n"), func(l string) bool { return strings.Join(strings.Fields(l), " ") == c.row })
		if !rowFound || !strings.Contains(out.String(), c.line) {
			t.Errorf("skipped %v: report\n%s\nwant the row\n%s\nwant the line\n%s", c.skipped, out.String(), c.row, c.line)
		}
		j := makeJSONTrain(run, rep)
		if w := j.Rows[1].Wrong; w == nil || *w != 0 || j.Rows[0].Wrong != nil {
			t.Errorf("skipped %v: JSON rows' wrong: unscale %v, update %v; want none and 0", c.skipped, j.Rows[0].Wrong, w)
		}
		if j.UpdateUs != c.wantUs || j.UpdateSteps != c.wantSteps || j.Rows[1].TimeUs != c.wantUs {
			t.Errorf("skipped %v: JSON update_us %v, update_steps %d, row time_us %v; want %v, %d, %v", c.skipped, j.UpdateUs, j.UpdateSteps, j.Rows[1].TimeUs, c.wantUs, c.wantSteps, c.wantUs)
		}
	}
}

// The summary's unchecked elements name the overflows' inf and NaN among
// their causes when steps were skipped, and only then.
func TestUncheckedNamesOverflows(t *testing.T) {
	for _, skipped := range []bool{true, false} {
		p, prog := trainPlan(t)
		res := result.New(p, prog)
		res.Checked = 2
		res.Unchecked[0] = 2
		res.Scaling = &result.Scaling{Scale: []float64{64, 32}, Skipped: []bool{skipped, false}}
		run := &Run{Plan: p, Prog: prog, Ranks: 1, Steps: 0, Warmup: 2, CheckEvery: 1, Quiet: true}
		rep := buildReport(p, prog, []int64{1000}, res, [][]byte{encodeFigures(res, 1)})
		var out bytes.Buffer
		Print(&out, run, rep)
		named := strings.Contains(out.String(), "2 unchecked (the inf or NaN of the steps skipped on overflow, values beyond")
		if named != skipped {
			t.Errorf("skipped %v: the summary names the overflows: %v\n%s", skipped, named, out.String())
		}
	}
}

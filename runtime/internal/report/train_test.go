package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

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

package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/costmodel"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// TestPredictedAgainstMeasured: a run given a prediction prints, per
// bucket and for the step, predicted, measured (medians) and the error in
// percent, in the table and the JSON; without one the JSON has none of
// the fields.
func TestPredictedAgainstMeasured(t *testing.T) {
	p, prog := reportPlan(t)
	res := result.New(p, prog)
	res.Checked = 1
	for i := range res.Rows {
		res.Rows[i].Times = []time.Duration{2 * time.Millisecond, 2 * time.Millisecond}
	}
	res.Steps = []result.StepStats{{Step: 10 * time.Millisecond}, {Step: 10 * time.Millisecond}}
	rep := buildReport(p, prog, []int64{10, 10}, res, [][]byte{encodeFigures(res, 2)})
	// Row (0, a) predicted 2.5 ms: +25%; the step 9 ms: -10%.
	pr := &costmodel.Prediction{Step: 9 * time.Millisecond, Rows: []costmodel.Row{{ID: 0, Bucket: 0, Start: 0, End: 2500 * time.Microsecond}}}
	run := withFlags(&Run{Plan: p, Prog: prog, Ranks: 1}, Run{CheckEvery: 1})
	run.Predicted = NewPredicted("test", pr)
	var out bytes.Buffer
	Print(&out, run, rep)
	for _, want := range []string{"predicted with profile test", "2500.0         2000.0     +25.0", "step time predicted 9.00 ms, measured p50 10.00 ms (-10.0%)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	var j struct {
		Buckets []struct {
			PredictedUs *float64 `json:"predicted_us"`
			ErrorPct    *float64 `json:"error_pct"`
		} `json:"buckets"`
		Summary struct {
			StepErrorPct *float64 `json:"step_error_pct"`
		} `json:"summary"`
	}
	data, _ := json.Marshal(makeJSON(run, rep, &Info{}))
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if e := j.Buckets[0].ErrorPct; e == nil || *e != 25 || *j.Buckets[0].PredictedUs != 2500 || j.Buckets[1].ErrorPct != nil {
		t.Errorf("bucket rows: %s", data)
	}
	if e := j.Summary.StepErrorPct; e == nil || *e != -10 {
		t.Errorf("step error: %s", data)
	}
	run.Predicted = nil
	data, _ = json.Marshal(makeJSON(run, rep, &Info{}))
	if strings.Contains(string(data), "predicted") || strings.Contains(string(data), "error_pct") {
		t.Errorf("without a profile the JSON has prediction fields: %s", data)
	}
}

package predict

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

// Result is one plan's prediction with what it was made from.
type Result struct {
	Prog    *ir.Program
	Ranks   int
	Profile *costmodel.Profile
	*costmodel.Prediction
}

// Predict replays prog's step at ranks ranks against profile p.
func Predict(prog *ir.Program, ranks int, p *costmodel.Profile) (*Result, error) {
	if ranks < 1 {
		return nil, fmt.Errorf("--np %d: need at least one rank", ranks)
	}
	pr, err := costmodel.Replay(Schedule(prog, ranks), p)
	if err != nil {
		return nil, fmt.Errorf("predicting %s: %w", prog.Name, err)
	}
	return &Result{Prog: prog, Ranks: ranks, Profile: p, Prediction: pr}, nil
}

// bandwidths returns a row's algbw and busbw, in gigabytes a second.
func bandwidths(r *costmodel.Row, ranks int) (alg, bus float64) {
	if t := r.Time(); t > 0 {
		alg = float64(r.Bytes) / t.Seconds() / 1e9
	}
	// The runtime's rule: busbw 0 for a one-rank allreduce.
	return alg, alg * costmodel.BusFactor(r.Collective, ranks)
}

// us formats a duration in microseconds with one decimal.
func us(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e3) }

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// Write prints the prediction as the table a run prints.
func (r *Result) Write(w io.Writer) error {
	p := r.Prog
	fmt.Fprintf(w, "# predicted: %s at %d rank(s), profile %s (%s, measured at %s)\n", p.Name, r.Ranks, orDash(r.ProfileName()), orDash(r.Profile.Backend), ranksText(r.Profile.Ranks))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "bucket\tstream\tcollective\tbytes\twire\tstart(us)\ttime(us)\talgbw(GB/s)\tbusbw(GB/s)\tgroup\t")
	for i := range r.Rows {
		row := &r.Rows[i]
		b := &p.Buckets[row.Bucket]
		alg, bus := bandwidths(row, r.Ranks)
		group := ""
		if row.Group {
			group = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%.2f\t%.2f\t%s\t\n", b.Name, p.Streams[row.Stream].Name, row.Collective, row.Bytes, b.Wire,
			us(row.Start), us(row.Time()), alg, bus, group)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "# step time %s; compute %s; exposed communication (step - compute) %s; communication %s, %.1f%% overlapped with compute\n",
		ms(r.Step), ms(r.Compute), ms(r.Exposed), ms(r.Comm), r.Overlap)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
	_, err := fmt.Fprintf(w, "# source: %s\n", orDash(r.Profile.Source))
	return err
}

// ProfileName names the prediction's profile, in the table and the JSON
// alike: a built-in profile's name, else the machine a calibrated one was
// measured on ("" when it says neither).
func (r *Result) ProfileName() string {
	if r.Profile.Name != "" {
		return r.Profile.Name
	}
	return r.Profile.Machine
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ranksText(n int) string {
	if n == 0 {
		return "any number of ranks"
	}
	return fmt.Sprintf("%d ranks", n)
}

// JSONRow is one bucket of the prediction in JSON, in the units its field
// names end with, as the run's own JSON.
type JSONRow struct {
	Bucket     string  `json:"bucket"`
	Stream     string  `json:"stream"`
	Collective string  `json:"collective"`
	Bytes      int64   `json:"bytes"`
	Group      bool    `json:"group"`
	StartUs    float64 `json:"start_us"`
	TimeUs     float64 `json:"time_us"`
	AlgBW      float64 `json:"algbw_gbs"`
	BusBW      float64 `json:"busbw_gbs"`
}

// JSON is the prediction's file for scripts (milliseconds for the step).
type JSON struct {
	Program    string    `json:"program"`
	Ranks      int       `json:"ranks"`
	Profile    string    `json:"profile"`
	Buckets    []JSONRow `json:"buckets"`
	StepMs     float64   `json:"step_ms"`
	ComputeMs  float64   `json:"compute_ms"`
	CommMs     float64   `json:"communication_ms"`
	ExposedMs  float64   `json:"exposed_communication_ms"`
	OverlapPct float64   `json:"overlap_pct"`
	Notes      []string  `json:"notes,omitempty"`
}

// JSON returns the prediction's JSON record.
func (r *Result) JSON() *JSON {
	msf := func(d time.Duration) float64 { return float64(d) / 1e6 }
	j := &JSON{Program: r.Prog.Name, Ranks: r.Ranks, Profile: r.ProfileName(), Buckets: []JSONRow{}, StepMs: msf(r.Step), ComputeMs: msf(r.Compute),
		CommMs: msf(r.Comm), ExposedMs: msf(r.Exposed), OverlapPct: r.Overlap, Notes: r.Notes}
	for i := range r.Rows {
		row := &r.Rows[i]
		alg, bus := bandwidths(row, r.Ranks)
		j.Buckets = append(j.Buckets, JSONRow{Bucket: r.Prog.Buckets[row.Bucket].Name, Stream: r.Prog.Streams[row.Stream].Name,
			Collective: row.Collective, Bytes: row.Bytes, Group: row.Group, StartUs: float64(row.Start) / 1e3, TimeUs: float64(row.Time()) / 1e3,
			AlgBW: alg, BusBW: bus})
	}
	return j
}

// WriteJSON writes the prediction's JSON record to path ("-": w).
func (r *Result) WriteJSON(path string, w io.Writer) error {
	data, err := json.MarshalIndent(r.JSON(), "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = w.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--json %s: %w", path, err)
	}
	return nil
}

// Summary is one line about the prediction: "step 71.2 ms, exposed 11.0 ms, overlap 85%".
func (r *Result) Summary() string {
	return strings.TrimSpace(fmt.Sprintf("step %s, exposed %s, %.0f%% of communication overlapped", ms(r.Step), ms(r.Exposed), r.Overlap))
}

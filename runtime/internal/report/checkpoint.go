package report

// Checkpoints in the report: how large they were, how long the steps
// stood still for each save, the bandwidth, and the resume.

import (
	"fmt"
	"io"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// savesReport sums up the checkpoints over the ranks.
type savesReport struct {
	count int
	// bytes is one checkpoint's size over all ranks (the last one's);
	// stall the mean over saves of the slowest rank's time.
	bytes int64
	stall time.Duration
	// resumed is the step a resumed run started at; resume the slowest
	// rank's time to read the checkpoint (0: not resumed).
	resumed int
	resume  time.Duration
}

// gbps is the checkpoint's bytes over the stall.
func (s *savesReport) gbps() float64 {
	if s.stall <= 0 {
		return 0
	}
	return float64(s.bytes) / float64(s.stall)
}

// saveFigures appends one rank's checkpoint figures: per save its bytes
// and time (every rank saves the same steps), then the resume's time.
func saveFigures(vals []float64, res *result.Results) []float64 {
	for _, s := range res.Saves {
		vals = append(vals, float64(s.Bytes), float64(s.Time))
	}
	return append(vals, float64(res.ResumeTime))
}

// buildSaves reads what saveFigures wrote from index base.
func buildSaves(res *result.Results, n, base int, at func(rank, i int) float64) savesReport {
	s := savesReport{count: len(res.Saves), resumed: res.Resumed}
	var stall float64
	for k := range res.Saves {
		var bytes, slowest float64
		for r := 0; r < n; r++ {
			bytes += at(r, base+2*k)
			slowest = max(slowest, at(r, base+2*k+1))
		}
		s.bytes = int64(bytes)
		stall += slowest
	}
	if s.count > 0 {
		s.stall = time.Duration(stall / float64(s.count))
	}
	for r := 0; r < n; r++ {
		s.resume = max(s.resume, time.Duration(at(r, base+2*len(res.Saves))))
	}
	return s
}

// printSaves prints the checkpoints' line.
func printSaves(w io.Writer, rep *Report) {
	s := &rep.saves
	if s.count > 0 {
		fmt.Fprintf(w, "# checkpoints: %d written, %s each (all ranks), the steps stood still %s a save (%.3f GB/s)\n",
			s.count, text.Bytes(s.bytes), text.Dur(s.stall), s.gbps())
	}
	if s.resume > 0 {
		fmt.Fprintf(w, "# resumed at step %d, from the checkpoint after %d steps (steps 0 to %d); reading the checkpoint took %s\n",
			s.resumed, s.resumed, s.resumed-1, text.Dur(s.resume))
	}
}

// jsonSaves is the checkpoints in the JSON file.
type jsonSaves struct {
	Count   int     `json:"count"`
	Bytes   int64   `json:"bytes"`
	StallMs float64 `json:"stall_ms"`
	GBs     float64 `json:"gbs"`
	// Resumed is the step the resumed run started at (the checkpoint's
	// steps done, step-N: the state after steps 0 to N-1), as
	// training.scaler.first_step.
	Resumed  int     `json:"resumed_at_step,omitempty"`
	ResumeMs float64 `json:"resume_ms,omitempty"`
}

// makeJSONSaves is nil for a run that neither saved nor resumed.
func makeJSONSaves(rep *Report) *jsonSaves {
	s := &rep.saves
	if s.count == 0 && s.resume == 0 {
		return nil
	}
	return &jsonSaves{Count: s.count, Bytes: s.bytes, StallMs: float64(s.stall) / 1e6, GBs: s.gbps(),
		Resumed: s.resumed, ResumeMs: float64(s.resume) / 1e6}
}

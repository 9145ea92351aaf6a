package report

// Heterogeneous ranks: per rank its compute, what it waited at the step's
// first collective for the others, its speed relative to the fastest; the
// rank the others waited for; the shares over time; and what balanced
// shares, in whole samples, would save.

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// ranksReport is the per-rank part of the report (kept only for a
// heterogeneous run: res.Hetero not nil).
type ranksReport struct {
	het   *result.Hetero
	ranks []rankFigures
	// slowest is the rank with the lowest speed score, waitedFor the one
	// whose late arrivals at the first collective cost the others the
	// most waiting in total (-1: none), lastSteps the steps in which it
	// arrived last.
	slowest, waitedFor, lastSteps int
	// longest is the rank with the longest mean compute a step, the one
	// that bounds the step. balancedShares are the shares that balancing
	// by the measured speeds would give (whole samples, at least one a
	// rank), balanced the longest compute a step they would take, and
	// saving the longest rank's compute less that (0 when whole samples
	// leave nothing to gain).
	longest        int
	balancedShares []int
	balanced       time.Duration
	saving         time.Duration
}

// rankFigures are one rank's means over the measured steps.
type rankFigures struct {
	compute time.Duration
	// wait is what the rank waited at the step's first collective: the
	// latest rank's arrival there less its own.
	wait time.Duration
	// share is the rank's mean share of the batch; perSample its compute
	// per sample; score its samples per second over the fastest rank's.
	share     float64
	perSample float64
	score     float64
}

// rankFiguresTail appends what buildRanks reads, last in the record (so
// that it moves no other figure): per measured step the first
// collective's start and the rank's share.
func rankFiguresTail(vals []float64, res *result.Results) []float64 {
	if res.Hetero == nil {
		return vals
	}
	for _, s := range res.RankSteps {
		vals = append(vals, float64(s.FirstColl), float64(s.Share))
	}
	return vals
}

// buildRanks reads every rank's figures: compute per step at
// sbase+4*s+1, the tail that rankFiguresTail wrote at the end of each
// record of length recLen(rank) values.
func buildRanks(res *result.Results, n, ns, sbase int, recLen func(rank int) int, at func(rank, i int) float64) ranksReport {
	rr := ranksReport{het: res.Hetero, slowest: -1, waitedFor: -1, longest: -1}
	if res.Hetero == nil || ns == 0 || len(res.RankSteps) != ns {
		return rr
	}
	rr.ranks = make([]rankFigures, n)
	// last counts the steps in which a rank reached the first collective
	// last, cost the others' waiting for it then: a rank last by a few
	// microseconds in many steps costs less than a straggler last by
	// milliseconds in a few.
	last := make([]int, n)
	cost := make([]float64, n)
	for s := 0; s < ns; s++ {
		latest, who := -1.0, -1
		for r := 0; r < n; r++ {
			if fc := at(r, recLen(r)-2*ns+2*s); fc > latest {
				latest, who = fc, r
			}
		}
		for r := 0; r < n; r++ {
			f := &rr.ranks[r]
			f.compute += time.Duration(at(r, sbase+4*s+1))
			if fc := at(r, recLen(r)-2*ns+2*s); fc >= 0 {
				f.wait += time.Duration(latest - fc)
				if who >= 0 {
					cost[who] += latest - fc
				}
			}
			f.share += max(at(r, recLen(r)-2*ns+2*s+1), 1)
		}
		if who >= 0 {
			last[who]++
		}
	}
	var best float64
	perSample := make([]float64, n)
	for r := range rr.ranks {
		f := &rr.ranks[r]
		f.compute /= time.Duration(ns)
		f.wait /= time.Duration(ns)
		f.share /= float64(ns)
		if f.compute > 0 {
			f.perSample = float64(f.compute) / f.share
			best = max(best, 1/f.perSample)
		}
		perSample[r] = f.perSample
	}
	for r := range rr.ranks {
		f := &rr.ranks[r]
		if f.perSample > 0 {
			f.score = 1 / f.perSample / best
		}
		if rr.slowest < 0 || f.score < rr.ranks[rr.slowest].score {
			rr.slowest = r
		}
		if rr.waitedFor < 0 || cost[r] > cost[rr.waitedFor] {
			rr.waitedFor = r
		}
		if rr.longest < 0 || f.compute > rr.ranks[rr.longest].compute {
			rr.longest = r
		}
	}
	rr.lastSteps = last[rr.waitedFor]
	if best > 0 {
		shares, longest := hetero.Balanced(res.Hetero.Batch, perSample)
		rr.balancedShares = shares
		rr.balanced = time.Duration(longest)
		rr.saving = max(rr.ranks[rr.longest].compute-rr.balanced, 0)
	}
	return rr
}

// printRanks prints the per-rank lines of a heterogeneous run.
func printRanks(w io.Writer, rep *Report) {
	rr := rep.ranks
	if rr.het == nil || len(rr.ranks) == 0 {
		return
	}
	h := rr.het
	fmt.Fprintf(w, "#\n# ranks: global batch %d, balance %s", h.Batch, h.Balance)
	if h.Balance == "dynamic" {
		fmt.Fprintf(w, " every %d step%s", h.Every, text.Plural(h.Every))
	}
	if h.From != "" {
		fmt.Fprintf(w, " (from %s)", h.From)
	}
	fmt.Fprintf(w, "\n# %4s %7s %10s %12s %12s %7s\n", "rank", "speed", "share", "compute(ms)", "wait(ms)", "score")
	for r, f := range rr.ranks {
		fmt.Fprintf(w, "  %4d %7.3g %10.1f %12.3f %12.3f %7.3f\n", r, h.Speeds[r], f.share, ms(f.compute), ms(f.wait), f.score)
	}
	fmt.Fprintf(w, "# speed: declared; share: mean samples a step; compute: mean a step; wait: mean time at the step's first collective for the latest rank; score: samples per second over the fastest rank's\n")
	fmt.Fprintf(w, "# slowest rank %d (score %.3f); the others waited longest for rank %d (the last at the first collective in %d of %d steps)\n",
		rr.slowest, rr.ranks[rr.slowest].score, rr.waitedFor, rr.lastSteps, len(rep.stepTimes))
	if len(h.Course) > 1 || h.Balance != "off" {
		var parts []string
		for _, c := range h.Course {
			parts = append(parts, fmt.Sprintf("from step %d: %s", c.From, joinInts(c.Shares)))
		}
		fmt.Fprintf(w, "# shares %s\n", strings.Join(parts, "; "))
	}
	if rr.balancedShares == nil {
		return
	}
	saving := "nothing"
	if rr.saving > 0 {
		saving = text.Dur(rr.saving) + " a step"
	}
	fmt.Fprintf(w, "# what if: shares in proportion to the measured speeds (%s) would make the longest compute %s a step, saving %s on rank %d's %s\n",
		joinInts(rr.balancedShares), text.Dur(rr.balanced), saving, rr.longest, text.Dur(rr.ranks[rr.longest].compute))
}

// jsonRanks is the per-rank part of the JSON file (milliseconds).
type jsonRanks struct {
	Batch     int            `json:"batch"`
	Balance   string         `json:"balance"`
	Every     int            `json:"balance_every,omitempty"`
	From      string         `json:"from,omitempty"`
	Ranks     []jsonRank     `json:"ranks"`
	Slowest   int            `json:"slowest_rank"`
	WaitedFor int            `json:"waited_for_rank"`
	Shares    []jsonShareSet `json:"shares"`
	// BalancedShares, Balanced and Saving are the what-if: the shares
	// balancing by the measured speeds would give, the longest compute
	// a step they would take, and what that saves on LongestRank's.
	BalancedShares []int   `json:"balanced_shares,omitempty"`
	Balanced       float64 `json:"balanced_compute_ms"`
	Saving         float64 `json:"balanced_saving_ms"`
	LongestRank    int     `json:"longest_compute_rank"`
}

// jsonRank is one rank's figures.
type jsonRank struct {
	Rank      int     `json:"rank"`
	Speed     float64 `json:"speed"`
	Share     float64 `json:"share"`
	ComputeMs float64 `json:"compute_ms"`
	WaitMs    float64 `json:"wait_first_collective_ms"`
	Score     float64 `json:"speed_score"`
}

// jsonShareSet is the shares from a step on.
type jsonShareSet struct {
	From   int   `json:"from_step"`
	Shares []int `json:"shares"`
}

// makeJSONRanks fills the per-rank part (nil for a homogeneous run).
func makeJSONRanks(rep *Report) *jsonRanks {
	rr := rep.ranks
	if rr.het == nil || len(rr.ranks) == 0 {
		return nil
	}
	j := &jsonRanks{Batch: rr.het.Batch, Balance: rr.het.Balance, Every: rr.het.Every, From: rr.het.From, Slowest: rr.slowest, WaitedFor: rr.waitedFor,
		BalancedShares: rr.balancedShares, Balanced: ms(rr.balanced), Saving: ms(rr.saving), LongestRank: rr.longest}
	for r, f := range rr.ranks {
		j.Ranks = append(j.Ranks, jsonRank{Rank: r, Speed: rr.het.Speeds[r], Share: f.share, ComputeMs: ms(f.compute), WaitMs: ms(f.wait), Score: f.score})
	}
	for _, c := range rr.het.Course {
		j.Shares = append(j.Shares, jsonShareSet{From: c.From, Shares: c.Shares})
	}
	return j
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}

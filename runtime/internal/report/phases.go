package report

// Phase figures of hierarchical allreduces: each rank's mean time of each
// phase over the measured steps (result.Row.Phases), gathered like the
// rows' times, and a phase's time the maximum over ranks of those means.
// A phase's bytes and bus factor are those of the collective it is, over
// the ranks it spans: the reduce-scatter and the allgather move the
// bucket's S bytes among the l ranks of a host ((l-1)/l), the allreduce
// across hosts the rank's slice S/l among h hosts (2(h-1)/h).

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// phaseNames name the phases in the table, the JSON file and the trace.
var phaseNames = [3]string{"reduce-scatter in host", "allreduce across hosts", "allgather in host"}

// phaseKeys name the phases in the JSON file.
var phaseKeys = [3]string{"reduce_scatter_intra", "allreduce_inter", "allgather_intra"}

// phaseReport is one phase of a row.
type phaseReport struct {
	ranks int           // the ranks the phase's collective spans
	bytes float64       // the bytes it reduces or gathers
	time  time.Duration // max over ranks of the mean
	busbw float64       // GB/s
}

// encodePhases lays out this rank's mean phase times, three per row with
// `algo hierarchical` (-1 for a row without phase times), for the gather.
func encodePhases(res *result.Results) []byte {
	var vals []float64
	for _, r := range res.Rows {
		if !r.Hier {
			continue
		}
		for _, ts := range r.Phases {
			v := -1.0
			if len(ts) > 0 {
				v = float64(meanDur(ts))
			}
			vals = append(vals, v)
		}
	}
	rec := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(rec[8*i:], math.Float64bits(v))
	}
	return rec
}

// hasHier says whether the plan has a hierarchical allreduce (the same on
// every rank, so all agree on gathering phases).
func hasHier(res *result.Results) bool {
	for _, r := range res.Rows {
		if r.Hier {
			return true
		}
	}
	return false
}

// hostShape returns the number of hosts h and of ranks per host l where
// every host holds the same number of ranks; ok false otherwise.
func hostShape(hosts []string) (h, l int, ok bool) {
	per := map[string]int{}
	for _, x := range hosts {
		per[x]++
	}
	if len(hosts) == 0 {
		return 0, 0, false
	}
	l = per[hosts[0]]
	for _, c := range per {
		if c != l {
			return 0, 0, false
		}
	}
	return len(per), l, true
}

// addPhases fills the rows' phase figures from every rank's encodePhases
// (all[rank]); a row gets them only when every rank timed its phases.
func (rep *Report) addPhases(all [][]byte, hosts []string) {
	h, l, ok := hostShape(hosts)
	if !ok {
		return
	}
	k := 0
	for i := range rep.rows {
		r := &rep.rows[i]
		if !r.Hier {
			continue
		}
		var ph [3]phaseReport
		have := true
		for p := range ph {
			var t float64
			for _, rec := range all {
				if 8*(k+p+1) > len(rec) {
					have = false
					break
				}
				v := math.Float64frombits(binary.LittleEndian.Uint64(rec[8*(k+p):]))
				if v < 0 {
					have = false
				}
				t = max(t, v)
			}
			ph[p].time = time.Duration(t)
		}
		k += 3
		if !have {
			continue
		}
		s := float64(r.Bytes)
		ph[0].ranks, ph[0].bytes = l, s
		ph[1].ranks, ph[1].bytes = h, s/float64(l)
		ph[2].ranks, ph[2].bytes = l, s
		factors := [3]float64{float64(l-1) / float64(l), 2 * float64(h-1) / float64(h), float64(l-1) / float64(l)}
		for p := range ph {
			if ph[p].time > 0 {
				ph[p].busbw = ph[p].bytes / float64(ph[p].time) * factors[p]
			}
		}
		r.phases, r.phased = ph, true
	}
}

// printPhases prints the phase table under the per-bucket table, when a
// hierarchical allreduce has phase figures.
func printPhases(w io.Writer, run *Run, rep *Report) {
	any := false
	for _, r := range rep.rows {
		any = any || r.phased
	}
	if !any || len(rep.stepTimes) == 0 {
		return
	}
	fmt.Fprintf(w, "#\n# hierarchical allreduces by phase\n# %-24s %-24s %5s %12s %12s %10s\n", "bucket", "phase", "ranks", "bytes", "time(us)", "busbw(GB/s)")
	for _, r := range rep.rows {
		if !r.phased {
			continue
		}
		name := text.Cell(run.Plan.Buckets[r.Bucket].Name, 24)
		for p, ph := range r.phases {
			if p > 0 {
				name = text.Cell("", 24)
			}
			fmt.Fprintf(w, "  %s %-24s %5d %12.0f %12.1f %10.3f\n", name, phaseNames[p], ph.ranks, ph.bytes, float64(ph.time)/1e3, ph.busbw)
		}
	}
	fmt.Fprintf(w, "# phase time: the maximum over ranks of each rank's mean of the phase's MPI call, summed over the bucket's pieces; busbw over the phase's ranks (reduce-scatter and allgather (l-1)/l, allreduce 2(h-1)/h)\n")
}

// jsonPhase is one phase of a hierarchical allreduce in the JSON file.
type jsonPhase struct {
	Phase  string  `json:"phase"`
	Ranks  int     `json:"ranks"`
	Bytes  float64 `json:"bytes"`
	TimeUs float64 `json:"time_us"`
	BusBW  float64 `json:"busbw_gbs"`
}

// jsonPhases returns a row's phases for the JSON file, nil without.
func jsonPhases(r rowReport) []jsonPhase {
	if !r.phased {
		return nil
	}
	out := make([]jsonPhase, 3)
	for p, ph := range r.phases {
		out[p] = jsonPhase{Phase: phaseKeys[p], Ranks: ph.ranks, Bytes: ph.bytes, TimeUs: float64(ph.time) / 1e3, BusBW: ph.busbw}
	}
	return out
}

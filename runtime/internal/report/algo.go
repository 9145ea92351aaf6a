package report

// Bytes across hosts. For every collective the report gives the bytes that
// each rank sends to ranks on other hosts in one run of it, from the
// algorithm the collective is assumed to run and where the ranks are
// (every rank's host). The assumptions, per backend:
//
//   - CPU, flat, Open MPI's coll/tuned: allreduce and allgather a ring in
//     rank order (rank r sends to r+1 mod n; algorithm 4 of
//     coll_tuned_allreduce_algorithm and coll_tuned_allgather_algorithm):
//     2(n-1)/n · S and (n-1)/n · S a rank, across hosts where r+1 is on
//     another host; reducescatter (MPI_Reduce_scatter_block) recursive
//     halving (algorithm 3), n a power of two: S/2^k to rank r xor n/2^k
//     at step k; broadcast and reduce a pipeline, the chain root, root+1,
//     ... (algorithm 3 of coll_tuned_bcast_algorithm and
//     coll_tuned_reduce_algorithm): S from each rank to the next (to the
//     one before, for reduce). Open MPI's fixed decision picks among
//     several by size; the formula is exact where the algorithm is pinned
//     (docs/hosts.md says how) and the ring's bytes are also those of the
//     segmented ring.
//   - CPU, `algo hierarchical` where it ran so: only the allreduce of each
//     rank's slice S/l crosses hosts, a ring among h hosts: 2(h-1)/h · S/l.
//   - NCCL: its rings and chains visit each host's ranks together, so a
//     ring crosses hosts h times: the same formulas over the ranks ordered
//     by host.
//
// S is the row's bytes (the whole gathered or scattered buffer for
// allgather and reducescatter).

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// ranHierarchical reports whether the run's hierarchical allreduces ran
// in that form: on the CPU backend, whose header line "algo hierarchical"
// starts with "runs flat:" where they did not.
func ranHierarchical(info *Info) bool {
	if info.backend != "cpu" {
		return false
	}
	for _, kv := range info.Versions {
		if kv.Key == "algo hierarchical" {
			return !strings.HasPrefix(kv.Value, "runs flat:")
		}
	}
	return false
}

// RanHierarchical says whether the run's hierarchical allreduces ran in
// that form (see ranHierarchical), for Run.HierRan.
func (info *Info) RanHierarchical() bool { return ranHierarchical(info) }

// crossSpec is what the formula of one row needs.
type crossSpec struct {
	coll plan.Coll
	// hier: an `algo hierarchical` allreduce that ran in that form.
	hier bool
	root int
	// nccl: the NCCL backend's rings (ranks ordered by host).
	nccl  bool
	bytes int64
}

// crossSent returns, for each rank, the bytes it sends to other hosts in
// one run of the collective, and the algorithm assumed; nil where no
// formula applies (a reducescatter on a number of ranks that is not a
// power of two on the CPU backend).
func crossSent(c crossSpec, hosts []string) ([]float64, string) {
	n := len(hosts)
	out := make([]float64, n)
	if n == 0 {
		return nil, ""
	}
	s := float64(c.bytes)
	// order is the ranks in the order the ring or chain visits them.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if c.nccl {
		order = byHost(hosts)
	}
	host := func(i int) string { return hosts[order[(i%n+n)%n]] }
	switch {
	case c.hier && c.coll == plan.CollAllReduce:
		h, l, ok := hostShape(hosts)
		if !ok {
			return nil, ""
		}
		for r := range out {
			out[r] = 2 * float64(h-1) / float64(h) * s / float64(l)
		}
		return out, "hierarchical (ring across hosts)"
	case c.coll == plan.CollAllReduce || c.coll == plan.CollAllGather || (c.coll == plan.CollReduceScatter && c.nccl):
		per := float64(n-1) / float64(n) * s
		if c.coll == plan.CollAllReduce {
			per *= 2
		}
		for i := 0; i < n; i++ {
			if host(i) != host(i+1) {
				out[order[i]] = per
			}
		}
		return out, "ring"
	case c.coll == plan.CollReduceScatter:
		if n&(n-1) != 0 {
			return nil, ""
		}
		for r := range out {
			part := s
			for mask := n >> 1; mask > 0; mask >>= 1 {
				part /= 2
				if hosts[r] != hosts[r^mask] {
					out[r] += part
				}
			}
		}
		return out, "recursive halving"
	default: // broadcast, reduce: a chain from the root
		at := 0
		for i, r := range order {
			if r == c.root {
				at = i
			}
		}
		for k := 0; k+1 < n; k++ {
			from, to := at+k, at+k+1
			if c.coll == plan.CollReduce {
				from, to = to, from
			}
			if host(from) != host(to) {
				out[order[(from%n+n)%n]] = s
			}
		}
		return out, "pipeline (a chain from the root)"
	}
}

// byHost returns the ranks ordered by host (hosts in the order of their
// lowest rank), then rank.
func byHost(hosts []string) []int {
	var out []int
	for _, h := range (&Info{hosts: hosts}).topology() {
		out = append(out, h.Ranks...)
	}
	return out
}

// crossFigures are a row's bytes across hosts in one run of it: the mean
// over ranks, the most any host sends (its ranks' sum), and the algorithm
// assumed.
type crossFigures struct {
	perRank, perHost float64
	algo             string
}

// rowCross returns a row's figures across hosts; ok false where no
// formula applies.
func rowCross(c crossSpec, hosts []string) (crossFigures, bool) {
	sent, algo := crossSent(c, hosts)
	if sent == nil {
		return crossFigures{}, false
	}
	f := crossFigures{algo: algo}
	byHostSum := map[string]float64{}
	for r, b := range sent {
		f.perRank += b
		byHostSum[hosts[r]] += b
	}
	f.perRank /= float64(len(sent))
	for _, b := range byHostSum {
		f.perHost = max(f.perHost, b)
	}
	return f, true
}

// hostSent returns the bytes each host sends to the others in one step
// under the formulas (every row once), by host name; ok false where a row
// has no formula.
func hostSent(specs []crossSpec, hosts []string) (map[string]float64, bool) {
	out := map[string]float64{}
	for _, c := range specs {
		sent, _ := crossSent(c, hosts)
		if sent == nil {
			return nil, false
		}
		for r, b := range sent {
			out[hosts[r]] += b
		}
	}
	return out, true
}

// rowSpec returns the formula's input for a row of the run.
func rowSpec(run *Run, r rowReport) crossSpec {
	return crossSpec{coll: r.Coll, hier: r.Hier && run.HierRan, root: r.Root, nccl: run.Backend == "nccl", bytes: r.Bytes}
}

// printCross prints the bytes across hosts of every row under the
// per-bucket table, with more than one host, and how to pin the ring when
// a flat allreduce's formula assumes it.
func printCross(w io.Writer, run *Run, rep *Report) {
	if distinct(run.Hosts) < 2 {
		return
	}
	fmt.Fprintf(w, "#\n# bytes across hosts a step (formula; docs/hosts.md)\n# %-24s %-14s %-34s %12s %12s %12s\n",
		"bucket", "collective", "algorithm assumed", "per rank", "per host", "host GB/s")
	flatAllreduce := false // Open MPI picks such a row's algorithm by size
	for _, r := range rep.rows {
		spec := rowSpec(run, r)
		flatAllreduce = flatAllreduce || (spec.coll == plan.CollAllReduce && !spec.hier)
		f, ok := rowCross(spec, run.Hosts)
		name := text.Cell(run.Plan.Buckets[r.Bucket].Name, 24)
		if !ok {
			fmt.Fprintf(w, "  %s %-14s %-34s %12s %12s %12s\n", name, r.Coll, "no formula (ranks not a power of 2)", "-", "-", "-")
			continue
		}
		gbs := "-"
		if r.time > 0 {
			gbs = fmt.Sprintf("%.3f", f.perHost/float64(r.time))
		}
		fmt.Fprintf(w, "  %s %-14s %-34s %12.0f %12.0f %12s\n", name, r.Coll, f.algo, f.perRank, f.perHost, gbs)
	}
	fmt.Fprintf(w, "# per rank: the mean over ranks of the bytes a rank sends to other hosts; per host: the most one host's ranks send; host GB/s: that over the bucket's time, the load on the host's network link\n")
	if run.Backend == "cpu" && flatAllreduce && !ringPinned(os.Getenv) {
		fmt.Fprintf(w, "# Open MPI picks each flat allreduce's algorithm by size, and not all cross hosts as a ring does: pin the ring (--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4) to compare with the formula\n")
	}
}

// ringPinned says whether the environment (getenv) pins Open MPI's
// allreduce to the ring, the algorithm the flat allreduce's formula
// assumes.
func ringPinned(getenv func(string) string) bool {
	rules := getenv("OMPI_MCA_coll_tuned_use_dynamic_rules")
	algo := getenv("OMPI_MCA_coll_tuned_allreduce_algorithm")
	return (rules == "1" || strings.EqualFold(rules, "true")) && (algo == "4" || algo == "ring")
}

// distinct returns the number of different hosts.
func distinct(hosts []string) int { return (&Info{hosts: hosts}).distinctHosts() }

package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

func TestRanHierarchical(t *testing.T) {
	note := func(backend, v string) *Info {
		return &Info{backend: backend, Versions: []text.KV{{Key: "algo hierarchical", Value: v}}}
	}
	if !ranHierarchical(note("cpu", "reduce-scatter inside each host (2 ranks), ...")) {
		t.Error("cpu with the hierarchical form: want true")
	}
	if ranHierarchical(note("cpu", "runs flat: the hosts hold different numbers of ranks")) {
		t.Error("cpu running flat: want false")
	}
	if ranHierarchical(note("nccl", "reduce-scatter")) || ranHierarchical(&Info{backend: "cpu"}) {
		t.Error("nccl, or cpu without the header line: want false")
	}
}

func TestCrossSent(t *testing.T) {
	aabb, abab := []string{"a", "a", "b", "b"}, []string{"a", "b", "a", "b"}
	ar, ag, rs := plan.CollAllReduce, plan.CollAllGather, plan.CollReduceScatter
	cases := []struct {
		name  string
		spec  crossSpec
		hosts []string
		want  []float64 // nil: no formula
	}{
		// 2(h-1)/h · S/l for every rank.
		{"hier 2x2", crossSpec{coll: ar, hier: true, bytes: 1000}, aabb, []float64{500, 500, 500, 500}},
		{"hier 4x1", crossSpec{coll: ar, hier: true, bytes: 1000}, []string{"a", "b", "c", "d"}, []float64{1500, 1500, 1500, 1500}},
		{"hier one host", crossSpec{coll: ar, hier: true, bytes: 1000}, []string{"a", "a"}, []float64{0, 0}},
		{"hier uneven", crossSpec{coll: ar, hier: true, bytes: 1000}, []string{"a", "a", "b"}, nil},
		// A ring in rank order: 2(n-1)/n · S from the ranks whose next
		// rank is on another host (1 -> 2, 3 -> 0).
		{"ring 2x2", crossSpec{coll: ar, bytes: 1000}, aabb, []float64{0, 1500, 0, 1500}},
		{"ring round robin", crossSpec{coll: ar, bytes: 1000}, abab, []float64{1500, 1500, 1500, 1500}},
		// NCCL's ring visits 0, 2 on a, then 1, 3 on b.
		{"nccl ring round robin", crossSpec{coll: ar, nccl: true, bytes: 1000}, abab, []float64{0, 0, 1500, 1500}},
		{"allgather ring", crossSpec{coll: ag, bytes: 1000}, aabb, []float64{0, 750, 0, 750}},
		// Recursive halving: S/2 to rank xor 2 (the other host), S/4 to
		// rank xor 1 (the same host).
		{"reducescatter halving", crossSpec{coll: rs, bytes: 1000}, aabb, []float64{500, 500, 500, 500}},
		{"reducescatter 3 ranks", crossSpec{coll: rs, bytes: 900}, []string{"a", "a", "b"}, nil},
		// The chain 0, 1, 2, 3 crosses from 1 to 2; from root 1, the chain
		// 1, 2, 3, 0 crosses from 1 and from 3; a reduce runs it backwards.
		{"broadcast root 0", crossSpec{coll: plan.CollBroadcast, bytes: 1000}, aabb, []float64{0, 1000, 0, 0}},
		{"broadcast root 1", crossSpec{coll: plan.CollBroadcast, root: 1, bytes: 1000}, aabb, []float64{0, 1000, 0, 1000}},
		{"reduce root 0", crossSpec{coll: plan.CollReduce, bytes: 1000}, aabb, []float64{0, 0, 1000, 0}},
	}
	for _, c := range cases {
		got, _ := crossSent(c.spec, c.hosts)
		if fmt.Sprint(got) != fmt.Sprint(c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: crossSent = %v, want %v", c.name, got, c.want)
		}
	}
	f, ok := rowCross(crossSpec{coll: ar, bytes: 1000}, aabb)
	if !ok || f.perRank != 750 || f.perHost != 1500 || f.algo != "ring" {
		t.Errorf("rowCross of a ring on 2x2 = %+v, %v; want 750 a rank, 1500 a host, ring", f, ok)
	}
}

func TestRingPinned(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	const rules, algo = "OMPI_MCA_coll_tuned_use_dynamic_rules", "OMPI_MCA_coll_tuned_allreduce_algorithm"
	if !ringPinned(env(rules, "1", algo, "4")) || !ringPinned(env(rules, "true", algo, "ring")) {
		t.Error("dynamic rules on and algorithm 4 (ring): want pinned")
	}
	if ringPinned(env(algo, "4")) || ringPinned(env(rules, "1", algo, "3")) || ringPinned(env()) {
		t.Error("without dynamic rules, another algorithm, or nothing set: want not pinned")
	}
}

// The note on pinning Open MPI's ring is there when a flat allreduce's
// formula assumes the ring, and not when every allreduce ran hierarchical.
func TestCrossPinNote(t *testing.T) {
	t.Setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "")
	t.Setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "")
	run := &Run{Plan: &plan.Plan{Buckets: []plan.Bucket{{Name: "b0"}}}, Hosts: []string{"a", "a", "b", "b"}, Backend: "cpu"}
	rep := &Report{rows: []rowReport{{Row: result.Row{Bucket: 0, Coll: plan.CollAllReduce, Hier: true, Bytes: 1 << 20}}}}
	for _, c := range []struct {
		hierRan bool
		want    bool
	}{{false, true}, {true, false}} {
		run.HierRan = c.hierRan
		var b strings.Builder
		printCross(&b, run, rep)
		if got := strings.Contains(b.String(), "pin the ring"); got != c.want {
			t.Errorf("hierarchical ran %v: note shown %v, want %v:\n%s", c.hierRan, got, c.want, b.String())
		}
	}
}

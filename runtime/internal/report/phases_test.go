package report

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
)

// phaseRec encodes one rank's mean phase times as encodePhases does.
func phaseRec(vals ...float64) []byte {
	rec := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(rec[8*i:], math.Float64bits(v))
	}
	return rec
}

func TestAddPhases(t *testing.T) {
	hier := rowReport{Row: result.Row{Coll: plan.CollAllReduce, Hier: true, Bytes: 8000}}
	flat := rowReport{Row: result.Row{Coll: plan.CollAllReduce, Bytes: 8000}}
	rep := &Report{rows: []rowReport{flat, hier}}
	// Two ranks' means (ns); the phase's time is the larger.
	all := [][]byte{phaseRec(1000, 4000, 2000), phaseRec(2000, 3000, 1000)}
	rep.addPhases(all, []string{"a", "a", "b", "b"})
	if rep.rows[0].phased {
		t.Error("a flat row got phases")
	}
	r := rep.rows[1]
	if !r.phased {
		t.Fatal("the hierarchical row got no phases")
	}
	// l = 2 ranks a host, h = 2 hosts: the reduce-scatter and allgather
	// move 8000 bytes among 2 ranks ((l-1)/l), the allreduce across hosts
	// 4000 among 2 hosts (2(h-1)/h).
	want := [3]phaseReport{
		{ranks: 2, bytes: 8000, time: 2000, busbw: 8000.0 / 2000 / 2},
		{ranks: 2, bytes: 4000, time: 4000, busbw: 4000.0 / 4000},
		{ranks: 2, bytes: 8000, time: 2000, busbw: 8000.0 / 2000 / 2},
	}
	if r.phases != want {
		t.Errorf("phases %+v, want %+v", r.phases, want)
	}
	// A rank without phase times (-1) leaves the row without them.
	rep = &Report{rows: []rowReport{hier}}
	rep.addPhases([][]byte{phaseRec(1, 2, 3), phaseRec(-1, -1, -1)}, []string{"a", "b"})
	if rep.rows[0].phased {
		t.Error("a row that one rank did not time got phases")
	}
}

func TestTraceProcessByHost(t *testing.T) {
	run := &Run{Rank: 1, Ranks: 4, Host: "b", Hosts: []string{"a", "b", "a", "b"}}
	var label, index any
	for _, ev := range traceProcess(run) {
		switch ev.Name {
		case "process_labels":
			label = ev.Args["labels"]
		case "process_sort_index":
			index = ev.Args["sort_index"]
		}
	}
	// b is the second host: its ranks sort after a's (0..3), by rank.
	if label != "host b" || index != 1*4+1 {
		t.Errorf("rank 1 on b: label %v, sort index %v; want host b, 5", label, index)
	}
}

func TestPhaseEvents(t *testing.T) {
	run := &Run{Rank: 0}
	k := result.Traced{Step: 2, Base: time.Millisecond, R: result.Record{Name: "g", Stream: 1, T0: 10 * time.Microsecond,
		Phases: [3]time.Duration{time.Microsecond, 3 * time.Microsecond, 2 * time.Microsecond}, Phased: true}}
	evs := phaseEvents(run, k)
	if len(evs) != 3 {
		t.Fatalf("%d sub-spans, want 3", len(evs))
	}
	// From the collective's start (1000 + 10 us), end to end.
	starts := []float64{1010, 1011, 1014}
	for i, ev := range evs {
		if ev.Ts != starts[i] || ev.Tid != 2 || ev.Cat != "phase" || ev.Args["phase"] != phaseKeys[i] {
			t.Errorf("sub-span %d: %+v, want ts %v on tid 2, phase %s", i, ev, starts[i], phaseKeys[i])
		}
	}
}

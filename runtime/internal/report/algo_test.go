package report

import (
	"testing"

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

func TestCrossHostBytes(t *testing.T) {
	cases := []struct {
		ran   bool
		hosts []string
		n     int64
		want  float64
		ok    bool
	}{
		{true, []string{"a", "a", "b", "b"}, 1000, 500, true},          // 2·1/2 · 1000/2
		{true, []string{"a", "b", "c", "d"}, 1000, 1500, true},         // 2·3/4 · 1000/1
		{true, []string{"a", "a", "a", "a"}, 1000, 0, true},            // one host
		{true, []string{"a", "a", "a", "b", "b", "b"}, 900, 300, true}, // 2·1/2 · 900/3
		{true, []string{"a", "a", "b"}, 1000, 0, false},                // uneven: flat
		{false, []string{"a", "a", "b", "b"}, 1000, 0, false},          // ran flat
		{true, nil, 1000, 0, false},
	}
	for _, c := range cases {
		got, ok := crossHostBytes(c.ran, c.hosts, c.n)
		if got != c.want || ok != c.ok {
			t.Errorf("crossHostBytes(%v, %v, %d) = %v, %v; want %v, %v", c.ran, c.hosts, c.n, got, ok, c.want, c.ok)
		}
	}
}

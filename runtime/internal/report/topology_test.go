package report

import "testing"

// TestTopology checks the hosts' order (by lowest rank), the ranks of each
// and the header's rendering, with ranks placed round-robin and in blocks.
func TestTopology(t *testing.T) {
	for _, c := range []struct {
		hosts []string
		want  string
	}{
		{[]string{"a", "a", "b", "b"}, "a (ranks 0-1), b (ranks 2-3)"},
		{[]string{"b", "a", "b", "a"}, "b (ranks 0, 2), a (ranks 1, 3)"},
		{[]string{"n1", "n1", "n1", "n2"}, "n1 (ranks 0-2), n2 (rank 3)"},
		{[]string{"x"}, "x (rank 0)"},
	} {
		info := &Info{hosts: c.hosts}
		if got := topologyLine(info.topology()); got != c.want {
			t.Errorf("hosts %q: topology %q, want %q", c.hosts, got, c.want)
		}
	}
}

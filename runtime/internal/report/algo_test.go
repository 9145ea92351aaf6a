package report

import "testing"

func TestCrossHostBytes(t *testing.T) {
	cases := []struct {
		backend string
		hosts   []string
		n       int64
		want    float64
		ok      bool
	}{
		{"cpu", []string{"a", "a", "b", "b"}, 1000, 500, true},          // 2·1/2 · 1000/2
		{"cpu", []string{"a", "b", "c", "d"}, 1000, 1500, true},         // 2·3/4 · 1000/1
		{"cpu", []string{"a", "a", "a", "a"}, 1000, 0, true},            // one host
		{"cpu", []string{"a", "a", "a", "b", "b", "b"}, 900, 300, true}, // 2·1/2 · 900/3
		{"cpu", []string{"a", "a", "b"}, 1000, 0, false},                // uneven: flat
		{"nccl", []string{"a", "a", "b", "b"}, 1000, 0, false},          // NCCL chooses
		{"cpu", nil, 1000, 0, false},
	}
	for _, c := range cases {
		got, ok := crossHostBytes(c.backend, c.hosts, c.n)
		if got != c.want || ok != c.ok {
			t.Errorf("crossHostBytes(%s, %v, %d) = %v, %v; want %v, %v", c.backend, c.hosts, c.n, got, ok, c.want, c.ok)
		}
	}
}

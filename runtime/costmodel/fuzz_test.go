package costmodel

import "testing"

// FuzzParseProfile: reading a profile file never panics, and a profile it
// accepts can be used for every collective at any size without a panic or
// a negative time.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"format":"syncgen-profile/1","ranks":2,"collectives":[{"collective":"allreduce","segments":[{"from_bytes":0,"alpha_us":3,"busbw_gbs":1},{"from_bytes":65536,"alpha_us":30,"busbw_gbs":4}]}]}`))
	f.Add([]byte(`{"format":"syncgen-profile/1","collectives":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			return
		}
		for _, c := range Collectives {
			for _, b := range []int64{0, 1, 1 << 20, 1 << 40} {
				if us, err := p.CollectiveUs(c, "sum", "f32", b, 4); err == nil && (us < 0 || us != us) {
					t.Fatalf("%s %d bytes: %v us", c, b, us)
				}
			}
		}
	})
}

package costmodel

import (
	"slices"
	"testing"
)

// FuzzParseProfile: reading a profile file never panics, and a profile it
// accepts can be used for every collective at any size without a panic or
// a negative time, and replays a step to an error or to times that are
// not negative and end in order.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"format":"syncgen-profile/1","ranks":2,"collectives":[{"collective":"allreduce","segments":[{"from_bytes":0,"alpha_us":3,"busbw_gbs":1},{"from_bytes":65536,"alpha_us":30,"busbw_gbs":4}]}]}`))
	f.Add([]byte(`{"format":"syncgen-profile/1","collectives":[]}`))
	f.Add([]byte(`{"format":"syncgen-profile/1","ranks":2,"mem_gbs":1e-9,"collectives":[{"collective":"allreduce","segments":[{"from_bytes":0,"alpha_us":3.6e9,"step_us":3.6e9,"busbw_gbs":1e-9}]}]}`))
	f.Add([]byte(`{"format":"syncgen-profile/1","ranks":2,"collectives":[{"collective":"allreduce","segments":[{"from_bytes":0,"alpha_us":1e308,"busbw_gbs":1e-300}]}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"format":"syncgen-profile/1","ranks":2,"collectives":[{"collective":"reduce","op":"max","dtype":"bf16","segments":[{"from_bytes":0,"alpha_us":3,"busbw_gbs":1}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			return
		}
		for _, c := range p.Curves {
			if (c.Op != "" && !slices.Contains(Ops, c.Op)) || (c.DType != "" && !slices.Contains(DTypes, c.DType)) {
				t.Fatalf("accepted curve %s: an op or dtype the language lacks", c.Key())
			}
		}
		for _, c := range Collectives {
			for _, b := range []int64{0, 1, 1 << 20, 1 << 40} {
				if us, err := p.CollectiveUs(c, "sum", "f32", b, 4); err == nil && (us < 0 || us != us) {
					t.Fatalf("%s %d bytes: %v us", c, b, us)
				}
			}
		}
		for _, b := range []int64{4, 1 << 20, 1 << 40} {
			s := sched([]string{"compute", "comm"}, [][2]int64{{b, 0}, {b, 1}}, []int64{b, b},
				Op{Kind: OpBackward, Stream: 0, Dur: ms(10)},
				Op{Kind: OpCollective, Stream: 1, Collective: "allreduce", Op: "sum", After: AfterReady, Buckets: []int{0}},
				Op{Kind: OpGroup, Body: []Op{{Kind: OpCollective, Stream: 1, Collective: "allreduce", Op: "sum", After: AfterReady, Buckets: []int{1}, ID: 1}}},
				Op{Kind: OpUpdate, Stream: 1, After: AfterSynced, Buckets: []int{0, 1}, Bytes: []int64{b, b}},
				Op{Kind: OpWait, Stream: 1})
			s.Buckets[1].CastBytes = b
			pr, err := Replay(s, p)
			if err != nil {
				continue
			}
			if pr.Step < 0 || pr.Exposed < 0 || pr.Comm < 0 {
				t.Fatalf("%d bytes: step %v, exposed %v, communication %v", b, pr.Step, pr.Exposed, pr.Comm)
			}
			for _, r := range pr.Rows {
				if r.Start < 0 || r.End < r.Start || r.End > pr.Step {
					t.Fatalf("%d bytes: row %+v in a step of %v", b, r, pr.Step)
				}
			}
		}
	})
}

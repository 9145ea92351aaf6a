package runtime

import "testing"

func BenchmarkFillF32(b *testing.B) {
	buf := make([]byte, 4<<20)
	p := PatternShape{Kind: FillUniform, Lo: -100, Hi: 100}.Params(0, 4, 1, 1)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		fillBytes(buf, F32, &p)
	}
}

func BenchmarkCheckF32(b *testing.B) {
	chain := []stmt{{kind: sColl, coll: CollAllReduce, op: Sum, buckets: []int{0}}}
	const n = 1 << 20
	e := testEngine(F32, F32, n, 4, 0, chain)
	out := make([]float64, checkBlock)
	b.SetBytes(n * 4)
	for i := 0; i < b.N; i++ {
		s := e.model.newSim(0)
		for i0 := int64(0); i0 < n; i0 += checkBlock {
			s.run(i0, out)
		}
	}
}

package engine

import (
	"bytes"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/ckpt"
	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// A sharded bucket is put together from every old rank's slice (the last
// one short, the padding past the bucket absent); a replicated one is
// any rank's copy.
func TestWholeBucket(t *testing.T) {
	const elems, world = 10, 4 // padded to 12: slices of 3, the last holds 1
	full := make([]byte, elems*4)
	for i := range full {
		full[i] = byte(i)
	}
	bi := ckpt.BucketInfo{Name: "g", DType: "f32", Elems: elems, States: 0, Sharded: true, Slice: 3}
	shards := make([]*ckpt.Shard, world)
	for r := range world {
		lo, hi := min(int64(r)*3, elems), min(int64(r+1)*3, elems)
		shards[r] = &ckpt.Shard{Tensors: map[string]ckpt.Tensor{"param/g": {Data: full[lo*4 : hi*4]}}}
	}
	read := func(r int) (*ckpt.Shard, error) { return shards[r], nil }
	got, err := wholeBucket(bi, "param/g", elem.F32, world, 1, read)
	if err != nil || !bytes.Equal(got, full) {
		t.Fatalf("sharded: %v %v", got, err)
	}
	bi.Sharded = false
	shards[3] = &ckpt.Shard{Tensors: map[string]ckpt.Tensor{"param/g": {Data: full}}}
	if got, err := wholeBucket(bi, "param/g", elem.F32, world, 7, read); err != nil || !bytes.Equal(got, full) {
		t.Fatalf("replicated, from a larger world's rank: %v %v", got, err)
	}
	shards[3] = &ckpt.Shard{Tensors: map[string]ckpt.Tensor{"param/g": {Data: full[:8]}}}
	if _, err := wholeBucket(bi, "param/g", elem.F32, world, 7, read); err == nil {
		t.Fatal("a short tensor was taken")
	}
}

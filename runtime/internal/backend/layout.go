package backend

import (
	"fmt"
	"sort"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// Layout is a plan's memory on a backend: every bucket's wire buffer and
// where every tensor's gradient lives.
type Layout struct {
	Buckets []BucketMem
	Tensors []TensorMem
}

// BucketMem is a bucket's wire buffer.
type BucketMem struct {
	Buf Buffer
	// Elems is the buffer's length: the plan's Elems, padded to a multiple
	// of the world size for buckets that a sliced collective (allgather,
	// reducescatter) touches.
	Elems int64
	Span  Span
}

// TensorMem is where a tensor's gradient lives.
type TensorMem struct {
	Elems int64
	// Store is the gradient: a view into the bucket's wire buffer when the
	// dtypes agree (InPlace), separate storage otherwise.
	Store   Span
	InPlace bool
	// Wire is the tensor's place in its bucket's wire buffer (zero Span if
	// in no bucket).
	Wire Span
}

// SlicedBuckets reports which of the plan's n buckets a sliced collective
// touches anywhere in the program.
func SlicedBuckets(prog *plan.Program, n int) []bool {
	out := make([]bool, n)
	for _, ss := range [][]plan.Stmt{plan.Flat(prog.Init), plan.Flat(prog.Step)} {
		for _, s := range ss {
			if s.Kind != plan.StmtColl || !s.Coll.Info().Sliced {
				continue
			}
			if s.Into != nil {
				// Out of place, only a reducescatter's source is sliced
				// (its output is one slice, an allgather's a whole
				// number of them).
				if s.Coll == plan.CollReduceScatter {
					out[s.Buckets[0]] = true
				}
				continue
			}
			for _, b := range s.Buckets {
				out[b] = true
			}
		}
	}
	return out
}

// Allocate creates the buckets' wire buffers (padded where sliced says,
// for a world of size ranks) and the separate storage of tensors that do
// not live in place: one arena per dtype, each tensor 64-byte aligned. The
// contents are undefined.
func Allocate(be Backend, p *plan.Plan, sliced []bool, size int) (*Layout, error) {
	l := &Layout{Buckets: make([]BucketMem, len(p.Buckets)), Tensors: make([]TensorMem, len(p.Tensors))}
	for i, b := range p.Buckets {
		n := b.Elems
		if sliced[i] && n%int64(size) != 0 {
			n += int64(size) - n%int64(size)
		}
		buf, err := be.Alloc(b.Wire, max(n, 1))
		if err != nil {
			return nil, fmt.Errorf("bucket %q (%s of %s): %w", b.Name, text.Count(n), b.Wire, err)
		}
		l.Buckets[i] = BucketMem{Buf: buf, Elems: n, Span: Span{Buf: buf, Off: 0, N: n, DType: b.Wire}}
	}
	arenaSize := map[elem.DType]int64{}
	offsets := make([]int64, len(p.Tensors))
	for i := range p.Tensors {
		t := &p.Tensors[i]
		tm := &l.Tensors[i]
		tm.Elems = t.Elems()
		if t.Bucket >= 0 {
			b := &l.Buckets[t.Bucket]
			tm.Wire = Span{Buf: b.Buf, Off: t.Offset, N: tm.Elems, DType: p.Buckets[t.Bucket].Wire}
			if t.DType == p.Buckets[t.Bucket].Wire {
				tm.Store = tm.Wire
				tm.InPlace = true
				continue
			}
		}
		align := 64 / t.DType.Size()
		off := (arenaSize[t.DType] + align - 1) / align * align
		offsets[i] = off
		arenaSize[t.DType] = off + tm.Elems
	}
	dtypes := make([]elem.DType, 0, len(arenaSize))
	for dt := range arenaSize {
		dtypes = append(dtypes, dt)
	}
	sort.Slice(dtypes, func(i, j int) bool { return dtypes[i] < dtypes[j] })
	arenas := map[elem.DType]Buffer{}
	for _, dt := range dtypes {
		buf, err := be.Alloc(dt, arenaSize[dt])
		if err != nil {
			return nil, fmt.Errorf("storage of the %s tensors (%s): %w", dt, text.Count(arenaSize[dt]), err)
		}
		arenas[dt] = buf
	}
	for i := range p.Tensors {
		tm := &l.Tensors[i]
		if tm.InPlace {
			continue
		}
		dt := p.Tensors[i].DType
		tm.Store = Span{Buf: arenas[dt], Off: offsets[i], N: tm.Elems, DType: dt}
	}
	return l, nil
}

// Command testprog runs one of a set of small plans with the syncgen
// runtime, for the runtime's tests and benchmarks. The first argument names
// the plan, the rest are the runtime's own flags:
//
//	mpirun -np 4 testprog matrix --steps 3
//	mpirun -np 2 testprog allreduce:64MiB --steps 20 --check off
//
// The plans stand in for generated programs: they fill the same tables and
// call the same Step methods that syncgen's code generator emits.
package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	rt "github.com/syncgen/syncgen/runtime"
)

// plans maps a plan name to its constructor; the argument is what follows
// a ':' in the name (e.g. the size in "allreduce:64MiB").
var plans = map[string]func(arg string) (*rt.Plan, error){
	"basic":      basic,
	"matrix":     matrix,
	"wire":       wire,
	"overlap":    overlap,
	"group":      group,
	"chain":      chain,
	"init":       initPlan,
	"big":        big,
	"allreduce":  allreduce,
	"avgsum":     avgSum,
	"other":      other,
	"root":       rootPlan,
	"after":      afterPlan,
	"train":      trainPlan,
	"apart":      apartPlan,
	"syncedinto": syncedIntoPlan,
	"zerointo":   zeroIntoPlan,
	"scaled":     scaledPlan,
	"zero":       zeroPlan,
	"wavg":       wavgPlan,
	"ranks":      ranksPlan,
	"pieces":     piecesPlan,
	"into":       intoPlan,
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	name, arg, _ := strings.Cut(os.Args[1], ":")
	mk, ok := plans[name]
	if !ok {
		usage()
	}
	p, err := mk(arg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testprog: %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	os.Args = append([]string{os.Args[0]}, os.Args[2:]...)
	rt.Main(p)
}

func usage() {
	var names []string
	for n := range plans {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: testprog PLAN[:ARG] [runtime flags]\nplans: %s\n", strings.Join(names, " "))
	os.Exit(2)
}

// builder assembles a plan's tables.
type builder struct {
	p *rt.Plan
}

func newBuilder(name string) *builder {
	return &builder{p: &rt.Plan{Name: name, Source: "testdata/" + name + ".sync", Hash: "test-" + name,
		Run: rt.Run{Steps: 3, Warmup: 1, CheckEvery: 1}}}
}

func (b *builder) stream(name string, prio rt.Priority) int {
	b.p.Streams = append(b.p.Streams, rt.Stream{Name: name, Priority: prio})
	return len(b.p.Streams) - 1
}

func (b *builder) tensor(name string, dt rt.DType, shape ...int64) int {
	b.p.Tensors = append(b.p.Tensors, rt.Tensor{Name: name, DType: dt, Shape: shape, Bucket: -1})
	return len(b.p.Tensors) - 1
}

// bucket lays tensors out one after another in a new bucket.
func (b *builder) bucket(name string, wire rt.DType, tensors ...int) int {
	bi := len(b.p.Buckets)
	var off int64
	for _, t := range tensors {
		tt := &b.p.Tensors[t]
		tt.Bucket, tt.Offset = bi, off
		n := int64(1)
		for _, d := range tt.Shape {
			n *= d
		}
		off += n
	}
	b.p.Buckets = append(b.p.Buckets, rt.Bucket{Name: name, Wire: wire, Elems: off, Tensors: tensors})
	return bi
}

var dtypes = []rt.DType{rt.F64, rt.F32, rt.F16, rt.BF16, rt.I64, rt.I32, rt.I8, rt.U8}
var dtypeNames = []string{"", "f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"}
var opNames = []string{"", "sum", "avg", "min", "max", "prod", "wavg"}

// src returns the position of a statement on line. Made once per line, as
// generated code has its positions as constants: the runtime's test of
// allocation-free steps counts the plan's own allocations too.
func src(line int) rt.Src {
	if line >= 0 && line < len(srcs) {
		return srcs[line]
	}
	return rt.Src(fmt.Sprintf("test.sync:%d:5", line))
}

var srcs = func() (s [512]rt.Src) {
	for i := range s {
		s[i] = rt.Src(fmt.Sprintf("test.sync:%d:5", i))
	}
	return s
}()

// basic: two buckets of f32 gradients all-reduced after ready.
func basic(string) (*rt.Plan, error) { return basicWith(rt.Avg) }

func basicWith(op rt.RedOp) (*rt.Plan, error) {
	b := newBuilder("basic")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	t0 := b.tensor("fc1.weight", rt.F32, 64, 33)
	t1 := b.tensor("fc1.bias", rt.F32, 64)
	t2 := b.tensor("fc2.weight", rt.F32, 10, 64)
	t3 := b.tensor("fc2.bias", rt.F32, 10)
	b.tensor("bn.weight", rt.F32, 64) // in no bucket
	b0 := b.bucket("grads[0]", rt.F32, t3, t2)
	b1 := b.bucket("grads[1]", rt.F32, t1, t0)
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 20*time.Millisecond)
		s.AllReduce(src(11), comm, op, rt.AfterReady(), b0, b1)
		s.Wait(src(12), comm)
	}
	return b.p, nil
}

// ranks: basic with a ranks declaration, `ranks batch 90 balance static
// { SLOW speed 0.5 }` (SLOW the argument, default 1), on test.sync's lines
// 3 and 4.
func ranksPlan(arg string) (*rt.Plan, error) {
	slow := 1
	if arg != "" {
		var err error
		if slow, err = strconv.Atoi(arg); err != nil {
			return nil, fmt.Errorf("want ranks:SLOWRANK")
		}
	}
	p, err := basicWith(rt.WAvg)
	if err != nil {
		return nil, err
	}
	p.Name, p.Source, p.Hash = "ranks", "testdata/ranks.sync", "test-ranks"
	p.Ranks = &rt.Ranks{Speeds: []rt.RankSpeed{{First: slow, Last: slow, Speed: 0.5, At: "test.sync:4"}},
		Batch: 90, Balance: "static", At: "test.sync:3"}
	return p, nil
}

// matrix: every collective with every operator on every dtype, one bucket
// each, with an odd number of elements (so allgather and reducescatter
// buckets are padded).
func matrix(string) (*rt.Plan, error) {
	b := newBuilder("matrix")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	type job struct {
		coll string
		op   rt.RedOp
		b    int
	}
	var jobs []job
	line := 100
	for _, dt := range dtypes {
		add := func(coll string, op rt.RedOp) {
			name := fmt.Sprintf("%s.%s", dtypeNames[dt], coll)
			if op != rt.NoOp {
				name += "." + opNames[op]
			}
			t := b.tensor(name+".grad", dt, 7, 11) // 77 elements
			t2 := b.tensor(name+".grad2", dt, 6)
			jobs = append(jobs, job{coll, op, b.bucket(name, dt, t, t2)})
		}
		for op := rt.Sum; op <= rt.Prod; op++ {
			add("allreduce", op)
			add("reduce", op)
			add("reducescatter", op)
		}
		add("broadcast", rt.NoOp)
		add("allgather", rt.NoOp)
	}
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 5*time.Millisecond)
		for i, j := range jobs {
			at := src(line + i)
			switch j.coll {
			case "allreduce":
				s.AllReduce(at, comm, j.op, rt.AfterReady(), j.b)
			case "reduce":
				s.Reduce(at, comm, j.op, (i/3)%maxRoot(), rt.AfterReady(), j.b)
			case "reducescatter":
				s.ReduceScatter(at, comm, j.op, rt.AfterReady(), j.b)
			case "broadcast":
				s.Broadcast(at, comm, (i/3)%maxRoot(), rt.AfterReady(), j.b)
			case "allgather":
				s.AllGather(at, comm, rt.AfterReady(), j.b)
			}
		}
		s.Wait(src(20), comm)
	}
	return b.p, nil
}

// wavgPlan: the weighted average on every float dtype and every reducing
// collective, and on a bf16 wire of f32 tensors, with a backward long
// enough for the ranks' speeds and shares to show (--speed, --batch,
// --balance).
func wavgPlan(string) (*rt.Plan, error) {
	b := newBuilder("wavg")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	type job struct {
		coll string
		b    int
	}
	var jobs []job
	for _, dt := range []rt.DType{rt.F64, rt.F32, rt.F16, rt.BF16} {
		for _, coll := range []string{"allreduce", "reduce", "reducescatter"} {
			name := fmt.Sprintf("%s.%s.wavg", dtypeNames[dt], coll)
			t := b.tensor(name+".grad", dt, 7, 11) // 77 elements
			t2 := b.tensor(name+".grad2", dt, 6)
			jobs = append(jobs, job{coll, b.bucket(name, dt, t, t2)})
		}
	}
	wt := b.tensor("f32_on_bf16.wavg.grad", rt.F32, 50)
	jobs = append(jobs, job{"allreduce", b.bucket("f32_on_bf16.wavg", rt.BF16, wt)})
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 20*time.Millisecond)
		for i, j := range jobs {
			at := src(100 + i)
			switch j.coll {
			case "allreduce":
				s.AllReduce(at, comm, rt.WAvg, rt.AfterReady(), j.b)
			case "reduce":
				s.Reduce(at, comm, rt.WAvg, i%maxRoot(), rt.AfterReady(), j.b)
			case "reducescatter":
				s.ReduceScatter(at, comm, rt.WAvg, rt.AfterReady(), j.b)
			}
		}
		s.Wait(src(20), comm)
	}
	return b.p, nil
}

// maxRoot is the number of ranks roots cycle through: the world size from
// Open MPI's environment (1 when run alone), so every root is valid.
func maxRoot() int {
	n, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_SIZE"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// wire: tensors whose dtype differs from their bucket's wire dtype.
func wire(string) (*rt.Plan, error) {
	b := newBuilder("wire")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	type pair struct{ t, w rt.DType }
	pairs := []pair{{rt.F32, rt.BF16}, {rt.F32, rt.F16}, {rt.F16, rt.F32}, {rt.BF16, rt.F32}, {rt.F64, rt.F16},
		{rt.F32, rt.F64}, {rt.I32, rt.F32}, {rt.F16, rt.BF16}}
	var sums, avgs []int
	for _, pr := range pairs {
		for _, op := range []string{"sum", "avg"} {
			name := fmt.Sprintf("%s_on_%s.%s", dtypeNames[pr.t], dtypeNames[pr.w], op)
			a := b.tensor(name+".a", pr.t, 100)
			c := b.tensor(name+".b", pr.w, 30) // same dtype as the wire: in place
			d := b.tensor(name+".c", pr.t, 3, 3)
			bi := b.bucket(name, pr.w, a, c, d)
			if op == "sum" {
				sums = append(sums, bi)
			} else {
				avgs = append(avgs, bi)
			}
		}
	}
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 5*time.Millisecond)
		s.AllReduce(src(11), comm, rt.Sum, rt.AfterReady(), sums...)
		s.AllReduce(src(12), comm, rt.Avg, rt.AfterReady(), avgs...)
		s.Wait(src(13), comm)
	}
	return b.p, nil
}

// overlap: a long backward over many buckets, all-reduced after ready, so
// that the first buckets' collectives run while backward still runs.
func overlap(string) (*rt.Plan, error) {
	b := newBuilder("overlap")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	var ts []int
	for i := 0; i < 16; i++ {
		ts = append(ts, b.tensor(fmt.Sprintf("layer%d.weight", i), rt.F32, 256, 256))
	}
	var bs []int
	for i := 0; i < 8; i++ {
		// Reverse order, as DDP: the last tensors first.
		bs = append(bs, b.bucket(fmt.Sprintf("grads[%d]", i), rt.F32, ts[15-2*i], ts[14-2*i]))
	}
	b.p.Step = func(s *rt.Step) {
		s.Compute(src(9), compute, 10*time.Millisecond)
		s.Backward(src(10), compute, 80*time.Millisecond)
		s.AllReduce(src(11), comm, rt.Sum, rt.AfterReady(), bs...)
		s.Wait(src(12), comm)
	}
	return b.p, nil
}

// after: a compute and a backward that wait for a stream, not the host
// (`after comm`): the second backward overwrites the bucket only once the
// first allreduce is done with it.
func afterPlan(string) (*rt.Plan, error) {
	b := newBuilder("after")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	side := b.stream("side", rt.PriorityLow)
	g := b.bucket("grads", rt.F32, b.tensor("w", rt.F32, 256, 1024), b.tensor("v", rt.F32, 1000))
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 5*time.Millisecond)
		s.AllReduce(src(11), comm, rt.Sum, rt.AfterReady(), g)
		s.Compute(src(12), side, 3*time.Millisecond, rt.AfterStream(comm))
		s.Backward(src(13), compute, 5*time.Millisecond, rt.AfterStream(comm))
		s.AllReduce(src(14), comm, rt.Avg, rt.AfterReady(), g)
		s.Wait(src(15), comm)
	}
	return b.p, nil
}

// pieces: a backward in two pieces on two streams, the first one longer;
// bucket g0's tensors are split between them, so its allreduce waits for
// both, and a frozen tensor that no piece names keeps its initial values.
func piecesPlan(string) (*rt.Plan, error) {
	b := newBuilder("pieces")
	compute := b.stream("compute", rt.PriorityDefault)
	side := b.stream("side", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	w0, b0 := b.tensor("l0.w", rt.F32, 64, 64), b.tensor("l0.b", rt.F32, 64)
	w1, b1 := b.tensor("l1.w", rt.F32, 64, 64), b.tensor("l1.b", rt.F32, 64)
	e := b.tensor("embed", rt.F32, 16)
	b.p.Tensors[e].Frozen = true
	g0 := b.bucket("g0", rt.F32, w0, b0)
	g1 := b.bucket("g1", rt.F32, w1, b1)
	b.p.Step = func(s *rt.Step) {
		s.BackwardFor(src(10), compute, 8*time.Millisecond, rt.After{}, b0, w1, b1)
		s.BackwardFor(src(11), side, 2*time.Millisecond, rt.After{}, w0)
		s.AllReduce(src(12), comm, rt.Sum, rt.AfterReady(), g0)
		s.AllReduce(src(13), comm, rt.Avg, rt.AfterReady(), g1)
		s.Wait(src(14), comm)
	}
	return b.p, nil
}

// group: collectives issued as groups, one of them across two streams.
func group(string) (*rt.Plan, error) {
	b := newBuilder("group")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	comm2 := b.stream("comm2", rt.PriorityLow)
	var bs []int
	for i := 0; i < 5; i++ {
		t := b.tensor(fmt.Sprintf("w%d", i), rt.F32, 1000+int64(i))
		bs = append(bs, b.bucket(fmt.Sprintf("b%d", i), rt.F32, t))
	}
	h := b.tensor("head", rt.F16, 333)
	hb := b.bucket("head", rt.F16, h)
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 10*time.Millisecond)
		s.Group(src(11), func() {
			s.AllReduce(src(12), comm, rt.Sum, rt.AfterReady(), bs[0], bs[1])
			s.AllReduce(src(13), comm2, rt.Max, rt.AfterReady(), bs[2])
			s.Broadcast(src(14), comm2, 0, rt.AfterReady(), hb)
		})
		s.Group(src(15), func() {
			s.AllReduce(src(16), comm, rt.Avg, rt.AfterStream(comm2), bs[3], bs[4])
		})
		s.Wait(src(17), comm)
		s.Wait(src(18), comm2)
	}
	return b.p, nil
}

// chain: several collectives on the same buckets in one step, on two
// streams ordered by after.
func chain(string) (*rt.Plan, error) {
	b := newBuilder("chain")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	side := b.stream("side", rt.PriorityDefault)
	x := b.bucket("x", rt.F32, b.tensor("x", rt.F32, 500))
	y := b.bucket("y", rt.BF16, b.tensor("y", rt.BF16, 123))
	z := b.bucket("z", rt.I32, b.tensor("z", rt.I32, 77))
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 5*time.Millisecond)
		s.AllReduce(src(11), comm, rt.Sum, rt.AfterReady(), x, y, z)
		s.Broadcast(src(12), side, 0, rt.AfterStream(comm), x)
		s.ReduceScatter(src(13), side, rt.Max, rt.AfterStream(comm), y)
		s.AllGather(src(14), side, rt.AfterStream(side), y)
		s.Reduce(src(15), comm, rt.Avg, 0, rt.AfterStream(side), z)
		s.Compute(src(16), compute, 2*time.Millisecond)
		s.Wait(src(17), side)
		s.Wait(src(18), comm)
	}
	return b.p, nil
}

// into: every collective out of place (`into NAME`), on f32, on f16
// tensors with an f32 wire and on i32, with odd lengths (the
// reducescatter's source is padded); a reducescatter into a shard and an
// allgather of the shard into a full buffer; an output used in place, as
// the source of another, and written again by another collective; and a
// group with an out-of-place member; an allgather into from a bucket
// that an in-place reducescatter pads. Outputs follow their sources:
// bucket 3 is the first output (the corruption tests name it).
func intoPlan(string) (*rt.Plan, error) {
	b := newBuilder("into")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	g := b.bucket("grads", rt.F32, b.tensor("w", rt.F32, 9, 11), b.tensor("v", rt.F32, 4))
	h := b.bucket("half", rt.F32, b.tensor("e", rt.F16, 37))
	n := b.bucket("ints", rt.I32, b.tensor("c", rt.I32, 29))
	out := func(name string, of int, size rt.OutSize) int {
		b.p.Buckets = append(b.p.Buckets, rt.Bucket{Name: name, Wire: b.p.Buckets[of].Wire, Elems: b.p.Buckets[of].Elems, Out: &rt.Output{Of: of, Size: size}})
		return len(b.p.Buckets) - 1
	}
	sum := out("sum", g, rt.OutSame)
	shard := out("shard", g, rt.OutShard)
	full := out("full", shard, rt.OutGather)
	hall := out("hall", h, rt.OutGather)
	hmax := out("hmax", h, rt.OutSame)
	nred := out("nred", n, rt.OutSame)
	copied := out("copied", sum, rt.OutSame)
	// A source that an in-place reducescatter pads: the allgather into
	// padall sends its 13 elements, not the padding.
	pad := b.bucket("pad", rt.F32, b.tensor("p", rt.F32, 13))
	padall := out("padall", pad, rt.OutGather)
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 2*time.Millisecond)
		s.AllReduceInto(src(11), comm, rt.Avg, rt.AfterReady(), g, sum)
		s.ReduceScatterInto(src(12), comm, rt.Sum, rt.After{}, g, shard)
		s.AllGatherInto(src(13), comm, rt.After{}, shard, full)
		s.Group(src(14), func() {
			s.AllGatherInto(src(15), comm, rt.After{}, h, hall)
			s.AllReduceInto(src(16), comm, rt.Max, rt.After{}, h, hmax)
		})
		s.ReduceInto(src(17), comm, rt.Sum, 0, rt.After{}, n, nred)
		s.AllReduce(src(18), comm, rt.Sum, rt.After{}, sum)
		s.BroadcastInto(src(19), comm, 0, rt.After{}, sum, copied)
		s.BroadcastInto(src(20), comm, 0, rt.After{}, g, sum)
		s.AllGatherInto(src(21), comm, rt.AfterReady(), pad, padall)
		s.ReduceScatter(src(22), comm, rt.Sum, rt.After{}, pad)
		s.Wait(src(23), comm)
	}
	return b.p, nil
}

// initPlan: an init block that broadcasts the parameters before the steps.
func initPlan(string) (*rt.Plan, error) {
	b := newBuilder("init")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	w := b.bucket("params", rt.F32, b.tensor("w", rt.F32, 300), b.tensor("v", rt.F32, 20))
	f := b.bucket("frozen", rt.F32, b.tensor("emb", rt.F32, 50))
	b.p.Tensors[len(b.p.Tensors)-1].Frozen = true
	b.p.Init = func(s *rt.Step) {
		s.Broadcast(src(5), comm, 0, rt.After{}, w, f)
		s.Wait(src(6), comm)
	}
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 2*time.Millisecond)
		s.AllReduce(src(11), comm, rt.Sum, rt.AfterReady(), w)
		s.AllReduce(src(12), comm, rt.Max, rt.After{}, f)
		s.Wait(src(13), comm)
	}
	return b.p, nil
}

// big: one bucket larger than the CPU backend's chunk, checked.
func big(arg string) (*rt.Plan, error) {
	n := int64(5<<20 + 3) // f32 elements: 20 MiB
	if arg != "" {
		v, err := strconv.ParseInt(arg, 10, 64)
		if err != nil {
			return nil, err
		}
		n = v
	}
	b := newBuilder("big")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	g := b.bucket("grads", rt.F32, b.tensor("w", rt.F32, n))
	h := b.bucket("half", rt.BF16, b.tensor("h", rt.BF16, n/2))
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 10*time.Millisecond)
		s.AllReduce(src(11), comm, rt.Avg, rt.AfterReady(), g, h)
		s.Broadcast(src(12), comm, 0, rt.After{}, h)
		s.Wait(src(13), comm)
	}
	return b.p, nil
}

// allreduce ("allreduce:SIZE[:OP[:DTYPE]]"): one bucket of the given size
// (f32 by default), all-reduced with OP (sum by default), and nothing
// else: the runtime side of bench/allreduce.sh and bench/avg.sh.
func allreduce(arg string) (*rt.Plan, error) {
	parts := strings.Split(arg, ":")
	size, err := parseSize(parts[0])
	if err != nil {
		return nil, err
	}
	op, dt := rt.Sum, rt.F32
	if len(parts) > 1 {
		if i := slices.Index(opNames, parts[1]); i > 0 {
			op = rt.RedOp(i)
		} else {
			return nil, fmt.Errorf("unknown op %q", parts[1])
		}
	}
	if len(parts) > 2 {
		if dt = dtypeOf(parts[2]); dt == rt.InvalidDType {
			return nil, fmt.Errorf("unknown dtype %q", parts[2])
		}
	}
	b := newBuilder("allreduce")
	comm := b.stream("comm", rt.PriorityHigh)
	g := b.bucket("buf", dt, b.tensor("buf", dt, max(size/dt.Size(), 1)))
	b.p.Hash = "bench-allreduce-" + arg
	// Positions made once, as generated code has them as constants: a
	// Sprintf a statement would be the benchmark's own cost, not the
	// runtime's.
	at11, at12 := src(11), src(12)
	b.p.Step = func(s *rt.Step) {
		s.AllReduce(at11, comm, op, rt.After{}, g)
		s.Wait(at12, comm)
	}
	return b.p, nil
}

// avgSum: two buckets of the same size and dtype ("avgsum:1MiB:bf16"),
// one allreduced with op sum and one with op avg, the host waiting after
// each, their order swapped every step: a paired comparison, in which
// both see the same load on the machine at the same moments, for
// bench/avg.sh.
func avgSum(arg string) (*rt.Plan, error) {
	sizeArg, dtArg, _ := strings.Cut(arg, ":")
	size, err := parseSize(sizeArg)
	if err != nil {
		return nil, err
	}
	dt := rt.F32
	if dtArg != "" {
		if dt = dtypeOf(dtArg); dt == rt.InvalidDType {
			return nil, fmt.Errorf("unknown dtype %q", dtArg)
		}
	}
	b := newBuilder("avgsum")
	comm := b.stream("comm", rt.PriorityHigh)
	n := max(size/dt.Size(), 1)
	sum := b.bucket("sum", dt, b.tensor("sum", dt, n))
	avg := b.bucket("avg", dt, b.tensor("avg", dt, n))
	b.p.Hash = "bench-avgsum-" + arg
	at11, at12, at13, at14 := src(11), src(12), src(13), src(14)
	step := 0
	b.p.Step = func(s *rt.Step) {
		first, firstOp, second, secondOp := sum, rt.Sum, avg, rt.Avg
		if step%2 == 1 {
			first, firstOp, second, secondOp = avg, rt.Avg, sum, rt.Sum
		}
		step++
		s.AllReduce(at11, comm, firstOp, rt.After{}, first)
		s.Wait(at12, comm)
		s.AllReduce(at13, comm, secondOp, rt.After{}, second)
		s.Wait(at14, comm)
	}
	return b.p, nil
}

// other: a plan that differs from basic, for the plan-mismatch test.
func other(string) (*rt.Plan, error) {
	p, _ := basicWith(rt.Sum)
	p.Name, p.Source, p.Hash = "other", "testdata/other.sync", "test-other"
	return p, nil
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.s) {
			s, mult = strings.TrimSuffix(s, u.s), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want e.g. 64MiB", s)
	}
	return n * mult, nil
}

// rootPlan: a broadcast from the root given as the argument, to test roots
// outside the world.
func rootPlan(arg string) (*rt.Plan, error) {
	root, err := strconv.Atoi(arg)
	if err != nil {
		return nil, fmt.Errorf("root %q: %v", arg, err)
	}
	b := newBuilder("root")
	comm := b.stream("comm", rt.PriorityHigh)
	g := b.bucket("params", rt.F32, b.tensor("w", rt.F32, 10))
	b.p.Step = func(s *rt.Step) {
		s.Broadcast(src(7), comm, root, rt.After{}, g)
		s.Wait(src(8), comm)
	}
	return b.p, nil
}

// trainPlan ("train:OPT:DT[:master][:wavg]"): two buckets of DT
// gradients, all-reduced with avg (wavg: weighted by the ranks' shares)
// after ready, each updated with optimizer OPT (sgd or adamw) on the
// compute stream as soon as its own allreduce ends.
func trainPlan(arg string) (*rt.Plan, error) {
	parts := strings.Split(arg, ":")
	if len(parts) < 2 {
		return nil, fmt.Errorf("want train:sgd|adamw:DTYPE[:master][:wavg]")
	}
	opt := rt.Optimizer{Kind: rt.SGD, LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4}
	switch parts[0] {
	case "sgd":
	case "sgd-plain":
		opt = rt.Optimizer{Kind: rt.SGD, LR: 0.125}
	case "adamw":
		opt = rt.Optimizer{Kind: rt.AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	default:
		return nil, fmt.Errorf("unknown optimizer %q", parts[0])
	}
	dt := dtypeOf(parts[1])
	if dt == rt.InvalidDType {
		return nil, fmt.Errorf("unknown dtype %q", parts[1])
	}
	opt.Master = slices.Contains(parts[2:], "master")
	op := rt.Avg
	if slices.Contains(parts[2:], "wavg") {
		op = rt.WAvg
	}
	b := newBuilder("train")
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	w0 := b.tensor("l0.weight", dt, 33, 17)
	b0 := b.tensor("l0.bias", dt, 33)
	w1 := b.tensor("l1.weight", dt, 10, 33)
	b1 := b.tensor("l1.bias", dt, 10)
	g0 := b.bucket("grads[0]", dt, b1, w1)
	g1 := b.bucket("grads[1]", dt, b0, w0)
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, 2*time.Millisecond)
		s.AllReduce(src(11), comm, op, rt.AfterReady(), g0, g1)
		s.Update(src(12), compute, opt, rt.AfterSynced(), g0, g1)
		s.Wait(src(13), compute)
	}
	return b.p, nil
}

// syncedUpdateStep is a step that averages bucket g on comm once it is
// ready, then unscales and updates it with opt on compute after synced.
func syncedUpdateStep(compute, comm int, opt rt.Optimizer, g int) func(*rt.Step) {
	return func(s *rt.Step) {
		s.Backward(src(10), compute, time.Millisecond)
		s.AllReduce(src(11), comm, rt.Avg, rt.AfterReady(), g)
		s.Unscale(src(12), compute, false, rt.AfterSynced(), g)
		s.Update(src(13), compute, opt, rt.AfterSynced(), g)
		s.Wait(src(14), compute)
	}
}

// apartPlan ("apart"): f32 gradients of a million elements on a bf16
// wire, so that they live apart from the wire buffer and the allreduce
// casts them back into place after the collective, unscaled and updated
// on another stream than the allreduce's as soon as it ends (after
// synced): both must wait for the casts back.
func apartPlan(string) (*rt.Plan, error) {
	b := newBuilder("apart")
	b.p.Scaler = &rt.Scaler{Rule: rt.ScaleStatic, Init: 4}
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	g := b.bucket("grads", rt.BF16, b.tensor("w", rt.F32, 1024, 1024))
	opt := rt.Optimizer{Kind: rt.SGD, LR: 0.125}
	b.p.Step = syncedUpdateStep(compute, comm, opt, g)
	return b.p, nil
}

// syncedIntoPlan ("syncedinto"): a bucket all-reduced in place, then read
// by an allreduce into an output on another stream that first computes
// for a while, then unscaled and updated after synced: the unscale, which
// writes the bucket, must wait for the out-of-place allreduce too (the
// bucket's latest collective), or the output holds unscaled sums.
func syncedIntoPlan(string) (*rt.Plan, error) {
	b := newBuilder("syncedinto")
	b.p.Scaler = &rt.Scaler{Rule: rt.ScaleStatic, Init: 4}
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	side := b.stream("side", rt.PriorityDefault)
	g := b.bucket("grads", rt.F32, b.tensor("w", rt.F32, 1000))
	b.p.Buckets = append(b.p.Buckets, rt.Bucket{Name: "sum", Wire: rt.F32, Elems: 1000, Out: &rt.Output{Of: g, Size: rt.OutSame}})
	sum := len(b.p.Buckets) - 1
	opt := rt.Optimizer{Kind: rt.SGD, LR: 0.125}
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, time.Millisecond)
		s.AllReduce(src(11), comm, rt.Sum, rt.AfterReady(), g)
		s.Compute(src(12), side, 50*time.Millisecond)
		s.AllReduceInto(src(13), side, rt.Sum, rt.AfterStream(comm), g, sum)
		s.Unscale(src(14), compute, false, rt.AfterSynced(), g)
		s.Update(src(15), compute, opt, rt.AfterSynced(), g)
		s.Wait(src(16), side)
	}
	return b.p, nil
}

// scaledPlan ("scaled:RULE[:DT[:pre]]"): DT gradients (f32 by default)
// with loss scaler RULE (static, torch, megatron, deepspeed) from a small
// initial scale, all-reduced with avg (divided before the sum with pre),
// unscaled and updated with AdamW with f32 master parameters.
func scaledPlan(arg string) (*rt.Plan, error) {
	parts := strings.Split(arg, ":")
	rules := map[string]rt.Scaler{
		"static":    {Rule: rt.ScaleStatic, Init: 64},
		"torch":     {Rule: rt.ScaleTorch, Init: 256, Interval: 3},
		"megatron":  {Rule: rt.ScaleMegatron, Init: 256, Interval: 3},
		"deepspeed": {Rule: rt.ScaleDeepSpeed, Init: 256, Interval: 3},
	}
	sc, ok := rules[parts[0]]
	if !ok {
		return nil, fmt.Errorf("want scaled:static|torch|megatron|deepspeed[:DTYPE[:pre]]")
	}
	dt := rt.F32
	if len(parts) > 1 {
		if dt = dtypeOf(parts[1]); dt == rt.InvalidDType {
			return nil, fmt.Errorf("unknown dtype %q", parts[1])
		}
	}
	b := newBuilder("scaled")
	b.p.Scaler = &sc
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	w := b.tensor("w", dt, 40, 25)
	v := b.tensor("v", dt, 77)
	g := b.bucket("grads", dt, v, w)
	b.p.Buckets[g].PreDivide = len(parts) > 2 && parts[2] == "pre"
	opt := rt.Optimizer{Kind: rt.AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Master: true}
	b.p.Step = syncedUpdateStep(compute, comm, opt, g)
	return b.p, nil
}

// zeroPlan ("zero[:WIRE]"): ZeRO's step: the bf16 gradients (on a WIRE
// wire, bf16 by default) reduce-scattered, each rank's shard unscaled
// (the ranks agree on overflows) and updated, and the new parameters
// all-gathered, with no host wait in between.
func zeroPlan(arg string) (*rt.Plan, error) {
	wire := rt.BF16
	if arg != "" {
		if wire = dtypeOf(arg); wire == rt.InvalidDType {
			return nil, fmt.Errorf("want zero[:WIRE]: unknown dtype %q", arg)
		}
	}
	b := newBuilder("zero")
	b.p.Scaler = &rt.Scaler{Rule: rt.ScaleTorch, Init: 1024, Interval: 4}
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	g := b.bucket("grads", wire, b.tensor("w", rt.BF16, 31, 13), b.tensor("v", rt.BF16, 9))
	opt := rt.Optimizer{Kind: rt.AdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Master: true}
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, time.Millisecond)
		s.ReduceScatter(src(11), comm, rt.Avg, rt.AfterReady(), g)
		s.Unscale(src(12), compute, false, rt.AfterStream(comm), g)
		s.Update(src(13), compute, opt, rt.AfterStream(comm), g)
		s.AllGather(src(14), comm, rt.AfterStream(compute), g)
		s.Wait(src(15), comm)
	}
	return b.p, nil
}

// zeroIntoPlan ("zerointo"): ZeRO's step with a reduce of the
// reduce-scattered gradients into an output before the update: out of
// place, it leaves the bucket reduce-scattered, so the update is still
// this rank's shard's and writes the new parameters into it for the
// allgather.
func zeroIntoPlan(string) (*rt.Plan, error) {
	b := newBuilder("zerointo")
	b.p.Scaler = &rt.Scaler{Rule: rt.ScaleStatic, Init: 4}
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	g := b.bucket("grads", rt.F32, b.tensor("w", rt.F32, 100))
	b.p.Buckets = append(b.p.Buckets, rt.Bucket{Name: "peak", Wire: rt.F32, Elems: 100, Out: &rt.Output{Of: g, Size: rt.OutSame}})
	peak := len(b.p.Buckets) - 1
	opt := rt.Optimizer{Kind: rt.SGD, LR: 0.125}
	b.p.Step = func(s *rt.Step) {
		s.Backward(src(10), compute, time.Millisecond)
		s.ReduceScatter(src(11), comm, rt.Sum, rt.AfterReady(), g)
		s.ReduceInto(src(12), comm, rt.Max, 0, rt.After{}, g, peak)
		s.Unscale(src(13), compute, false, rt.AfterStream(comm), g)
		s.Update(src(14), compute, opt, rt.AfterStream(comm), g)
		s.AllGather(src(15), comm, rt.AfterStream(compute), g)
		s.Wait(src(16), comm)
	}
	return b.p, nil
}

// dtypeOf returns the dtype named s, or InvalidDType.
func dtypeOf(s string) rt.DType {
	for i, n := range dtypeNames {
		if n == s && i > 0 {
			return rt.DType(i)
		}
	}
	return rt.InvalidDType
}

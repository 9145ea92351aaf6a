package nccl

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/syncgen/syncgen/runtime/cuda"
	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/text"
	ncclapi "github.com/syncgen/syncgen/runtime/nccl"
)

func init() {
	backend.Register(backend.Factory{Name: "nccl", Priority: 10, Probe: gpuProbe, New: newGPUBackend})
}

// gpuLoad loads the CUDA runtime, the driver and NCCL.
func gpuLoad() error {
	if err := cuda.Load(); err != nil {
		return err
	}
	return ncclapi.Load()
}

// gpuProbe says whether this rank can run the NCCL backend: the libraries
// load and every rank on this host can have a GPU of its own, by the rule
// chooseDevice follows. Ranks that each see the whole host take one device
// each; ranks that a launcher gave their own CUDA_VISIBLE_DEVICES (Slurm's
// --gpus-per-task) may each see fewer devices than the host has ranks, so
// the ranks compare the devices they would use (PCI bus ids) and refuse
// when two of one host would share a GPU.
//
// To compare, every rank sends its view to all others with one Allgather,
// on every path (also when it cannot run NCCL), so the ranks' collectives
// stay matched. Without a bootstrap (a one-rank job, tests) the rank
// decides from its own view alone.
func gpuProbe(env *backend.Env) (bool, string) {
	v := probeLocal(env)
	if env.Size <= 1 || env.Boot == nil {
		return gpuPlacement([]gpuView{v}, 0)
	}
	all, err := env.Boot.Allgather(encodeView(v))
	if err != nil {
		return false, "gathering the ranks' GPUs: " + err.Error()
	}
	if env.Rank < 0 || env.Rank >= len(all) {
		return false, fmt.Sprintf("rank %d of %d GPU records", env.Rank, len(all))
	}
	views := make([]gpuView, len(all))
	for r, rec := range all {
		if views[r], err = decodeView(rec); err != nil {
			views[r] = gpuView{Err: fmt.Sprintf("rank %d: %v", r, err)}
		}
	}
	// This rank's own view as it is, not as it travelled.
	views[env.Rank] = v
	return gpuPlacement(views, env.Rank)
}

// probeLocal is what this rank sees: whether the libraries load, how many
// devices it has and their PCI bus ids.
func probeLocal(env *backend.Env) (v gpuView) {
	v = gpuView{Host: env.Host, LocalRank: env.LocalRank, LocalSize: env.LocalSize}
	v.Visible, v.VisibleSet = os.LookupEnv("CUDA_VISIBLE_DEVICES")
	defer func() {
		if r := recover(); r != nil {
			v.Err = fmt.Sprintf("probe panicked: %v", r)
		}
	}()
	if err := gpuLoad(); err != nil {
		v.Err = err.Error()
		return v
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		v.Err = err.Error()
		return v
	}
	if n == 0 {
		v.Err = "no CUDA device" + visibleNote()
		return v
	}
	v.N = n
	v.IDs = make([]string, n)
	for d := range v.IDs {
		if v.IDs[d], err = cuda.PCIBusID(d); err != nil {
			v.IDs = nil // tell the devices apart by CUDA_VISIBLE_DEVICES
			break
		}
	}
	return v
}

// visibleNote mentions CUDA_VISIBLE_DEVICES when it is set, since it is the
// usual reason for seeing fewer GPUs than the machine has.
func visibleNote() string {
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		return fmt.Sprintf(" visible (CUDA_VISIBLE_DEVICES=%q)", v)
	}
	return ""
}

// gpuBackend implements backend.Backend over CUDA and NCCL.
type gpuBackend struct {
	env      *backend.Env
	dev      int
	devName  string
	busID    string
	kernels  *cuda.Kernels
	prioLow  int // cudaDeviceGetStreamPriorityRange's least priority
	prioHigh int // and its greatest
	versions []text.KV
	// copies is the stream of CopyToHost and CopyFromHost, so that they
	// wait for their own copy only.
	copies cuda.Stream

	mu      sync.Mutex // guards the lists below and aborted
	streams []*gpuStream
	events  []*gpuEvent
	buffers []*gpuBuffer
	aborted bool
}

// newGPUBackend selects the rank's GPU, checks that no two ranks share one
// and that every rank loaded the same NCCL, and loads the kernels. The
// communicators are created per stream in NewStream.
func newGPUBackend(env *backend.Env) (backend.Backend, error) {
	if err := gpuLoad(); err != nil {
		return nil, fmt.Errorf("nccl backend: %w (use --backend cpu to run without GPUs)", err)
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("nccl backend: %w", err)
	}
	b := &gpuBackend{env: env}
	if b.dev, err = chooseDevice(env, n); err != nil {
		return nil, err
	}

	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := cuda.SetDevice(b.dev); err != nil {
		return nil, fmt.Errorf("nccl backend: rank %d: %w", env.Rank, err)
	}
	if b.busID, err = cuda.PCIBusID(b.dev); err != nil {
		return nil, fmt.Errorf("nccl backend: rank %d: %w", env.Rank, err)
	}
	if b.devName, err = cuda.DeviceName(b.dev); err != nil {
		return nil, fmt.Errorf("nccl backend: rank %d: %w", env.Rank, err)
	}

	// One record per rank: host, GPU and NCCL version, gathered so that
	// every rank sees the same verdict and no rank enters
	// ncclCommInitRank alone.
	rec := make([]byte, 256)
	copy(rec, fmt.Sprintf("%s\x00%s\x00%d\x00", env.Host, b.busID, ncclapi.Version()))
	all, err := env.Boot.Allgather(rec)
	if err != nil {
		return nil, fmt.Errorf("nccl backend: gathering GPUs and NCCL versions: %w", err)
	}
	if err := checkPeers(all); err != nil {
		return nil, err
	}

	if b.prioLow, b.prioHigh, err = cuda.StreamPriorityRange(); err != nil {
		return nil, fmt.Errorf("nccl backend: %w", err)
	}
	if b.kernels, err = cuda.LoadKernels(); err != nil {
		return nil, fmt.Errorf("nccl backend: loading the PTX kernels: %w", err)
	}
	if b.copies, err = cuda.NewStream(b.prioLow); err != nil {
		return nil, fmt.Errorf("nccl backend: %w", err)
	}

	if err := b.describe(); err != nil {
		return nil, err
	}
	return b, nil
}

// chooseDevice picks the GPU of the rank that env describes among the n
// its process sees: its local rank's, or, when the launcher gave each rank
// its own CUDA_VISIBLE_DEVICES, the local rank's modulo n (gpuProbe
// refused ranks that would share a GPU, and checkPeers checks again).
func chooseDevice(env *backend.Env, n int) (int, error) {
	_, perRank := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if n == 0 {
		return 0, fmt.Errorf("nccl backend: rank %d on %s sees no CUDA device%s; use --backend cpu", env.Rank, env.Host, visibleNote())
	}
	if d, ok := pickDevice(env.LocalRank, n, perRank); ok {
		return d, nil
	}
	return 0, fmt.Errorf("nccl backend: %d ranks on host %s but only %d GPU(s): NCCL needs a GPU per rank; run fewer ranks per host or use --backend cpu",
		env.LocalSize, env.Host, n)
}

// describe fills b.versions, what the report's header says of NCCL, CUDA
// and the device, and with NCCL_DEBUG set says it on every rank.
func (b *gpuBackend) describe() error {
	env := b.env
	rtv, drv, err := cuda.Versions()
	if err != nil {
		return fmt.Errorf("nccl backend: %w", err)
	}
	rtPath, _ := cuda.Libraries()
	b.versions = []text.KV{
		{Key: "NCCL", Value: fmt.Sprintf("%s (%s%s)", ncclapi.VersionString(ncclapi.Version()), ncclapi.Path(), sameOnAll(env.Size))},
		{Key: "CUDA runtime", Value: fmt.Sprintf("%s (%s)", cuda.VersionString(rtv), rtPath)},
		{Key: "CUDA driver", Value: cuda.VersionString(drv)},
		{Key: "device", Value: fmt.Sprintf("%s (rank 0: GPU %d, %s)", b.devName, b.dev, b.busID)},
	}
	if os.Getenv("NCCL_DEBUG") != "" {
		// Every rank says what it loaded when the user asks NCCL to talk;
		// otherwise rank 0's header says it once, checked on all ranks.
		fmt.Fprintf(os.Stderr, "syncgen: rank %d (%s, GPU %d %s %s): NCCL %s (%s), CUDA runtime %s, driver %s\n",
			env.Rank, env.Host, b.dev, b.busID, b.devName, ncclapi.VersionString(ncclapi.Version()), ncclapi.Path(),
			cuda.VersionString(rtv), cuda.VersionString(drv))
	}
	if m := ncclapi.Missing(); len(m) > 0 {
		b.versions = append(b.versions, text.KV{Key: "NCCL lacks", Value: strings.Join(m, ", ") + " (optional; the backend does without)"})
	}
	return nil
}

// sameOnAll notes in the header that every rank loaded this NCCL.
func sameOnAll(size int) string {
	if size == 1 {
		return ""
	}
	return fmt.Sprintf(", the same on all %d ranks", size)
}

// checkPeers refuses two ranks on one GPU (NCCL would fail later with
// "Duplicate GPU detected") and ranks with different NCCL versions, naming
// the ranks concerned.
func checkPeers(recs [][]byte) error {
	type peer struct{ host, bus, version string }
	peers := make([]peer, len(recs))
	for r, rec := range recs {
		f := strings.SplitN(string(rec), "\x00", 4)
		if len(f) < 3 {
			return fmt.Errorf("nccl backend: rank %d sent a malformed record", r)
		}
		peers[r] = peer{f[0], f[1], f[2]}
	}
	seen := map[[2]string]int{}
	for r, p := range peers {
		if q, ok := seen[[2]string{p.host, p.bus}]; ok {
			return fmt.Errorf("nccl backend: ranks %d and %d share GPU %s on host %s; NCCL needs a GPU per rank (set CUDA_VISIBLE_DEVICES, run fewer ranks per host, or use --backend cpu)",
				q, r, p.bus, p.host)
		}
		seen[[2]string{p.host, p.bus}] = r
	}
	for r, p := range peers {
		if p.version != peers[0].version {
			var lines []string
			for q, pq := range peers {
				lines = append(lines, fmt.Sprintf("rank %d on %s: NCCL %s", q, pq.host, versionOf(pq.version)))
			}
			return fmt.Errorf("nccl backend: rank %d loaded NCCL %s but rank 0 loaded %s; every rank must use the same NCCL:\n  %s",
				r, versionOf(p.version), versionOf(peers[0].version), strings.Join(lines, "\n  "))
		}
	}
	return nil
}

func versionOf(code string) string {
	var v int
	fmt.Sscan(code, &v)
	return ncclapi.VersionString(v)
}

// enter locks the goroutine to its OS thread and makes the rank's device
// current there. The caller defers goruntime.UnlockOSThread().
func (b *gpuBackend) enter() error {
	goruntime.LockOSThread()
	if err := cuda.UseDevice(b.dev); err != nil {
		goruntime.UnlockOSThread()
		return fmt.Errorf("nccl backend: %w", err)
	}
	return nil
}

func (b *gpuBackend) Name() string { return "nccl" }

func (b *gpuBackend) Versions() []text.KV { return b.versions }

// gpuStream is a CUDA stream with its own NCCL communicator.
type gpuStream struct {
	b    *gpuBackend
	name string
	s    cuda.Stream
	comm ncclapi.Comm
	// stamp is 8 bytes of device memory holding the time the last spin
	// was to end, or when a run of fills started (see Busy); mark says
	// what it holds now.
	stamp cuda.Ptr
	mark  stampMark
	// token is one f32 of device memory that a barrier statement
	// allreduces (NCCL has no barrier).
	token cuda.Ptr
}

// stampMark is what a stream's stamp holds for the next Busy.
type stampMark uint8

const (
	// markNone: nothing the next Busy may count from (after a collective,
	// a cast, a wait for an event or the host).
	markNone stampMark = iota
	// markSpin: the last spin's target, with nothing queued since.
	markSpin
	// markFills: fills were queued since the stamp's time (a spin's
	// target, or a stamp kernel before the first fill); the next Busy
	// counts from it, so the fills' time comes out of its own, and what a
	// fill overruns comes out of the spins after it.
	markFills
)

// NewStream creates a CUDA stream with the plan's priority and joins a new
// NCCL communicator for it: rank 0 makes the unique id, MPI broadcasts it.
func (b *gpuBackend) NewStream(index int, name string, prio plan.Priority) (backend.Stream, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer goruntime.UnlockOSThread()
	p := b.prioLow
	if prio == plan.PriorityHigh {
		p = b.prioHigh
	}
	s, err := cuda.NewStream(p)
	if err != nil {
		return nil, fmt.Errorf("nccl backend: stream %s: %w", name, err)
	}
	st := &gpuStream{b: b, name: name, s: s}
	if st.stamp, err = cuda.Malloc(8); err != nil {
		return nil, fmt.Errorf("nccl backend: stream %s: %w", name, err)
	}
	if st.token, err = cuda.Malloc(4); err != nil {
		return nil, fmt.Errorf("nccl backend: stream %s: %w", name, err)
	}
	var id ncclapi.UniqueID
	if b.env.Rank == 0 {
		if id, err = ncclapi.NewUniqueID(); err != nil {
			return nil, fmt.Errorf("nccl backend: stream %s: %w", name, err)
		}
	}
	if err := b.env.Boot.Bcast(0, id[:]); err != nil {
		return nil, fmt.Errorf("nccl backend: stream %s: broadcasting the NCCL unique id: %w", name, err)
	}
	if st.comm, err = ncclapi.InitRank(b.env.Size, id, b.env.Rank); err != nil {
		return nil, fmt.Errorf("nccl backend: communicator of stream %s on GPU %d (%s): %w", name, b.dev, b.busID, err)
	}
	b.mu.Lock()
	b.streams = append(b.streams, st)
	b.mu.Unlock()
	return st, nil
}

// gpuEvent is a CUDA event with timing, so that Elapsed works on any.
type gpuEvent struct {
	b  *gpuBackend
	ev cuda.Event
}

func (b *gpuBackend) NewEvent() (backend.Event, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer goruntime.UnlockOSThread()
	ev, err := cuda.NewEvent(cuda.EventDefault)
	if err != nil {
		return nil, fmt.Errorf("nccl backend: %w", err)
	}
	e := &gpuEvent{b: b, ev: ev}
	b.mu.Lock()
	b.events = append(b.events, e)
	b.mu.Unlock()
	return e, nil
}

// gpuBuffer is device memory from cudaMalloc.
type gpuBuffer struct {
	p     cuda.Ptr
	dtype elem.DType
	elems int64
}

func (g *gpuBuffer) DType() elem.DType { return g.dtype }
func (g *gpuBuffer) Elems() int64      { return g.elems }

func (b *gpuBackend) Alloc(dtype elem.DType, elems int64) (backend.Buffer, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer goruntime.UnlockOSThread()
	n := elems * dtype.Size()
	if n == 0 {
		n = 1 // a valid, distinct address even for an empty bucket
	}
	p, err := cuda.Malloc(n)
	if err != nil {
		free, total, _ := cuda.MemInfo()
		return nil, fmt.Errorf("nccl backend: allocating %d %s elements on GPU %d (%d MiB free of %d MiB): %w",
			elems, dtype, b.dev, free>>20, total>>20, err)
	}
	g := &gpuBuffer{p: p, dtype: dtype, elems: elems}
	b.mu.Lock()
	b.buffers = append(b.buffers, g)
	b.mu.Unlock()
	return g, nil
}

// addr returns the device address of the span's first element.
func addr(s backend.Span) (cuda.Ptr, error) {
	g, ok := s.Buf.(*gpuBuffer)
	if !ok {
		return 0, fmt.Errorf("nccl backend: a span of a %T, not of a GPU buffer", s.Buf)
	}
	if s.Off < 0 || s.N < 0 || (s.Off+s.N)*s.DType.Size() > g.elems*g.dtype.Size() {
		return 0, fmt.Errorf("nccl backend: span [%d, %d) of %s is outside its buffer of %d %s", s.Off, s.Off+s.N, s.DType, g.elems, g.dtype)
	}
	return g.p + cuda.Ptr(s.Off*s.DType.Size()), nil
}

var ncclTypes = map[elem.DType]ncclapi.DataType{
	elem.F64: ncclapi.Float64, elem.F32: ncclapi.Float32, elem.F16: ncclapi.Float16, elem.BF16: ncclapi.Bfloat16,
	elem.I64: ncclapi.Int64, elem.I32: ncclapi.Int32, elem.I8: ncclapi.Int8, elem.U8: ncclapi.Uint8,
}

var ncclOps = map[plan.RedOp]ncclapi.RedOp{plan.Sum: ncclapi.Sum, plan.Avg: ncclapi.Avg, plan.Min: ncclapi.Min, plan.Max: ncclapi.Max, plan.Prod: ncclapi.Prod}

// divideAfter reports whether an average must be a sum followed by the
// division kernel to give the CPU backend's result. ncclAvg on floats
// multiplies every input by 1/size before summing (NCCL's PreMulSum), which
// rounds differently from sum-then-divide unless size is a power of two;
// on integers it sums and then divides, truncating, like the CPU backend.
func divideAfter(op plan.RedOp, dt elem.DType, size int) bool {
	return op == plan.Avg && dt.IsFloat() && size&(size-1) != 0
}

// divideBefore reports whether op is an average whose inputs are divided
// before an ncclSum (CollOp.PreDivide): the division kernel, the CPU
// backend's arithmetic, rather than ncclAvg's multiplication by 1/size.
func divideBefore(op *backend.CollOp) bool {
	return op.PreDivide && op.Op == plan.Avg && op.Coll.Reduces()
}

// Collectives queues the group as ncclGroupStart, one in-place NCCL call
// per op, ncclGroupEnd; averages that NCCL would round differently are
// sums followed by the division kernel on the op's stream, and averages
// with PreDivide are the division kernel on each input followed by a sum.
func (b *gpuBackend) Collectives(ops []backend.CollOp) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	// The divisions before a sum are queued before the group starts, so
	// that each runs on its stream ahead of the collective.
	for i := range ops {
		if err := b.preDivide(&ops[i]); err != nil {
			return err
		}
	}
	if len(ops) > 1 {
		if err := ncclapi.GroupStart(); err != nil {
			return fmt.Errorf("nccl backend: %w", err)
		}
	}
	var firstErr error
	for i := range ops {
		if err := b.queue(&ops[i]); err != nil {
			firstErr = err
			break
		}
	}
	if len(ops) > 1 {
		// Close the group even after an error, so NCCL is not left inside
		// one; the first error is the one to report.
		if err := ncclapi.GroupEnd(); err != nil && firstErr == nil {
			names := make([]string, len(ops))
			for i, op := range ops {
				names[i] = op.Coll.String() + " " + op.Name
			}
			firstErr = fmt.Errorf("nccl backend: group of %s: %w", strings.Join(names, ", "), err)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	size, rank := b.env.Size, b.env.Rank
	for i := range ops {
		op := &ops[i]
		if !op.Coll.Reduces() || divideBefore(op) || !divideAfter(op.Op, op.Buf.DType, size) {
			continue
		}
		st := op.Stream.(*gpuStream)
		span := op.Buf
		switch {
		case op.Coll == plan.CollReduce && rank != op.Root:
			continue
		case op.Out.N > 0:
			span = op.Out // out of place: the whole output is the result
		case op.Coll == plan.CollReduceScatter:
			span.N /= int64(size)
			span.Off += int64(rank) * span.N
		}
		p, err := addr(span)
		if err != nil {
			return err
		}
		if err := b.kernels.Div(st.s, p, int(span.DType), span.N, size); err != nil {
			return fmt.Errorf("nccl backend: %s of bucket %s: the average's division: %w", op.Coll, op.Name, err)
		}
	}
	return nil
}

// preDivide queues, for an average with PreDivide, the division of the
// op's whole input by the number of ranks on the op's stream (the kernel
// that finishes the other averages, so the arithmetic is elem.AvgOf's).
func (b *gpuBackend) preDivide(op *backend.CollOp) error {
	if !divideBefore(op) || op.Buf.N == 0 {
		return nil
	}
	st, ok := op.Stream.(*gpuStream)
	if !ok {
		return fmt.Errorf("nccl backend: %s of bucket %s on a %T, not a GPU stream", op.Coll, op.Name, op.Stream)
	}
	p, err := addr(op.Buf)
	if err != nil {
		return collError(op, st, err)
	}
	st.mark = markNone
	if err := b.kernels.Div(st.s, p, int(op.Buf.DType), op.Buf.N, b.env.Size); err != nil {
		return collError(op, st, fmt.Errorf("the division before the sum: %w", err))
	}
	return nil
}

// queue issues one collective on its stream's communicator.
func (b *gpuBackend) queue(op *backend.CollOp) error {
	st, ok := op.Stream.(*gpuStream)
	if !ok {
		return fmt.Errorf("nccl backend: %s of bucket %s on a %T, not a GPU stream", op.Coll, op.Name, op.Stream)
	}
	st.mark = markNone
	where := func(err error) error { return collError(op, st, err) }
	dt, ok := ncclTypes[op.Buf.DType]
	if !ok {
		return where(fmt.Errorf("no NCCL data type for %s", op.Buf.DType))
	}
	base, err := addr(op.Buf)
	if err != nil {
		return where(err)
	}
	n := op.Buf.N
	size, rank := int64(b.env.Size), int64(b.env.Rank)
	slice := n / size
	sliceAddr := base + cuda.Ptr(rank*slice*op.Buf.DType.Size())
	var redop ncclapi.RedOp
	if op.Coll.Reduces() {
		var ok bool
		if redop, ok = ncclOps[op.Op]; !ok {
			return where(fmt.Errorf("no NCCL operator for %s", op.Op))
		}
		if divideBefore(op) || divideAfter(op.Op, op.Buf.DType, b.env.Size) {
			redop = ncclapi.Sum
		}
		// One rank: an average is the sum, value for value, and NCCL runs
		// a sum as a whole copy, where its average goes through its
		// one-rank reduce kernel, which for some counts leaves the last
		// elements unwritten (it splits the count among its blocks
		// rounded down; the GPU check found 7 of 232071): in place they
		// keep the right values, out of place they keep the output's.
		if size == 1 && redop == ncclapi.Avg {
			redop = ncclapi.Sum
		}
	}
	if op.Out.N > 0 {
		if err := b.queueInto(op, st, base, dt, redop); err != nil {
			return where(err)
		}
		return nil
	}
	switch op.Coll {
	case plan.CollAllReduce:
		err = st.comm.AllReduce(base, base, n, dt, redop, st.s)
	case plan.CollBroadcast:
		err = st.comm.Broadcast(base, base, n, dt, op.Root, st.s)
	case plan.CollReduce:
		err = st.comm.Reduce(base, base, n, dt, redop, op.Root, st.s)
	case plan.CollAllGather:
		err = st.comm.AllGather(sliceAddr, base, slice, dt, st.s)
	case plan.CollReduceScatter:
		err = st.comm.ReduceScatter(base, sliceAddr, slice, dt, redop, st.s)
	default:
		err = fmt.Errorf("unknown collective %d", op.Coll)
	}
	if err != nil {
		return where(err)
	}
	return nil
}

// queueInto issues out-of-place collective op (CollOp.Out) from base on
// its stream's communicator: NCCL's calls with distinct send and receive
// buffers, whose counts are those of nccl-tests' out-of-place runs.
func (b *gpuBackend) queueInto(op *backend.CollOp, st *gpuStream, base cuda.Ptr, dt ncclapi.DataType, redop ncclapi.RedOp) error {
	out, err := addr(op.Out)
	if err != nil {
		return err
	}
	size := int64(b.env.Size)
	n := op.Buf.N
	want := map[plan.Coll]int64{plan.CollAllGather: size * n, plan.CollReduceScatter: n / size}[op.Coll]
	if want == 0 {
		want = n
	}
	if op.Out.N != want || op.Out.DType != op.Buf.DType || op.Coll == plan.CollReduceScatter && n%size != 0 {
		return fmt.Errorf("out of place: %d %s into %d %s (want %d)", n, op.Buf.DType, op.Out.N, op.Out.DType, want)
	}
	switch op.Coll {
	case plan.CollAllReduce:
		return st.comm.AllReduce(base, out, n, dt, redop, st.s)
	case plan.CollBroadcast:
		return st.comm.Broadcast(base, out, n, dt, op.Root, st.s)
	case plan.CollReduce:
		return st.comm.Reduce(base, out, n, dt, redop, op.Root, st.s)
	case plan.CollAllGather:
		return st.comm.AllGather(base, out, n, dt, st.s)
	case plan.CollReduceScatter:
		return st.comm.ReduceScatter(base, out, n/size, dt, redop, st.s)
	}
	return fmt.Errorf("unknown collective %d", op.Coll)
}

// Barrier implements backend.Barrierer. NCCL has no barrier: a one-element
// allreduce on the stream's communicator is one, since no rank's stream
// passes it before every rank's stream has reached it.
func (b *gpuBackend) Barrier(s backend.Stream) error {
	st, ok := s.(*gpuStream)
	if !ok {
		return fmt.Errorf("nccl backend: barrier on a %T, not a GPU stream", s)
	}
	if err := b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	st.mark = markNone
	if err := st.comm.AllReduce(st.token, st.token, 1, ncclapi.Float32, ncclapi.Sum, st.s); err != nil {
		return fmt.Errorf("nccl backend: barrier on stream %s: %w", st.name, err)
	}
	return nil
}

// collError says which collective of which bucket on which stream failed.
func collError(op *backend.CollOp, st *gpuStream, err error) error {
	desc := fmt.Sprintf("%d %s", op.Buf.N, op.Buf.DType)
	if op.Coll.Reduces() {
		desc += ", op " + op.Op.String()
	}
	return fmt.Errorf("nccl backend: %s of bucket %s (%s) on stream %s: %w", op.Coll, op.Name, desc, st.name, err)
}

func (b *gpuBackend) Elapsed(start, end backend.Event) (time.Duration, error) {
	s, ok1 := start.(*gpuEvent)
	e, ok2 := end.(*gpuEvent)
	if !ok1 || !ok2 {
		return 0, errors.New("nccl backend: Elapsed of events that are not CUDA events")
	}
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer goruntime.UnlockOSThread()
	ms, err := cuda.Elapsed(s.ev, e.ev)
	if err != nil {
		return 0, fmt.Errorf("nccl backend: %w", err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

func (b *gpuBackend) CopyToHost(dst []byte, src backend.Span) error {
	if int64(len(dst)) != src.Bytes() {
		return fmt.Errorf("nccl backend: CopyToHost of %d bytes into %d", src.Bytes(), len(dst))
	}
	p, err := addr(src)
	if err != nil {
		return err
	}
	if err := b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	if err := cuda.CopyToHost(dst, p, b.copies); err != nil {
		return fmt.Errorf("nccl backend: %w", err)
	}
	return nil
}

func (b *gpuBackend) CopyFromHost(dst backend.Span, src []byte) error {
	if int64(len(src)) != dst.Bytes() {
		return fmt.Errorf("nccl backend: CopyFromHost of %d bytes into %d", len(src), dst.Bytes())
	}
	p, err := addr(dst)
	if err != nil {
		return err
	}
	if err := b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	if err := cuda.CopyFromHost(p, src, b.copies); err != nil {
		return fmt.Errorf("nccl backend: %w", err)
	}
	return nil
}

// Close waits for the streams, destroys the communicators (after an abort
// they are already gone) and frees everything else. It goes on after an
// error and returns the first.
func (b *gpuBackend) Close() error {
	if err := b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	b.mu.Lock()
	defer b.mu.Unlock()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = fmt.Errorf("nccl backend: closing: %w", err)
		}
	}
	for _, s := range b.streams {
		keep(s.s.Synchronize())
	}
	for _, s := range b.streams {
		if !b.aborted {
			keep(s.comm.Destroy())
		}
		keep(cuda.Free(s.stamp))
		keep(cuda.Free(s.token))
		keep(s.s.Destroy())
	}
	for _, e := range b.events {
		keep(e.ev.Destroy())
	}
	for _, g := range b.buffers {
		keep(cuda.Free(g.p))
	}
	if b.kernels != nil {
		keep(b.kernels.Unload())
	}
	if b.copies != 0 {
		keep(b.copies.Destroy())
	}
	b.streams, b.events, b.buffers = nil, nil, nil
	return first
}

// asyncError returns the first asynchronous error of any communicator
// (ncclCommGetAsyncError): what NCCL saw go wrong in the background, such
// as a peer that died.
func (b *gpuBackend) asyncError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.aborted {
		return errors.New("the NCCL communicators were aborted after an earlier error")
	}
	for _, s := range b.streams {
		if err := s.comm.AsyncError(); err != nil {
			return fmt.Errorf("communicator of stream %s: %w", s.name, err)
		}
	}
	return nil
}

// Abort aborts every communicator (ncclCommAbort), so that no NCCL kernel
// keeps waiting for a peer that will never come. The backend calls it when
// it sees an NCCL error; the runtime's watchdog may call it before
// MPI_Abort (it is safe from any goroutine and more than once).
func (b *gpuBackend) Abort() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.aborted {
		return
	}
	b.aborted = true
	for _, s := range b.streams {
		s.comm.Abort()
	}
}

// wait blocks until sync (a blocking cudaStreamSynchronize or
// cudaEventSynchronize) returns, and meanwhile watches the communicators:
// a blocked synchronisation alone would never return when a peer dies and
// leaves NCCL's kernels spinning. The synchronisation runs on a goroutine
// of its own (CUDA's own wait spins, so the host notices completion within
// a microsecond); the caller's goroutine asks every communicator for an
// asynchronous error every watchEvery, and on one aborts them all, which
// ends NCCL's kernels and so the synchronisation, and returns the error.
// done, a non-blocking query, lets work that has already finished skip the
// goroutine.
func (b *gpuBackend) wait(what string, done func() (bool, error), sync func() error) error {
	// After a host wait a stream may have gone idle: a pending stamp would
	// make the next Busy subtract idle time, not fill time.
	b.mu.Lock()
	for _, s := range b.streams {
		s.mark = markNone
	}
	b.mu.Unlock()
	if ok, err := done(); err != nil {
		return fmt.Errorf("nccl backend: %s: %w", what, err)
	} else if ok {
		return nil
	}
	result := make(chan error, 1)
	go func() { result <- sync() }()
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-result:
			if err != nil {
				return fmt.Errorf("nccl backend: %s: %w", what, err)
			}
			return nil
		case <-tick.C:
			if err := b.asyncError(); err != nil {
				b.Abort()
				select {
				case <-result:
				case <-time.After(abortGrace):
				}
				return fmt.Errorf("nccl backend: %s: %w", what, err)
			}
		}
	}
}

// watchEvery is how often a waiting host asks NCCL for asynchronous errors;
// abortGrace how long it then gives the aborted work to end.
const (
	watchEvery = 10 * time.Millisecond
	abortGrace = 10 * time.Second
)

func (s *gpuStream) Name() string { return s.name }

func (s *gpuStream) Fill(dst backend.Span, p elem.FillParams) error {
	ptr, err := addr(dst)
	if err != nil {
		return err
	}
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	if s.mark == markNone {
		// Fills that no spin precedes: note when they start, so that the
		// next Busy subtracts what they take. After a spin its end time is
		// already there.
		if err := s.b.kernels.Stamp(s.s, s.stamp); err != nil {
			return fmt.Errorf("nccl backend: stream %s: %w", s.name, err)
		}
	}
	s.mark = markFills
	kp := cuda.FillParams{Kind: int(p.Kind), SeedA: p.SeedA, SeedB: p.SeedB, Lo: p.Lo, Hi: p.Hi, Dev: p.Dev, Sign: p.Sign, Two: p.Two, Neg: p.Neg, Add: p.Add}
	if err := s.b.kernels.Fill(s.s, ptr, int(dst.DType), dst.N, kp); err != nil {
		return fmt.Errorf("nccl backend: stream %s: fill of %d %s: %w", s.name, dst.N, dst.DType, err)
	}
	return nil
}

func (s *gpuStream) Cast(dst, src backend.Span) error {
	if dst.N != src.N {
		return fmt.Errorf("nccl backend: cast of %d elements into %d", src.N, dst.N)
	}
	dp, err := addr(dst)
	if err != nil {
		return err
	}
	sp, err := addr(src)
	if err != nil {
		return err
	}
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	s.mark = markNone
	if err := s.b.kernels.Cast(s.s, dp, int(dst.DType), sp, int(src.DType), src.N); err != nil {
		return fmt.Errorf("nccl backend: stream %s: cast of %d %s to %s: %w", s.name, src.N, src.DType, dst.DType, err)
	}
	return nil
}

func (s *gpuStream) Busy(d time.Duration) error {
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	use := s.mark == markFills
	s.mark = markSpin
	if err := s.b.kernels.Spin(s.s, d.Nanoseconds(), s.stamp, use); err != nil {
		return fmt.Errorf("nccl backend: stream %s: busy %v: %w", s.name, d, err)
	}
	return nil
}

func (s *gpuStream) Record(e backend.Event) error {
	ev, ok := e.(*gpuEvent)
	if !ok {
		return fmt.Errorf("nccl backend: stream %s: recording a %T, not a CUDA event", s.name, e)
	}
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	if err := ev.ev.Record(s.s); err != nil {
		return fmt.Errorf("nccl backend: stream %s: %w", s.name, err)
	}
	return nil
}

func (s *gpuStream) WaitEvent(e backend.Event) error {
	ev, ok := e.(*gpuEvent)
	if !ok {
		return fmt.Errorf("nccl backend: stream %s: waiting for a %T, not a CUDA event", s.name, e)
	}
	if err := s.b.enter(); err != nil {
		return err
	}
	defer goruntime.UnlockOSThread()
	s.mark = markNone
	if err := s.s.Wait(ev.ev); err != nil {
		return fmt.Errorf("nccl backend: stream %s: %w", s.name, err)
	}
	return nil
}

func (s *gpuStream) Synchronize() error {
	return s.b.wait("stream "+s.name, func() (bool, error) {
		if err := s.b.enter(); err != nil {
			return false, err
		}
		defer goruntime.UnlockOSThread()
		return s.s.Done()
	}, func() error {
		if err := s.b.enter(); err != nil {
			return err
		}
		defer goruntime.UnlockOSThread()
		return s.s.Synchronize()
	})
}

func (e *gpuEvent) Synchronize() error {
	return e.b.wait("event", e.Query, func() error {
		if err := e.b.enter(); err != nil {
			return err
		}
		defer goruntime.UnlockOSThread()
		return e.ev.Synchronize()
	})
}

// Query may run on the watchdog's goroutine: it selects the device too, so
// that it never makes a context on device 0 of a rank that uses another.
func (e *gpuEvent) Query() (bool, error) {
	if err := e.b.enter(); err != nil {
		return false, err
	}
	defer goruntime.UnlockOSThread()
	return e.ev.Done()
}

package cpu

// The CPU backend's nonblocking mode (SYNCGEN_CPU_MODE=nonblocking): one
// progress thread starts the nonblocking collectives (MPI_Iallreduce ...)
// that the streams hand it and drives them with MPI_Testsome while any are
// active (Open MPI progresses nonblocking collectives only inside MPI
// calls); it sleeps on a channel when none are. Collectives of different
// streams, each on its own communicator, are then in flight together, and
// a large collective is split into pieces of which several are in flight.
//
// It is not the default because Open MPI 4.1's nonblocking collectives
// (coll/libnbc) are slower than its blocking ones (coll.go says why that
// rules them out); it is there for plans whose streams should overlap
// their communication, and for MPI libraries whose nonblocking
// collectives are good.

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// progressThread owns the nonblocking requests.
type progressThread struct {
	h    *mpihost.Host
	tune Tuning
	jobs chan *nbJob
	quit chan struct{}
	done chan struct{}
}

// nbJob is one collective (or barrier) split into pieces.
type nbJob struct {
	s      *cpuStream
	op     *backend.CollOp
	next   int64 // first element not started yet
	active int
	err    error
	fin    chan error
	// barrier jobs have no op.
	barrier bool
}

func startProgressThread(h *mpihost.Host, tune Tuning) *progressThread {
	p := &progressThread{h: h, tune: tune, jobs: make(chan *nbJob, 64), quit: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

func (p *progressThread) stop() {
	close(p.quit)
	<-p.done
}

// run hands op to the progress thread and waits for it (called by the
// stream that runs op).
func (p *progressThread) run(s *cpuStream, op *backend.CollOp) error {
	j := &nbJob{s: s, op: op, fin: make(chan error, 1)}
	p.jobs <- j
	return <-j.fin
}

// barrier runs a nonblocking barrier on s's communicator.
func (p *progressThread) barrier(s *cpuStream) error {
	j := &nbJob{s: s, barrier: true, fin: make(chan error, 1)}
	p.jobs <- j
	if err := <-j.fin; err != nil {
		return fmt.Errorf("step barrier: %w", err)
	}
	return nil
}

// loop is the progress thread.
func (p *progressThread) loop() {
	runtime.LockOSThread()
	defer close(p.done)
	var set mpi.RequestSet
	owner := map[int]*nbJob{} // request slot -> job
	var finished []int
	for {
		if set.Len() == 0 {
			select {
			case j := <-p.jobs:
				p.start(j, &set, owner)
			case <-p.quit:
				return
			}
			continue
		}
		// Take whatever else arrived, then drive progress.
		for more := true; more; {
			select {
			case j := <-p.jobs:
				p.start(j, &set, owner)
			default:
				more = false
			}
		}
		p.h.Lock()
		var err error
		finished, err = set.Testsome(finished)
		p.h.Unlock()
		if err != nil {
			// Every pending job fails: the runtime aborts the job anyway.
			for slot, j := range owner {
				delete(owner, slot)
				j.fail(err)
			}
			set = mpi.RequestSet{}
			continue
		}
		if len(finished) == 0 {
			runtime.Gosched()
			continue
		}
		// Take the finished pieces' jobs first: starting new pieces reuses
		// the finished slots.
		jobs := make([]*nbJob, len(finished))
		for i, slot := range finished {
			jobs[i] = owner[slot]
			delete(owner, slot)
		}
		for _, j := range jobs {
			j.active--
			p.start(j, &set, owner)
		}
	}
}

// fail ends a job with err.
func (j *nbJob) fail(err error) {
	if j.err == nil {
		j.err = err
		j.fin <- err
	}
}

// start starts as many of j's pieces as may be in flight, and completes j
// when it has none left.
func (p *progressThread) start(j *nbJob, set *mpi.RequestSet, owner map[int]*nbJob) {
	if j.err != nil {
		return
	}
	add := func(r mpi.Request, err error) bool {
		if err != nil {
			j.fail(err)
			return false
		}
		owner[set.Add(r)] = j
		j.active++
		return true
	}
	if j.barrier {
		p.startBarrier(j, add)
		return
	}
	started := false
	switch j.op.Coll {
	case plan.CollAllGather, plan.CollReduceScatter:
		started = p.startSliced(j, add)
	default:
		started = p.startPieces(j, add)
	}
	if started && j.next >= j.op.Buf.N && j.active == 0 {
		p.finish(j)
	}
}

// lock takes the MPI lock and returns its release.
func (p *progressThread) lock() func() { p.h.Lock(); return p.h.Unlock }

// startBarrier starts a barrier job's one Ibarrier, or, once it is done,
// says that the job is.
func (p *progressThread) startBarrier(j *nbJob, add func(mpi.Request, error) bool) {
	if j.next == 0 {
		j.next = 1
		unlock := p.lock()
		r, err := j.s.comm.Ibarrier()
		unlock()
		add(r, err)
		return
	}
	if j.active == 0 {
		j.fin <- nil
	}
}

// startSliced starts an allgather's or reducescatter's one call over the
// whole buffer. It returns false when the job failed before any call.
func (p *progressThread) startSliced(j *nbJob, add func(mpi.Request, error) bool) bool {
	op := j.op
	n, dt := op.Buf.N, op.Buf.DType
	if j.next != 0 || n == 0 {
		return true
	}
	j.next = n
	per := n / int64(p.h.Size)
	if per > math.MaxInt32 {
		j.fail(fmt.Errorf("%d elements per rank exceed MPI's int count", per))
		return false
	}
	unlock := p.lock()
	var r mpi.Request
	var err error
	if op.Coll == plan.CollAllGather {
		r, err = j.s.comm.Iallgather(spanPtr(op.Buf), int(per), dt)
	} else {
		r, err = j.s.comm.IreduceScatterBlock(spanPtr(op.Buf), int(per), dt, mpi.Op(op.Op))
	}
	unlock()
	add(r, err)
	return true
}

// startPieces starts the next pieces of an allreduce, broadcast or reduce,
// up to the pieces in flight that the tuning allows. It returns false when
// a call failed.
func (p *progressThread) startPieces(j *nbJob, add func(mpi.Request, error) bool) bool {
	op := j.op
	n, dt := op.Buf.N, op.Buf.DType
	base := spanPtr(op.Buf)
	chunk := p.tune.chunkElems(dt)
	for j.next < n && j.active < p.tune.inflight {
		off, cnt := j.next, min(chunk, n-j.next)
		ptr := unsafe.Add(base, off*dt.Size())
		unlock := p.lock()
		var r mpi.Request
		var err error
		switch op.Coll {
		case plan.CollAllReduce:
			r, err = j.s.comm.Iallreduce(ptr, int(cnt), dt, mpi.Op(op.Op))
		case plan.CollBroadcast:
			r, err = j.s.comm.Ibcast(ptr, int(cnt), dt, op.Root)
		case plan.CollReduce:
			r, err = j.s.comm.Ireduce(ptr, int(cnt), dt, mpi.Op(op.Op), op.Root, p.h.Rank)
		default:
			err = fmt.Errorf("unknown collective %d", op.Coll)
		}
		unlock()
		if !add(r, err) {
			return false
		}
		j.next += cnt
	}
	return true
}

// finish completes a collective: the avg division and the reducescatter
// move, then the stream is released.
func (p *progressThread) finish(j *nbJob) {
	op := j.op
	rank, size := p.h.Rank, p.h.Size
	all, err := spanBytes(op.Buf)
	if err != nil {
		j.fail(err)
		return
	}
	switch op.Coll {
	case plan.CollReduceScatter:
		per := int64(len(all)) / int64(size)
		mine := all[int64(rank)*per : int64(rank+1)*per]
		if rank != 0 {
			copy(mine, all[:per])
		}
		if op.Op == plan.Avg {
			divideAvg(mine, op.Buf.DType, size)
		}
	case plan.CollAllReduce, plan.CollReduce:
		if op.Op == plan.Avg && (op.Coll == plan.CollAllReduce || rank == op.Root) {
			divideAvg(all, op.Buf.DType, size)
		}
	}
	j.fin <- nil
}

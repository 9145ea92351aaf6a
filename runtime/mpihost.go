package runtime

// MPI ownership. One goroutine, locked to its OS thread, initialises and
// finalises MPI. Every MPI call anywhere in the runtime holds mpiHost.mu,
// so calls never overlap: that lets the job-level calls (bootstrap,
// barriers, gathers) run on the goroutine that needs them and the CPU
// backend's stream goroutines run their collectives themselves, without
// hops through the owner thread (see cpu_coll.go for why that matters).
//
// The thread level. Calls that never overlap are what MPI_THREAD_SERIALIZED
// promises, but Open MPI turns on its internal locking for every level
// above MPI_THREAD_SINGLE (ompi_mpi_init.c: opal_set_using_threads(true)
// unless the level provided is single), and its progress loop then takes
// and releases a mutex at every turn: measured with perf on a 4 KiB
// allreduce loop in C, 23% of the time went to pthread_mutex_lock and
// unlock, and the call took 0.4-0.6 us longer than with MPI_Init. Since
// the runtime serialises every call itself, it asks for MPI_THREAD_SINGLE
// by default, like a plain MPI program; SYNCGEN_MPI_THREAD=serialized asks
// for the level the standard names, for an MPI stack that checks which
// thread calls it.

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/syncgen/syncgen/runtime/mpi"
)

// mpiHost is the job's MPI state.
type mpiHost struct {
	// mu serialises every MPI call of the process.
	mu    sync.Mutex
	calls chan func()
	done  chan struct{}

	level                mpi.ThreadLevel
	rank, size           int
	localRank, localSize int
	host                 string
	library              string
	local                mpi.Comm
	// setParams are the MCA parameters the runtime set before MPI_Init
	// (mpisettings.go), settings what MPI reports of them after it.
	setParams []string
	settings  []KV
}

// startMPI starts the owner goroutine and initialises MPI on it.
func startMPI() (*mpiHost, error) {
	h := &mpiHost{calls: make(chan func()), done: make(chan struct{})}
	started := make(chan error, 1)
	go h.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return h, nil
}

// loop is the owner goroutine: it initialises MPI, then runs the calls it
// is given until finalize closes calls.
func (h *mpiHost) loop(started chan<- error) {
	runtime.LockOSThread()
	defer close(h.done)
	started <- h.init()
	for f := range h.calls {
		f()
	}
}

func (h *mpiHost) init() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := mpiThreadLevelFromEnv()
	params, err := applyMPISettings()
	if err != nil {
		return fmt.Errorf("initialising MPI: %w", err)
	}
	level, err := mpi.Init(want)
	if err != nil {
		return fmt.Errorf("initialising MPI: %w", err)
	}
	h.setParams = params
	h.settings = readMPISettings(params)
	h.level = level
	if level < want {
		return fmt.Errorf("initialising MPI: asked for %s, the library granted only %s; the runtime's streams call MPI from several threads (one at a time)",
			want, level)
	}
	w := mpi.World()
	if h.rank, err = w.Rank(); err != nil {
		return err
	}
	if h.size, err = w.Size(); err != nil {
		return err
	}
	if h.local, err = w.SplitShared(); err != nil {
		return fmt.Errorf("finding the ranks of this host: %w", err)
	}
	if h.localRank, err = h.local.Rank(); err != nil {
		return err
	}
	if h.localSize, err = h.local.Size(); err != nil {
		return err
	}
	h.host = mpi.ProcessorName()
	h.library = mpi.LibraryVersion()
	return nil
}

// do runs f while holding the MPI lock. Any thread may call MPI as long
// as the calls never overlap (see the thread level above), so f runs on
// the calling goroutine: a hop through the owner thread would cost two
// goroutine wake-ups (tens of microseconds under load) on every barrier.
func (h *mpiHost) do(f func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return f()
}

// onOwner runs f on the owner thread (MPI_Finalize must run on the thread
// that initialised MPI), holding the MPI lock.
func (h *mpiHost) onOwner(f func() error) error {
	errc := make(chan error, 1)
	h.calls <- func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		errc <- f()
	}
	return <-errc
}

// Bcast implements Bootstrap.
func (h *mpiHost) Bcast(root int, buf []byte) error {
	return h.do(func() error { return mpi.World().BcastBytes(root, buf) })
}

// Allgather implements Bootstrap.
func (h *mpiHost) Allgather(rec []byte) ([][]byte, error) {
	var out [][]byte
	err := h.do(func() error {
		var err error
		out, err = mpi.World().AllgatherBytes(rec)
		return err
	})
	return out, err
}

// Gather collects every rank's rec (any length) on rank 0.
func (h *mpiHost) Gather(rec []byte) ([][]byte, error) {
	var out [][]byte
	err := h.do(func() error {
		var err error
		out, err = mpi.World().GatherBytes(0, rec)
		return err
	})
	return out, err
}

// Barrier waits for every rank.
func (h *mpiHost) Barrier() error {
	return h.do(func() error { return mpi.World().Barrier() })
}

// finalize shuts MPI down on the owner thread and stops it.
func (h *mpiHost) finalize() error {
	err := h.onOwner(func() error {
		_ = h.local.Free()
		return mpi.Finalize()
	})
	close(h.calls)
	<-h.done
	return err
}

// abort ends the whole job. It does not take the MPI lock: a stream may be
// stuck inside a collective holding it, which is often why we abort.
func (h *mpiHost) abort(code int) {
	mpi.Abort(code)
}

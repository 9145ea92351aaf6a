package mpihost

// MPI ownership. One goroutine, locked to its OS thread, initialises and
// finalises MPI. Every MPI call anywhere in the runtime holds Host.mu,
// so calls never overlap: that lets the job-level calls (bootstrap,
// barriers, gathers) run on the goroutine that needs them and the CPU
// backend's stream goroutines run their collectives themselves, without
// hops through the owner thread (see backend/cpu/coll.go for why that
// matters).
//
// The thread level. Calls that never overlap are what MPI_THREAD_SERIALIZED
// promises, but Open MPI turns on its internal locking for every level
// above MPI_THREAD_SINGLE (ompi_mpi_init.c: opal_set_using_threads(true)
// unless the level provided is single), and its progress loop then takes
// and releases a mutex at every turn, which a small collective pays for
// in every call (bench/results/2026-12-runtime-comments.md, "The thread
// level"). Since the runtime serialises every call itself, it asks for
// MPI_THREAD_SINGLE by default, like a plain MPI program;
// SYNCGEN_MPI_THREAD=serialized asks for the level the standard names, for
// an MPI stack that checks which thread calls it.

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/text"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// Host is the job's MPI state.
type Host struct {
	// mu serialises every MPI call of the process.
	mu    sync.Mutex
	calls chan func()
	done  chan struct{}

	// Level is the thread level MPI granted.
	Level mpi.ThreadLevel
	// Rank and Size are this process's place in MPI_COMM_WORLD;
	// LocalRank and LocalSize among the ranks of its host.
	Rank, Size           int
	LocalRank, LocalSize int
	// Name is the host's name (MPI_Get_processor_name), Library the MPI
	// library's version string.
	Name    string
	Library string
	local   mpi.Comm
	// SetParams are the MCA parameters the runtime set before MPI_Init
	// (settings.go), Settings what MPI reports of them after it.
	SetParams []string
	Settings  []text.KV
}

// Start starts the owner goroutine and initialises MPI on it.
func Start() (*Host, error) {
	h := &Host{calls: make(chan func()), done: make(chan struct{})}
	started := make(chan error, 1)
	go h.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return h, nil
}

// loop is the owner goroutine: it initialises MPI, then runs the calls it
// is given until finalize closes calls.
func (h *Host) loop(started chan<- error) {
	runtime.LockOSThread()
	defer close(h.done)
	started <- h.init()
	for f := range h.calls {
		f()
	}
}

func (h *Host) init() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := threadLevelFromEnv()
	params, err := applyMPISettings()
	if err != nil {
		return fmt.Errorf("initialising MPI: %w", err)
	}
	level, err := mpi.Init(want)
	if err != nil {
		return fmt.Errorf("initialising MPI: %w", err)
	}
	h.SetParams = params
	h.Settings = readMPISettings(params)
	h.Level = level
	if level < want {
		return fmt.Errorf("initialising MPI: asked for %s, the library granted only %s; the runtime's streams call MPI from several threads (one at a time)",
			want, level)
	}
	w := mpi.World()
	if h.Rank, err = w.Rank(); err != nil {
		return err
	}
	if h.Size, err = w.Size(); err != nil {
		return err
	}
	if h.local, err = w.SplitShared(); err != nil {
		return fmt.Errorf("finding the ranks of this host: %w", err)
	}
	if h.LocalRank, err = h.local.Rank(); err != nil {
		return err
	}
	if h.LocalSize, err = h.local.Size(); err != nil {
		return err
	}
	h.Name = mpi.ProcessorName()
	h.Library = mpi.LibraryVersion()
	return nil
}

// Do runs f while holding the MPI lock. Any thread may call MPI as long
// as the calls never overlap (see the thread level above), so f runs on
// the calling goroutine: a hop through the owner thread would cost two
// goroutine wake-ups (tens of microseconds under load) on every barrier.
func (h *Host) Do(f func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return f()
}

// onOwner runs f on the owner thread (MPI_Finalize must run on the thread
// that initialised MPI), holding the MPI lock.
func (h *Host) onOwner(f func() error) error {
	errc := make(chan error, 1)
	h.calls <- func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		errc <- f()
	}
	return <-errc
}

// Bcast sends root's buf to every rank (all bufs have the same length).
func (h *Host) Bcast(root int, buf []byte) error {
	return h.Do(func() error { return mpi.World().BcastBytes(root, buf) })
}

// Allgather returns every rank's rec, in rank order (all recs have the
// same length).
func (h *Host) Allgather(rec []byte) ([][]byte, error) {
	var out [][]byte
	err := h.Do(func() error {
		var err error
		out, err = mpi.World().AllgatherBytes(rec)
		return err
	})
	return out, err
}

// Gather collects every rank's rec (any length) on rank 0.
func (h *Host) Gather(rec []byte) ([][]byte, error) {
	var out [][]byte
	err := h.Do(func() error {
		var err error
		out, err = mpi.World().GatherBytes(0, rec)
		return err
	})
	return out, err
}

// Barrier waits for every rank.
func (h *Host) Barrier() error {
	return h.Do(func() error { return mpi.World().Barrier() })
}

// Finalize shuts MPI down on the owner thread and stops it.
func (h *Host) Finalize() error {
	err := h.onOwner(func() error {
		_ = h.local.Free()
		return mpi.Finalize()
	})
	close(h.calls)
	<-h.done
	return err
}

// Abort ends the whole job. It does not take the MPI lock: a stream may be
// stuck inside a collective holding it, which is often why we abort.
func (h *Host) Abort(code int) {
	mpi.Abort(code)
}

// threadLevelFromEnv reads SYNCGEN_MPI_THREAD.
func threadLevelFromEnv() mpi.ThreadLevel {
	switch v := os.Getenv("SYNCGEN_MPI_THREAD"); strings.ToLower(v) {
	case "", "single":
		return mpi.ThreadSingle
	case "serialized":
		return mpi.ThreadSerialized
	default:
		proc.WarnEnv("SYNCGEN_MPI_THREAD=%q: want single or serialized", v)
		return mpi.ThreadSingle
	}
}

// Lock takes the MPI lock, for a caller that makes MPI calls itself rather
// than through Do (the CPU backend's streams, whose hot paths avoid Do's
// closure). Every MPI call of the process must hold it.
func (h *Host) Lock() { h.mu.Lock() }

// Unlock releases the MPI lock.
func (h *Host) Unlock() { h.mu.Unlock() }

package report

import (
	"os"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// Run is what the report knows of the run besides its figures: the plan,
// where this rank stands, the settings of the program's flags, and how to
// reach the other ranks. It stands in for the engine and the options,
// which the report never sees.
type Run struct {
	Plan *plan.Plan
	Prog *plan.Program
	// Mem is the plan's memory; the report reads the buckets' padded
	// lengths from it.
	Mem *backend.Layout
	// Rank is this rank, Ranks the world's size, Host this rank's host.
	Rank, Ranks int
	Host        string
	// Hosts is every rank's host, in rank order (Info's), for the figures
	// that depend on the ranks' placement.
	Hosts []string
	// Backend is the backend's name; HierRan says whether hierarchical
	// allreduces ran in that form (Info.RanHierarchical).
	Backend string
	HierRan bool
	// Net counts the bytes of the host's network interface over the
	// measured steps (SYNCGEN_NET_IFACE; netcount.go), or nil.
	Net *NetCounter
	// Steps, Warmup and CheckEvery are the flags' values; Quiet prints
	// only the summary lines.
	Steps, Warmup, CheckEvery int
	Quiet                     bool
	// Tracing: rank 0 writes a trace to Trace ("-": standard output),
	// through TracePipe when that is a named pipe kept open for it.
	Tracing   bool
	Trace     string
	TracePipe *os.File
	// Comm gathers every rank's figures and events.
	Comm Comm
	// Predicted is the prediction of a run given --profile, nil without.
	Predicted *Predicted
}

// Comm is what the report needs of MPI (mpihost.Host has it).
type Comm interface {
	// Allgather returns every rank's rec (all of the same length), in
	// rank order, on every rank.
	Allgather(rec []byte) ([][]byte, error)
	// Gather returns every rank's rec (any length) on rank 0.
	Gather(rec []byte) ([][]byte, error)
}

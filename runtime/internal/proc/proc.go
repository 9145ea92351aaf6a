package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
)

// name is the program's name for messages, set once by SetName.
var name atomic.Value

// SetName sets the program's name from its argv[0].
func SetName(argv0 string) { name.Store(filepath.Base(argv0)) }

// Name is the program's name for messages ("syncgen" until SetName).
func Name() string {
	if s, ok := name.Load().(string); ok {
		return s
	}
	return "syncgen"
}

// envWarnings holds every warning WarnEnv was given on this process.
var envWarnings struct {
	sync.Mutex
	list []string
}

// WarnEnv says that an environment variable's value is ignored, and why.
// Only the first rank says it at once: mpirun gives every rank the same
// environment, and the variables are read before MPI says which rank this
// is, so the launcher's rank variable decides (a rank started some other
// way, or alone, always speaks). Every rank records the warning, so that
// one whose environment differs can say so once the ranks compare their
// warnings (EnvWarnings).
func WarnEnv(format string, args ...any) {
	msg := "ignoring " + fmt.Sprintf(format, args...)
	envWarnings.Lock()
	envWarnings.list = append(envWarnings.list, msg)
	envWarnings.Unlock()
	if FirstRank() {
		fmt.Fprintf(os.Stderr, "%s: %s\n", Name(), msg)
	}
}

// EnvWarnings returns the warnings WarnEnv was given on this process, in
// order, each as printed after the program's name.
func EnvWarnings() []string {
	envWarnings.Lock()
	defer envWarnings.Unlock()
	return append([]string(nil), envWarnings.list...)
}

// FirstRank reports whether the launcher's rank variable, which
// is there before MPI starts, makes this process rank 0 (or names no rank:
// a process started alone).
func FirstRank() bool {
	r := LauncherRank()
	return r == "" || r == "0"
}

// LauncherRank is this process's rank as the launcher's variable says
// before MPI starts, or "" when there is none (a process started alone).
func LauncherRank() string {
	for _, v := range []string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"} {
		if r := os.Getenv(v); r != "" {
			return r
		}
	}
	return ""
}

// LauncherSize is the world size that the launcher announces before MPI
// starts (Open MPI, PMI, Slurm's srun), if it does. Slurm's is the job
// step's SLURM_STEP_NUM_TASKS, which srun sets for the tasks it starts,
// and not SLURM_NTASKS, which salloc and sbatch set for the whole
// allocation: a program started alone, or by mpirun, inside one is not
// a world of that size.
func LauncherSize() (int, bool) {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil && n > 0 {
			return n, true
		}
	}
	return 0, false
}

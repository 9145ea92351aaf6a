package runtime

// The environment a run reports: versions, hosts, variables, and the
// GOMAXPROCS adjustment.

import (
	"os"
	goruntime "runtime"
)

// adjustGOMAXPROCS makes sure Go has at least two threads to run on. Under
// mpirun, Open MPI binds each rank to a core by default (--bind-to core for
// up to 2 ranks, socket beyond), and Go then sees one CPU: the streams and
// the host would share it and the overlap of compute and communication
// disappears. `mpirun --bind-to none` avoids the binding; failing that we
// raise GOMAXPROCS to 2 (the threads still share the bound core, but a
// sleeping stream no longer blocks the others). It returns a note for the
// report, empty when nothing changed.
func adjustGOMAXPROCS() string {
	if os.Getenv("GOMAXPROCS") != "" {
		return ""
	}
	if goruntime.NumCPU() < 2 && goruntime.GOMAXPROCS(0) < 2 {
		goruntime.GOMAXPROCS(2)
		return "the process is bound to 1 CPU (mpirun binds ranks to cores; use --bind-to none): GOMAXPROCS raised to 2"
	}
	return ""
}

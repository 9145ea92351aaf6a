package runtime

// Tuning knobs, read from the environment so that the generated program's
// flags stay those of the design. Every rank must use the same values (they
// decide how collectives are split, and MPI matches the pieces): the plan
// check compares them across ranks. Open MPI's mpirun passes the launching
// shell's environment to the ranks on one host; across hosts, use -x.
//
//	SYNCGEN_CPU_CHUNK   piece size of the CPU backend's allreduce, broadcast
//	                    and reduce (default: 4MiB, grown to 8 or 16MiB after
//	                    the warm-up where pieces are quick, cpu_pieces.go;
//	                    0 or off: no splitting).
//	SYNCGEN_CPU_MODE    blocking (default) or nonblocking: how the CPU
//	                    backend runs collectives (cpu_coll.go, cpu_nb.go).
//	SYNCGEN_CPU_INFLIGHT  pieces of one collective in flight in the
//	                    nonblocking mode (default 2).
//	SYNCGEN_MPI_THREAD  single (default) or serialized: the thread level
//	                    the runtime asks MPI for (mpihost.go says why).
//	SYNCGEN_SETTLE      how long the ranks settle before the measured
//	                    steps (default 50ms; 0 or off: not at all), see
//	                    settle.go. It need not match across ranks.

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/mpi"
)

const defaultCPUChunk = 4 << 20

// cpuTuningFromEnv reads the CPU backend's knobs.
func cpuTuningFromEnv() cpuTuning {
	t := cpuTuning{chunkBytes: defaultCPUChunk, autoChunk: true, inflight: 2}
	switch v := os.Getenv("SYNCGEN_CPU_MODE"); v {
	case "", "blocking":
	case "nonblocking":
		t.nonblocking = true
	default:
		fmt.Fprintf(os.Stderr, "%s: ignoring SYNCGEN_CPU_MODE=%q: want blocking or nonblocking\n", progName(), v)
	}
	if v := os.Getenv("SYNCGEN_CPU_INFLIGHT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			fmt.Fprintf(os.Stderr, "%s: ignoring SYNCGEN_CPU_INFLIGHT=%q: want 1 to 64\n", progName(), v)
		} else {
			t.inflight = n
		}
	}
	if v := os.Getenv("SYNCGEN_CPU_CHUNK"); v != "" {
		n, err := parseSize(v)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "%s: ignoring SYNCGEN_CPU_CHUNK=%q: %v\n", progName(), v, err)
		case n == 0:
			t.chunkBytes, t.autoChunk = math.MaxInt64, false
		default:
			t.chunkBytes, t.autoChunk = n, false
		}
	}
	return t
}

// mpiThreadLevelFromEnv reads SYNCGEN_MPI_THREAD.
func mpiThreadLevelFromEnv() mpi.ThreadLevel {
	switch v := os.Getenv("SYNCGEN_MPI_THREAD"); strings.ToLower(v) {
	case "", "single":
		return mpi.ThreadSingle
	case "serialized":
		return mpi.ThreadSerialized
	default:
		fmt.Fprintf(os.Stderr, "%s: ignoring SYNCGEN_MPI_THREAD=%q: want single or serialized\n", progName(), v)
		return mpi.ThreadSingle
	}
}

// settleFromEnv reads SYNCGEN_SETTLE.
func settleFromEnv() time.Duration {
	v := strings.TrimSpace(os.Getenv("SYNCGEN_SETTLE"))
	switch strings.ToLower(v) {
	case "":
		return defaultSettle
	case "0", "off":
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > time.Minute {
		fmt.Fprintf(os.Stderr, "%s: ignoring SYNCGEN_SETTLE=%q: want a duration like 50ms, at most 1m, or off\n", progName(), v)
		return defaultSettle
	}
	return d
}

// parseSize parses "4MiB", "512K", "1048576" or "off".
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("want a size like 4MiB")
	}
	return int64(f * float64(mult)), nil
}

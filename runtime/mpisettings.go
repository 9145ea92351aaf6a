package runtime

// Open MPI's shared-memory transport, set up for gradient buckets.
//
// Between two ranks of one host, Open MPI (btl/vader in 4.x, btl/sm from
// 5.0) sends a message in one of two ways. Up to the eager limit (4 KiB by
// default, its header included) the sender copies it into shared memory
// and goes on. Above it, the two ranks first exchange a rendezvous
// handshake, and the receiver then copies the data from the sender's
// memory (CMA). For a few KiB the handshake costs more than the two
// copies, so Open MPI's collectives fall off a cliff just above 4 KiB: on
// a 16-core host a 2-rank allreduce of 8 KiB took 6.2 µs with the
// defaults and 4.1 µs with a 32 KiB eager limit, and a 4-rank allreduce of
// 4 KiB 8.2 and 5.4 µs (docs/runtime.md, "The shared-memory transport").
// The small buckets of a plan (biases and norms, DDP's first bucket, a
// per-tensor plan's many collectives) sit exactly there.
//
// So before MPI_Init the runtime raises the eager limit and the size of
// the fast boxes (per-peer buffers that messages up to their size use once
// two ranks have exchanged a few) to 32 KiB. It leaves alone any parameter
// the user has set in the environment, which is where `mpirun --mca NAME
// VALUE` and `mpirun -x OMPI_MCA_NAME=VALUE` put it, and
// SYNCGEN_MPI_TUNING=off leaves Open MPI's defaults. (A value in an Open
// MPI parameter file is overridden: the environment comes first.) After
// MPI_Init it reads the values back through MPI_T for the report.

import (
	"fmt"
	"os"
	"regexp"
	"strconv"

	"github.com/syncgen/syncgen/runtime/mpi"
)

// transportTuningEnv turns the settings off when it is "off".
const transportTuningEnv = "SYNCGEN_MPI_TUNING"

// transportParams are the parameters the runtime sets, without the
// component's prefix, and their values.
var transportParams = []KV{
	{"eager_limit", "32768"},
	{"fbox_size", "32768"},
}

var openMPIVersion = regexp.MustCompile(`Open MPI v(\d+)\.`)

// sharedMemoryComponent returns the name of Open MPI's shared-memory
// component for library (MPI_Get_library_version's text), or "" for
// another MPI.
func sharedMemoryComponent(library string) string {
	m := openMPIVersion.FindStringSubmatch(library)
	if m == nil {
		return ""
	}
	if major, _ := strconv.Atoi(m[1]); major >= 5 {
		return "sm"
	}
	return "vader"
}

// transportSettings returns the environment variables the runtime sets for
// library, given the environment getenv reads: those of transportParams
// that the user has not set under either component's name, none for
// another MPI or when SYNCGEN_MPI_TUNING is "off".
func transportSettings(library string, getenv func(string) string) ([]KV, error) {
	switch v := getenv(transportTuningEnv); v {
	case "", "on":
	case "off":
		return nil, nil
	default:
		return nil, fmt.Errorf("%s=%q: want on or off", transportTuningEnv, v)
	}
	component := sharedMemoryComponent(library)
	if component == "" {
		return nil, nil
	}
	var set []KV
	for _, p := range transportParams {
		if getenv("OMPI_MCA_btl_vader_"+p.Key) != "" || getenv("OMPI_MCA_btl_sm_"+p.Key) != "" {
			continue
		}
		set = append(set, KV{"OMPI_MCA_btl_" + component + "_" + p.Key, p.Value})
	}
	return set, nil
}

// setTransportDefaults sets the environment variables of
// transportSettings; it must run before MPI_Init. It returns the MCA
// parameters it set (without OMPI_MCA_).
func setTransportDefaults() ([]string, error) {
	set, err := transportSettings(mpi.LibraryVersion(), os.Getenv)
	if err != nil {
		return nil, err
	}
	var params []string
	for _, kv := range set {
		if err := os.Setenv(kv.Key, kv.Value); err != nil {
			return nil, fmt.Errorf("setting %s: %w", kv.Key, err)
		}
		params = append(params, kv.Key[len("OMPI_MCA_"):])
	}
	return params, nil
}

// readTransport reads the parameters back from MPI after MPI_Init, as
// "name=value" pairs for the report; a parameter MPI does not know is
// left out.
func readTransport(params []string) []KV {
	var out []KV
	for _, p := range params {
		if v, ok, err := mpi.ControlVar(p); err == nil && ok {
			out = append(out, KV{p, v})
		}
	}
	return out
}

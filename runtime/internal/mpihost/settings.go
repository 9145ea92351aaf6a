package mpihost

// Open MPI's settings for gradient buckets: the shared-memory transport
// and one allreduce algorithm choice, both set before MPI_Init.
//
// The transport. Between two ranks of one host, Open MPI (btl/vader in
// 4.x, btl/sm from 5.0) sends a message of up to the eager limit (4 KiB by
// default, its header included) by copying it into shared memory and going
// on. Above it, the two ranks first exchange a rendezvous handshake, and
// the receiver then copies the data from the sender's memory (CMA). For a
// few KiB the handshake costs more than the two copies, so Open MPI's
// collectives fall off a cliff just above 4 KiB. The small buckets of a
// plan (biases and norms, DDP's first bucket, a per-tensor plan's many
// collectives) sit exactly there. So the runtime raises the eager limit
// and the size of the fast boxes (per-peer buffers that messages up to
// their size use once two ranks have exchanged a few) to 32 KiB.
//
// The algorithm. Open MPI 4's fixed decision for an allreduce between 2
// ranks leaves recursive doubling at 4096 bytes for a slower algorithm;
// from 8 KiB on the two are level. The runtime gives Open MPI 4's
// coll/tuned a rules file that picks recursive doubling for 2 ranks from
// 4096 to 8191 bytes and leaves every other size and communicator to the
// fixed decision.
//
// Both cliffs and the settings' effect were measured with C's
// MPI_Allreduce (bench/results/2026-12-03-openmpi-small-message-cliffs.md;
// docs/runtime.md, "Open MPI's settings", says what the runtime does).
//
// A parameter the user has set in the environment (where `mpirun --mca
// NAME VALUE` and `mpirun -x OMPI_MCA_NAME=VALUE` put it) is left alone,
// and SYNCGEN_MPI_TUNING=off leaves all of Open MPI's defaults. (A value in
// an Open MPI parameter file is overridden: the environment comes first.)
// After MPI_Init the runtime reads the values back through MPI_T for the
// report.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/text"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// TuningEnv turns the settings off when it is "off" (or no, false, 0).
const TuningEnv = "SYNCGEN_MPI_TUNING"

// transportParams are the shared-memory parameters the runtime sets,
// without the component's prefix, and their values.
var transportParams = []text.KV{
	{Key: "eager_limit", Value: "32768"},
	{Key: "fbox_size", Value: "32768"},
}

// allreduceRules is a coll/tuned rules file (Open MPI 4's format: the
// number of collectives; then for each its id (allreduce is 2) and number
// of communicator sizes; for each size, the number of message sizes and,
// for each, "bytes algorithm fan-in/out segment-size"). A rule applies
// from its communicator size and message size up to the next; algorithm 0
// leaves the choice to the fixed decision, 3 is recursive doubling. A
// change to it needs a new file name in rulesFile.
const allreduceRules = `1
2 2
2 3
0 0 0 0
4096 3 0 0
8192 0 0 0
3 1
0 0 0 0
`

// allreduceRuleText says what allreduceRules does, for the report.
const allreduceRuleText = "2 ranks, 4096 to 8191 bytes: recursive doubling"

// collRulesParams are the parameters that ask coll/tuned for a rules file;
// a user who sets any of them, or forces an allreduce algorithm, keeps
// theirs.
var collRulesParams = []string{"coll_tuned_use_dynamic_rules", "coll_tuned_dynamic_rules_filename", "coll_tuned_allreduce_algorithm"}

var openMPIVersion = regexp.MustCompile(`Open MPI v(\d+)\.`)

// openMPIMajor returns the major version of Open MPI from library
// (MPI_Get_library_version's text), or 0 for another MPI.
func openMPIMajor(library string) int {
	m := openMPIVersion.FindStringSubmatch(library)
	if m == nil {
		return 0
	}
	major, _ := strconv.Atoi(m[1])
	return major
}

// mpiSettings is what the runtime sets before MPI_Init.
type mpiSettings struct {
	// env are the environment variables to set.
	env []text.KV
	// allreduceRules is whether to write allreduceRules to a file and set
	// the two variables that make coll/tuned read it.
	allreduceRules bool
}

// chooseMPISettings returns the settings for library, given the
// environment getenv reads: those of transportParams that the user has
// not set under either component's name, and the allreduce rules on Open
// MPI 4 unless the user has set a collRulesParams; none for another MPI or
// when SYNCGEN_MPI_TUNING is "off" (or no, false, 0).
// A value of SYNCGEN_MPI_TUNING that is neither (spaces around it
// aside) is ignored, with a warning through warn, as every other knob's,
// and the default, on, applies.
func chooseMPISettings(library string, getenv func(string) string, warn func(format string, args ...any)) mpiSettings {
	var s mpiSettings
	switch v := getenv(TuningEnv); {
	case text.IsOff(strings.TrimSpace(v)):
		return s
	case !text.IsOn(strings.TrimSpace(v)):
		warn("%s=%q: want on or off (or yes/no, true/false, 1/0, in any case); leaving it on", TuningEnv, v)
	}
	major := openMPIMajor(library)
	if major == 0 {
		return s
	}
	component := "vader"
	if major >= 5 {
		component = "sm"
	}
	for _, p := range transportParams {
		if getenv("OMPI_MCA_btl_vader_"+p.Key) != "" || getenv("OMPI_MCA_btl_sm_"+p.Key) != "" {
			continue
		}
		s.env = append(s.env, text.KV{Key: "OMPI_MCA_btl_" + component + "_" + p.Key, Value: p.Value})
	}
	// Measured with Open MPI 4.1 only; 5.0 reworked coll/tuned's rules.
	s.allreduceRules = major == 4
	for _, p := range collRulesParams {
		if getenv("OMPI_MCA_"+p) != "" {
			s.allreduceRules = false
		}
	}
	return s
}

// applyMPISettings makes the settings of chooseMPISettings; it must run
// before MPI_Init. It returns the MCA parameters it set (without
// OMPI_MCA_), to be read back. The rules are skipped if their file cannot
// be written.
func applyMPISettings() (params []string, err error) {
	s := chooseMPISettings(mpi.LibraryVersion(), os.Getenv, proc.WarnEnv)
	env := s.env
	if s.allreduceRules {
		if path, err := rulesFile(); err == nil {
			env = append(env, text.KV{Key: "OMPI_MCA_coll_tuned_use_dynamic_rules", Value: "1"}, text.KV{Key: "OMPI_MCA_coll_tuned_dynamic_rules_filename", Value: path})
		}
	}
	for _, kv := range env {
		if err := os.Setenv(kv.Key, kv.Value); err != nil {
			return nil, fmt.Errorf("setting %s: %w", kv.Key, err)
		}
		params = append(params, kv.Key[len("OMPI_MCA_"):])
	}
	return params, nil
}

// rulesFile returns the path of a file that holds allreduceRules, in the
// user's cache directory (syncgen/ under $XDG_CACHE_HOME or ~/.cache),
// writing it when it is missing or differs. One file serves every run: a
// temporary file per run could not always be removed, because Open MPI
// reads it inside MPI_Init, which ends the process when it fails. The
// ranks of a host may write it at the same time, so each writes its own
// temporary file and renames it into place.
func rulesFile() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "syncgen")
	path := filepath.Join(dir, "openmpi-allreduce-rules-1.conf")
	if b, err := os.ReadFile(path); err == nil && string(b) == allreduceRules {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "openmpi-allreduce-rules-*.tmp")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(allreduceRules)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return path, nil
}

// readMPISettings reads the parameters back from MPI after MPI_Init, for
// the report. A parameter MPI does not know is left out. The rules file
// is shown as what it does, when MPI took it.
func readMPISettings(params []string) []text.KV {
	var out []text.KV
	for _, p := range params {
		if p == "coll_tuned_dynamic_rules_filename" {
			continue // shown as the rule, below
		}
		v, ok, err := mpi.ControlVar(p)
		if err != nil || !ok {
			continue
		}
		switch p {
		case "coll_tuned_use_dynamic_rules":
			if v == "true" {
				out = append(out, text.KV{Key: "allreduce rule", Value: allreduceRuleText})
			}
		default:
			out = append(out, text.KV{Key: p, Value: v})
		}
	}
	return out
}

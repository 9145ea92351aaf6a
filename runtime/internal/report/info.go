package report

import (
	"fmt"
	"os"
	goruntime "runtime"
	"sort"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// Info is what every report shows about the run.
type Info struct {
	backend  string
	why      string
	Versions []text.KV
	hosts    []string // per rank
	procNote string
	maxprocs []int // per rank
	numCPU   []int
	env      []text.KV // NCCL_*, OMPI_*, SYNCGEN_*, CUDA_VISIBLE_DEVICES on rank 0, as the user set them
	// mpiSettings is what the runtime set of MPI's parameters
	// (mpihost.Host.Settings).
	mpiSettings []text.KV
	goVer       string
	warnings    []string
}

// GatherInfo collects the run's environment (collective).
func GatherInfo(h *mpihost.Host, be backend.Backend, why, procNote string) *Info {
	info := &Info{backend: be.Name(), why: why, Versions: be.Versions(), procNote: procNote, goVer: goruntime.Version(),
		mpiSettings: h.Settings}
	setByRuntime := map[string]bool{}
	for _, p := range h.SetParams {
		setByRuntime["OMPI_MCA_"+p] = true
	}
	// Each rank's figures, host and MPI library: the library must be the
	// same everywhere, or collectives may not match.
	rec := make([]byte, 512)
	s := fmt.Sprintf("%d %d %s\n%s", goruntime.GOMAXPROCS(0), goruntime.NumCPU(), h.Name, h.Library)
	copy(rec, s)
	all, err := h.Allgather(rec)
	if err == nil {
		libs := map[string][]int{}
		for r, x := range all {
			var mp, nc int
			var host string
			line, lib, _ := strings.Cut(strings.TrimRight(string(x), "\x00"), "\n")
			fmt.Sscanf(line, "%d %d %s", &mp, &nc, &host)
			info.hosts = append(info.hosts, host)
			info.maxprocs = append(info.maxprocs, mp)
			info.numCPU = append(info.numCPU, nc)
			libs[lib] = append(libs[lib], r)
		}
		if len(libs) > 1 {
			var parts []string
			for lib, rs := range libs {
				parts = append(parts, fmt.Sprintf("%s: %s", text.RankList(rs), lib))
			}
			sort.Strings(parts)
			info.warnings = append(info.warnings, "the ranks run different MPI libraries ("+strings.Join(parts, "; ")+")")
		}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if setByRuntime[k] {
			continue
		}
		if strings.HasPrefix(k, "NCCL_") || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "SYNCGEN_") ||
			k == "CUDA_VISIBLE_DEVICES" || k == "GOMAXPROCS" {
			info.env = append(info.env, text.KV{Key: k, Value: v})
		}
	}
	sort.Slice(info.env, func(i, j int) bool { return info.env[i].Key < info.env[j].Key })
	return info
}

// distinctHosts returns the number of different hosts.
func (info *Info) distinctHosts() int {
	m := map[string]bool{}
	for _, h := range info.hosts {
		m[h] = true
	}
	return len(m)
}

// RankHosts returns every rank's host, in rank order.
func (info *Info) RankHosts() []string { return info.hosts }

// Warn adds a warning that the header and the JSON file show.
func (i *Info) Warn(msg string) { i.warnings = append(i.warnings, msg) }

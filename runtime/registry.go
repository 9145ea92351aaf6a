package runtime

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

var (
	backendsMu sync.Mutex
	backends   []BackendFactory
)

// registeredBackends returns the registered factories, highest Priority
// first.
func registeredBackends() []BackendFactory {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	out := append([]BackendFactory(nil), backends...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	return out
}

// probeRecordSize is the size of the record each rank contributes when
// the ranks agree on a backend: one byte ok, then the reason.
const probeRecordSize = 1024

// selectBackend creates the backend --backend asks for. "auto" tries the
// registered GPU backends by priority and takes the first that every rank
// can run, else the CPU backend; it returns why it chose what it chose.
func selectBackend(h *mpiHost, p *plan.Plan, opts *options, tune cpuTuning) (Backend, string, error) {
	env := &BackendEnv{Rank: h.rank, Size: h.size, LocalRank: h.localRank, LocalSize: h.localSize, Host: h.host, Boot: h, Plan: p}
	if opts.backend == "cpu" {
		return newCPUBackend(h, tune), "--backend cpu", nil
	}
	var reasons []string
	found := false
	for _, f := range registeredBackends() {
		if f.Name == "cpu" || (opts.backend != "auto" && f.Name != opts.backend) {
			continue
		}
		found = true
		ok, why := safeProbe(f, env)
		rec := make([]byte, probeRecordSize)
		if ok {
			rec[0] = 1
		}
		copy(rec[1:], why)
		all, err := h.Allgather(rec)
		if err != nil {
			return nil, "", fmt.Errorf("asking every rank whether it can run %s: %w", f.Name, err)
		}
		// Ranks that fail for the same reason are named together.
		var bad []string
		byWhy := map[string][]int{}
		for r, x := range all {
			if x[0] != 1 {
				w := strings.TrimRight(string(x[1:]), "\x00")
				if len(byWhy[w]) == 0 {
					bad = append(bad, w)
				}
				byWhy[w] = append(byWhy[w], r)
			}
		}
		for i, w := range bad {
			bad[i] = text.RankList(byWhy[w]) + ": " + w
		}
		if len(bad) == 0 {
			be, err := f.New(env)
			if err != nil {
				return nil, "", fmt.Errorf("starting the %s backend: %w", f.Name, err)
			}
			if opts.backend == "auto" {
				return be, fmt.Sprintf("auto: every rank can run %s", f.Name), nil
			}
			return be, "--backend " + f.Name, nil
		}
		if len(bad) > 4 {
			bad = append(bad[:4], fmt.Sprintf("and %d more", len(bad)-4))
		}
		reasons = append(reasons, fmt.Sprintf("%s unavailable (%s)", f.Name, strings.Join(bad, "; ")))
		if opts.backend != "auto" {
			return nil, "", agreed(fmt.Errorf("--backend %s: %s; use --backend cpu to run on the CPU", f.Name, strings.Join(bad, "; ")))
		}
	}
	if opts.backend != "auto" && !found {
		return nil, "", agreed(fmt.Errorf("--backend %s: this plan.Program was built without that backend", opts.backend))
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no GPU backend is built in")
	}
	return newCPUBackend(h, tune), "auto: " + strings.Join(reasons, "; "), nil
}

// safeProbe runs a probe, turning a panic into a "no".
func safeProbe(f BackendFactory, env *BackendEnv) (ok bool, why string) {
	defer func() {
		if r := recover(); r != nil {
			ok, why = false, fmt.Sprintf("probe panicked: %v", r)
		}
	}()
	if f.Probe == nil {
		return false, "no probe"
	}
	return f.Probe(env)
}

// agreedError is an error that every rank reaches the same way (from what
// they all gathered), so that the run ends with one message and no abort
// (runner.agreedFailure).
type agreedError struct{ err error }

func agreed(err error) error { return &agreedError{err} }

func (e *agreedError) Error() string { return e.err.Error() }
func (e *agreedError) Unwrap() error { return e.err }

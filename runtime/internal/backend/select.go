package backend

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/syncgen/syncgen/runtime/internal/text"
)

var (
	backendsMu sync.Mutex
	backends   []Factory
)

// Registered returns the registered factories, highest Priority
// first.
func Registered() []Factory {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	out := append([]Factory(nil), backends...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	return out
}

// probeRecordSize is the size of the record each rank contributes when
// the ranks agree on a backend: one byte ok, then the reason.
const probeRecordSize = 1024

// Select creates the backend that want names, as --backend spells it
// (collective: every rank calls it with the same want). "cpu" is cpu();
// "auto" tries the registered GPU backends by priority and takes the first
// that every rank can run, else cpu(). It returns why it chose what it
// chose. An *AgreedError is an error every rank reached the same way.
func Select(env *Env, want string, cpu func() Backend) (Backend, string, error) {
	if want == "cpu" {
		return cpu(), "--backend cpu", nil
	}
	var reasons []string
	found := false
	for _, f := range Registered() {
		if f.Name == "cpu" || (want != "auto" && f.Name != want) {
			continue
		}
		found = true
		ok, why := safeProbe(f, env)
		rec := make([]byte, probeRecordSize)
		if ok {
			rec[0] = 1
		}
		copy(rec[1:], why)
		all, err := env.Boot.Allgather(rec)
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
			if want == "auto" {
				return be, fmt.Sprintf("auto: every rank can run %s", f.Name), nil
			}
			return be, "--backend " + f.Name, nil
		}
		if len(bad) > 4 {
			bad = append(bad[:4], fmt.Sprintf("and %d more", len(bad)-4))
		}
		reasons = append(reasons, fmt.Sprintf("%s unavailable (%s)", f.Name, strings.Join(bad, "; ")))
		if want != "auto" {
			return nil, "", agreed(fmt.Errorf("--backend %s: %s; use --backend cpu to run on the CPU", f.Name, strings.Join(bad, "; ")))
		}
	}
	if want != "auto" && !found {
		return nil, "", agreed(fmt.Errorf("--backend %s: this program was built without that backend", want))
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no GPU backend is built in")
	}
	return cpu(), "auto: " + strings.Join(reasons, "; "), nil
}

// safeProbe runs a probe, turning a panic into a "no".
func safeProbe(f Factory, env *Env) (ok bool, why string) {
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

// AgreedError is an error that every rank reaches the same way (from what
// they all gathered), so that the run can end with one message and no
// abort.
type AgreedError struct{ Err error }

func agreed(err error) error { return &AgreedError{Err: err} }

func (e *AgreedError) Error() string { return e.Err.Error() }
func (e *AgreedError) Unwrap() error { return e.Err }

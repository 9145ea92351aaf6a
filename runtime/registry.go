package runtime

import (
	"sort"
	"sync"
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

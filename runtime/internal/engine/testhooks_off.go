//go:build !syncgen_testhooks

package engine

import "github.com/syncgen/syncgen/runtime/internal/plan"

// testHooks is empty without the build tag syncgen_testhooks: a user's
// program has none of the runtime's test hooks (testhooks.go), and the
// calls below compile to nothing.
type testHooks struct{}

func testHooksFromEnv() *testHooks { return &testHooks{} }

func (*testHooks) duringSetup(rank int)                             {}
func (*testHooks) beforeStep(e *Engine, i int)                      {}
func (*testHooks) beforeStatement(e *Engine, at plan.Src)           {}
func (*testHooks) beforeCheck(e *Engine, i int)                     {}
func (*testHooks) inSave(e *Engine, steps int)                      {}
func (*testHooks) failSave(e *Engine, steps int, path string) error { return nil }
func (*testHooks) measuring()                                       {}
func (*testHooks) reportAllocs(e *Engine)                           {}

package runtime

import (
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// TestHierNote: the header notes `algo hierarchical` on NCCL only, and
// names NCCL_ALGO's value.
func TestHierNote(t *testing.T) {
	hier := &plan.Program{Step: []plan.Stmt{{Kind: plan.StmtGroup, Body: []plan.Stmt{{Coll: plan.CollAllReduce, Hier: true}}}}}
	flat := &plan.Program{Step: []plan.Stmt{{Coll: plan.CollAllReduce}}}
	if n := hierNote("cpu", hier); n != "" {
		t.Errorf("cpu: note %q, want none: the CPU backend runs it hierarchically", n)
	}
	if n := hierNote("nccl", flat); n != "" {
		t.Errorf("nccl, flat plan: note %q, want none", n)
	}
	t.Setenv("NCCL_ALGO", "Tree")
	if n := hierNote("nccl", hier); !strings.Contains(n, "ignored on nccl") || !strings.Contains(n, "NCCL_ALGO Tree") {
		t.Errorf("nccl: note %q, want it to say ignored and name NCCL_ALGO Tree", n)
	}
}

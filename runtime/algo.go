package runtime

import (
	"os"

	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// hierNote says, for the header, that a backend other than the CPU one
// runs `algo hierarchical` allreduces as it runs any other: NCCL has no
// per-call algorithm and chooses its own (NCCL_ALGO sets it process-wide).
// "" when the backend runs them hierarchically or the plan has none.
func hierNote(backend string, prog *plan.Program) string {
	if backend == "cpu" || !prog.Hierarchical() {
		return ""
	}
	algo := os.Getenv("NCCL_ALGO")
	if algo == "" {
		algo = "not set: NCCL chooses by size and topology"
	}
	return "`algo hierarchical` is ignored on " + backend + ": NCCL has no per-collective algorithm; NCCL_ALGO=Ring|Tree sets one for the whole process (NCCL_ALGO " + algo + ")"
}

package runtime

import (
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// TestNCCLHierAlgo: `algo hierarchical` becomes NCCL_ALGO=allreduce:tree
// on NCCL only where it can mean something (every allreduce hierarchical,
// several hosts, NCCL_ALGO not set by the user), and the note says what
// NCCL does otherwise.
func TestNCCLHierAlgo(t *testing.T) {
	ar := func(hier bool) plan.Stmt { return plan.Stmt{Kind: plan.StmtColl, Coll: plan.CollAllReduce, Hier: hier} }
	hier := &plan.Program{Step: []plan.Stmt{{Kind: plan.StmtGroup, Body: []plan.Stmt{ar(true)}}}, Init: []plan.Stmt{ar(true)}}
	mixed := &plan.Program{Step: []plan.Stmt{ar(true), ar(false)}}
	flat := &plan.Program{Step: []plan.Stmt{ar(false)}}
	for _, c := range []struct {
		name     string
		prog     *plan.Program
		userAlgo string
		hosts    int
		set      string
		says     string
	}{
		{"flat plan", flat, "", 2, "", ""},
		{"all hierarchical, 2 hosts", hier, "", 2, "allreduce:tree", "NCCL_ALGO=allreduce:tree"},
		{"one host", hier, "", 1, "", "one host"},
		{"mixed", mixed, "", 2, "", "also has flat allreduces"},
		{"the user's NCCL_ALGO", hier, "Ring", 2, "", "NCCL_ALGO=Ring as set"},
	} {
		set, note := ncclHierAlgo(c.prog, c.userAlgo, c.hosts)
		if set != c.set || (c.says == "") != (note == "") || !strings.Contains(note, c.says) {
			t.Errorf("%s: set %q, note %q; want set %q, a note saying %q", c.name, set, note, c.set, c.says)
		}
	}
}

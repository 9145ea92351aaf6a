package dsl

import (
	"strings"
	"testing"

	"github.com/syncgen/syncgen/ir"
)

// TestAlgo: `algo hierarchical` marks an allreduce, flat is the default,
// and a tensor named algo is still a target.
func TestAlgo(t *testing.T) {
	p := mustCheck(t, "tensor a f32[4]\ntensor algo f32[4]\nbucket g { a }\nstream comm\n"+
		"step { allreduce g algo hierarchical op avg on comm; allreduce g on comm algo flat; allreduce algo on comm\n"+
		"group { allreduce g on comm algo hierarchical } }\n")
	s := p.Step
	if len(s) != 4 || !s[0].Hierarchical || s[0].Op != ir.Avg || s[1].Hierarchical || s[2].Hierarchical || !s[3].Body[0].Hierarchical {
		t.Fatalf("statements %+v: want the first and the group's allreduce hierarchical, the others flat", s)
	}
	got := mustFormat(t, "tensor a f32[4]\nbucket g { a }\nstream comm\nstep { allreduce g on comm algo hierarchical op sum }\n")
	want := "allreduce g op sum algo hierarchical on comm"
	if !strings.Contains(got, want) {
		t.Errorf("formatted:\n%s\nwant the line %q", got, want)
	}
}

func TestAlgoErrors(t *testing.T) {
	checkHints(t, []hintCase{
		{"tensor a f32[1]\nstep { reduce a to 0 algo hierarchical }\n", "reduce takes no `algo`", "only allreduce chooses an algorithm; remove `algo`"},
		{"tensor a f32[1]\nstep { broadcast a from 0 algo flat }\n", "broadcast takes no `algo`", "only allreduce chooses an algorithm"},
		{"tensor a f32[1]\nstep { allreduce a algo hierarchial }\n", "unknown algo `hierarchial`", "did you mean `hierarchical`? algorithms are flat (the default) and hierarchical"},
		{"tensor a f32[1]\nstep { allreduce a algo hier }\n", "unknown algo `hier`", "did you mean `hierarchical`?"},
		{"tensor a f32[1]\nstep { allreduce a algo ring }\n", "unknown algo `ring`", "algorithms are flat (the default) and hierarchical"},
		{"tensor a f32[1]\nstep { allreduce a algo flat algo hierarchical }\n", "duplicate option `algo` (first on line 2)", "remove one of them"},
	})
}

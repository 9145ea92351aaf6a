package calibrate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
)

func TestKindsAndSweepPlan(t *testing.T) {
	prog, diags := dsl.Check("p.sync", []byte(`tensor a f32[8]
tensor b f16[8]
stream compute
stream comm
bucket x { a }
bucket y { b }
step {
    backward 1ms on compute
    allreduce x op avg on comm after ready
    group {
        allgather y on comm after ready
    }
    wait comm
}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	kinds := Kinds(prog)
	if got := fmt.Sprint(kinds); got != "[allgather f16 allreduce avg f32]" {
		t.Errorf("kinds %s", got)
	}
	if got := Kinds(nil); len(got) != 1 || got[0] != DefaultKind {
		t.Errorf("no plan: %v", got)
	}
	sizes := Sizes(1024, 4)
	if fmt.Sprint(sizes) != "[4 16 64 256 1024]" {
		t.Errorf("sizes %v", sizes)
	}
	src, err := SweepPlan(kinds, sizes, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	sweep, diags := dsl.Check("sweep.sync", src)
	if diags.HasErrors() {
		t.Fatalf("the sweep does not check: %v\n%s", diags, src)
	}
	// A bucket per kind and size, and the untimed first one.
	if len(sweep.Buckets) != 2*len(sizes)+1 || sweep.Run.Steps != 5 || sweep.Run.CheckEvery != 5 {
		t.Errorf("%d buckets, run %+v", len(sweep.Buckets), sweep.Run)
	}
	// The allgather's 4 bytes of f16 (2 elements) pad to 3 ranks: 3.
	if b := sweep.Buckets[0]; b.Name != "bk0_s0" || b.Elems != 3 {
		t.Errorf("first bucket %s of %d elements", b.Name, b.Elems)
	}
}

func TestFromRun(t *testing.T) {
	var rows []string
	for i, b := range []int64{4, 16, 64, 256, 1024} {
		rows = append(rows, fmt.Sprintf(`{"bucket":"bk0_s%d","bytes":%d,"wire":"f32","collective":"allreduce","op":"sum","time_median_us":%g}`,
			i, b, 10+float64(b)/1e3))
	}
	rows = append(rows, `{"bucket":"warm","bytes":4,"wire":"f32","collective":"allreduce","op":"sum","time_median_us":500}`)
	report := `{"ranks":2,"hosts":["h1","h1"],"backend":"cpu","versions":{"MPI":"x"},"buckets":[` + strings.Join(rows, ",") + `],"summary":{"wrong":0}}`
	p, err := FromRun([]byte(report), "test")
	if err != nil {
		t.Fatal(err)
	}
	if p.Machine != "h1" || p.Ranks != 2 || len(p.Curves) != 1 || len(p.Curves[0].Points) != 5 {
		t.Fatalf("profile %+v", p)
	}
	// The fixture's points lie on one line, whose latency and bandwidth
	// are asserted below (the bus factor is 1 at 2 ranks); the warm-up's
	// point is left out of the fit.
	s := p.Curves[0].Segments
	if len(s) != 1 || s[0].AlphaUs < 9.99 || s[0].AlphaUs > 10.01 || s[0].BusGBs < 0.999 || s[0].BusGBs > 1.001 {
		t.Errorf("segments %+v", s)
	}
	if _, err := FromRun([]byte(strings.Replace(report, `"wrong":0`, `"wrong":3`, 1)), "test"); err == nil || !strings.Contains(err.Error(), "3 wrong") {
		t.Errorf("a run with wrong elements: %v", err)
	}
}

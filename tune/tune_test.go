package tune

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

// Eight tensors of 1 MiB (f32[262144]); backward 8 ms; one bucket
// declaration with a 4 MiB cap.
const plan = `// a comment that stays
tensor t{0..7} f32[262144]
stream compute
stream comm
bucket grads { * } cap 4MiB order reverse
step {
    backward 8ms on compute
    allreduce grads on comm after ready
    wait comm
}
`

// prof: allreduce 100 us + bytes at 1 GB/s algbw (2 ranks).
var prof = &costmodel.Profile{Format: costmodel.Format, Curves: []costmodel.Curve{
	{Collective: "allreduce", Segments: []costmodel.Segment{{AlphaUs: 100, BusGBs: 1}}},
}}

func grid() Grid {
	return Grid{Caps: []int64{1 * mib, 2 * mib, 4 * mib, 0}, Firsts: []int64{0, 1 * mib}, Orders: []string{"reverse", "declared"}, Wires: []string{""}}
}

func TestTuneRanksAndIsDeterministic(t *testing.T) {
	a, err := Tune("p.sync", []byte(plan), 2, prof, grid())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Tune("p.sync", []byte(plan), 2, prof, grid())
	if err != nil {
		t.Fatal(err)
	}
	var ta, tb bytes.Buffer
	a.WriteTable(&ta)
	b.WriteTable(&tb)
	if ta.String() != tb.String() {
		t.Errorf("two searches differ:\n%s\n%s", ta.String(), tb.String())
	}
	if a.Bucket != "grads" {
		t.Errorf("tuned %q, want grads", a.Bucket)
	}
	for i := 1; i < len(a.Candidates); i++ {
		if a.Candidates[i].Step < a.Candidates[i-1].Step {
			t.Fatalf("not ranked: %v before %v", a.Candidates[i-1].Step, a.Candidates[i].Step)
		}
	}
	// By hand: 1 MiB buckets in reverse order; the first is ready at
	// 1 ms, and each takes 100 us + 1048.576 us, longer than the 1 ms
	// until the next is ready: they run back to back, the last ending at
	// 1 ms + 8 x 1.148576 ms. No other plan ends sooner.
	best := a.Candidates[0]
	if best.Cap != 1*mib || best.Order != "reverse" || best.Buckets != 8 {
		t.Errorf("best %s (%d buckets)", best.Label(), best.Buckets)
	}
	if want := 1e6 + 8*(100e3+1048576.0); float64(best.Step) != want {
		t.Errorf("best step %v, want %v ns", best.Step, want)
	}
	// The grid: (4 caps without a first, and the 2 caps above 1 MiB with
	// one) x 2 orders = 12; the plan as written is one more; a point
	// whose buckets repeat an earlier one's (cap 4MiB order reverse is
	// the plan as written) is dropped.
	if len(a.Candidates) != 12 || a.Duplicates != 1 {
		t.Errorf("%d candidates and %d duplicates, want 12 and 1", len(a.Candidates), a.Duplicates)
	}
	var current int
	for _, c := range a.Candidates {
		if c.Current() {
			current++
			continue
		}
		p, diags := dsl.Check("p.sync", c.Src)
		if diags.HasErrors() || p == nil || !strings.HasPrefix(string(c.Src), "// a comment that stays\n") {
			t.Errorf("%s: the candidate's source does not check or lost its comment:\n%s", c.Label(), c.Src)
		}
	}
	if current != 1 {
		t.Errorf("%d candidates are the plan as written, want 1", current)
	}
}

func TestTuneSVG(t *testing.T) {
	tu, err := Tune("p.sync", []byte(plan), 2, prof, grid())
	if err != nil {
		t.Fatal(err)
	}
	tu.Candidates[0].Ran, tu.Candidates[0].Measured = true, tu.Candidates[0].Step
	var buf bytes.Buffer
	if err := tu.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	lines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 2 {
		t.Errorf("%d lines, want one per order", lines)
	}
}

func TestTuneErrors(t *testing.T) {
	g := grid()
	g.Bucket = "nope"
	if _, err := Tune("p.sync", []byte(plan), 2, prof, g); err == nil || !strings.Contains(err.Error(), "no bucket \"nope\"") {
		t.Errorf("an unknown bucket: %v", err)
	}
	if _, err := Tune("p.sync", []byte("tensor x f32[1]\nbucket b { y }\n"), 2, prof, grid()); err == nil {
		t.Error("a plan with errors was tuned")
	}
}

func TestTuneStreamsAndGroups(t *testing.T) {
	g := Grid{Caps: []int64{1 * mib}, Firsts: []int64{0}, Orders: []string{"reverse"}, Wires: []string{""}, Streams: []int{1, 2}, GroupBelow: []int64{0, 2 * mib}}
	tu, err := Tune("p.sync", []byte(plan), 2, prof, g)
	if err != nil {
		t.Fatal(err)
	}
	// as written, and the four of the grid: none repeats another.
	if len(tu.Candidates) != 5 || len(tu.Invalid) != 0 {
		t.Fatalf("%d candidates, invalid %v", len(tu.Candidates), tu.Invalid)
	}
	by := map[string]*Candidate{}
	for _, c := range tu.Candidates {
		by[c.Label()] = c
		if _, diags := dsl.Check("p.sync", c.Src); diags.HasErrors() {
			t.Errorf("%s does not check: %v", c.Label(), diags)
		}
	}
	one, two := by["cap 1MiB order reverse"], by["cap 1MiB order reverse streams 2"]
	grouped := by["cap 1MiB order reverse group below 2MiB"]
	if one == nil || two == nil || grouped == nil {
		t.Fatalf("candidates %v", by)
	}
	if !strings.Contains(string(two.Src), "stream comm_2") || !strings.Contains(string(grouped.Src), "group {") {
		t.Errorf("sources:\n%s\n%s", two.Src, grouped.Src)
	}
	// By hand: on one stream the eight 1 MiB allreduces run back to back
	// from 1 ms, each 100 us + 1048.576 us. On two streams one's latency
	// hides behind the other's bytes: faster, though not faster than the
	// bytes alone from 1.1 ms. One group waits for all eight (8 ms), pays
	// one latency and the bytes.
	if want := 1e6 + 8*(100e3+1048576.0); float64(one.Step) != want {
		t.Errorf("one stream: %v, want %v ns", one.Step, want)
	}
	if bound := 1e6 + 100e3 + 8*1048576.0; float64(two.Step) >= float64(one.Step) || float64(two.Step) < bound {
		t.Errorf("two streams: %v, want below one stream's %v and at least %v ns", two.Step, one.Step, bound)
	}
	if want := 8e6 + 100e3 + 8*1048576.0; float64(grouped.Step) != want {
		t.Errorf("grouped: %v, want %v ns", grouped.Step, want)
	}
}

// TestTuneUnsplitSaidOnce: a step the rewriter cannot deal over streams
// (its collective names no stream) is said once in the notes, with the
// streams and groups left out, as the rewriter's refusal, not the
// checker's; groups on the one stream are still searched.
func TestTuneUnsplitSaidOnce(t *testing.T) {
	src := strings.Replace(plan, "allreduce grads on comm after ready", "allreduce grads after ready", 1)
	g := grid()
	g.Streams, g.GroupBelow = []int{1, 2}, []int64{0, 2 * mib}
	tu, err := Tune("p.sync", []byte(src), 2, prof, g)
	if err != nil {
		t.Fatal(err)
	}
	want := "streams 2, streams 2 group below 2MiB: the collective of bucket grads names no declared stream"
	if len(tu.Unsplit) != 1 || !strings.HasPrefix(tu.Unsplit[0], want) || len(tu.Invalid) != 0 {
		t.Fatalf("unsplit %q, invalid %q; want one note %q...", tu.Unsplit, tu.Invalid, want)
	}
	grouped := false
	for _, c := range tu.Candidates {
		grouped = grouped || c.GroupBelow > 0
	}
	if !grouped {
		t.Error("no grouped candidate: groups on one stream need no second stream")
	}
	var buf bytes.Buffer
	if err := tu.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.Count(out, "# left out, the step rewriter cannot rewrite this step for "+want) != 1 || strings.Contains(out, "checker") {
		t.Errorf("the table's notes:\n%s", out)
	}
}

// TestTuneSVGLegend: the legend explains rings only when some were drawn.
func TestTuneSVGLegend(t *testing.T) {
	tu, err := Tune("p.sync", []byte(plan), 2, prof, grid())
	if err != nil {
		t.Fatal(err)
	}
	svg := func() string {
		var buf bytes.Buffer
		if err := tu.WriteSVG(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if out := svg(); strings.Contains(out, "ring: measured") || strings.Contains(out, `r="6"`) {
		t.Error("nothing measured, but the legend explains rings")
	}
	for _, c := range tu.Candidates {
		if !c.Current() {
			c.Ran, c.Measured = true, c.Step
			break
		}
	}
	if out := svg(); !strings.Contains(out, "ring: measured") || !strings.Contains(out, `r="6"`) {
		t.Error("a candidate measured, but no ring or no legend for it")
	}
}

package calibrate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

// Kind is one collective to measure: its name, reduction operator ("" for
// broadcast and allgather) and wire dtype.
type Kind struct {
	Collective string
	Op         string
	DType      string
}

// String names the kind: "allreduce avg f32".
func (k Kind) String() string {
	return strings.Join(strings.Fields(k.Collective+" "+k.Op+" "+k.DType), " ")
}

// DefaultKind is what a calibration without a plan measures.
var DefaultKind = Kind{"allreduce", "sum", "f32"}

// Kinds returns the distinct collectives of prog's step (group members
// included) with the wire dtypes of their buckets, sorted; DefaultKind
// when prog is nil or has none.
func Kinds(prog *ir.Program) []Kind {
	seen := map[Kind]bool{}
	var walk func(ss []ir.Stmt)
	walk = func(ss []ir.Stmt) {
		for i := range ss {
			s := &ss[i]
			if s.Kind == ir.StmtGroup {
				walk(s.Body)
			}
			if s.Kind != ir.StmtCollective {
				continue
			}
			op := ""
			if s.Op != ir.NoOp {
				op = s.Op.String()
			}
			for _, b := range s.Buckets {
				seen[Kind{s.Collective.String(), op, prog.Buckets[b].Wire.String()}] = true
			}
		}
	}
	if prog != nil {
		walk(prog.Step)
	}
	if len(seen) == 0 {
		return []Kind{DefaultKind}
	}
	var out []Kind
	for k := range seen {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Sizes returns the sweep's sizes in bytes: from 4 bytes to max, each
// step multiplying by factor (2 or 4).
func Sizes(max int64, factor int64) []int64 {
	var out []int64
	for b := int64(4); b <= max; b *= factor {
		out = append(out, b)
	}
	return out
}

// dtypeSize is the size of dtype name's element.
func dtypeSize(name string) (int64, error) {
	d, ok := ir.ParseDType(name)
	if !ok {
		return 0, fmt.Errorf("unknown dtype %q", name)
	}
	return d.Size(), nil
}

// SweepPlan returns the source of a plan that measures each kind at each
// size at ranks ranks: a tensor and a bucket of its own per (kind, size),
// each collective issued after the (negligible) backward made every
// gradient ready and waited for before the next, so that each runs alone. reps is the
// number of measured steps, every one of which times each size once; the
// last one is checked.
func SweepPlan(kinds []Kind, sizes []int64, ranks, reps int) ([]byte, error) {
	if reps < 1 {
		return nil, fmt.Errorf("--reps %d: want at least 1", reps)
	}
	var b strings.Builder
	b.WriteString("// The size sweep of syncgen calibrate: each collective of each size runs alone.\n\n")
	var step strings.Builder
	for k, kind := range kinds {
		size, err := dtypeSize(kind.DType)
		if err != nil {
			return nil, err
		}
		for i, bytes := range sizes {
			elems := sweepElems(kind, size, bytes, ranks)
			name := fmt.Sprintf("k%d_s%d", k, i)
			fmt.Fprintf(&b, "tensor %s %s[%d]\n", name, kind.DType, elems)
			fmt.Fprintf(&step, "    %s\n    wait comm\n", statement(kind, "b"+name))
		}
	}
	b.WriteString("\nstream compute\nstream comm priority high\n\n")
	for k := range kinds {
		for i := range sizes {
			name := fmt.Sprintf("k%d_s%d", k, i)
			fmt.Fprintf(&b, "bucket b%s { %s }\n", name, name)
		}
	}
	// Every gradient is filled before the first collective (wait
	// compute): a fill still running on one rank would be timed as the
	// other's collective. The first collective then takes up how far the
	// ranks are apart, untimed.
	fmt.Fprintf(&b, "tensor %s f32[1]\nbucket %s { %s }\n", warmName, warmName, warmName)
	fmt.Fprintf(&b, "\nstep {\n    backward 1us on compute\n    wait compute\n    allreduce %s on comm after ready\n    wait comm\n%s}\n\nrun steps %d warmup 2 check every %d\n",
		warmName, step.String(), reps, reps)
	return []byte(b.String()), nil
}

// sweepElems is the elements of the sweep's tensor of kind k (elements
// of size bytes) for a size of bytes at ranks ranks: whole elements, at
// least one, and for allgather and reducescatter a multiple of the ranks.
func sweepElems(k Kind, size, bytes int64, ranks int) int64 {
	elems := max(bytes/size, 1)
	if k.Collective == "allgather" || k.Collective == "reducescatter" {
		elems = (elems + int64(ranks) - 1) / int64(ranks) * int64(ranks)
	}
	return elems
}

// SweepBytes returns the bytes that the sweep's collectives of kind k
// move at each of sizes at ranks ranks, as its run's report gives them
// (SweepPlan's tensors: whole elements, padded for allgather and
// reducescatter), so that a report can be compared with the sweep that
// flags ask for.
func SweepBytes(k Kind, sizes []int64, ranks int) ([]int64, error) {
	size, err := dtypeSize(k.DType)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(sizes))
	for i, b := range sizes {
		out[i] = sweepElems(k, size, b, ranks) * size
	}
	return out, nil
}

// warmName names the tensor and bucket of the sweep's untimed first
// collective.
const warmName = "warm"

// statement is the .sync statement of kind on bucket.
func statement(k Kind, bucket string) string {
	s := k.Collective + " " + bucket
	switch k.Collective {
	case "broadcast":
		s += " from 0"
	case "reduce":
		s += " to 0"
	}
	if k.Op != "" {
		s += " op " + k.Op
	}
	return s + " on comm after ready"
}

// runReport is what FromRun reads of a run's JSON report.
type runReport struct {
	Ranks    int               `json:"ranks"`
	Hosts    []string          `json:"hosts"`
	Backend  string            `json:"backend"`
	Versions map[string]string `json:"versions"`
	Buckets  []struct {
		Bucket     string  `json:"bucket"`
		Bytes      int64   `json:"bytes"`
		Wire       string  `json:"wire"`
		Collective string  `json:"collective"`
		Op         string  `json:"op"`
		MedianUs   float64 `json:"time_median_us"`
		Wrong      *int64  `json:"wrong"`
	} `json:"buckets"`
	Summary struct {
		Wrong int64 `json:"wrong"`
	} `json:"summary"`
}

// FromRun fits a profile to the JSON report of a sweep plan's run. A run
// with wrong elements is refused: its times are not of correct
// collectives.
func FromRun(report []byte, source string) (*costmodel.Profile, error) {
	var r runReport
	if err := json.Unmarshal(report, &r); err != nil {
		return nil, fmt.Errorf("reading the sweep's report: %v", err)
	}
	if r.Summary.Wrong != 0 {
		return nil, fmt.Errorf("the sweep's run had %d wrong elements: its times are not of correct collectives", r.Summary.Wrong)
	}
	p := &costmodel.Profile{Format: costmodel.Format, Source: source, Ranks: r.Ranks, Backend: r.Backend, Versions: r.Versions,
		Date: time.Now().UTC().Format(time.RFC3339)}
	hosts := map[string]bool{}
	for _, h := range r.Hosts {
		if !hosts[h] {
			hosts[h] = true
			p.Machine = strings.TrimPrefix(p.Machine+","+h, ",")
		}
	}
	points := map[Kind][]costmodel.Point{}
	var order []Kind
	for _, b := range r.Buckets {
		if b.Bucket == warmName {
			continue
		}
		k := Kind{b.Collective, b.Op, b.Wire}
		if _, ok := points[k]; !ok {
			order = append(order, k)
		}
		points[k] = append(points[k], costmodel.Point{Bytes: b.Bytes, Us: b.MedianUs})
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("the sweep's report has no collectives")
	}
	for _, k := range order {
		segs, err := costmodel.Fit(k.Collective, r.Ranks, points[k])
		if err != nil {
			return nil, err
		}
		p.Curves = append(p.Curves, costmodel.Curve{Collective: k.Collective, Op: k.Op, DType: k.DType, Segments: segs, Points: points[k]})
	}
	return p, p.Validate()
}

// MemBandwidth is this host's memory bandwidth in gigabytes a second of
// bytes read plus written, from copying a buffer of size bytes reps
// times, the best time counting: what the CPU backend's casts and updates
// run at.
func MemBandwidth(size, reps int) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	best := time.Duration(1<<63 - 1)
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t0))
	}
	return 2 * float64(size) / best.Seconds() / 1e9
}

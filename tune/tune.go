package tune

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/predict"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

// Grid is the search space: every combination of its lists, in this
// order (caps outermost, wires innermost).
type Grid struct {
	// Bucket is the bucket declaration to tune; "" takes the one that
	// holds the most gradient bytes.
	Bucket string
	// Caps are the caps in bytes; 0 is no cap (one bucket).
	Caps []int64
	// Firsts are the first bucket's caps; 0 is none. They apply only with
	// a cap, and only when smaller than it.
	Firsts []int64
	// Orders are "reverse" and "declared".
	Orders []string
	// Wires are wire dtypes; "" keeps the declaration's.
	Wires []string
	// Streams are numbers of communication streams the declaration's
	// pieces are dealt over (1: as written); GroupBelow are sizes below
	// which a stream's consecutive pieces are issued as one group (0:
	// none). Both rewrite the step (dsl.SplitCollective) and apply only
	// where it has one collective of the whole declaration.
	Streams    []int
	GroupBelow []int64
}

const mib = 1 << 20

// DefaultGrid is the grid syncgen tune searches unless told otherwise:
// caps from 1 MiB to 256 MiB and none, PyTorch DDP's 1 MiB first bucket
// or none, both orders, the declared wire dtype (a narrower wire changes
// the gradients' precision: the user asks for it with --wire), one or two
// communication streams, and pieces below 1 MiB grouped or not.
func DefaultGrid() Grid {
	return Grid{
		Caps:       []int64{1 * mib, 2 * mib, 4 * mib, 8 * mib, 16 * mib, 25 * mib, 32 * mib, 64 * mib, 128 * mib, 256 * mib, 0},
		Firsts:     []int64{0, 1 * mib},
		Orders:     []string{"reverse", "declared"},
		Wires:      []string{""},
		Streams:    []int{1, 2},
		GroupBelow: []int64{0, 1 * mib},
	}
}

// Candidate is one plan of the search.
type Candidate struct {
	// Index is the candidate's place in the grid; -1 for the plan as
	// written.
	Index int
	// Cap, First, Order and Wire are its bucket options (0 and "": not
	// given).
	Cap, First  int64
	Order, Wire string
	Streams     int
	GroupBelow  int64
	Src         []byte
	Buckets     int
	*predict.Result
	// Ran, Measured and Wrong are filled in when the candidate was run:
	// the measured step's p50 and its wrong elements. Unchecked: the run
	// checked no element (a plan's `check off`), so its 0 wrong means
	// nothing.
	Measured  time.Duration
	Wrong     int64
	Ran       bool
	Unchecked bool
}

// Current reports whether the candidate is the plan as written.
func (c *Candidate) Current() bool { return c.Index < 0 }

// Label describes the candidate's options: "cap 25MiB first 1MiB order
// reverse".
func (c *Candidate) Label() string {
	var parts []string
	if c.Cap > 0 {
		parts = append(parts, "cap "+SizeText(c.Cap))
	} else {
		parts = append(parts, "no cap")
	}
	if c.First > 0 {
		parts = append(parts, "first "+SizeText(c.First))
	}
	if c.Order != "" {
		parts = append(parts, "order "+c.Order)
	}
	if c.Wire != "" {
		parts = append(parts, "wire "+c.Wire)
	}
	if c.Streams > 1 {
		parts = append(parts, fmt.Sprintf("streams %d", c.Streams))
	}
	if c.GroupBelow > 0 {
		parts = append(parts, "group below "+SizeText(c.GroupBelow))
	}
	return strings.Join(parts, " ")
}

// SizeText writes bytes as a .sync size: "25MiB", "512KiB", "100B".
func SizeText(b int64) string {
	switch {
	case b > 0 && b%mib == 0:
		return fmt.Sprintf("%dMiB", b/mib)
	case b > 0 && b%1024 == 0:
		return fmt.Sprintf("%dKiB", b/1024)
	}
	return fmt.Sprintf("%dB", b)
}

// Tuning is a search's outcome.
type Tuning struct {
	// Bucket is the declaration tuned.
	Bucket string
	// Candidates are ranked by predicted step time, the plan as written
	// among them.
	Candidates []*Candidate
	// Duplicates counts the grid's candidates whose buckets came out the
	// same as an earlier one's; Invalid lists those the checker refused.
	Duplicates int
	Invalid    []string
	// Unsplit says, once for each reason, which --streams and
	// --group-below the step rewriter (dsl.SplitCollective) could not
	// apply to the plan's step: "streams 2, streams 2 group below 1MiB:
	// the step has no `wait comm` ...". The step's shape is the same for
	// every candidate, so each reason is said once.
	Unsplit []string
}

// Tune searches grid g for the plan src (file filename) at ranks ranks
// with profile prof.
func Tune(filename string, src []byte, ranks int, prof *costmodel.Profile, g Grid) (*Tuning, error) {
	prog, diags := dsl.Check(filename, src)
	if diags.HasErrors() || prog == nil {
		return nil, fmt.Errorf("%s has errors; fix them first (syncgen check %s)", filename, filename)
	}
	bucket := g.Bucket
	if bucket == "" {
		bucket = largestDecl(prog)
		if bucket == "" {
			return nil, fmt.Errorf("%s has no bucket to tune", filename)
		}
	}
	cur, err := predict.Predict(prog, ranks, prof)
	if err != nil {
		return nil, err
	}
	t := &Tuning{Bucket: bucket}
	current := &Candidate{Index: -1, Src: src, Buckets: countPieces(prog, bucket), Result: cur}
	t.Candidates = append(t.Candidates, current)
	seen := map[string]bool{layout(prog, bucket) + steps(prog): true}
	index := 0
	invalid := map[string]bool{}
	refuse := func(c *Candidate, why string) {
		if msg := c.Label() + ": " + why; !invalid[msg] {
			invalid[msg] = true
			t.Invalid = append(t.Invalid, msg)
		}
	}
	// unsplit gathers, per reason the step rewriter gave, the streams and
	// groups it refused, in grid order.
	var reasons []string
	unsplit := map[string][]string{}
	refuseSplit := func(ns int, gb int64, why string) {
		what := strings.TrimPrefix((&Candidate{Streams: ns, GroupBelow: gb}).Label(), "no cap ")
		if _, ok := unsplit[why]; !ok {
			reasons = append(reasons, why)
		}
		if !slices.Contains(unsplit[why], what) {
			unsplit[why] = append(unsplit[why], what)
		}
	}
	streams, groups := g.Streams, g.GroupBelow
	if len(streams) == 0 {
		streams = []int{1}
	}
	if len(groups) == 0 {
		groups = []int64{0}
	}
	for _, cp := range g.Caps {
		for _, first := range g.Firsts {
			if first > 0 && (cp == 0 || first >= cp) {
				continue
			}
			for _, order := range g.Orders {
				for _, wire := range g.Wires {
					set := map[string]string{"cap": "", "first": "", "order": order}
					if cp > 0 {
						set["cap"] = SizeText(cp)
					}
					if first > 0 {
						set["first"] = SizeText(first)
					}
					if wire != "" {
						set["wire"] = wire
					}
					base, err := dsl.SetBucketOptions(filename, src, bucket, set)
					if err != nil {
						return nil, err
					}
					bp, diags := dsl.Check(filename, base)
					for _, ns := range streams {
						for _, gb := range groups {
							c := &Candidate{Index: index, Cap: cp, First: first, Order: order, Wire: wire, Streams: ns, GroupBelow: gb, Src: base}
							index++
							if diags.HasErrors() || bp == nil {
								refuse(c, firstError(diags))
								continue
							}
							p := bp
							if ns > 1 || gb > 0 {
								n, small := pieces(bp, bucket, gb)
								if c.Src, err = dsl.SplitCollective(filename, base, bucket, n, ns, small); err != nil {
									// The step's shape, the same for every
									// candidate: said once.
									refuseSplit(ns, gb, err.Error())
									continue
								}
								var d dsl.Diagnostics
								if p, d = dsl.Check(filename, c.Src); d.HasErrors() || p == nil {
									refuse(c, firstError(d))
									continue
								}
							}
							key := layout(p, bucket) + steps(p)
							if seen[key] {
								t.Duplicates++
								continue
							}
							seen[key] = true
							if c.Result, err = predict.Predict(p, ranks, prof); err != nil {
								return nil, err
							}
							c.Buckets = countPieces(p, bucket)
							t.Candidates = append(t.Candidates, c)
						}
					}
				}
			}
		}
	}
	for _, why := range reasons {
		t.Unsplit = append(t.Unsplit, strings.Join(unsplit[why], ", ")+": "+why)
	}
	sort.SliceStable(t.Candidates, func(i, j int) bool { return t.Candidates[i].Step < t.Candidates[j].Step })
	return t, nil
}

// firstError is the first error of diags, for one line.
func firstError(diags dsl.Diagnostics) string {
	for _, d := range diags {
		if d.Severity == dsl.Error {
			return d.Message
		}
	}
	return "does not check"
}

// largestDecl names the bucket declaration with the most bytes; the
// first declared wins a tie.
func largestDecl(p *ir.Program) string {
	bytes := map[string]int64{}
	var order []string
	for i := range p.Buckets {
		b := &p.Buckets[i]
		if b.Output != nil {
			continue // an output buffer of `into`: no declaration to tune
		}
		if _, ok := bytes[b.Decl]; !ok {
			order = append(order, b.Decl)
		}
		bytes[b.Decl] += b.Bytes()
	}
	best := ""
	for _, d := range order {
		if best == "" || bytes[d] > bytes[best] {
			best = d
		}
	}
	return best
}

// countPieces counts the buckets of declaration decl.
func countPieces(p *ir.Program, decl string) int {
	n := 0
	for i := range p.Buckets {
		if p.Buckets[i].Decl == decl {
			n++
		}
	}
	return n
}

// layout describes the buckets of declaration decl: their tensors in
// layout order and wire dtypes. Two candidates with one layout run the
// same plan.
func layout(p *ir.Program, decl string) string {
	var b strings.Builder
	for i := range p.Buckets {
		bk := &p.Buckets[i]
		if bk.Decl != decl {
			continue
		}
		fmt.Fprintf(&b, "%s:%v;", bk.Wire, bk.Tensors)
	}
	return b.String()
}

// pieces returns the number of buckets of declaration decl and which of
// them are smaller than below bytes.
func pieces(p *ir.Program, decl string, below int64) (int, []bool) {
	var small []bool
	for i := range p.Buckets {
		if p.Buckets[i].Decl == decl {
			small = append(small, p.Buckets[i].Bytes() < below)
		}
	}
	return len(small), small
}

// steps describes the step's statements: kinds, streams, buckets and
// groups. With layout it tells two candidates that run the same plan.
func steps(p *ir.Program) string {
	var b strings.Builder
	var walk func(ss []ir.Stmt, depth int)
	walk = func(ss []ir.Stmt, depth int) {
		for i := range ss {
			s := &ss[i]
			fmt.Fprintf(&b, "|%d:%s:%d:%v", depth, s.Kind, s.Stream, s.Buckets)
			walk(s.Body, depth+1)
		}
	}
	walk(p.Step, 0)
	return b.String()
}

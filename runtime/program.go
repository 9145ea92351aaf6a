package runtime

// The runtime learns what a step does by calling the plan's Step function
// once in recording mode before anything runs (a dry run: the generated
// code has no branches, so every step issues the same statements). The
// recorded program drives the choice of fill patterns, the checker's model
// of what every bucket must hold, the report's table rows, the plan hash,
// and validation against the world size.

import (
	"fmt"
	"strings"
	"time"
)

// stmtKind says what a recorded statement does.
type stmtKind uint8

const (
	sBackward stmtKind = iota + 1
	sCompute
	sColl
	sGroup
	sWait
)

// stmt is one recorded statement.
type stmt struct {
	kind   stmtKind
	at     Src
	stream int
	d      time.Duration
	coll   Coll
	op     RedOp
	root   int
	after  After
	// buckets are the targets of a collective.
	buckets []int
	// body holds a group's collectives.
	body []stmt
	// id numbers the collective statements of a block in program order
	// (group members included); the report's rows are (id, bucket).
	id int
}

// program is the recorded plan: the init block and one step.
type program struct {
	init []stmt
	step []stmt
	// colls counts the collective statements of step (ids 0..colls-1).
	colls int
}

// recorder collects statements while Step methods run in recording mode.
type recorder struct {
	out   *[]stmt
	group *[]stmt
	errs  []error
	ids   int
}

func (r *recorder) add(s stmt) {
	if s.kind == sColl {
		s.id = r.ids
		r.ids++
	}
	if r.group != nil {
		if s.kind != sColl {
			r.errs = append(r.errs, fmt.Errorf("%s: only collectives may appear inside a group", s.at))
			return
		}
		*r.group = append(*r.group, s)
		return
	}
	*r.out = append(*r.out, s)
}

// record runs the plan's Init and Step functions in recording mode.
func record(p *Plan) (*program, error) {
	prog := &program{}
	run := func(fn func(*Step), out *[]stmt) (int, []error) {
		if fn == nil {
			return 0, nil
		}
		r := &recorder{out: out}
		fn(&Step{rec: r})
		return r.ids, r.errs
	}
	_, errs := run(p.Init, &prog.init)
	n, errs2 := run(p.Step, &prog.step)
	prog.colls = n
	errs = append(errs, errs2...)
	// The program is returned even with errors: the plan hash covers what
	// was recorded, so ranks compare plans before judging them.
	return prog, joinErrors(errs)
}

// validate checks the recorded program against the plan's tables and the
// world size; every problem is reported with the statement's position.
func (prog *program) validate(p *Plan, size int) error {
	var errs []error
	bad := func(at Src, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
	}
	var walk func(ss []stmt)
	walk = func(ss []stmt) {
		for _, s := range ss {
			if s.kind == sGroup {
				walk(s.body)
				continue
			}
			if s.stream < 0 || s.stream >= len(p.Streams) {
				bad(s.at, "stream %d does not exist (the plan has %d)", s.stream, len(p.Streams))
			}
			if s.d < 0 {
				bad(s.at, "negative duration %v", s.d)
			}
			if s.kind != sColl {
				continue
			}
			if s.after.kind == 2 && (s.after.stream < 0 || s.after.stream >= len(p.Streams)) {
				bad(s.at, "after: stream %d does not exist", s.after.stream)
			}
			if len(s.buckets) == 0 {
				bad(s.at, "%s has no buckets", s.coll)
			}
			for _, b := range s.buckets {
				if b < 0 || b >= len(p.Buckets) {
					bad(s.at, "bucket %d does not exist (the plan has %d)", b, len(p.Buckets))
				}
			}
			if (s.coll == CollBroadcast || s.coll == CollReduce) && (s.root < 0 || s.root >= size) {
				opt := "from"
				if s.coll == CollReduce {
					opt = "to"
				}
				fix := fmt.Sprintf("run with at least %d ranks (mpirun -np %d), or change `%s %d` in the plan", s.root+1, s.root+1, opt, s.root)
				if s.root < 0 {
					fix = fmt.Sprintf("change `%s %d` in the plan to a rank from 0 to %d", opt, s.root, size-1)
				}
				bad(s.at, "%s of %s %s rank %d: root %d is outside the world of %d rank%s (ranks 0..%d); %s",
					s.coll, bucketList(p, s.buckets), opt, s.root, s.root, size, plural(size), size-1, fix)
			}
			if s.coll.Reduces() && (s.op < Sum || s.op > Prod) {
				bad(s.at, "%s needs a reduction operator (sum, avg, min, max or prod), got %s", s.coll, s.op)
			}
		}
	}
	if len(p.Streams) == 0 {
		errs = append(errs, fmt.Errorf("the plan has no streams"))
	}
	walk(prog.init)
	walk(prog.step)
	for i, t := range p.Tensors {
		if !t.DType.Valid() {
			errs = append(errs, fmt.Errorf("tensor %q: invalid dtype %d", t.Name, t.DType))
		}
		if t.Bucket < -1 || t.Bucket >= len(p.Buckets) {
			errs = append(errs, fmt.Errorf("tensor %q (#%d): bucket %d does not exist", t.Name, i, t.Bucket))
		}
	}
	for _, b := range p.Buckets {
		if !b.Wire.Valid() {
			errs = append(errs, fmt.Errorf("bucket %q: invalid wire dtype %d", b.Name, b.Wire))
		}
		for _, ti := range b.Tensors {
			if ti < 0 || ti >= len(p.Tensors) {
				errs = append(errs, fmt.Errorf("bucket %q: tensor %d does not exist", b.Name, ti))
				continue
			}
			t := p.Tensors[ti]
			if t.Offset < 0 || t.Offset+tensorElems(&t) > b.Elems {
				errs = append(errs, fmt.Errorf("bucket %q: tensor %q at %d..%d lies outside its %d elements",
					b.Name, t.Name, t.Offset, t.Offset+tensorElems(&t), b.Elems))
			}
		}
	}
	return joinErrors(errs)
}

// bucketList names a statement's buckets for messages: `bucket "a"`,
// `buckets "a", "b"`, or the first three and how many more.
func bucketList(p *Plan, buckets []int) string {
	var names []string
	for _, b := range buckets[:min(len(buckets), 3)] {
		if b >= 0 && b < len(p.Buckets) {
			names = append(names, fmt.Sprintf("%q", p.Buckets[b].Name))
		} else {
			names = append(names, fmt.Sprintf("#%d", b))
		}
	}
	switch {
	case len(buckets) == 1:
		return "bucket " + names[0]
	case len(buckets) > 3:
		return fmt.Sprintf("buckets %s and %d more", strings.Join(names, ", "), len(buckets)-3)
	}
	return "buckets " + strings.Join(names, ", ")
}

// flat returns the block's collectives and other statements in program
// order with groups expanded.
func flat(ss []stmt) []stmt {
	var out []stmt
	for _, s := range ss {
		if s.kind == sGroup {
			out = append(out, s.body...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// tensorElems returns the number of elements of t.
func tensorElems(t *Tensor) int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// joinErrors joins errors one per line, or returns nil.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msg := errs[0].Error()
	for _, e := range errs[1:] {
		msg += "\n" + e.Error()
	}
	return fmt.Errorf("%s", msg)
}

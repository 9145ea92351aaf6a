package costmodel

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Prediction is what Replay predicts for one step, in the terms of the
// runtime's report.
type Prediction struct {
	// Rows are the collectives' buckets in program order: one per bucket
	// of each collective statement, as the runtime's table.
	Rows []Row
	// Spans are every predicted piece of work, for a trace.
	Spans []Span
	// Step is the step's time: until the host and every stream are done.
	Step time.Duration
	// Compute is the union of backward and compute work, Comm of
	// collectives, Hidden the communication that overlapped compute.
	Compute, Comm, Hidden time.Duration
	// Exposed is Step minus Compute, as the report computes it.
	Exposed time.Duration
	// Overlap is Hidden as a percentage of Comm.
	Overlap float64
	// Notes say what the prediction left out.
	Notes []string
}

// Row is one bucket of one collective statement.
type Row struct {
	ID         int
	Bucket     int
	Collective string
	Stream     int
	Bytes      int64
	Group      bool
	// Start and End are from the step's start; in a group, the group's
	// span on the stream (which is what the runtime times for each
	// member).
	Start, End time.Duration
}

// Time returns the row's predicted duration.
func (r *Row) Time() time.Duration { return r.End - r.Start }

// Span is one predicted piece of work on a stream.
type Span struct {
	Kind       OpKind
	Stream     int
	Name       string
	Start, End time.Duration
}

// replay is the state of one Replay.
type replay struct {
	s    *Schedule
	p    *Profile
	pred *Prediction
	// free is when each stream's queued work ends; host the host's time.
	free []time.Duration
	host time.Duration
	// ready and synced are each bucket's gradients' ready time and its
	// last collective's end (-1: not in this step yet).
	ready, synced []time.Duration
	// fabric are the spans in which the bandwidth that all streams share
	// is taken, sorted and disjoint.
	fabric []Interval
	notes  map[string]bool
	// beyond are the curves asked for sizes beyond their points, by key.
	beyond map[string]beyond
	// tooBig names the work whose bytes saturated at math.MaxInt64
	// (UpdateBytes, SatAdd): more than a prediction counts.
	tooBig string
}

// transfer takes d of the shared bandwidth from time t on, in the spans
// no earlier transfer took, and returns when it is done. A transfer
// issued later in program order but ready earlier so takes the bandwidth
// first, and two at once share it (what one leaves idle the other uses),
// though the one issued first keeps its spans.
func (r *replay) transfer(t, d time.Duration) time.Duration {
	var taken []Interval
	cur, left := t, d
	for _, busy := range r.fabric {
		if left <= 0 {
			break
		}
		if busy.B <= cur {
			continue
		}
		if gap := busy.A - cur; gap > 0 {
			use := min(gap, left)
			taken = append(taken, Interval{cur, add(cur, use)})
			left -= use
			cur = add(cur, use)
			if left <= 0 {
				break
			}
		}
		cur = max(cur, busy.B)
	}
	if left > 0 {
		taken = append(taken, Interval{cur, add(cur, left)})
		cur = add(cur, left)
	}
	r.fabric = Union(append(r.fabric, taken...))
	return cur
}

// Replay predicts one step of schedule s with profile p. Its rules are
// the runtime's: the host issues statements in program order and blocks
// only at waits; each stream runs its work in order; a backward makes
// gradients ready in reverse declaration order, its duration shared by
// size; `after ready` waits for the bucket's gradients, `after STREAM`
// for the work queued on that stream when the statement is issued, `after
// synced` for the bucket's last collective; a group's collectives start
// together once all their dependencies are met, pay the largest of their
// latencies once, and each member's time is the group's. Collectives on
// different streams share one bandwidth: a collective's latency term runs
// concurrently with other streams' work, its bandwidth term takes the
// bandwidth when no other transfer does (transfer). Casts, updates and unscales cost their bytes at the profile's
// memory bandwidth.
func Replay(s *Schedule, p *Profile) (*Prediction, error) {
	r := &replay{s: s, p: p, pred: &Prediction{}, free: make([]time.Duration, len(s.Streams)),
		ready: make([]time.Duration, len(s.Buckets)), synced: make([]time.Duration, len(s.Buckets)), notes: map[string]bool{}, beyond: map[string]beyond{}}
	for i := range r.ready {
		r.ready[i], r.synced[i] = -1, -1
	}
	for i := range s.Step {
		if err := r.op(&s.Step[i]); err != nil {
			return nil, err
		}
	}
	end := r.host
	for _, f := range r.free {
		end = max(end, f)
	}
	if end >= Never && r.tooBig != "" {
		return nil, fmt.Errorf("the %s of this step move more than %d bytes (8 EiB), more than a prediction counts, so it cannot say how long they take: check the tensors' shapes",
			r.tooBig, int64(math.MaxInt64))
	}
	if end >= Never {
		return nil, fmt.Errorf("the predicted step does not end within %.0f years, the longest time a prediction holds: the profile's latencies (alpha_us, step_us) and bandwidths (busbw_gbs, mem_gbs) give work longer than any step at these sizes and %d ranks; check them, or calibrate on the cluster (syncgen calibrate)",
			Never.Hours()/24/365, s.Ranks)
	}
	pr := r.pred
	pr.Step = end
	var comp, comm []Interval
	for _, sp := range pr.Spans {
		switch sp.Kind {
		case OpBackward, OpCompute:
			comp = append(comp, Interval{sp.Start, sp.End})
		case OpCollective:
			comm = append(comm, Interval{sp.Start, sp.End})
		}
	}
	comp, comm = Union(comp), Union(comm)
	pr.Compute, pr.Comm = Length(comp), Length(comm)
	pr.Hidden = Length(Intersect(nil, comp, comm))
	pr.Exposed = max(pr.Step-pr.Compute, 0)
	if pr.Comm > 0 {
		pr.Overlap = 100 * float64(pr.Hidden) / float64(pr.Comm)
	}
	for key, b := range r.beyond {
		r.notes[fmt.Sprintf("%s: collectives up to %s, beyond the largest size the profile measured (%s): its last segment extrapolated; calibrate with a larger --max",
			key, sizeText(b.asked), sizeText(b.measured))] = true
	}
	for n := range r.notes {
		pr.Notes = append(pr.Notes, n)
	}
	slices.Sort(pr.Notes)
	return pr, nil
}

// Never is the longest time a prediction holds: the conversions and sums
// of the replay saturate at it instead of wrapping around to a negative
// time, and a step that reaches it is an error (Replay).
const Never = time.Duration(math.MaxInt64)

// us converts microseconds to a duration, saturating at Never (and at
// -Never below it; NaN is Never).
func us(v float64) time.Duration {
	ns := math.Round(v * 1e3)
	switch {
	case !(ns < float64(Never)): // also NaN
		return Never
	case ns <= -float64(Never):
		return -Never
	}
	return time.Duration(ns)
}

// add returns a+b, saturating at Never and -Never.
func add(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case b > 0 && s < a:
		return Never
	case b < 0 && s > a:
		return -Never
	}
	return s
}

func (r *replay) checkStream(i int) error {
	if i < 0 || i >= len(r.free) {
		return fmt.Errorf("stream %d does not exist (the schedule has %d)", i, len(r.free))
	}
	return nil
}

// dep returns when an op on stream may start by its AfterStream
// dependency, taken when it is issued.
func (r *replay) dep(o *Op) (time.Duration, error) {
	if o.After != AfterStream {
		return 0, nil
	}
	if err := r.checkStream(o.AfterStream); err != nil {
		return 0, err
	}
	return r.free[o.AfterStream], nil
}

func (r *replay) op(o *Op) error {
	if o.Kind != OpGroup {
		if err := r.checkStream(o.Stream); err != nil {
			return err
		}
	}
	switch o.Kind {
	case OpBackward, OpCompute:
		d, err := r.dep(o)
		if err != nil {
			return err
		}
		start := max(r.free[o.Stream], r.host, d)
		if o.Kind == OpBackward {
			r.backward(start, o.Dur, o.Tensors)
		}
		r.free[o.Stream] = add(start, o.Dur)
		name := "compute"
		if o.Kind == OpBackward {
			name = "backward"
		}
		r.pred.Spans = append(r.pred.Spans, Span{Kind: o.Kind, Stream: o.Stream, Name: name, Start: start, End: add(start, o.Dur)})
	case OpWait:
		r.host = max(r.host, r.free[o.Stream])
	case OpCollective:
		d, err := r.dep(o)
		if err != nil {
			return err
		}
		for i := range o.Buckets {
			if err := r.group([]item{{o, i, d}}, false); err != nil {
				return err
			}
		}
	case OpGroup:
		var items []item
		for k := range o.Body {
			m := &o.Body[k]
			if err := r.checkStream(m.Stream); err != nil {
				return err
			}
			d, err := r.dep(m)
			if err != nil {
				return err
			}
			for i := range m.Buckets {
				items = append(items, item{m, i, d})
			}
		}
		return r.group(items, true)
	case OpUpdate, OpUnscale:
		return r.train(o)
	default:
		return fmt.Errorf("unknown op kind %d", o.Kind)
	}
	return nil
}

// backward sets the ready time of every bucket: gradients in reverse
// declaration order, the duration shared in proportion to their bytes; a
// bucket is ready when the last of its gradients is.
//
// A backward in pieces fills only tensors, and a bucket is ready at the
// latest of its gradients that the pieces wrote.
func (r *replay) backward(start, d time.Duration, tensors []int) {
	fills := func(i int) bool { return !r.s.Tensors[i].Frozen }
	if tensors != nil {
		mine := make(map[int]bool, len(tensors))
		for _, t := range tensors {
			mine[t] = true
		}
		fills = func(i int) bool { return mine[i] }
	}
	var total int64
	for i, t := range r.s.Tensors {
		if fills(i) {
			total += t.Bytes
		}
	}
	var cum int64
	for i := len(r.s.Tensors) - 1; i >= 0; i-- {
		t := r.s.Tensors[i]
		if !fills(i) {
			continue
		}
		cum += t.Bytes
		at := add(start, time.Duration(float64(d)*float64(cum)/float64(max(total, 1))))
		if t.Bucket >= 0 && t.Bucket < len(r.ready) {
			if tensors == nil {
				r.ready[t.Bucket] = at // the last one written wins
			} else {
				r.ready[t.Bucket] = max(r.ready[t.Bucket], at)
			}
		}
	}
}

// item is one bucket of one collective statement.
type item struct {
	op  *Op
	k   int           // index into op.Buckets
	dep time.Duration // the AfterStream dependency's time
}

func (it item) bucket() int { return it.op.Buckets[it.k] }

// bytes returns what the item's collective moves.
func (it item) bytes(s *Schedule) int64 {
	if it.op.Bytes != nil {
		return it.op.Bytes[it.k]
	}
	return s.Buckets[it.bucket()].Bytes
}

// group runs items as the runtime's issueGroup does: per stream in order
// of first use, the dependencies and casts in, then the collectives one
// after another, then the casts back.
func (r *replay) group(items []item, grouped bool) error {
	var order []int
	for _, it := range items {
		if b := it.bucket(); b < 0 || b >= len(r.s.Buckets) {
			return fmt.Errorf("bucket %d does not exist (the schedule has %d)", b, len(r.s.Buckets))
		}
		if !slices.Contains(order, it.op.Stream) {
			order = append(order, it.op.Stream)
		}
	}
	for _, si := range order {
		t := max(r.free[si], r.host)
		for _, it := range items {
			if it.op.Stream != si {
				continue
			}
			b := it.bucket()
			switch it.op.After {
			case AfterReady:
				if r.ready[b] >= 0 {
					t = max(t, r.ready[b])
				}
			case AfterStream:
				t = max(t, it.dep)
			}
			t = add(t, r.mem(r.s.Buckets[b].CastBytes, "casts between a tensor's dtype and its bucket's wire dtype"))
		}
		start, cur := t, t
		first := len(r.pred.Rows)
		// A group's members are issued together: their latencies overlap
		// (one launch of NCCL's, concurrent nonblocking MPI calls), so
		// the stream pays the largest once; their bytes still take turns.
		if grouped {
			var most float64
			for _, it := range items {
				if it.op.Stream != si {
					continue
				}
				c, err := r.curve(it.op, it.bucket(), it.bytes(r.s))
				if err != nil {
					return err
				}
				lat, _ := c.split(it.bytes(r.s), r.s.Ranks)
				most = max(most, lat)
			}
			cur = add(cur, us(most))
		}
		for _, it := range items {
			if it.op.Stream != si {
				continue
			}
			b := it.bucket()
			n := it.bytes(r.s)
			c, err := r.curve(it.op, b, n)
			if err != nil {
				return err
			}
			lat, bw := c.split(n, r.s.Ranks)
			if !grouped {
				cur = add(cur, us(lat))
			}
			if bw > 0 {
				cur = r.transfer(cur, us(bw))
			}
			r.pred.Rows = append(r.pred.Rows, Row{ID: it.op.ID, Bucket: b, Collective: it.op.Collective, Stream: si, Bytes: n,
				Group: grouped, Start: start, End: cur})
			r.pred.Spans = append(r.pred.Spans, Span{Kind: OpCollective, Stream: si, Name: r.s.Buckets[b].Name, Start: start, End: cur})
			if !grouped {
				start = cur
			}
		}
		for k := first; k < len(r.pred.Rows); k++ {
			if grouped {
				r.pred.Rows[k].End = cur
				r.pred.Spans[len(r.pred.Spans)-len(r.pred.Rows)+k].End = cur
			}
			r.synced[r.pred.Rows[k].Bucket] = cur
		}
		for _, it := range items {
			if it.op.Stream == si {
				cur = add(cur, r.mem(r.s.Buckets[it.bucket()].CastBytes, "casts between a tensor's dtype and its bucket's wire dtype"))
			}
		}
		r.free[si] = cur
	}
	return nil
}

// split returns the latency and bandwidth terms (microseconds) of the
// curve's segment for bytes on n ranks.
func (c *Curve) split(bytes int64, n int) (lat, bw float64) {
	seg := &c.Segments[0]
	for i := range c.Segments {
		if c.Segments[i].FromBytes <= bytes {
			seg = &c.Segments[i]
		}
	}
	lat = seg.AlphaUs + seg.StepUs*float64(Steps(c.Collective, n))
	if seg.BusGBs > 0 {
		bw = float64(bytes) * costFactor(c.Collective, n) / (seg.BusGBs * 1e3)
	}
	return lat, bw
}

// curve returns the profile's curve for collective o of bucket b, n
// bytes, and notes where the prediction rests on figures the profile did
// not measure for it: a curve measured for another operator or dtype (the
// profile has none closer), or a size beyond the largest the curve's
// points measured, where its last segment is extrapolated.
func (r *replay) curve(o *Op, b int, n int64) (*Curve, error) {
	dtype := r.s.Buckets[b].DType
	c, err := r.p.Curve(o.Collective, o.Op, dtype)
	if err != nil {
		return nil, err
	}
	want := curveName(o.Collective, o.Op, dtype)
	if c.Op != "" && c.Op != o.Op || c.DType != "" && c.DType != dtype {
		r.notes[fmt.Sprintf("%s: the profile has no curve of its own; predicted with %s's (calibrate --plan with this plan measures it)", want, c.Key())] = true
	}
	if len(c.Points) > 0 {
		largest := c.Points[0].Bytes
		for _, pt := range c.Points {
			largest = max(largest, pt.Bytes)
		}
		if n > largest {
			key := c.Key()
			r.beyond[key] = beyond{measured: largest, asked: max(r.beyond[key].asked, n)}
		}
	}
	return c, nil
}

// beyond is a curve asked for a size larger than its points measured:
// the largest asked, and the largest measured.
type beyond struct{ asked, measured int64 }

// sizeText writes a byte count for a note: "64.0 KiB", "12 B".
func sizeText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// mem returns the time of memory work of bytes, noting what is left out
// when the profile has no memory bandwidth.
func (r *replay) mem(bytes int64, what string) time.Duration {
	if bytes == 0 {
		return 0
	}
	if r.p.MemGBs <= 0 {
		r.notes[what+": not modelled (the profile has no mem_gbs)"] = true
		return 0
	}
	if bytes == math.MaxInt64 {
		// A saturated count: the true one is larger, its time unknown.
		r.tooBig, _, _ = strings.Cut(what, " between")
		return Never
	}
	return us(r.p.MemUs(bytes))
}

// train runs an update or an unscale: each bucket in turn on the stream,
// after its dependency.
func (r *replay) train(o *Op) error {
	d, err := r.dep(o)
	if err != nil {
		return err
	}
	what := "updates"
	if o.Kind == OpUnscale {
		what = "unscales"
	}
	t := max(r.free[o.Stream], r.host, d)
	for k, b := range o.Buckets {
		if b < 0 || b >= len(r.s.Buckets) {
			return fmt.Errorf("bucket %d does not exist (the schedule has %d)", b, len(r.s.Buckets))
		}
		if o.After == AfterSynced && r.synced[b] >= 0 {
			t = max(t, r.synced[b])
		}
		var n int64
		switch {
		case o.Bytes != nil:
			n = o.Bytes[k]
		case o.Kind == OpUnscale:
			n = SatMul(2, r.s.Buckets[b].Bytes)
		}
		start := t
		t = add(t, r.mem(n, what))
		r.pred.Spans = append(r.pred.Spans, Span{Kind: o.Kind, Stream: o.Stream, Name: r.s.Buckets[b].Name, Start: start, End: t})
	}
	if o.Kind == OpUnscale && o.Agree {
		if c, err := r.p.Curve("allreduce", "max", "i32"); err == nil {
			lat, bw := c.split(4, r.s.Ranks)
			t = add(t, us(lat+bw))
		} else {
			r.notes["the overflow flag's allreduce: not modelled (the profile has no allreduce)"] = true
		}
	}
	r.free[o.Stream] = t
	return nil
}

package dsl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/syncgen/syncgen/ir"
)

// blockState is what resolving a block's statements needs to remember.
type blockState struct {
	kind        string // "init" or "step"
	sawBackward bool   // a backward came earlier in the block
	train       trainState
	pieces      piecesState
}

// resolveBlock resolves the statements of an init or step block. Every
// statement of the source gives exactly one ir.Stmt (one that cannot be
// resolved gives a zero Kind), so that the race check can walk the syntax
// and the IR side by side.
func (c *checker) resolveBlock(b *BlockDecl) []ir.Stmt {
	st := &blockState{kind: b.Kind}
	out := c.resolveStmts(st, b.Body, false)
	c.checkPiecesCover(st)
	return out
}

func (c *checker) resolveStmts(st *blockState, body []*Stmt, inGroup bool) []ir.Stmt {
	var out []ir.Stmt
	for _, s := range body {
		if s.Semi != nil {
			continue
		}
		out = append(out, c.resolveStmt(st, s, inGroup))
	}
	return out
}

// stmts returns the statements of a body without the lone semicolons.
func stmts(body []*Stmt) []*Stmt {
	out := make([]*Stmt, 0, len(body))
	for _, s := range body {
		if s.Semi == nil {
			out = append(out, s)
		}
	}
	return out
}

func (c *checker) resolveStmt(st *blockState, s *Stmt, inGroup bool) ir.Stmt {
	f := c.main.file
	switch {
	case s.Timed != nil:
		return c.resolveTimed(st, s.Timed, inGroup)
	case s.Wait != nil:
		w := s.Wait
		if inGroup {
			c.errorf(f, spanOf(w.Pos, w.EndPos), "a group only issues collectives; put the wait after the group's closing brace",
				"wait inside group")
			return ir.Stmt{}
		}
		si, ok := c.lookupStream(f, w.Stream)
		if !ok {
			return ir.Stmt{}
		}
		return ir.Stmt{Kind: ir.StmtWait, Pos: f.pos(w.Pos.Offset), Stream: si}
	case s.Group != nil:
		g := s.Group
		kw := keywordSpan(g.Pos.Offset, len("group"))
		if inGroup {
			c.errorf(f, kw, "groups do not nest; put the collectives in the enclosing group", "nested group")
			return ir.Stmt{}
		}
		body := c.resolveStmts(st, g.Body, true)
		if len(body) == 0 {
			c.errorf(f, kw, "put collectives inside it, or remove it", "empty group")
			return ir.Stmt{}
		}
		stream := 0
		for _, b := range body {
			if b.Kind != 0 {
				stream = b.Stream
				break
			}
		}
		return ir.Stmt{Kind: ir.StmtGroup, Pos: f.pos(g.Pos.Offset), Stream: stream, Body: body}
	case s.Collective != nil:
		out := c.resolveCollective(st, s.Collective)
		c.notePieceTargets(st, out, spanOf(s.Collective.Pos, s.Collective.EndPos), s.Collective.Options)
		return out
	case s.Update != nil:
		out := c.resolveUpdate(st, s.Update, inGroup)
		c.notePieceTargets(st, out, spanOf(s.Update.Pos, s.Update.EndPos), nil)
		return out
	case s.Unscale != nil:
		out := c.resolveUnscale(st, s.Unscale, inGroup)
		c.notePieceTargets(st, out, spanOf(s.Unscale.Pos, s.Unscale.EndPos), nil)
		return out
	case s.Barrier != nil:
		return c.resolveBarrier(s.Barrier, inGroup)
	}
	return ir.Stmt{}
}

// resolveTimed resolves backward and compute.
func (c *checker) resolveTimed(st *blockState, t *TimedStmt, inGroup bool) ir.Stmt {
	f := c.main.file
	kw := keywordSpan(t.Pos.Offset, len(t.Kind))
	if inGroup {
		c.errorf(f, kw, "a group only issues collectives; put it before or after the group", "%s inside group", t.Kind)
		return ir.Stmt{}
	}
	kind := ir.StmtCompute
	if t.Kind == "backward" {
		kind = ir.StmtBackward
		if st.kind == "init" {
			c.errorf(f, kw, "init runs once before the steps and has no gradients; backward belongs in step", "backward in init")
			return ir.Stmt{}
		}
		st.sawBackward = true
	}
	ok := true
	d, msg, hint := parseDuration(t.Duration.Text)
	if msg != "" {
		c.errorf(f, wordSpan(t.Duration), hint, "%s", msg)
		ok = false
	}
	s := ir.Stmt{Kind: kind, Pos: f.pos(t.Pos.Offset), Duration: d}
	tensors, piecesOK := c.resolvePiece(st, t)
	s.Tensors = tensors
	if kind == ir.StmtBackward {
		st.train.backward(c.filledBuckets(tensors))
	}
	on, optsOK := c.timedOptions(t, &s)
	stream, sok := c.stmtStream(f, on, "compute", t.Kind, kw)
	if !ok || !optsOK || !sok || !piecesOK {
		return ir.Stmt{}
	}
	s.Stream = stream
	return s
}

// timedOptions reads a backward's or compute's options, each at most once:
// `on STREAM` (returned) and `after STREAM` (set in s), which makes the
// statement's stream wait for the work queued on STREAM so far, as a
// collective's does. `after ready` is a collective's: it waits for each
// bucket's own gradients, and these statements have no buckets.
func (c *checker) timedOptions(t *TimedStmt, s *ir.Stmt) (on *Word, ok bool) {
	f := c.main.file
	ok = true
	seen := map[string]*Option{}
	for _, o := range slices.Concat(t.Options, t.Late) {
		sp := spanOf(o.Pos, o.EndPos)
		if prev, dup := seen[o.Key]; dup {
			c.errorf(f, sp, "each option is given at most once: remove one of them", "duplicate option %s (first on line %d)", code(o.Key), prev.Pos.Line)
			ok = false
			continue
		}
		seen[o.Key] = o
		switch {
		case o.Key == "on":
			on = o.Value
		case o.Key == "after" && o.Value.Text == "ready":
			c.errorf(f, sp, "`after ready` waits for each bucket's gradients and belongs to a collective; "+t.Kind+" takes `after STREAM`",
				"%s takes no `after ready`", t.Kind)
			ok = false
		case o.Key == "after" && o.Value.Text == "synced":
			c.errorf(f, sp, t.Kind+" waits with `after STREAM`", "%s takes no `after synced`: it is for update and unscale", t.Kind)
			ok = false
		case o.Key == "after":
			si, found := c.lookupStream(f, o.Value)
			if !found {
				ok = false
				continue
			}
			s.After = ir.After{Kind: ir.AfterStream, Stream: si}
		default:
			c.errorf(f, keywordSpan(o.Pos.Offset, len(o.Key)), t.Kind+" takes only `on STREAM` and `after STREAM`", "%s takes no %s", t.Kind, code(o.Key))
			ok = false
		}
	}
	return on, ok
}

// stmtStream resolves a statement's `on` stream, or its default.
func (c *checker) stmtStream(f *sourceFile, on *Word, def, what string, kw span) (int, bool) {
	if on != nil {
		return c.lookupStream(f, on)
	}
	if i, ok := c.streamIndex[def]; ok {
		return i, true
	}
	declared := ""
	if names := c.streamNames(); len(names) > 0 {
		declared = " (declared: " + strings.Join(names, ", ") + ")"
	}
	c.errorOnce("default stream "+def, "%d statements without `on` need it; first here", f, kw,
		fmt.Sprintf("without `on`, %s runs on %s; add `on STREAM`%s or declare `stream %s`%s", what, code(def), declared, def, c.implicitStreamNote(def)),
		"no stream %s for this %s", code(def), what)
	return 0, false
}

var collectiveKinds = map[string]ir.Collective{
	"allreduce": ir.AllReduce, "broadcast": ir.Broadcast, "reduce": ir.Reduce,
	"allgather": ir.AllGather, "reducescatter": ir.ReduceScatter,
}

var redOps = map[string]ir.RedOp{"sum": ir.Sum, "avg": ir.Avg, "min": ir.Min, "max": ir.Max, "prod": ir.Prod, "wavg": ir.WAvg}

// redOpNames are the keys of redOps in the order messages list them.
var redOpNames = []string{"sum", "avg", "min", "max", "prod", "wavg"}

// opAliases are other words for the reductions (PyTorch's ReduceOp has
// PRODUCT, NumPy has mean), by the op they mean.
var opAliases = byAlias(map[string][]string{
	"avg":  {"mean", "average"},
	"sum":  {"add", "plus"},
	"prod": {"product", "mul"},
	"wavg": {"weighted_avg", "weighted"},
	"min":  {"minimum"},
	"max":  {"maximum"},
})

// reduces reports whether a collective takes a reduction operator.
func reduces(k ir.Collective) bool {
	return k == ir.AllReduce || k == ir.Reduce || k == ir.ReduceScatter
}

// resolveCollective resolves a collective's options and targets. It checks
// everything before it gives up, so that one run reports every error.
func (c *checker) resolveCollective(st *blockState, cs *CollectiveStmt) ir.Stmt {
	f := c.main.file
	kind := collectiveKinds[cs.Kind]
	kw := keywordSpan(cs.Pos.Offset, len(cs.Kind))
	s := ir.Stmt{Kind: ir.StmtCollective, Pos: f.pos(cs.Pos.Offset), Collective: kind}
	if reduces(kind) {
		s.Op = ir.Sum
	}
	on, opWord, ok := c.resolveCollectiveOptions(st, cs, &s)
	stream, sok := c.stmtStream(f, on, "comm", cs.Kind, kw)
	s.Stream = stream
	buckets, tok := c.resolveTargets(cs.Targets)
	s.Buckets = buckets
	for _, b := range buckets {
		c.synced[b] = true
	}
	if into := intoOption(cs); into != nil {
		// Out of place: the source is read, not changed.
		ok = c.resolveInto(cs, into, &s, tok) && ok
	} else {
		st.train.collective(kind, buckets)
	}
	if (s.Op == ir.Avg || s.Op == ir.WAvg) && opWord != nil && !c.avgOnFloats(opWord, s.Op, buckets) {
		ok = false
	}
	if !ok || !sok || !tok {
		return ir.Stmt{}
	}
	return s
}

// resolveCollectiveOptions sets s's op, after and root from the options of
// cs, each given at most once, and requires the root of broadcast and
// reduce. It returns the value words of `on` and of a valid `op` (else
// nil), which need the targets or the streams resolved first, and whether
// every option is valid.
func (c *checker) resolveCollectiveOptions(st *blockState, cs *CollectiveStmt, s *ir.Stmt) (on, opWord *Word, ok bool) {
	f := c.main.file
	ok = true
	seen := map[string]*Option{}
	for _, o := range cs.Options {
		if prev, dup := seen[o.Key]; dup {
			c.errorf(f, spanOf(o.Pos, o.EndPos), "each option is given at most once: remove one of them", "duplicate option %s (first on line %d)", code(o.Key), prev.Pos.Line)
			ok = false
			continue
		}
		seen[o.Key] = o
		valid := true
		switch o.Key {
		case "op":
			if valid = c.resolveOp(cs, o, s); valid {
				opWord = o.Value
			}
		case "on":
			on = o.Value
		case "after":
			valid = c.resolveAfter(st, cs.Kind, o, s)
		case "from", "to":
			valid = c.resolveRoot(cs, o, s)
		case "algo":
			valid = c.resolveAlgo(cs, o, s)
		case "into":
			// Resolved with the targets (resolveInto).
		default:
			c.errorf(f, keywordSpan(o.Pos.Offset, len(o.Key)), "collective options are op, on, after, algo (allreduce), from (broadcast), to (reduce) and into (an output buffer)", "%s is not an option of %s", code(o.Key), cs.Kind)
			valid = false
		}
		ok = ok && valid
	}
	if seen["from"] == nil && seen["to"] == nil {
		// broadcast and reduce send from or reduce to one rank.
		kw := keywordSpan(cs.Pos.Offset, len(cs.Kind))
		switch s.Collective {
		case ir.Broadcast:
			c.errorf(f, kw, "add `from RANK`, e.g. `from 0`", "broadcast needs a root rank")
			ok = false
		case ir.Reduce:
			c.errorf(f, kw, "add `to RANK`, e.g. `to 0`", "reduce needs a root rank")
			ok = false
		}
	}
	return on, opWord, ok
}

// resolveOp sets s.Op from `op OP`. Only reducing collectives take an op:
// the others move data unchanged. An unknown op's hint names the op that a
// known alias or a close spelling stands for.
func (c *checker) resolveOp(cs *CollectiveStmt, o *Option, s *ir.Stmt) bool {
	f := c.main.file
	if !reduces(s.Collective) {
		c.errorf(f, keywordSpan(o.Pos.Offset, len(o.Key)), cs.Kind+" moves data without reducing it", "%s takes no `op`", cs.Kind)
		return false
	}
	op, known := redOps[o.Value.Text]
	if !known {
		hint := "ops are sum, avg, min, max, prod and wavg"
		if a, ok := opAliases[strings.ToLower(o.Value.Text)]; ok {
			hint = "did you mean " + code(a) + "? " + hint
		} else if m := didYouMean(o.Value.Text, keys(redOps)); m != "" {
			hint = m + " " + hint
		}
		c.errorOnce("op "+o.Value.Text, usedTimes, f, wordSpan(o.Value), hint, "unknown op %s", code(o.Value.Text))
		return false
	}
	s.Op = op
	return true
}

// algos are the values of a collective's `algo`: whether an allreduce
// runs flat across all ranks or hierarchically, host by host.
var algos = map[string]bool{"flat": false, "hierarchical": true}

// resolveAlgo sets s.Hierarchical from `algo flat|hierarchical`. Only
// allreduce takes it: the other collectives run one way.
func (c *checker) resolveAlgo(cs *CollectiveStmt, o *Option, s *ir.Stmt) bool {
	f := c.main.file
	if s.Collective != ir.AllReduce {
		c.errorf(f, keywordSpan(o.Pos.Offset, len(o.Key)), "only allreduce chooses an algorithm; remove `algo`", "%s takes no `algo`", cs.Kind)
		return false
	}
	hier, known := algos[o.Value.Text]
	if !known {
		hint := "algorithms are flat (the default) and hierarchical"
		if m := didYouMean(o.Value.Text, keys(algos)); m != "" {
			hint = m + " " + hint
		} else if w := strings.ToLower(o.Value.Text); w != "" && strings.HasPrefix("hierarchical", w) {
			hint = "did you mean `hierarchical`? " + hint
		}
		c.errorf(f, wordSpan(o.Value), hint, "unknown algo %s", code(o.Value.Text))
		return false
	}
	s.Hierarchical = hier
	return true
}

// resolveAfter sets s.After from `after ready` or `after STREAM`. `after
// ready` needs a backward earlier in the block, since only a backward makes
// gradients ready; a word closer to `ready` than to any stream is taken for
// a misspelt `ready`, which is the likelier mistake.
func (c *checker) resolveAfter(st *blockState, what string, o *Option, s *ir.Stmt) bool {
	f := c.main.file
	if o.Value.Text == "synced" {
		c.errorf(f, spanOf(o.Pos, o.EndPos), "a collective waits with `after ready` or `after STREAM`", "%s takes no `after synced`: it is for update and unscale", what)
		return false
	}
	if o.Value.Text == "ready" {
		ok := true
		if !st.sawBackward {
			hint := "`after ready` waits for gradients made by a backward earlier in the step; use `after STREAM`, or move it after the backward"
			if st.kind == "init" {
				hint = "init has no backward, so nothing ever becomes ready; remove `after ready`"
			}
			c.errorf(f, spanOf(o.Pos, o.EndPos), hint, "`after ready` with no backward before it in %s", st.kind)
			ok = false
		}
		s.After = ir.After{Kind: ir.AfterReady}
		return ok
	}
	if _, isStream := c.streamIndex[o.Value.Text]; !isStream &&
		suggest(o.Value.Text, append(c.streamNames(), "ready")) == "ready" {
		// A misspelt `ready` (`after redy`) rather than a stream.
		c.errorOnce("stream "+o.Value.Text, usedTimes, f, wordSpan(o.Value), "did you mean `ready`? `after ready` starts each bucket once its gradients are ready",
			"no stream %s", code(o.Value.Text))
		return false
	}
	si, found := c.lookupStream(f, o.Value)
	if !found {
		return false
	}
	s.After = ir.After{Kind: ir.AfterStream, Stream: si}
	return true
}

// resolveRoot sets s.Root from `from RANK` (broadcast only) or `to RANK`
// (reduce only), a rank counted from 0. The hint for the wrong key says
// which key is right, or that the root is given already, so that the fix
// does not make a duplicate.
func (c *checker) resolveRoot(cs *CollectiveStmt, o *Option, s *ir.Stmt) bool {
	f := c.main.file
	want := map[ir.Collective]string{ir.Broadcast: "from", ir.Reduce: "to"}[s.Collective]
	if o.Key != want {
		hint := "only broadcast takes `from RANK` and only reduce takes `to RANK`"
		if want != "" {
			hint = "write `" + want + " RANK`"
			for _, other := range cs.Options {
				if other.Key == want {
					// `broadcast g to 0 from 0`: the root is there already.
					hint = "remove it: " + cs.Kind + "'s root is given by `" + want + "`"
				}
			}
		}
		c.errorf(f, keywordSpan(o.Pos.Offset, len(o.Key)), hint, "%s takes no %s", cs.Kind, code(o.Key))
		return false
	}
	n, msg := parseInt(o.Value.Text, "root rank")
	switch {
	case msg != "":
		c.errorf(f, wordSpan(o.Value), intHint(o.Value.Text, msg, o.Key+" 0")+"; ranks count from 0", "%s", msg)
		return false
	case n < 0:
		c.errorf(f, wordSpan(o.Value), "ranks count from 0", "negative root rank %d", n)
		return false
	}
	s.Root = n
	return true
}

// avgOnFloats reports whether `op avg` (opWord is its value) only averages
// buckets of floats on the wire, and reports the first integer bucket
// otherwise: an integer average would be rounded.
func (c *checker) avgOnFloats(opWord *Word, op ir.RedOp, buckets []int) bool {
	for _, bi := range buckets {
		b := c.prog.Buckets[bi]
		if b.Wire != ir.InvalidDType && !b.Wire.IsFloat() {
			c.errorf(c.main.file, wordSpan(opWord), "integer averages are not exact; use sum (and divide), min, max or prod",
				"op %s on integer bucket %s (%s)", op, code(b.Name), b.Wire)
			return false
		}
	}
	return true
}

// pieceHint says what to do about a piece `NAME[i]` of an unknown bucket:
// a close bucket name, the declared ones, or that a tensor is named
// without an index.
func (c *checker) pieceHint(name string) string {
	if h := didYouMean(name, keys(c.buckets)); h != "" {
		return h
	}
	if _, isTensor := c.tensorIndex[name]; isTensor {
		return "`" + name + "` is a tensor: name it without an index; pieces like g[0] are of buckets declared with `bucket`"
	}
	if len(c.buckets) == 0 {
		return "no bucket is declared; pieces like g[0] are of buckets declared with `bucket`"
	}
	return "declared buckets: " + c.bucketList()
}

// bucketList lists the declared buckets' names for a hint, the first ten
// of them in order of name.
func (c *checker) bucketList() string {
	names := keys(c.buckets)
	sort.Strings(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// targetHint says what to do about a target that names no bucket and
// matches no tensor: a close name, else what the program has.
func (c *checker) targetHint(p pattern) string {
	const what = "a target is a bucket, a piece like g[0], a tensor or a pattern"
	if !p.literal {
		return "no tensor matches it; `*` matches any run of characters, dots included (`layer1.*`)"
	}
	if h := didYouMean(p.text, append(keys(c.buckets), c.tensorNames()...)); h != "" {
		return h
	}
	if h := c.prefixHint(p.text); h != "" {
		return h
	}
	switch {
	case len(c.buckets) > 0:
		return "declared buckets: " + c.bucketList() + "; " + what
	case len(c.prog.Tensors) == 0:
		return "the program declares no tensors: declare them with `tensor` or import a model (`import \"models/NAME\"`)"
	}
	return "no bucket is declared; " + what
}

// resolveTargets resolves the targets of a collective, an update or an
// unscale to bucket indices in bucket order without repeats: a bucket
// declaration stands for all its pieces, NAME[i] for one piece, and a
// tensor name or pattern for the pieces holding its tensors plus an
// implicit bucket for each matched tensor in no bucket.
func (c *checker) resolveTargets(targets []*Target) ([]int, bool) {
	f := c.main.file
	ok := true
	set := map[int]bool{}
	for _, t := range targets {
		sp := spanOf(t.Pos, t.EndPos)
		tn := t.Name.name()
		name, why := tn.unquoted()
		if why != "" || name == "" {
			c.errorf(f, sp, why, "invalid target %s", tn.source())
			ok = false
			continue
		}
		info := c.buckets[name]
		if t.Index != nil {
			if info == nil {
				if ti, isTensor := c.tensorIndex[name]; isTensor {
					// `a[0]` for a tensor `a`: the error says to drop the
					// index; the tensor is named all the same.
					c.targeted[ti] = true
				}
				if !c.incomplete && !c.badNames[name] {
					c.errorOnce("target "+name, usedTimes, f, nameSpan(tn), c.pieceHint(name), "no bucket %s", code(name))
				}
				ok = false
				continue
			}
			i, msg := parseInt(t.Index.Text, "piece index")
			switch {
			case msg != "":
				c.errorf(f, wordSpan(t.Index), intHint(t.Index.Text, msg, name+"[0]")+"; pieces count from 0", "%s", msg)
				ok = false
			case i < 0 || i >= info.count:
				hint := fmt.Sprintf("%s has %d pieces: %s[0] .. %s[%d]", code(name), info.count, name, name, info.count-1)
				switch {
				case info.count == 0:
					hint = fmt.Sprintf("%s has no pieces", code(name))
				case info.count == 1:
					hint = fmt.Sprintf("%s has one piece, %s[0]", code(name), name)
				}
				c.errorf(f, sp, hint, "piece %s[%d] out of range", name, i)
				ok = false
			default:
				set[info.first+i] = true
			}
			continue
		}
		if info != nil {
			for i := range info.count {
				set[info.first+i] = true
			}
			continue
		}
		if c.outputLater(f, t, name) {
			ok = false
			continue
		}
		if !c.targetTensors(f, t, set) {
			ok = false
		}
	}
	out := make([]int, 0, len(set))
	for bi := range set {
		out = append(out, bi)
	}
	slices.Sort(out)
	return out, ok
}

// targetTensors resolves a tensor name or pattern target, adding the
// buckets of its tensors to set.
func (c *checker) targetTensors(f *sourceFile, t *Target, set map[int]bool) bool {
	name := t.Name.name()
	sp := nameSpan(name)
	pat, ok := c.compileName(f, name)
	if !ok {
		return false
	}
	matched := c.matchTensors(pat)
	for _, ti := range matched {
		c.targeted[ti] = true
	}
	n := 0
	for _, ti := range matched {
		tn := &c.prog.Tensors[ti]
		if tn.Frozen {
			continue
		}
		n++
		if tn.Bucket < 0 {
			if _, clash := c.buckets[tn.Name]; clash {
				c.errorf(f, sp, "rename the bucket or the tensor", "tensor %s would get an implicit bucket named like bucket %s", code(tn.Name), code(tn.Name))
				return false
			}
			tn.Bucket = len(c.prog.Buckets)
			c.implicitBucket[ti] = tn.Bucket
			c.prog.Buckets = append(c.prog.Buckets, ir.Bucket{
				Name: tn.Name, Decl: tn.Name, Wire: tn.DType, Elems: tn.Elems, Tensors: []int{ti},
				Pos: f.pos(t.Pos.Offset),
			})
		}
		set[tn.Bucket] = true
	}
	if n > 0 {
		return true
	}
	switch {
	case len(matched) > 0 && pat.literal:
		c.errorf(f, sp, "frozen tensors have no gradient and are never synchronised", "tensor %s is frozen", code(pat.text))
	case len(matched) > 0:
		c.errorf(f, sp, "frozen tensors have no gradient and are never synchronised", "%s matches only frozen tensors", code(name.source()))
	case c.mayMatchRejected(pat):
	default:
		c.errorOnce("target "+pat.text, usedTimes, f, sp, c.targetHint(pat), "no bucket or tensor %s", code(name.source()))
	}
	return false
}

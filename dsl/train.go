package dsl

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/ir"
)

// The training step after the sync: the `scaler` declaration, the `update`
// and `unscale` statements, and the rules that order them within a step.

// trainState is what the update and unscale rules remember of a block.
type trainState struct {
	// synced marks the buckets allreduced or reduce-scattered since the
	// block's last backward; collected those with any collective earlier
	// in the block (what `after synced` waits for).
	synced, collected map[int]bool
	// unscaled maps a bucket unscaled since the last backward to the line
	// of its unscale; updated maps a bucket updated in the block to the
	// line of its update.
	unscaled, updated map[int]int
	firstUpdate       int // the line of the block's first update; 0 before it
}

func (t *trainState) init() {
	if t.synced == nil {
		t.synced, t.collected = map[int]bool{}, map[int]bool{}
		t.unscaled, t.updated = map[int]int{}, map[int]int{}
	}
}

// backward refills the gradients of buckets (nil: every bucket): what was
// synchronised or unscaled of them is no longer. A backward in pieces
// refills only its tensors' buckets, so that a bucket synchronised or
// unscaled before another bucket's piece stays so.
func (t *trainState) backward(buckets []int) {
	t.init()
	if buckets == nil {
		clear(t.synced)
		clear(t.unscaled)
		return
	}
	for _, b := range buckets {
		delete(t.synced, b)
		delete(t.unscaled, b)
	}
}

// collective notes a collective of buckets.
func (t *trainState) collective(k ir.Collective, buckets []int) {
	t.init()
	for _, b := range buckets {
		t.collected[b] = true
		if k == ir.AllReduce || k == ir.ReduceScatter {
			t.synced[b] = true
		}
	}
}

// optimizers are the optimizers by keyword; optimizerSettings the settings
// each takes, in canonical order.
var (
	optimizers        = map[string]ir.Optimizer{"sgd": ir.SGD, "adamw": ir.AdamW}
	optimizerSettings = map[ir.Optimizer][]string{
		ir.SGD:   {"lr", "momentum", "weight_decay"},
		ir.AdamW: {"lr", "beta1", "beta2", "eps", "weight_decay"},
	}
)

// resolveUpdate resolves `update TARGETS OPTIMIZER SETTINGS`.
func (c *checker) resolveUpdate(st *blockState, u *UpdateStmt, inGroup bool) ir.Stmt {
	f := c.main.file
	kw := keywordSpan(u.Pos.Offset, len("update"))
	if !c.trainPlace(st, "update", kw, inGroup) {
		return ir.Stmt{}
	}
	s := ir.Stmt{Kind: ir.StmtUpdate, Pos: f.pos(u.Pos.Offset)}
	opt, ok := c.optimizer(u, kw)
	if ok && opt == 0 {
		return ir.Stmt{} // the targets are the optimizer's name: reported
	}
	s.Update = defaultUpdate(opt)
	on, optsOK := c.trainOptions("update", u.Options, &s, func(o *Option) (known, valid bool) {
		return c.setting(opt, o, &s.Update)
	})
	stream, sok := c.stmtStream(f, on, "compute", "update", kw)
	s.Stream = stream
	buckets, tok := c.resolveTargets(u.Targets)
	tok = tok && c.noOutputs(u.Targets, buckets, "update")
	s.Buckets = buckets
	rok := tok && c.updateRules(st, u, s)
	st.train.init()
	for _, b := range buckets {
		if _, dup := st.train.updated[b]; !dup {
			st.train.updated[b] = u.Pos.Line
		}
	}
	if st.train.firstUpdate == 0 {
		st.train.firstUpdate = u.Pos.Line
	}
	if !ok || !optsOK || !sok || !rok {
		return ir.Stmt{}
	}
	return s
}

// resolveUnscale resolves `unscale TARGETS [agree] [on STREAM] [after
// synced|STREAM]`.
func (c *checker) resolveUnscale(st *blockState, u *UnscaleStmt, inGroup bool) ir.Stmt {
	f := c.main.file
	kw := keywordSpan(u.Pos.Offset, len("unscale"))
	if !c.trainPlace(st, "unscale", kw, inGroup) {
		return ir.Stmt{}
	}
	s := ir.Stmt{Kind: ir.StmtUnscale, Pos: f.pos(u.Pos.Offset)}
	on, ok := c.trainOptions("unscale", u.Options, &s, func(o *Option) (bool, bool) {
		s.Agree = s.Agree || o.Key == "agree"
		return o.Key == "agree", true
	})
	stream, sok := c.stmtStream(f, on, "compute", "unscale", kw)
	s.Stream = stream
	buckets, tok := c.resolveTargets(u.Targets)
	tok = tok && c.noOutputs(u.Targets, buckets, "unscale")
	s.Buckets = buckets
	if c.scalerDecl == nil {
		c.errorOnce("unscale without a scaler", "%d unscales; first here", f, kw, "declare `scaler dynamic` (or `scaler static 1024`): without a loss scaler the gradients carry no scale to divide by",
			"unscale without a loss scaler")
		ok = false
	}
	rok := tok && c.unscaleRules(st, u, s)
	st.train.init()
	for _, b := range buckets {
		if _, dup := st.train.unscaled[b]; !dup {
			st.train.unscaled[b] = u.Pos.Line
		}
	}
	if !ok || !sok || !rok {
		return ir.Stmt{}
	}
	return s
}

// trainPlace reports whether an update or unscale may stand where it is:
// not in a group, not in init.
func (c *checker) trainPlace(st *blockState, what string, kw span, inGroup bool) bool {
	f := c.main.file
	switch {
	case inGroup:
		c.errorf(f, kw, "a group only issues collectives; put it before or after the group", "%s inside group", what)
	case st.kind == "init":
		c.errorf(f, kw, "init runs once before the steps and has no gradients; "+what+" belongs in step", "%s in init", what)
	default:
		return true
	}
	return false
}

// optimizer resolves an update's optimizer. Without one, a lone target
// that is an optimizer's name is a missing target (`update sgd lr 0.1`),
// reported with opt 0 and ok true.
func (c *checker) optimizer(u *UpdateStmt, kw span) (opt ir.Optimizer, ok bool) {
	f := c.main.file
	if w := u.Optimizer; w != nil {
		if opt, ok := optimizers[w.Text]; ok {
			return opt, true
		}
		hint := "optimizers are sgd and adamw"
		switch l := strings.ToLower(w.Text); {
		case l == "adam":
			hint = "syncgen's Adam is adamw (decoupled weight decay): write adamw"
		case suggest(w.Text, keys(optimizers)) != "":
			hint = didYouMean(w.Text, keys(optimizers)) + " " + hint
		}
		c.errorf(f, wordSpan(w), hint, "unknown optimizer %s", code(w.Text))
		return 0, false
	}
	t := u.Targets[0]
	if len(u.Targets) == 1 && t.Index == nil && optimizers[t.Name.Bare] != 0 && c.buckets[t.Name.Bare] == nil {
		if _, isTensor := c.tensorIndex[t.Name.Bare]; !isTensor {
			c.errorf(f, spanOf(t.Pos, t.EndPos), "targets are buckets, pieces like grads[0], tensors and patterns, e.g. `update grads "+t.Name.Bare+"`",
				"update needs a target before %s", code(t.Name.Bare))
			return 0, true
		}
	}
	c.errorf(f, kw, "write it after the targets, e.g. `update grads adamw lr 1e-3`; optimizers are sgd and adamw", "update needs an optimizer")
	return 0, false
}

// defaultUpdate returns an optimizer's settings as PyTorch defaults them.
func defaultUpdate(opt ir.Optimizer) ir.Update {
	u := ir.Update{Optimizer: opt, LR: ir.DefaultLR}
	switch opt {
	case ir.SGD:
		u.Momentum, u.WeightDecay = ir.DefaultMomentum, ir.DefaultSGDWeightDecay
	case ir.AdamW:
		u.Beta1, u.Beta2, u.Eps, u.WeightDecay = ir.DefaultBeta1, ir.DefaultBeta2, ir.DefaultEps, ir.DefaultAdamWeightDecay
	}
	return u
}

// setting applies an update's setting or `master f32` to u; known is false
// for another option. opt is 0 when the optimizer is unknown: the value is
// still checked.
func (c *checker) setting(opt ir.Optimizer, o *Option, u *ir.Update) (known, valid bool) {
	f := c.main.file
	key := o.Key
	switch key {
	case "master":
		if o.Value.Text != "f32" {
			c.errorf(f, wordSpan(o.Value), "write `master f32`: float32 master parameters (and optimizer state) for f16 and bf16 gradients",
				"master parameters are f32, not %s", code(o.Value.Text))
			return true, false
		}
		u.Master = true
		return true, true
	case "wd":
		c.errorf(f, keywordSpan(o.Pos.Offset, len(key)), "did you mean `weight_decay`?", "unknown setting `wd`")
		return true, false
	case "lr", "momentum", "weight_decay", "beta1", "beta2", "eps":
	default:
		return false, false
	}
	valid = true
	if takes := optimizerSettings[opt]; opt != 0 && !slices.Contains(takes, key) {
		c.errorf(f, keywordSpan(o.Pos.Offset, len(key)), fmt.Sprintf("%s's settings are %s", opt, andList(takes)), "%s takes no %s", opt, code(key))
		valid = false
	}
	v, msg := parseNumber(o.Value.Text, key)
	if msg == "" {
		switch {
		case (key == "lr" || key == "eps") && v <= 0:
			msg = key + " must be positive, not " + code(o.Value.Text)
		case (key == "momentum" || key == "weight_decay") && v < 0:
			msg = key + " must not be negative, not " + code(o.Value.Text)
		case (key == "beta1" || key == "beta2") && (v < 0 || v >= 1):
			msg = key + " must be at least 0 and below 1, not " + code(o.Value.Text)
		}
	}
	if msg != "" {
		c.errorf(f, wordSpan(o.Value), "e.g. `"+key+" "+settingExamples[key]+"`; numbers are decimal, with an optional exponent (`0.001`, `1e-3`)", "%s", msg)
		return true, false
	}
	switch key {
	case "lr":
		u.LR = v
	case "momentum":
		u.Momentum = v
	case "weight_decay":
		u.WeightDecay = v
	case "beta1":
		u.Beta1 = v
	case "beta2":
		u.Beta2 = v
	case "eps":
		u.Eps = v
	}
	return true, valid
}

// settingExamples are typical values of the settings, for hints.
var settingExamples = map[string]string{
	"lr": "1e-3", "momentum": "0.9", "weight_decay": "1e-4", "beta1": "0.9", "beta2": "0.999", "eps": "1e-8",
}

// andList writes "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// numberRE matches a decimal number with an optional fraction and exponent.
var numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// parseNumber parses a decimal number such as `0.001` or `1e-3`.
func parseNumber(text, what string) (float64, string) {
	if !numberRE.MatchString(text) {
		return 0, fmt.Sprintf("%s must be a number, not %s", what, code(text))
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Sprintf("%s %s is out of range", what, code(text))
	}
	return v, ""
}

// trainOptions reads the options of an update or unscale, each at most
// once: `on STREAM` (returned), `after synced|STREAM` (set in s), and the
// others through other, which says whether it knows the key and whether
// its value is valid.
func (c *checker) trainOptions(what string, opts []*Option, s *ir.Stmt, other func(*Option) (known, valid bool)) (on *Word, ok bool) {
	f := c.main.file
	ok = true
	seen := map[string]*Option{}
	for _, o := range opts {
		if prev, dup := seen[o.Key]; dup {
			c.errorf(f, spanOf(o.Pos, o.EndPos), "each option is given at most once: remove one of them", "duplicate option %s (first on line %d)", code(o.Key), prev.Pos.Line)
			ok = false
			continue
		}
		seen[o.Key] = o
		switch o.Key {
		case "on":
			on = o.Value
		case "after":
			ok = c.trainAfter(what, o, s) && ok
		default:
			known, valid := other(o)
			if !known {
				hint := "unscale takes on STREAM, after synced|STREAM and agree"
				if what == "update" {
					hint = "update takes its optimizer's settings (lr, momentum, weight_decay, beta1, beta2, eps), master f32, on STREAM and after synced|STREAM"
				}
				c.errorf(f, keywordSpan(o.Pos.Offset, len(o.Key)), hint, "%s is not an option of %s", code(o.Key), what)
			}
			ok = ok && known && valid
		}
	}
	return on, ok
}

// trainAfter sets s.After from `after synced` or `after STREAM`.
func (c *checker) trainAfter(what string, o *Option, s *ir.Stmt) bool {
	f := c.main.file
	text := o.Value.Text
	switch _, isStream := c.streamIndex[text]; {
	case text == "synced":
		s.After = ir.After{Kind: ir.AfterSynced}
		return true
	case text == "ready":
		c.errorf(f, spanOf(o.Pos, o.EndPos), "`after ready` waits for the backward's gradients, not for their collective; write `after synced` (each bucket's last collective before it) or `after STREAM`",
			"%s takes no `after ready`", what)
		return false
	case !isStream && suggest(text, append(c.streamNames(), "synced")) == "synced":
		c.errorOnce("stream "+text, usedTimes, f, wordSpan(o.Value), "did you mean `synced`? `after synced` waits for each bucket's last collective before it",
			"no stream %s", code(text))
		return false
	}
	si, found := c.lookupStream(f, o.Value)
	s.After = ir.After{Kind: ir.AfterStream, Stream: si}
	return found
}

// targetsSpan is the span of a statement's targets.
func targetsSpan(ts []*Target) span {
	return spanOf(ts[0].Pos, ts[len(ts)-1].EndPos)
}

// firstBucket returns the first of buckets for which bad holds, or -1.
func firstBucket(buckets []int, bad func(int) bool) int {
	for _, b := range buckets {
		if bad(b) {
			return b
		}
	}
	return -1
}

// updateRules checks what an update needs of its buckets and of the
// statements before it, reporting the first bucket that breaks each rule.
func (c *checker) updateRules(st *blockState, u *UpdateStmt, s ir.Stmt) bool {
	f := c.main.file
	sp := targetsSpan(u.Targets)
	t := &st.train
	t.init()
	ok := c.floatBuckets("update", s.Buckets, sp) && c.oneParamDType(s, sp)
	name := func(b int) string { return code(c.prog.Buckets[b].Name) }
	if b := firstBucket(s.Buckets, func(b int) bool { return t.updated[b] != 0 }); b >= 0 {
		c.errorf(f, sp, "a bucket's parameters take one optimizer step a step: remove one of the updates",
			"bucket %s is updated twice in one step (first on line %d)", name(b), t.updated[b])
		ok = false
	}
	if b := firstBucket(s.Buckets, func(b int) bool { return !t.synced[b] }); b >= 0 {
		c.errorf(f, sp, "put an allreduce or reducescatter of it before the update, after the step's last backward",
			"bucket %s is updated before its gradients are synchronised", name(b))
		ok = false
	}
	if c.scalerDecl == nil {
		return ok
	}
	if b := firstBucket(s.Buckets, func(b int) bool { return t.unscaled[b] == 0 && c.prog.Buckets[b].Wire.IsFloat() }); b >= 0 {
		c.errorf(f, sp, "its gradients still carry the loss scale; unscale it first: `unscale "+c.prog.Buckets[b].Decl+" after synced` before the update",
			"bucket %s is updated before it is unscaled", name(b))
		ok = false
	}
	return ok
}

// unscaleRules checks what an unscale needs of its buckets and of the
// statements before it.
func (c *checker) unscaleRules(st *blockState, u *UnscaleStmt, s ir.Stmt) bool {
	f := c.main.file
	sp := targetsSpan(u.Targets)
	t := &st.train
	t.init()
	ok := c.floatBuckets("unscale", s.Buckets, sp)
	if t.firstUpdate != 0 {
		c.errorf(f, spanOf(u.Pos, u.EndPos), "an overflow found here could not skip the update already done: unscale every bucket before the step's first update",
			"unscale after the update on line %d", t.firstUpdate)
		ok = false
	}
	if b := firstBucket(s.Buckets, func(b int) bool { return t.unscaled[b] != 0 }); b >= 0 {
		c.errorf(f, sp, "a second unscale would divide its gradients by the scale again: remove one of them",
			"bucket %s is unscaled twice (first on line %d)", code(c.prog.Buckets[b].Name), t.unscaled[b])
		ok = false
	}
	if s.After.Kind == ir.AfterSynced {
		if b := firstBucket(s.Buckets, func(b int) bool { return !t.collected[b] }); b >= 0 {
			c.errorf(f, sp, "`after synced` waits for each bucket's last collective before it in the step: synchronise the bucket first, or write `after STREAM`",
				"`after synced`, but bucket %s has no collective before it in step", code(c.prog.Buckets[b].Name))
			ok = false
		}
	}
	return ok
}

// floatBuckets reports an update's or unscale's first integer bucket.
func (c *checker) floatBuckets(what string, buckets []int, sp span) bool {
	b := firstBucket(buckets, func(b int) bool { w := c.prog.Buckets[b].Wire; return w != ir.InvalidDType && !w.IsFloat() })
	if b < 0 {
		return true
	}
	bk := c.prog.Buckets[b]
	need := "an optimizer needs float gradients"
	if what == "unscale" {
		need = "a loss scaler scales float gradients only"
	}
	c.errorf(c.main.file, sp, need+"; leave the integer bucket out", "%s of integer bucket %s (%s)", what, code(bk.Name), bk.Wire)
	return false
}

// oneParamDType reports an updated bucket whose parameters would have two
// dtypes: a bucket's parameters are one buffer laid out like the bucket,
// and `master f32` makes the parameters of f16 and bf16 tensors f32.
func (c *checker) oneParamDType(s ir.Stmt, sp span) bool {
	param := func(d ir.DType) ir.DType {
		if s.Update.Master && (d == ir.F16 || d == ir.BF16) {
			return ir.F32
		}
		return d
	}
	for _, b := range s.Buckets {
		bk := c.prog.Buckets[b]
		for _, ti := range bk.Tensors[1:] {
			t0, t := c.prog.Tensors[bk.Tensors[0]], c.prog.Tensors[ti]
			if param(t.DType) == param(t0.DType) {
				continue
			}
			hint := "add `master f32`: f16 and bf16 gradients then update float32 master parameters, one dtype for the bucket"
			if s.Update.Master || !(t.DType.IsFloat() && t0.DType.IsFloat()) || t.DType == ir.F64 || t0.DType == ir.F64 {
				hint = "a bucket's parameters have one dtype (`master f32` makes those of f16 and bf16 tensors f32): put the " + t.DType.String() + " tensors in a bucket of their own"
			}
			c.errorf(c.main.file, sp, hint, "updated bucket %s holds tensors of two dtypes: %s (%s) and %s (%s)",
				code(bk.Name), t0.DType, code(t0.Name), t.DType, code(t.Name))
			return false
		}
	}
	return true
}

// divideOption reads a bucket's `divide before|after`.
func (c *checker) divideOption(f *sourceFile, o *Option) bool {
	switch o.Value.Text {
	case "before":
		return true
	case "after":
	default:
		c.errorf(f, wordSpan(o.Value), "`divide before` divides each rank's input of an `op avg` by the number of ranks before the sum; `divide after` (the default) divides the sum",
			"divide is before or after, not %s", code(o.Value.Text))
	}
	return false
}

// addScaler records the scaler declaration of the main file.
func (c *checker) addScaler(m *module, d *ScalerDecl) {
	sp := keywordSpan(d.Pos.Offset, len("scaler"))
	switch {
	case m != c.main:
		c.errorf(m.file, sp, "the loss scaler belongs to the program: declare it in the main file", "scaler declaration in an imported file")
	case c.scalerDecl != nil:
		c.errorf(m.file, sp, "a program has one loss scaler: remove one of them", "second scaler declaration (the first is on line %d)", c.scalerDecl.Pos.Line)
	default:
		c.scalerDecl = d
	}
}

// scalerRules are the scaler rules by keyword; dynamic is PyTorch's.
var scalerRules = map[string]ir.ScalerRule{
	"static": ir.ScaleStatic, "dynamic": ir.ScaleTorch, "torch": ir.ScaleTorch,
	"megatron": ir.ScaleMegatron, "deepspeed": ir.ScaleDeepSpeed,
}

// scalerAliases are other words for the rules.
var scalerAliases = byAlias(map[string][]string{"static": {"fixed", "constant"}, "torch": {"pytorch", "amp", "gradscaler"}})

// scalerKeys are a scaler's options in canonical order; scalerKeyAliases
// the names PyTorch, Megatron-LM and DeepSpeed give them.
var (
	scalerKeys       = []string{"init", "growth", "backoff", "interval", "hysteresis", "min", "max"}
	scalerKeyAliases = byAlias(map[string][]string{
		"init":     {"init_scale", "initial_scale", "initial_loss_scale", "scale"},
		"growth":   {"growth_factor", "scale_factor", "factor"},
		"backoff":  {"backoff_factor"},
		"interval": {"growth_interval", "window", "scale_window", "loss_scale_window"},
		"min":      {"min_scale", "min_loss_scale"},
		"max":      {"max_scale", "max_loss_scale"},
	})
)

// scalerPresets are the rules' defaults, which the runtime gives the
// options a plan leaves out (runtime/internal/scaler.Preset: PyTorch's,
// Megatron-LM's and DeepSpeed's defaults, with min 1).
var scalerPresets = map[ir.ScalerRule]ir.Scaler{
	ir.ScaleStatic:    {Init: 65536, Min: 1},
	ir.ScaleTorch:     {Init: 65536, Growth: 2, Backoff: 0.5, Interval: 2000, Hysteresis: 1, Min: 1},
	ir.ScaleMegatron:  {Init: 1 << 32, Growth: 2, Backoff: 0.5, Interval: 1000, Hysteresis: 2, Min: 1},
	ir.ScaleDeepSpeed: {Init: 65536, Growth: 2, Backoff: 0.5, Interval: 1000, Hysteresis: 2, Min: 1},
}

// scalerItem is an option of a scaler declaration and its value (nil
// when it has none), or a value that no option names (key nil): the bare
// scale of `scaler static 1024`.
type scalerItem struct {
	key, value *Word
}

// numberLike reports whether a word is written as a value, not a name.
func numberLike(w string) bool { return w != "" && strings.ContainsRune("0123456789-", rune(w[0])) }

// scalerItems pairs up the words of a scaler after its rule: a name and
// the word after it, its value (unless that is an option's name, or the
// name is unknown and the word not a number), or a lone value.
func scalerItems(d *ScalerDecl) []scalerItem {
	known := func(w string) bool { return slices.Contains(scalerKeys, w) }
	var items []scalerItem
	for i := 0; i < len(d.Words); i++ {
		w := d.Words[i].word()
		if numberLike(w.Text) {
			items = append(items, scalerItem{value: w})
			continue
		}
		it := scalerItem{key: w}
		if i+1 < len(d.Words) {
			next := d.Words[i+1].Text
			if known(w.Text) && !known(next) || !known(w.Text) && numberLike(next) {
				it.value = d.Words[i+1].word()
				i++
			}
		}
		items = append(items, it)
	}
	return items
}

// declareScaler checks the scaler declaration and sets Program.Scaler: the
// options given, each valid on its own and, with the rule's defaults for
// the others, together as the runtime requires.
func (c *checker) declareScaler() {
	d := c.scalerDecl
	if d == nil {
		return
	}
	f := c.main.file
	sc := &ir.Scaler{Pos: f.pos(d.Pos.Offset)}
	rule, ok := scalerRules[d.Rule.Text]
	if !ok {
		hint := "rules are static, dynamic (= torch), torch, megatron and deepspeed"
		if a, found := scalerAliases[strings.ToLower(d.Rule.Text)]; found {
			hint = "did you mean " + code(a) + "? " + hint
		} else if h := didYouMean(d.Rule.Text, keys(scalerRules)); h != "" {
			hint = h + " " + hint
		}
		c.errorf(f, wordSpan(d.Rule), hint, "unknown scaler rule %s", code(d.Rule.Text))
	}
	sc.Rule = rule
	given := map[string]*Word{} // the option (or bare scale) that gave each value
	for i, it := range scalerItems(d) {
		if !c.scalerItem(i, it, rule, given, sc) {
			ok = false
		}
	}
	if ok && c.scalerTogether(sc, given) {
		c.prog.Scaler = sc
	}
}

// scalerItem checks one option of a scaler (the i-th) and sets its value.
func (c *checker) scalerItem(i int, it scalerItem, rule ir.ScalerRule, given map[string]*Word, sc *ir.Scaler) bool {
	f := c.main.file
	static := rule == ir.ScaleStatic
	const form = "scaler options are written NAME VALUE: init 65536, growth 2, backoff 0.5, interval 2000, hysteresis 2, min 1, max 16777216"
	key := "init"
	switch {
	case it.key == nil && i > 0:
		c.errorf(f, wordSpan(it.value), form, "%s follows no option", code(it.value.Text))
		return false
	case it.key == nil && rule != 0 && !static:
		c.errorf(f, wordSpan(it.value), "a fixed scale is `scaler static "+it.value.Text+"`; a dynamic scaler's first scale is `init "+it.value.Text+"`",
			"a bare scale is for `scaler static`")
		return false
	case it.key != nil && !slices.Contains(scalerKeys, it.key.Text):
		hint := "options are " + andList(scalerKeys)
		if a, found := scalerKeyAliases[strings.ToLower(it.key.Text)]; found {
			hint = "did you mean " + code(a) + "? " + hint
		} else if h := didYouMean(it.key.Text, scalerKeys); h != "" {
			hint = h + " " + hint
		}
		c.errorf(f, wordSpan(it.key), hint, "unknown scaler option %s", code(it.key.Text))
		return false
	case it.key != nil:
		key = it.key.Text
	}
	if prev, dup := given[key]; dup {
		where := fmt.Sprintf("first on line %d", prev.Pos.Line)
		if _, bare := given["scale"]; bare && key == "init" {
			where = "`scaler static " + prev.Text + "` gives it already"
		}
		c.errorf(f, spanOf(it.key.Pos, it.key.EndPos), "each option is given at most once: remove one of them", "duplicate option %s (%s)", code(key), where)
		return false
	}
	name := key
	if it.key == nil {
		name = "scale"
		given["scale"] = it.value
	}
	given[key] = it.value
	if static && key != "init" {
		c.errorf(f, wordSpan(it.key), "a static scale never changes; `scaler dynamic` adapts it", "a static scaler takes no %s", code(key))
		return false
	}
	if it.value == nil {
		given[key] = it.key
		c.errorf(f, wordSpan(it.key), "write e.g. `"+key+" "+scalerExamples[key]+"`", "%s needs a value", code(key))
		return false
	}
	var v float64
	if key == "interval" || key == "hysteresis" {
		n, msg := parseInt(it.value.Text, key)
		switch {
		case msg != "":
			c.errorf(f, wordSpan(it.value), intHint(it.value.Text, msg, key+" "+scalerExamples[key]), "%s", msg)
		case n < 1:
			c.errorf(f, wordSpan(it.value), "it counts steps: a whole number of at least 1", "%s must be at least 1, not %d", key, n)
		default:
			v = float64(n)
		}
	} else {
		v = c.scalerValue(name, key, it.value)
	}
	switch key {
	case "init":
		sc.Init = v
	case "growth":
		sc.Growth = v
	case "backoff":
		sc.Backoff = v
	case "interval":
		sc.Interval = int(v)
	case "hysteresis":
		sc.Hysteresis = int(v)
	case "min":
		sc.Min = v
	case "max":
		sc.Max = v
	}
	return v != 0
}

// scalerExamples are typical values of the scaler's options, for hints.
var scalerExamples = map[string]string{
	"init": "65536", "growth": "2", "backoff": "0.5", "interval": "2000", "hysteresis": "2", "min": "1", "max": "16777216",
}

// scalerTogether checks the options given with the rule's defaults for the
// others, as the runtime does: min <= init <= max, torch's hysteresis is 1
// (PyTorch has none), deepspeed's backoff is 1/growth (DeepSpeed has one
// factor: one given alone sets the other in sc). given holds the words
// that gave the options.
func (c *checker) scalerTogether(sc *ir.Scaler, given map[string]*Word) bool {
	p := scalerPresets[sc.Rule]
	// DeepSpeed has one factor: growth or backoff given alone sets the
	// other, as the runtime's defaults do.
	if sc.Rule == ir.ScaleDeepSpeed {
		switch {
		case sc.Growth != 0 && sc.Backoff == 0:
			sc.Backoff = 1 / sc.Growth
		case sc.Backoff != 0 && sc.Growth == 0:
			sc.Growth = 1 / sc.Backoff
		}
	}
	e := *sc
	for _, x := range []struct{ v, def *float64 }{{&e.Init, &p.Init}, {&e.Growth, &p.Growth}, {&e.Backoff, &p.Backoff}, {&e.Min, &p.Min}, {&e.Max, &p.Max}} {
		if *x.v == 0 {
			*x.v = *x.def
		}
	}
	e.Hysteresis = cmp.Or(e.Hysteresis, p.Hysteresis)
	// What a value is called: `init 4` as given, or `init 4294967296`
	// as the rule's default.
	say := func(key string, v float64) string {
		if given[key] == nil {
			return fmt.Sprintf("%s's default %s %s", sc.Rule, key, num(v))
		}
		return key + " " + num(v)
	}
	at := func(keys ...string) span {
		for _, k := range keys {
			if w := given[k]; w != nil {
				return wordSpan(w)
			}
		}
		return span{c.scalerDecl.Pos.Offset, c.scalerDecl.Pos.Offset + len("scaler")}
	}
	f := c.main.file
	switch {
	case e.Min > e.Init:
		c.errorf(f, at("min", "init"), "the scale starts at init and never goes below min", "%s is above %s", say("min", e.Min), say("init", e.Init))
	case e.Max != 0 && e.Init > e.Max:
		c.errorf(f, at("init", "max"), "the scale starts at init and never goes above max", "%s is above %s", say("init", e.Init), say("max", e.Max))
	case sc.Rule == ir.ScaleTorch && e.Hysteresis != 1:
		c.errorf(f, at("hysteresis"), "PyTorch backs off at every overflow: leave hysteresis out, or use megatron or deepspeed, which have one",
			"torch has no hysteresis")
	case sc.Rule == ir.ScaleDeepSpeed && e.Growth*e.Backoff != 1:
		c.errorf(f, at("backoff", "growth"), "DeepSpeed has one scale factor: it multiplies the scale by it to grow and divides by it to back off; write backoff "+num(1/e.Growth),
			"deepspeed's backoff is 1/growth, not %s", num(e.Backoff))
	default:
		return true
	}
	return false
}

// num writes a number as the checker's messages show it.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// scalerValue checks a scale or factor of a scaler (name is how messages
// call it, key the option): a number in the option's range and a power of
// two, so that scaling is exact. It returns 0 after reporting a problem.
func (c *checker) scalerValue(name, key string, w *Word) float64 {
	valid, rule := func(v float64) bool { return v >= 1 }, "at least 1"
	switch key {
	case "growth":
		valid, rule = func(v float64) bool { return v > 1 }, "above 1"
	case "backoff":
		valid, rule = func(v float64) bool { return v > 0 && v < 1 }, "between 0 and 1"
	}
	v, msg := parseNumber(w.Text, name)
	hint := "numbers are decimal, with an optional exponent: `65536`, `0.5`, `2e3`"
	if msg == "" && !valid(v) {
		msg = fmt.Sprintf("%s must be %s, not %s", name, rule, code(w.Text))
		hint = "e.g. `" + key + " " + scalerExamples[key] + "`"
		if rule == "at least 1" {
			hint = "a scale below 1 would shift the scaled gradients down and lose their low bits; " + hint
		}
	}
	// A float32 holds the powers of two from 2^-126 to 2^127; a value
	// outside them is out of range, and no suggestion leaves them.
	inFloat32 := func(v float64) bool { return v >= 0x1p-126 && v <= 0x1p127 }
	frac, _ := math.Frexp(v)
	switch {
	case msg != "":
	case v < 0x1p-126 || v >= 0x1p128:
		msg = fmt.Sprintf("%s %s is out of float32's range", name, code(w.Text))
		hint = "the scale is kept in float32: a power of two from 2^-126 to 2^127"
	case frac != 0.5:
		msg = fmt.Sprintf("%s %s is not a power of two", name, code(w.Text))
		hint = "scaling by a power of two is exact (only the exponent changes)"
		if p := nearestPowerOfTwo(v, func(v float64) bool { return valid(v) && inFloat32(v) }); p != 0 {
			hint = "did you mean " + code(num(p)) + "? " + hint
		}
	default:
		return v
	}
	c.errorf(c.main.file, wordSpan(w), hint, "%s", msg)
	return 0
}

// nearestPowerOfTwo returns the power of two nearest v that is valid, or 0.
func nearestPowerOfTwo(v float64, valid func(float64) bool) float64 {
	_, exp := math.Frexp(v)
	lo, hi := math.Ldexp(1, exp-1), math.Ldexp(1, exp) // lo <= v < hi
	switch {
	case valid(lo) && (v-lo <= hi-v || !valid(hi)):
		return lo
	case valid(hi):
		return hi
	}
	return 0
}

package dsl

import (
	"testing"

	"github.com/syncgen/syncgen/ir"
)

// TestTrainIR checks what the checker makes of the training step: the
// optimizers' defaults filled in, the settings given, the streams and
// dependencies of update and unscale, agree, divide before and the scaler
// with the options it was given (the others zero).
func TestTrainIR(t *testing.T) {
	p := mustCheck(t, `
tensor w f16[8]
tensor v f32[8]
tensor u f32[8]
stream compute
stream comm priority high
scaler megatron init 1024 hysteresis 2
bucket g { w } wire f16 divide before
bucket e { v } divide after
bucket z { u }
step {
    backward 60ms on compute
    allreduce g op avg on comm after ready
    reducescatter e op avg on comm after ready
    allreduce z on comm after ready
    unscale g, z after synced
    unscale e on compute after comm agree
    update g sgd after synced
    update z sgd lr 0.1 momentum 0.9 weight_decay 1e-4 on compute after synced
    update e adamw lr 3e-4 weight_decay 0 master f32 after comm
    allgather e on comm after compute
}
`)
	if p.Scaler == nil || *p.Scaler != (ir.Scaler{Rule: ir.ScaleMegatron, Init: 1024, Hysteresis: 2, Pos: p.Scaler.Pos}) || p.Scaler.Pos.Line != 7 {
		t.Errorf("scaler = %+v", p.Scaler)
	}
	if !p.Buckets[0].PreDivide || p.Buckets[1].PreDivide || p.Buckets[2].PreDivide {
		t.Errorf("PreDivide = %v %v %v, want true false false", p.Buckets[0].PreDivide, p.Buckets[1].PreDivide, p.Buckets[2].PreDivide)
	}
	s := p.Step
	if s[4].Kind != ir.StmtUnscale || s[4].Stream != 0 || s[4].After.Kind != ir.AfterSynced || s[4].Agree || len(s[4].Buckets) != 2 {
		t.Errorf("unscale = %+v", s[4])
	}
	if s[5].Kind != ir.StmtUnscale || !s[5].Agree || s[5].After != (ir.After{Kind: ir.AfterStream, Stream: 1}) {
		t.Errorf("unscale agree = %+v", s[5])
	}
	want := []ir.Update{
		{Optimizer: ir.SGD, LR: 1e-3},
		{Optimizer: ir.SGD, LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4},
		{Optimizer: ir.AdamW, LR: 3e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Master: true},
	}
	for i, w := range want {
		u := s[6+i]
		if u.Kind != ir.StmtUpdate || u.Update != w || u.Stream != 0 {
			t.Errorf("update %d = %+v, want %+v on compute", i, u, w)
		}
	}
	if s[6].After.Kind != ir.AfterSynced || s[8].After != (ir.After{Kind: ir.AfterStream, Stream: 1}) {
		t.Errorf("update afters: %+v, %+v", s[6].After, s[8].After)
	}
	if d := defaultUpdate(ir.AdamW); d.WeightDecay != 0.01 || d.LR != 0.001 {
		t.Errorf("adamw defaults = %+v", d)
	}
	checkPositions(t, p)

	// Every rule and preset the scaler has.
	for src, want := range map[string]ir.Scaler{
		"scaler static 1024":                      {Rule: ir.ScaleStatic, Init: 1024},
		"scaler static init 2":                    {Rule: ir.ScaleStatic, Init: 2},
		"scaler static":                           {Rule: ir.ScaleStatic},
		"scaler torch":                            {Rule: ir.ScaleTorch},
		"scaler megatron init 65536 hysteresis 2": {Rule: ir.ScaleMegatron, Init: 65536, Hysteresis: 2},
		"scaler deepspeed growth 4 backoff 0.25 interval 500 min 1 max 2e3": {},
		"scaler deepspeed growth 4":                                         {Rule: ir.ScaleDeepSpeed, Growth: 4, Backoff: 0.25},
		"scaler deepspeed backoff 0.25":                                     {Rule: ir.ScaleDeepSpeed, Growth: 4, Backoff: 0.25},
		"scaler dynamic init 65536 growth 2 backoff 0.5 interval 2000 hysteresis 1 min 1 max 16777216": {
			Rule: ir.ScaleTorch, Init: 65536, Growth: 2, Backoff: 0.5, Interval: 2000, Hysteresis: 1, Min: 1, Max: 16777216},
	} {
		p, diags := Check("plan.sync", []byte(src+"\n"))
		if want == (ir.Scaler{}) {
			// max 2e3 is not a power of two.
			if p != nil || len(diags) != 1 || diags[0].Message != "max `2e3` is not a power of two" || diags[0].Hint[:21] != "did you mean `2048`? " {
				t.Errorf("%s: %v", src, diags)
			}
			continue
		}
		if p == nil || p.Scaler == nil {
			t.Errorf("%s: %v", src, diags)
			continue
		}
		got := *p.Scaler
		got.Pos = ir.Pos{}
		if got != want {
			t.Errorf("%s: scaler %+v, want %+v", src, got, want)
		}
	}
}

// TestTrainHints checks the hints of the training step's errors.
func TestTrainHints(t *testing.T) {
	const g = "tensor a f32[8]\nbucket g { a }\n"
	const synced = g + "step {\n backward 1ms\n allreduce g after ready\n"
	checkHints(t, []hintCase{
		{g + "step { backward 1ms; allreduce g after ready; update g adam }\n", "unknown optimizer `adam`", "syncgen's Adam is adamw (decoupled weight decay): write adamw"},
		{g + "step { backward 1ms; allreduce g after ready; update g sgdd }\n", "unknown optimizer `sgdd`", "did you mean `sgd`? optimizers are sgd and adamw"},
		{synced + " update g sgd wd 0.1\n}\n", "unknown setting `wd`", "did you mean `weight_decay`?"},
		{synced + " update g adamw momentum 0.9\n}\n", "adamw takes no `momentum`", "adamw's settings are lr, beta1, beta2, eps and weight_decay"},
		{synced + " update g sgd eps 1e-8\n}\n", "sgd takes no `eps`", "sgd's settings are lr, momentum and weight_decay"},
		{synced + " update g sgd lr 0x10\n}\n", "lr must be a number, not `0x10`", "numbers are decimal, with an optional exponent"},
		{synced + " update g sgd lr -1\n}\n", "lr must be positive, not `-1`", "e.g. `lr 1e-3`"},
		{synced + " update g adamw beta2 1.0\n}\n", "beta2 must be at least 0 and below 1, not `1.0`", "e.g. `beta2 0.999`"},
		{synced + " update g adamw master bf16\n}\n", "master parameters are f32, not `bf16`", "write `master f32`"},
		{synced + " update g adamw after ready\n}\n", "update takes no `after ready`", "write `after synced`"},
		{synced + " update g adamw after synced divide before\n}\n", "`divide` is not an option of update", "update takes its optimizer's settings"},
		{g + "step { backward 1ms; update g sgd }\n", "bucket `g` is updated before its gradients are synchronised", "put an allreduce or reducescatter of it before the update"},
		{g + "step { backward 1ms; broadcast g from 0 after ready; update g sgd after synced }\n", "bucket `g` is updated before its gradients are synchronised", "put an allreduce or reducescatter"},
		{g + "step { backward 1ms; allreduce g after ready; update g sgd; update g sgd }\n", "bucket `g` is updated twice in one step (first on line 3)", "one optimizer step a step"},
		{"scaler dynamic\n" + synced + " update g sgd after synced\n}\n", "bucket `g` is updated before it is unscaled", "its gradients still carry the loss scale; unscale it first: `unscale g after synced`"},
		{synced + " unscale g\n}\n", "unscale without a loss scaler", "declare `scaler dynamic` (or `scaler static 1024`)"},
		{synced + " unscale g\n unscale g\n}\n", "unscale without a loss scaler (2 unscales; first here)", "declare `scaler dynamic`"},
		{"scaler dynamic\n" + synced + " unscale g after synced\n update g sgd after synced\n unscale g after synced\n}\n", "unscale after the update on line 8", "an overflow found here could not skip the update already done"},
		{"tensor a f32[8]\ntensor b f16[8]\nbucket g { a, b } wire f32\nstep { backward 1ms; allreduce g after ready; update g adamw after synced }\n",
			"updated bucket `g` holds tensors of two dtypes: f16 (`b`) and f32 (`a`)", "add `master f32`"},
		{"tensor a i32[8]\nbucket g { a }\nstep { backward 1ms; allreduce g after ready; update g sgd after synced }\n", "update of integer bucket `g` (i32)", "an optimizer needs float gradients"},
		{synced + " allreduce g after synced\n}\n", "allreduce takes no `after synced`: it is for update and unscale", "a collective waits with `after ready` or `after STREAM`"},
		{synced + " update sgd lr 0.1\n}\n", "update needs a target before `sgd`", "targets are buckets, pieces like grads[0], tensors and patterns"},
		{synced + " update g on comm\n}\n", "update needs an optimizer", "e.g. `update grads adamw lr 1e-3`"},
		{"stream compute\nstream comm\n" + synced + " update g sgd on compute\n}\n", "data race on bucket `g`: this update on stream `compute` is not ordered after the allreduce on stream `comm` (line 7)", "add `after synced` (or `after comm`)"},
		{g + "bucket b { * } divide halfway\n", "divide is before or after, not `halfway`", "`divide before` divides each rank's input"},
		{g + "bucket b { * } divide before divide after\n", "duplicate option `divide` (first on line 3)", "remove one of them"},
		// The scaler.
		{"scaler dynamic 1024\n", "a bare scale is for `scaler static`", "`init 1024`"},
		{"scaler static 1024 growth 2\n", "a static scaler takes no `growth`", "`scaler dynamic` adapts it"},
		{"scaler static 1024 init 2\n", "duplicate option `init` (`scaler static 1024` gives it already)", "remove one of them"},
		{"scaler dynamic min 1024 max 512\n", "torch's default init 65536 is above max 512", "never goes above max"},
		{"scaler dynamic init 1 min 2\n", "min 2 is above init 1", "never goes below min"},
		{"scaler torch init 65536 max 1024\n", "init 65536 is above max 1024", "never goes above max"},
		{"scaler megatron max 65536\n", "megatron's default init 4294967296 is above max 65536", "never goes above max"},
		{"scaler dynamic hysteresis 2\n", "torch has no hysteresis", "PyTorch backs off at every overflow"},
		{"scaler deepspeed growth 4 backoff 0.5\n", "deepspeed's backoff is 1/growth, not 0.5", "write backoff 0.25"},
		{"scaler dynamic window 1000\n", "unknown scaler option `window`", "did you mean `interval`?"},
		{"scaler dynamic grwth 2\n", "unknown scaler option `grwth`", "did you mean `growth`?"},
		{"scaler dynamic interval\n", "`interval` needs a value", "e.g. `interval 2000`"},
		{"scaler dynamic init 4 5\n", "`5` follows no option", "NAME VALUE"},
		{"scaler static 4 init 8\n", "duplicate option `init` (`scaler static 4` gives it already)", "remove one of them"},
		{"scaler fixed 1024\n", "unknown scaler rule `fixed`", "did you mean `static`?"},
		{"scaler megatorn\n", "unknown scaler rule `megatorn`", "did you mean `megatron`?"},
		{"scaler adaptive\n", "unknown scaler rule `adaptive`", "rules are static, dynamic (= torch), torch, megatron and deepspeed"},
		{"scaler dynamic backoff 0.3\n", "backoff `0.3` is not a power of two", "did you mean `0.25`?"},
		{"scaler dynamic backoff 0.9\n", "backoff `0.9` is not a power of two", "did you mean `0.5`?"},
		{"scaler dynamic growth 1.2\n", "growth `1.2` is not a power of two", "did you mean `2`?"},
		{"scaler dynamic growth 1\n", "growth must be above 1, not `1`", "e.g. `growth 2`"},
		{"scaler dynamic init 0\n", "init must be at least 1, not `0`", "lose their low bits"},
		{"scaler dynamic min 0.5\n", "min must be at least 1, not `0.5`", "e.g. `min 1`"},
		{"scaler dynamic init 340282366920938463463374607431768211456\n", "init `340282366920938463463374607431768211456` is out of float32's range", "from 2^-126 to 2^127"},
		// Beyond float32's powers of two: out of range, whether a power of
		// two or not, and no suggestion leaves the range.
		{"scaler dynamic backoff 1e-40\n", "backoff `1e-40` is out of float32's range", "from 2^-126 to 2^127"},
		{"scaler dynamic init 1e40\n", "init `1e40` is out of float32's range", "from 2^-126 to 2^127"},
		{"scaler dynamic init 3e38\n", "init `3e38` is not a power of two", "did you mean `170141183460469230000000000000000000000`?"},
		{"scaler dynamic interval 1.5\n", "interval must be an integer, not `1.5`", "interval"},
		{"scaler dynamic hysteresis 0\n", "hysteresis must be at least 1, not 0", "a whole number of at least 1"},
		{"scaler dynamic max 1e3\n", "max `1e3` is not a power of two", "did you mean `1024`?"},
	})
}

// TestTrainKeywords checks that only update, unscale and scaler became
// reserved: the settings, `synced`, `agree`, `master`, `divide` and
// `before` still name tensors and buckets.
func TestTrainKeywords(t *testing.T) {
	p := mustCheck(t, `
tensor lr f32[1]
tensor synced.weight f32[1]
tensor agree f32[1]
tensor master f32[1]
tensor divide f32[1]
tensor before f32[1]
tensor update f32[1]
bucket momentum { lr, synced.*, agree, master, divide, before, update }
step {
    backward 1ms
    allreduce momentum after ready
    allreduce divide after ready
    update momentum sgd lr 0.1 after synced
}
`)
	if len(p.Tensors) != 7 || len(p.Step) != 4 {
		t.Errorf("tensors %d, statements %d", len(p.Tensors), len(p.Step))
	}
	for _, w := range []string{"update", "unscale", "scaler"} {
		if _, diags := Check("plan.sync", []byte("tensor a f32[1]\nstep { allreduce "+w+" }\n")); !diags.HasErrors() {
			t.Errorf("%s is not reserved", w)
		}
	}
}

// TestParseTrainConstructs parses the training step's constructs.
func TestParseTrainConstructs(t *testing.T) {
	f := mustParse(t, `scaler megatron init 65536 hysteresis 2
scaler static 1024
bucket g { * } wire f16 divide before
step {
    unscale g, h[1] on compute after synced agree
    update g sgd lr 0.01 momentum 0.9 weight_decay 1e-4 on compute after synced
    update emb adamw master f32
    update g lr 1
}
`)
	sc := f.Decls[0].Scaler
	if sc.Rule.Text != "megatron" || len(sc.Words) != 4 || sc.Words[0].Text != "init" || sc.Words[3].Text != "2" {
		t.Errorf("scaler parsed as %+v", sc)
	}
	if st := f.Decls[1].Scaler; st.Rule.Text != "static" || len(st.Words) != 1 || st.Words[0].Text != "1024" {
		t.Errorf("static scaler parsed as %+v", st)
	}
	if b := f.Decls[2].Bucket; len(b.Options) != 2 || b.Options[1].Key != "divide" || b.Options[1].Value.Text != "before" {
		t.Errorf("bucket parsed as %+v", b)
	}
	body := stmts(f.Decls[3].Block.Body)
	un := body[0].Unscale
	if un == nil || len(un.Targets) != 2 || len(un.Options) != 3 || un.Options[2].Key != "agree" || un.Options[2].Value != nil {
		t.Errorf("unscale parsed as %+v", body[0])
	}
	up := body[1].Update
	if up == nil || up.Optimizer.Text != "sgd" || len(up.Options) != 5 || up.Options[2].Key != "weight_decay" {
		t.Errorf("update parsed as %+v", body[1])
	}
	if up := body[2].Update; up.Optimizer.Text != "adamw" || up.Options[0].Key != "master" || up.Options[0].Value.Text != "f32" {
		t.Errorf("update master parsed as %+v", up)
	}
	if up := body[3].Update; up.Optimizer != nil || len(up.Options) != 1 || up.Options[0].Key != "lr" {
		t.Errorf("update without optimizer parsed as %+v", up)
	}
	// `divide after`: `after` is the value there, not an option.
	f = mustParse(t, "bucket g { * } divide after order declared\n")
	if o := f.Decls[0].Bucket.Options; len(o) != 2 || o[0].Key != "divide" || o[0].Value.Text != "after" {
		t.Errorf("divide after parsed as %+v", o)
	}
}

// TestFormatTrain formats the training step's constructs canonically.
func TestFormatTrain(t *testing.T) {
	src := `scaler   dynamic  max 16777216 init 65536   growth 2
bucket g { * }   divide before  wire f16 cap 1MiB
step {
  unscale g   after synced agree on compute
  update g sgd after synced on compute weight_decay 1e-4 master f32 lr 0.01 momentum 0.9
  update e adamw eps 1e-8 beta2 0.999 beta1 0.9 lr 1e-3
}
scaler static 1024
`
	want := `scaler dynamic init 65536 growth 2 max 16777216
bucket g { * } cap 1MiB wire f16 divide before
step {
    unscale g agree on compute after synced
    update g sgd lr 0.01 momentum 0.9 weight_decay 1e-4 master f32 on compute after synced
    update e adamw lr 1e-3 beta1 0.9 beta2 0.999 eps 1e-8
}
scaler static 1024
`
	got := mustFormat(t, src)
	if got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
	if again := mustFormat(t, got); again != got {
		t.Errorf("Format is not idempotent:\n%s\nthen:\n%s", got, again)
	}
}

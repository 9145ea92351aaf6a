package codegen

import (
	"fmt"
	"testing"

	"github.com/syncgen/syncgen/ir"
	rt "github.com/syncgen/syncgen/runtime"
)

// The compiler's dtypes (package ir) and the runtime's (rt.DType) are one
// table written twice, because the compiler does not import the runtime:
// they must agree on every dtype's name and size, and the constant that
// generated code names (rt.F32) must be the runtime's dtype of that name.
func TestDTypesAgreeWithRuntime(t *testing.T) {
	constants := map[string]rt.DType{"F64": rt.F64, "F32": rt.F32, "F16": rt.F16, "BF16": rt.BF16,
		"I64": rt.I64, "I32": rt.I32, "I8": rt.I8, "U8": rt.U8}
	n := 0
	for d := ir.F64; d.Size() > 0; d++ {
		n++
		r, ok := constants[dtypeName(d)]
		if !ok {
			t.Errorf("%s: generated code names rt.%s, which the runtime lacks", d, dtypeName(d))
			continue
		}
		if r.String() != d.String() || r.Size() != d.Size() || r.IsFloat() != d.IsFloat() {
			t.Errorf("%s (%d bytes, float %v) is rt.%s, which is %s (%d bytes, float %v)",
				d, d.Size(), d.IsFloat(), dtypeName(d), r, r.Size(), r.IsFloat())
		}
	}
	if n != len(constants) || rt.DType(n+1).Valid() {
		t.Errorf("the compiler has %d dtypes, the runtime %d constants and valid dtypes up to %d", n, len(constants), n)
	}
}

// The reduction operators and stream priorities are written twice as well:
// the constant generated code names (rt.Avg, rt.PriorityHigh) must be the
// runtime's operator or priority of the same keyword.
func TestOpsAndPrioritiesAgreeWithRuntime(t *testing.T) {
	ops := map[string]rt.RedOp{"NoOp": rt.NoOp, "Sum": rt.Sum, "Avg": rt.Avg, "Min": rt.Min, "Max": rt.Max, "Prod": rt.Prod, "WAvg": rt.WAvg}
	for o := ir.NoOp; o <= ir.WAvg; o++ {
		r, ok := ops[redOpName(o)]
		if !ok || r.String() != o.String() {
			t.Errorf("%s: generated code names rt.%s, which is %v (known: %v)", o, redOpName(o), r, ok)
		}
	}
	prios := map[string]rt.Priority{"PriorityDefault": rt.PriorityDefault, "PriorityHigh": rt.PriorityHigh, "PriorityLow": rt.PriorityLow}
	for p := ir.PriorityDefault; p <= ir.PriorityLow; p++ {
		r, ok := prios[priorityName(p)]
		if !ok || r.String() != p.String() {
			t.Errorf("%s: generated code names rt.%s, which is %v (known: %v)", p, priorityName(p), r, ok)
		}
	}
}

// The optimizers and the loss scaler's rules are written twice too: the
// constant generated code names (rt.AdamW, rt.ScaleTorch) must be the
// runtime's optimizer or rule of the same keyword and number (the runtime
// numbers from NoKind and NoRule, 0, as the IR leaves 0 invalid).
func TestOptimizersAndScalerRulesAgreeWithRuntime(t *testing.T) {
	kinds := map[string]rt.Optimizer{"SGD": {Kind: rt.SGD}, "AdamW": {Kind: rt.AdamW}}
	n := 0
	for o := ir.SGD; o.String() != fmt.Sprintf("optimizer(%d)", o); o++ {
		n++
		r, ok := kinds[optimizerName(o)]
		if !ok || r.Kind.String() != o.String() || uint8(r.Kind) != uint8(o) {
			t.Errorf("%s (%d): generated code names rt.%s, which is %v (%d) (known: %v)", o, o, optimizerName(o), r.Kind, r.Kind, ok)
		}
	}
	if n != len(kinds) {
		t.Errorf("the compiler has %d optimizers, generated code names %d", n, len(kinds))
	}
	rules := map[string]rt.Scaler{"ScaleStatic": {Rule: rt.ScaleStatic}, "ScaleTorch": {Rule: rt.ScaleTorch},
		"ScaleMegatron": {Rule: rt.ScaleMegatron}, "ScaleDeepSpeed": {Rule: rt.ScaleDeepSpeed}}
	n = 0
	for r := ir.ScaleStatic; r.String() != fmt.Sprintf("rule(%d)", r); r++ {
		n++
		s, ok := rules[scalerRuleName(r)]
		if !ok || uint8(s.Rule) != uint8(r) {
			t.Errorf("%s (%d): generated code names rt.%s, which is rule %d (known: %v)", r, r, scalerRuleName(r), s.Rule, ok)
		}
	}
	if n != len(rules) {
		t.Errorf("the compiler has %d scaler rules, generated code names %d", n, len(rules))
	}
}

package dsl

import (
	"fmt"
	"testing"

	rt "github.com/syncgen/syncgen/runtime"
)

// The checker keeps a copy of the runtime's scaler presets (so that it can
// check min <= init <= max with the presets filled in): the copy must stay
// what the runtime has. (The rules' numbers are the same: codegen's
// contract test checks them.)
func TestScalerPresetsAreTheRuntimes(t *testing.T) {
	for rule, want := range scalerPresets {
		got := rt.Scaler{Rule: rt.ScaleRule(rule)}.WithDefaults()
		if got.Init != want.Init || got.Growth != want.Growth || got.Backoff != want.Backoff || got.Interval != want.Interval ||
			got.Hysteresis != want.Hysteresis || got.Min != want.Min || got.Max != want.Max {
			t.Errorf("%s: the checker's preset %+v, the runtime's %+v", rule, want, got)
		}
	}
}

// The checker and the runtime agree on which scalers are valid: a plan
// that checks starts, and one that the runtime would refuse does not
// check.
func TestScalerValidationAgreesWithRuntime(t *testing.T) {
	cases := []struct {
		decl string
		spec rt.Scaler
	}{
		{"scaler dynamic", rt.Scaler{Rule: rt.ScaleTorch}},
		{"scaler torch init 1024 interval 8", rt.Scaler{Rule: rt.ScaleTorch, Init: 1024, Interval: 8}},
		{"scaler megatron", rt.Scaler{Rule: rt.ScaleMegatron}},
		{"scaler deepspeed init 256 growth 4 backoff 0.25", rt.Scaler{Rule: rt.ScaleDeepSpeed, Init: 256, Growth: 4, Backoff: 0.25}},
		{"scaler static 1024", rt.Scaler{Rule: rt.ScaleStatic, Init: 1024}},
		{"scaler static", rt.Scaler{Rule: rt.ScaleStatic}},
		{"scaler megatron init 1024 min 1 max 4096 hysteresis 3", rt.Scaler{Rule: rt.ScaleMegatron, Init: 1024, Min: 1, Max: 4096, Hysteresis: 3}},
		{"scaler torch hysteresis 2", rt.Scaler{Rule: rt.ScaleTorch, Hysteresis: 2}},
		{"scaler deepspeed growth 4 backoff 0.5", rt.Scaler{Rule: rt.ScaleDeepSpeed, Growth: 4, Backoff: 0.5}},
		{"scaler deepspeed growth 4", rt.Scaler{Rule: rt.ScaleDeepSpeed, Growth: 4}},
		{"scaler deepspeed backoff 0.25", rt.Scaler{Rule: rt.ScaleDeepSpeed, Backoff: 0.25}},
		{"scaler megatron max 65536", rt.Scaler{Rule: rt.ScaleMegatron, Max: 65536}},
		{"scaler torch init 1000", rt.Scaler{Rule: rt.ScaleTorch, Init: 1000}},
		{"scaler torch min 0.5", rt.Scaler{Rule: rt.ScaleTorch, Min: 0.5}},
		{"scaler torch growth 1", rt.Scaler{Rule: rt.ScaleTorch, Growth: 1}},
		{"scaler torch backoff 2", rt.Scaler{Rule: rt.ScaleTorch, Backoff: 2}},
		{"scaler dynamic init 64 min 128", rt.Scaler{Rule: rt.ScaleTorch, Init: 64, Min: 128}},
	}
	for _, c := range cases {
		src := fmt.Sprintf("tensor w f32[4]\nstream compute\nstream comm\n%s\nbucket g { w }\nstep {\n backward 1ms\n allreduce g after ready\n unscale g after comm\n}\n", c.decl)
		errs := checkErrors(src)
		runtimeErr := c.spec.WithDefaults().Validate()
		if (len(errs) == 0) != (runtimeErr == nil) {
			t.Errorf("%q: the checker says %q, the runtime %v", c.decl, errs, runtimeErr)
		}
	}
}

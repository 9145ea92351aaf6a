package scaler

import (
	"errors"
	"fmt"
	"math"

	"github.com/syncgen/syncgen/runtime/internal/text"
)

var ruleNames = [...]string{"none", "static", "torch", "megatron", "deepspeed"}

// String returns the rule's keyword ("torch").
func (r Rule) String() string {
	if int(r) < len(ruleNames) {
		return ruleNames[r]
	}
	return fmt.Sprintf("rule(%d)", r)
}

// MaxScale is the largest scale: the largest power of two a float32
// holds. The libraries keep the scale in float32 (PyTorch and Megatron in
// a float32 tensor, DeepSpeed multiplies a float32 loss by it), so no rule
// grows the scale past it.
const MaxScale = 0x1p127

// Preset returns the rule's defaults as its library has them, with Min 1
// where the library has no minimum, and Max 0 (no bound but MaxScale):
// none of the libraries bounds the scale from above. Preset(NoRule) is the
// zero Spec.
func Preset(r Rule) Spec {
	switch r {
	case Static:
		// A static scale only needs a first scale; the dynamic rules'
		// fields stay zero because it never changes.
		return Spec{Rule: Static, Init: 65536, Min: 1}
	case Torch:
		// pytorch/pytorch torch/amp/grad_scaler.py, GradScaler.__init__:
		// init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
		// growth_interval=2000. PyTorch has no hysteresis (1) and no
		// minimum; Min 1 here because a scale below 1 shifts the scaled
		// gradients down and loses their low bits, so they would no longer
		// be exact.
		return Spec{Rule: Torch, Init: 65536, Growth: 2, Backoff: 0.5, Interval: 2000, Hysteresis: 1, Min: 1}
	case Megatron:
		// NVIDIA/Megatron-LM megatron/training/arguments.py:
		// --initial-loss-scale 2**32, --min-loss-scale 1.0,
		// --loss-scale-window 1000, --hysteresis 2 (the same defaults as
		// megatron/core/optimizer/optimizer_config.py); growth 2.0 and
		// backoff 0.5 are fixed where megatron/core/optimizer/__init__.py
		// builds its DynamicGradScaler.
		return Spec{Rule: Megatron, Init: 1 << 32, Growth: 2, Backoff: 0.5, Interval: 1000, Hysteresis: 2, Min: 1}
	case DeepSpeed:
		// microsoft/DeepSpeed deepspeed/runtime/constants.py, the fp16
		// config: initial_scale_power 16, loss_scale_window 1000,
		// hysteresis 2, consecutive_hysteresis false, min_loss_scale 1;
		// scale_factor 2. is DynamicLossScaler's own default in
		// deepspeed/runtime/fp16/loss_scaler.py (the config cannot set it).
		return Spec{Rule: DeepSpeed, Init: 65536, Growth: 2, Backoff: 0.5, Interval: 1000, Hysteresis: 2, Min: 1}
	}
	return Spec{Rule: r}
}

// WithDefaults returns s with every zero field taken from Preset(s.Rule),
// so that a plan gives only what it changes; for DeepSpeed, a growth or a
// backoff given alone sets the other to its inverse.
func (s Spec) WithDefaults() Spec {
	p := Preset(s.Rule)
	// DeepSpeed has one factor: the one given sets the other (Growth is
	// a power of two, so its inverse is exact).
	if s.Rule == DeepSpeed {
		switch {
		case s.Growth != 0 && s.Backoff == 0:
			s.Backoff = 1 / s.Growth
		case s.Backoff != 0 && s.Growth == 0:
			s.Growth = 1 / s.Backoff
		}
	}
	if s.Init == 0 {
		s.Init = p.Init
	}
	if s.Growth == 0 {
		s.Growth = p.Growth
	}
	if s.Backoff == 0 {
		s.Backoff = p.Backoff
	}
	if s.Interval == 0 {
		s.Interval = p.Interval
	}
	if s.Hysteresis == 0 {
		s.Hysteresis = p.Hysteresis
	}
	if s.Min == 0 {
		s.Min = p.Min
	}
	if s.Max == 0 {
		s.Max = p.Max
	}
	return s
}

// whyPow2 is why every scale and factor must be a power of two.
const whyPow2 = "scaled gradients stay exact only with powers of two"

// Validate reports the first thing wrong with s, saying what to write
// instead. Every scale (Init, Min, and Max when not 0) must be a power of
// two no larger than MaxScale, with 1 <= Min <= Init <= Max; Growth must be
// a power of two above 1 and Backoff one below 1; Interval and Hysteresis
// must be at least 1. Torch has no hysteresis (it must be 1), DeepSpeed
// has one factor (Backoff must be 1/Growth), and Static never changes its
// scale (Growth, Backoff, Interval and Hysteresis must be 0).
func (s Spec) Validate() error {
	if s.Rule == NoRule || int(s.Rule) >= len(ruleNames) {
		return fmt.Errorf("scaler rule %s is not a rule: use static, torch, megatron or deepspeed", s.Rule)
	}
	p := Preset(s.Rule)
	if err := checkScale("init", s.Init, p.Init); err != nil {
		return err
	}
	if err := checkScale("min", s.Min, p.Min); err != nil {
		return err
	}
	if s.Min < 1 {
		return fmt.Errorf("min %s is below 1: a scale below 1 shifts the scaled gradients down and loses their low bits; use 1", text.Num(s.Min))
	}
	if s.Min > s.Init {
		return fmt.Errorf("min %s is above init %s: the scale starts at init and never goes below min; use min %s or less", text.Num(s.Min), text.Num(s.Init), text.Num(s.Init))
	}
	if s.Max != 0 {
		if err := checkScale("max", s.Max, s.Init); err != nil {
			return err
		}
		if s.Init > s.Max {
			return fmt.Errorf("init %s is above max %s: the scale never goes above max; use init %s or less, or max %s or more", text.Num(s.Init), text.Num(s.Max), text.Num(s.Max), text.Num(s.Init))
		}
	}
	if s.Rule == Static {
		// The static scale never changes, so a dynamic setting is a
		// mistake (most likely the wrong rule).
		if s.Growth != 0 || s.Backoff != 0 || s.Interval != 0 || s.Hysteresis != 0 {
			return fmt.Errorf("static scale has growth %s, backoff %s, interval %d, hysteresis %d: a static scale never changes; leave them out, or use torch, megatron or deepspeed",
				text.Num(s.Growth), text.Num(s.Backoff), s.Interval, s.Hysteresis)
		}
		return nil
	}
	if !isPow2(s.Growth) || s.Growth <= 1 {
		use := p.Growth
		if isFinitePositive(s.Growth) && nearestPow2(s.Growth) > 1 {
			use = nearestPow2(s.Growth)
		}
		if isFinitePositive(s.Growth) && s.Growth <= 1 {
			return fmt.Errorf("growth %s is not above 1: the scale would never grow; use %s", text.Num(s.Growth), text.Num(use))
		}
		return fmt.Errorf("growth %s is not a power of two: %s; use %s", text.Num(s.Growth), whyPow2, text.Num(use))
	}
	if !isPow2(s.Backoff) || s.Backoff >= 1 {
		use := p.Backoff
		if isFinitePositive(s.Backoff) && nearestPow2(s.Backoff) < 1 {
			use = nearestPow2(s.Backoff)
		}
		if isFinitePositive(s.Backoff) && s.Backoff >= 1 {
			return fmt.Errorf("backoff %s is not below 1: the scale would never back off; use %s", text.Num(s.Backoff), text.Num(use))
		}
		return fmt.Errorf("backoff %s is not a power of two in (0, 1): %s; use %s", text.Num(s.Backoff), whyPow2, text.Num(use))
	}
	if s.Interval < 1 {
		return fmt.Errorf("interval %d is below 1: it counts the clean steps before the scale grows; use %d", s.Interval, p.Interval)
	}
	if s.Hysteresis < 1 {
		return fmt.Errorf("hysteresis %d is below 1: it counts the overflows before the scale backs off; use %d", s.Hysteresis, p.Hysteresis)
	}
	if s.Rule == Torch && s.Hysteresis != 1 {
		return fmt.Errorf("torch has no hysteresis, so hysteresis %d would be ignored: PyTorch backs off at every overflow; use 1, or megatron or deepspeed for hysteresis", s.Hysteresis)
	}
	if s.Rule == DeepSpeed && s.Growth*s.Backoff != 1 {
		return fmt.Errorf("deepspeed backoff %s is not 1/growth: DeepSpeed has one scale_factor, it multiplies by it to grow and divides by it to back off; use backoff %s", text.Num(s.Backoff), text.Num(1/s.Growth))
	}
	return nil
}

// checkScale reports a scale that is not a power of two in [1, MaxScale]
// (1 is checked by the callers that need it); alt is what to suggest when
// x has no nearest power of two.
func checkScale(name string, x, alt float64) error {
	if !isPow2(x) {
		use := alt
		if isFinitePositive(x) {
			use = min(nearestPow2(x), MaxScale)
		}
		return fmt.Errorf("%s %s is not a power of two: %s; use %s", name, text.Num(x), whyPow2, text.Num(use))
	}
	if x > MaxScale {
		return fmt.Errorf("%s %s is above 2^127, the largest power of two a float32 holds: the libraries keep the scale in float32; use %s or less", name, text.Num(x), text.Num(MaxScale))
	}
	return nil
}

// isPow2 reports whether x is a (positive, finite) power of two.
func isPow2(x float64) bool {
	if !isFinitePositive(x) {
		return false
	}
	frac, _ := math.Frexp(x)
	return frac == 0.5
}

func isFinitePositive(x float64) bool {
	return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x)
}

// nearestPow2 returns the power of two nearest to x > 0 (the larger on a
// tie).
func nearestPow2(x float64) float64 {
	_, exp := math.Frexp(x) // x = frac * 2^exp, frac in [0.5, 1)
	lo := math.Ldexp(1, exp-1)
	hi := math.Ldexp(1, exp)
	if x-lo < hi-x {
		return lo
	}
	return hi
}

// State is everything a Scaler changes as it runs, as a checkpoint saves
// it. A field a rule does not use stays at its zero value.
type State struct {
	// Scale is the scale of the next step.
	Scale float64 `json:"scale"`
	// GrowthTracker counts the clean steps since the scale last grew or
	// backed off (Torch's and Megatron's _growth_tracker).
	GrowthTracker int `json:"growth_tracker"`
	// HysteresisTracker counts down the overflows left before the scale
	// backs off (Megatron's _hysteresis_tracker, which goes below 0;
	// DeepSpeed's cur_hysteresis, which stays at 1 or above).
	HysteresisTracker int `json:"hysteresis_tracker"`
	// Iter is the number of steps done (DeepSpeed's cur_iter).
	Iter int64 `json:"iter"`
	// LastOverflowIter is the last step that overflowed, -1 for none
	// (DeepSpeed's last_overflow_iter).
	LastOverflowIter int64 `json:"last_overflow_iter"`
}

// Scaler runs one rule: Scale is the scale of the current step, and
// Update, called once after every step, moves to the next step's scale.
type Scaler struct {
	spec Spec
	st   State
}

// New returns a scaler at its first step. It fills s's zero fields from
// the rule's Preset, and panics if s is then not valid: the plan
// validates its scaler before the run.
func New(s Spec) *Scaler {
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		panic("scaler.New: " + err.Error())
	}
	c := &Scaler{spec: s}
	c.st = initial(s)
	return c
}

// initial is the state of a scaler before its first step, as each library
// constructs it.
func initial(s Spec) State {
	st := State{Scale: s.Init}
	switch s.Rule {
	case Megatron:
		// DynamicGradScaler.__init__: _growth_tracker = 0,
		// _hysteresis_tracker = hysteresis.
		st.HysteresisTracker = s.Hysteresis
	case DeepSpeed:
		// DynamicLossScaler.__init__: cur_iter = 0, last_overflow_iter = -1,
		// cur_hysteresis = delayed_shift.
		st.HysteresisTracker = s.Hysteresis
		st.LastOverflowIter = -1
	}
	return st
}

// Spec returns the scaler's Spec, with its defaults filled in.
func (c *Scaler) Spec() Spec { return c.spec }

// Scale returns the scale of the current step.
func (c *Scaler) Scale() float64 { return c.st.Scale }

// State returns a copy of the scaler's state.
func (c *Scaler) State() State { return c.st }

// Restore sets the scaler's state to st, as State gave it from a scaler of
// the same Spec; the scaler then continues as that one would have. It
// returns an error, and leaves the scaler as it was, if st is not a state
// the rule can reach: a scale that is not a power of two in [Min, Max], or
// a tracker out of its range.
func (c *Scaler) Restore(st State) error {
	if err := c.check(st); err != nil {
		return fmt.Errorf("restoring the %s scaler: %w", c.spec.Rule, err)
	}
	c.st = st
	return nil
}

// check reports what in st no run of c's rule can reach.
func (c *Scaler) check(st State) error {
	s := c.spec
	hi := MaxScale
	if s.Max != 0 {
		hi = s.Max
	}
	if !isPow2(st.Scale) || st.Scale < s.Min || st.Scale > hi {
		return fmt.Errorf("scale %s is not a power of two in [%s, %s]", text.Num(st.Scale), text.Num(s.Min), text.Num(hi))
	}
	switch s.Rule {
	case Static:
		if st != (State{Scale: st.Scale}) {
			return errors.New("a static scaler keeps only its scale")
		}
	case Torch:
		if st.GrowthTracker < 0 || st.GrowthTracker >= s.Interval {
			return fmt.Errorf("growth tracker %d is not in [0, %d)", st.GrowthTracker, s.Interval)
		}
		if st.HysteresisTracker != 0 || st.Iter != 0 || st.LastOverflowIter != 0 {
			return errors.New("a torch scaler keeps only its scale and growth tracker")
		}
	case Megatron:
		if st.GrowthTracker < 0 || st.GrowthTracker >= s.Interval {
			return fmt.Errorf("growth tracker %d is not in [0, %d)", st.GrowthTracker, s.Interval)
		}
		if st.HysteresisTracker > s.Hysteresis {
			return fmt.Errorf("hysteresis tracker %d is above hysteresis %d", st.HysteresisTracker, s.Hysteresis)
		}
		if st.Iter != 0 || st.LastOverflowIter != 0 {
			return errors.New("a megatron scaler keeps only its scale and growth and hysteresis trackers")
		}
	case DeepSpeed:
		if st.HysteresisTracker < 1 || st.HysteresisTracker > s.Hysteresis {
			return fmt.Errorf("hysteresis tracker %d is not in [1, %d]", st.HysteresisTracker, s.Hysteresis)
		}
		if st.Iter < 0 || st.LastOverflowIter < -1 || st.LastOverflowIter >= st.Iter {
			return fmt.Errorf("last overflow at %d is not before iteration %d", st.LastOverflowIter, st.Iter)
		}
		if st.GrowthTracker != 0 {
			return errors.New("a deepspeed scaler keeps no growth tracker")
		}
	}
	return nil
}

// Update moves to the next step's scale; overflow is whether the step just
// done found an inf or NaN in its gradients (and so was skipped). It is
// called once after every step.
func (c *Scaler) Update(overflow bool) {
	switch c.spec.Rule {
	case Static:
		// The scale never changes; the step is skipped all the same.
	case Torch:
		c.updateTorch(overflow)
	case Megatron:
		c.updateMegatron(overflow)
	case DeepSpeed:
		c.updateDeepSpeed(overflow)
	}
}

// updateTorch is PyTorch's _amp_update_scale_, as GradScaler.update calls
// it: pytorch/pytorch aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp
// (_amp_update_scale_cpu_kernel) and aten/src/ATen/native/cuda/AmpKernels.cu
// (amp_update_scale_cuda_kernel), which agree. The one difference: PyTorch
// has no Min or Max, and here the scale stays within them.
func (c *Scaler) updateTorch(overflow bool) {
	s, st := c.spec, &c.st
	if overflow {
		// current_scale *= backoff_factor; growth_tracker = 0.
		st.Scale = max(st.Scale*s.Backoff, s.Min)
		st.GrowthTracker = 0
		return
	}
	// A clean step: growth_tracker is incremented before it is compared
	// with growth_interval.
	successful := st.GrowthTracker + 1
	if successful == s.Interval {
		// The scale grows only if the result is finite in float32; the
		// tracker restarts either way.
		st.Scale = c.grow(st.Scale)
		st.GrowthTracker = 0
	} else {
		st.GrowthTracker = successful
	}
}

// updateMegatron is Megatron-LM's DynamicGradScaler.update(found_inf):
// NVIDIA/Megatron-LM megatron/core/optimizer/grad_scaler.py. The
// hysteresis tracker is refilled only when the scale grows, not by a clean
// step, so overflows need not be consecutive to back the scale off (the
// class's docstring says "consecutive"; its code does not), and once it is
// spent every further overflow backs off until the next growth. Megatron
// has no Max and would grow its float32 scale to inf: here the scale stays
// at or below Max and MaxScale.
func (c *Scaler) updateMegatron(overflow bool) {
	s, st := c.spec, &c.st
	if overflow {
		st.GrowthTracker = 0
		st.HysteresisTracker--
		if st.HysteresisTracker <= 0 {
			// _scale = max(_scale * backoff_factor, min_scale).
			st.Scale = max(st.Scale*s.Backoff, s.Min)
		}
		return
	}
	st.GrowthTracker++
	if st.GrowthTracker == s.Interval {
		st.GrowthTracker = 0
		st.HysteresisTracker = s.Hysteresis
		st.Scale = c.grow(st.Scale)
	}
}

// updateDeepSpeed is DeepSpeed's DynamicLossScaler.update_scale(overflow),
// the scaler of its ZeRO optimizers: microsoft/DeepSpeed
// deepspeed/runtime/fp16/loss_scaler.py, with consecutive_hysteresis false
// (the config's default; Spec cannot set it). Two differences: DeepSpeed
// raises an error on an overflow at min_scale with no hysteresis left
// (raise_error_at_min_scale, true by default), and here the scale stays
// at Min, as DeepSpeed does with raise_error_at_min_scale false; and
// DeepSpeed has no Max (its scale is a Python float), here the scale stays
// at or below Max and MaxScale.
func (c *Scaler) updateDeepSpeed(overflow bool) {
	s, st := c.spec, &c.st
	if overflow {
		if s.Hysteresis == 1 || st.HysteresisTracker == 1 {
			// next_scale = max(cur_scale / scale_factor, min_scale); the
			// hysteresis stays at 1 until the scale grows.
			st.Scale = max(st.Scale/s.Growth, s.Min)
		} else {
			st.HysteresisTracker--
		}
		st.LastOverflowIter = st.Iter
	} else {
		// The scale grows every scale_window steps counted from the last
		// overflow (or from before the first step), and the hysteresis is
		// refilled only then.
		if (st.Iter-st.LastOverflowIter)%int64(s.Interval) == 0 {
			st.HysteresisTracker = s.Hysteresis
			st.Scale = c.grow(st.Scale)
		}
	}
	st.Iter++
}

// grow returns scale*Growth, kept as it is when the product is not finite
// in float32 (PyTorch's rule, here for every rule: the scale must stay a
// float32) and clamped to Max when that is set.
func (c *Scaler) grow(scale float64) float64 {
	next := scale * c.spec.Growth
	if next > MaxScale {
		return scale
	}
	if c.spec.Max != 0 && next > c.spec.Max {
		return c.spec.Max
	}
	return next
}

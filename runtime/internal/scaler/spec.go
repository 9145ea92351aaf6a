package scaler

// Rule is a family of loss-scaling rules: how the scale reacts to an
// overflow and to clean steps.
type Rule uint8

// The rules.
const (
	NoRule Rule = iota
	// Static keeps Init for ever; overflows still skip the step.
	Static
	// Torch is PyTorch's torch.amp.GradScaler.
	Torch
	// Megatron is Megatron-LM's DynamicGradScaler.
	Megatron
	// DeepSpeed is DeepSpeed's DynamicLossScaler.
	DeepSpeed
)

// Spec is a scaler as the plan declares it. A zero field takes the rule's
// Preset value (WithDefaults); Validate says what a valid Spec is.
type Spec struct {
	Rule Rule
	// Init is the first scale.
	Init float64
	// Growth multiplies the scale after Interval clean steps; Backoff
	// multiplies it after an overflow (with Hysteresis, after that many).
	// DeepSpeed has one scale_factor: its Backoff is 1/Growth.
	Growth, Backoff float64
	// Interval is PyTorch's growth_interval, Megatron's growth_interval
	// and DeepSpeed's scale_window.
	Interval int
	// Hysteresis is Megatron's hysteresis and DeepSpeed's delayed_shift:
	// how many overflows back the scale off once; PyTorch has none (1).
	Hysteresis int
	// Min and Max bound the scale (Max 0: no bound but float32's, 2^127).
	Min, Max float64
}

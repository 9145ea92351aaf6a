// Package scaler is dynamic loss scaling as the training libraries do it:
// exact Go models of PyTorch's GradScaler (Torch), Megatron-LM's
// DynamicGradScaler (Megatron) and DeepSpeed's DynamicLossScaler
// (DeepSpeed), plus a static scale, each with its library's own defaults
// (Preset) and its order of operations, so that a run's sequence of scales
// is the one the library would have given for the same overflows.
//
// Every scale is a power of two between Min and Max (Validate sees to
// it), so multiplying a gradient by the scale, and by its inverse, is
// exact and the checker can predict every scaled gradient bit for bit.
//
// It takes a Spec (the rule and its settings, as the plan declares them)
// and, after every step, whether that step overflowed; it gives the scale
// of the next step and a State that a checkpoint can save and restore; it
// imports nothing of the runtime.
package scaler

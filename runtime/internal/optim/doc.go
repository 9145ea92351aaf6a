// Package optim is the arithmetic of the optimizer updates and of loss
// scaling: what every backend must compute, element by element, and what
// the checker computes in Go to verify it.
//
// It takes an update's settings (Spec), the number of the update being
// applied, and the loaded values of one element (gradient, parameter,
// optimizer state); it gives the new parameter and state, computed in a
// fixed order of IEEE operations, each rounded to nearest even in the
// computing precision (float32 for parameters of f32, f16 and bf16,
// float64 for f64), with no fused multiply-add. The GPU kernels
// (kernels/syncgen.cu) use the same order with the _rn intrinsics, which
// are never contracted, so the CPU backend, the GPU backend and the
// checker agree bit for bit.
//
// For the CPU backend it also runs whole updates and loss scalings over raw
// memory (UpdateBytes, ScaleBytes): it takes the operands' bytes and
// dtypes and gives them updated in place, split over the usable cores.
// Each share runs in C (sg_optim.c, through cgo) where the CPU has AVX2
// and F16C, 8 elements at a time, and in Go otherwise and for the last
// few elements; the Go loops are the reference, and the C gives their
// bytes exactly (kernels_test.go compares them, NaNs included), the
// float64 update (f64 parameters) as well; float64 loss scaling stays in
// Go.
//
// It imports only package elem, and includes elem's sg_half.h, the 16-bit
// float conversions in C.
package optim

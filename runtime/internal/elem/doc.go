// Package elem is the runtime's vocabulary of elements: the eight dtypes
// (their names, sizes and exact integer ranges), the f16 and bf16 formats
// and every cast between dtypes, the deterministic fill pattern that makes
// exact checking possible, and the element-wise loops over raw memory
// (fill, cast, the divide of avg, loads and stores) that the CPU backend
// and the checker share so that both compute exactly the same thing.
//
// It takes dtypes, raw byte slices and pattern parameters, and gives
// values and filled or converted memory. It imports nothing of the runtime.
//
// Its C header sg_half.h gives the f16 and bf16 conversions to the
// packages whose element loops run in C (mpi, optim), scalar and with
// AVX2 and F16C, rounding as the Go conversions do.
package elem

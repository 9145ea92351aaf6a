// Package costmodel predicts how long a plan's step takes: a calibrated
// cost of each collective (the Hockney alpha-beta form, piecewise where
// the library changes algorithm at a size), and a replay of the step's
// schedule against it.
//
// It takes a Profile (read from the JSON file that `syncgen calibrate`
// writes, or one of the built-in profiles of named fabrics) and a
// Schedule (the step's streams, its statements in program order with
// their dependencies, and the tensors and buckets they move). It gives
// per-collective costs, a fit of measured points into a profile's
// segments, and a Prediction: per-bucket times, step time, compute,
// communication, exposed communication and overlap, computed as the
// runtime's report computes them from measurements.
//
// The package imports nothing of the module: the compiler (syncgen
// predict and tune, from the checked IR) and the runtime (a run given
// --profile, from its recorded program) both convert to its Schedule, so
// that one implementation of the model serves both sides.
package costmodel

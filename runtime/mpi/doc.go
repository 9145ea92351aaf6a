// Package mpi is a small cgo layer over Open MPI: just what the syncgen
// runtime needs, with every return code checked and turned into an error
// carrying MPI_Error_string.
//
// Calls must never overlap: the caller serialises them (package runtime
// holds one lock around every call, whichever thread makes it), except
// Abort, which may be called at any time. Buffers passed to the
// collectives must be C memory: nonblocking collectives keep using them
// after the call returns.
//
// It also holds the element kernels the CPU backend runs in C, vectorised
// where the CPU allows: the reduction operators of the 16-bit floats
// (MPI has no such types), the division of an average (AvgDivide, and
// inside the operator at two ranks), and the casts between f32 and the
// 16-bit floats (Cast). They compute the values of package elem, the
// checker's reference, which the tests compare bit for bit (a NaN as any
// NaN); they call no MPI function, so they need no lock.
package mpi

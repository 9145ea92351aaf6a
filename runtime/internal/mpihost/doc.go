// Package mpihost owns MPI for the runtime: one goroutine, locked to its OS
// thread, initialises and finalises it, and every MPI call of the process
// holds one lock, so calls never overlap. It also chooses the Open MPI
// settings the runtime sets before MPI_Init.
//
// It takes the environment (SYNCGEN_MPI_THREAD, SYNCGEN_MPI_TUNING, Open
// MPI's own variables) and gives a Host: this process's rank, the world's
// size, the ranks of this host, and the job-level calls (broadcast,
// gathers, barrier, finalize, abort) that the runtime and its backends use.
package mpihost

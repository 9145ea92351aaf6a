// Package cpu is the CPU backend: MPI's collectives on host memory. Each
// stream is a goroutine that runs its queue of operations in order
// (stream.go), or the host runs it while it waits; events are completion
// markers stamped with the monotonic clock; buffers are C memory so that MPI
// may keep pointers into them; collectives are MPI calls made by the stream
// that runs them (coll.go), with the step barriers and the clock reads
// around them, in one call into C (batch.go).
//
// It takes the MPI host (package mpihost) and its Tuning (TuningFromEnv),
// and gives a backend.Backend. It is what runs where there is no GPU, and
// what CI runs.
package cpu

// Package nccl is the GPU backend: streams are CUDA streams, events CUDA
// events, buffers device memory, collectives NCCL's in-place forms on one
// communicator per stream, and the fill, casts, simulated compute, loss
// scaling and optimizer updates are the PTX kernels of package cuda. CUDA, the driver and NCCL are loaded at
// run time (packages runtime/cuda and runtime/nccl), so a program built
// without them still runs on the CPU backend.
//
// It takes a backend.Env (the rank's place on its host, MPI to carry the
// NCCL unique id) and gives a backend.Backend; it registers itself with
// package backend as "nccl", which --backend auto prefers when every local
// rank has a GPU of its own and the libraries load.
//
// Threading: the CUDA current device belongs to the OS thread, and the
// runtime calls a backend from whichever goroutine runs the step. Every
// method that touches the device therefore locks its goroutine to its
// thread and selects the rank's device first (enter), which costs a
// thread-local comparison once the thread has it (cuda.UseDevice).
package nccl

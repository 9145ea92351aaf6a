// Package backend is the contract between the runtime and the devices it
// runs on, in CUDA's model: a Backend makes Streams (ordered executors),
// Events (points in a stream's work), and Buffers (device or C memory), and
// queues groups of collectives (CollOp) on its streams. It also holds what
// is the same for every backend: one descriptor per collective (its
// keyword, whether it reduces, takes a root or pads its buffer, its bus
// factor and what it leaves in every rank's buffer), the registry of
// backends and the selection --backend makes among them (Select), and the
// layout of a plan's buckets and tensors in a backend's memory (Layout).
//
// It takes a plan's tables and a backend, and gives the streams, buffers
// and collectives the engine drives. The CPU backend is in backend/cpu, the
// NCCL one in backend/nccl.
package backend

// Package hetero is the arithmetic of heterogeneous ranks: it takes the
// ranks' declared speeds, a straggler, a seeded jitter, a global batch and
// a balancing rule, and gives each rank's share of the batch (whole
// samples that always sum to the batch), the factor and the extra delay
// by which a rank's simulated compute is stretched at a step, and the
// shares that balancing moves to. It computes only from values every rank
// holds, so every rank that calls it with the same arguments gets the same
// answer; it does no I/O and knows nothing of MPI.
package hetero

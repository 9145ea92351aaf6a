// Package engine runs a recorded plan on a backend: it creates the
// streams, lays out and fills the buffers, issues every step's statements
// (backward, compute, collectives, groups, waits) with their events,
// aligns the ranks at each step, times every record, advances the
// checker's model and checks, and watches for steps and phases that take
// longer than --timeout (the watchdog), settling the process and quieting
// the garbage collector around the measured steps.
//
// A plan that accumulates gradients (plan.Plan.Accumulate) issues each
// step's statements once per micro-batch: backward and compute every
// time, each backward after the first adding its gradients, and the other
// statements on the last micro-batch only.
//
// It takes a Config, the plan and its recorded program, the MPI host and
// a backend, and gives a result.Results. The runtime's Step methods call
// its statement methods (Backward, Compute, Collective, BeginGroup and
// EndGroup, Wait).
package engine

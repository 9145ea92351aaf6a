// Package plan is the runtime's model of a plan: its tables (tensors,
// streams, buckets, run defaults), the vocabulary of its statements
// (priorities, reduction operators, collectives, dependencies, source
// positions), the program recorded from a dry run of the plan's init and
// step functions, its validation against a world size, and the digest that
// ranks compare.
//
// It takes the tables a generated program declares and the statements its
// functions issue, and gives a checked, recorded Program. It knows nothing
// of MPI, devices or time measurement.
package plan

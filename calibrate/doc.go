// Package calibrate writes the plan that measures a cluster's
// collectives and turns what its run measured into a cost-model profile.
//
// It takes the collectives a plan uses (Kinds, from its checked IR) and a
// size sweep (Sizes); SweepPlan gives a .sync plan that runs each
// collective of each size alone on a communication stream, the host
// waiting after each, so that the generated program's own report times
// every size on the same communicator and through the same runtime as a
// real plan. FromRun reads that run's JSON report and fits a curve per
// collective (costmodel.Fit) into a costmodel.Profile with the machine,
// ranks, backend and library versions. `syncgen calibrate` builds and
// runs the plan between the two.
package calibrate

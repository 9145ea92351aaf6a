// Package predict predicts a checked plan's step with a cost-model
// profile, without building or running it.
//
// It takes an *ir.Program, a world size and a *costmodel.Profile; it
// converts the program to the cost model's Schedule (Schedule) and gives
// the replay's Prediction, which Write prints as the table a run prints:
// per bucket its predicted time, algbw and busbw, then step time,
// compute, exposed communication and overlap. WriteJSON writes the same
// figures for scripts. `syncgen predict` and `syncgen tune` use it.
package predict

// Package forecast predicts a run's step from its recorded program, for a
// run given --profile: it converts the plan's tables and recorded step
// (package plan) to the cost model's schedule (runtime/costmodel), the
// same description the compiler's `syncgen predict` replays, and returns
// the replay's prediction, which the report sets beside what the run
// measured.
package forecast

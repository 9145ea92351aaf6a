// Package result holds what a run measured and checked on one rank: the
// records of each step's work with their times, the per-bucket table rows,
// each measured step's figures, the check counts, and the records kept for
// the trace. The engine fills a Results; the report reads it (and every
// rank's, gathered) and never the engine.
package result

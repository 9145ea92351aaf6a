// Package report is what rank 0 shows of a run: the header (what runs
// where), the per-bucket table in the spirit of nccl-tests with the
// summary, the --json file, the --trace file (Chrome trace JSON, one
// process per rank, one thread per stream), and the progress bar.
//
// It takes a Run (the plan, the flags' settings, a way to reach the other
// ranks) and each rank's result.Results, gathers them, and gives text and
// files. It never sees the engine.
package report

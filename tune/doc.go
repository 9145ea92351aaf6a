// Package tune searches bucket plans by predicted step time.
//
// It takes a plan's source, a world size, a cost-model profile and a grid
// (Grid: caps, first-bucket caps, orders and wire dtypes of one bucket
// declaration). Tune writes each candidate through dsl.SetBucketOptions,
// checks it with the compiler's own checker, predicts it with package
// predict (no build, no run), drops candidates whose buckets come out the
// same as an earlier one's, and ranks the rest by predicted step time,
// ties kept in grid order so that the list is the same for the same plan
// and profile. WriteTable prints the candidates, WriteSVG the predicted
// step time against the cap. `syncgen tune` runs the best of them for
// real and writes the winner.
package tune

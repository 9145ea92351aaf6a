package hetero

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Balance is how the shares of the batch are chosen.
type Balance uint8

// The balancing rules.
const (
	// Even gives every rank the same share (the remainder to the first
	// ranks), as data-parallel training without balancing does.
	Even Balance = iota
	// Static gives shares in proportion to the declared speeds, once.
	Static
	// Dynamic starts even and, every Every steps, gives shares in
	// proportion to the speed each rank showed in those steps.
	Dynamic
)

// String is the rule's name as --balance writes it.
func (b Balance) String() string {
	switch b {
	case Static:
		return "static"
	case Dynamic:
		return "dynamic"
	}
	return "off"
}

// Straggler slows one rank: from step From on, its compute takes Factor
// times as long.
type Straggler struct {
	Rank   int
	Factor float64
	From   int
}

// Jitter adds to each rank's compute, once a step, a pseudo-random delay
// in [0, Max) drawn from (Seed, rank, step): the same on every run.
type Jitter struct {
	Seed uint64
	Max  time.Duration
}

// Spec is the heterogeneity of a run. The zero Spec is a homogeneous run.
type Spec struct {
	// Speeds are the declared relative speeds by rank; a rank not named
	// has speed 1.
	Speeds map[int]float64
	// Straggler, if not nil, slows one rank from a step on.
	Straggler *Straggler
	// Jitter, if not nil, adds random delays.
	Jitter *Jitter
	// Batch is the global batch in samples; 0 means one sample per rank
	// (every share 1, and balancing has nothing to move).
	Batch int
	// BatchAt is the position of the plan's ranks declaration when Batch
	// is its batch ("": --batch's, or none), for Check's error.
	BatchAt string
	// Balance is the balancing rule, Every its period in steps (Dynamic).
	Balance Balance
	Every   int
	// From says where the speeds, batch and balance came from, for the
	// report: "" (the flags alone), or the plan's ranks declaration
	// ("the plan, mixed.sync:8") and which flags replaced its values.
	From string
}

// Active reports whether s changes anything in a run.
func (s *Spec) Active() bool {
	return s != nil && (len(s.Speeds) > 0 || s.Straggler != nil || s.Jitter != nil || s.Batch > 0 || s.Balance != Even)
}

// Speed is rank's declared speed.
func (s *Spec) Speed(rank int) float64 {
	if v, ok := s.Speeds[rank]; ok {
		return v
	}
	return 1
}

// Check refuses ranks outside a world of size ranks and a batch too small
// to give every rank a sample.
func (s *Spec) Check(size int) error {
	var ranks []int
	for r := range s.Speeds {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	for _, r := range ranks {
		if r >= size {
			return fmt.Errorf("--speed names rank %d, outside %s", r, World(size))
		}
	}
	if s.Straggler != nil && s.Straggler.Rank >= size {
		return fmt.Errorf("--straggler names rank %d, outside %s", s.Straggler.Rank, World(size))
	}
	if s.Batch > 0 && s.Batch < size {
		if s.BatchAt != "" {
			return fmt.Errorf("%s: the plan's ranks declare batch %d, fewer samples than %s: every rank needs at least one; run with at most %d ranks (mpirun -np %d), raise the plan's batch, or give --batch N",
				s.BatchAt, s.Batch, World(size), s.Batch, s.Batch)
		}
		return fmt.Errorf("--batch %d is smaller than %s: every rank needs at least one sample", s.Batch, World(size))
	}
	return nil
}

// MaxStepCompute bounds a rank's simulated compute in one step: a speed
// or straggler factor that stretches the plan's compute past it is a slip
// (1e-9 for 0.9), and would make a rehearsal that never ends.
const MaxStepCompute = time.Hour

// CheckStretch refuses a jitter above MaxStepCompute, and speeds and a
// straggler that stretch compute, the
// plan's compute of one step (every backward and compute statement, each
// micro-batch's), past MaxStepCompute on some rank of a world of size
// ranks: at the first step's shares, the straggler's factor included.
// Later shares cannot stretch it further: balancing gives a slow rank
// fewer samples, never fewer than one.
func (s *Spec) CheckStretch(size int, compute time.Duration) error {
	if j := s.Jitter; j != nil && j.Max > MaxStepCompute {
		return fmt.Errorf("--jitter's MAXDUR %v is more than %v a step, so the run would not end: give a delay of the order of a step's compute", j.Max, MaxStepCompute)
	}
	if compute <= 0 {
		return nil
	}
	shares := s.InitialShares(size)
	for r := 0; r < size; r++ {
		f := float64(shares[r]) / (float64(s.GlobalBatch(size)) / float64(size)) / s.Speed(r)
		var why []string
		if v, ok := s.Speeds[r]; ok {
			why = append(why, fmt.Sprintf("speed %g", v))
		}
		if st := s.Straggler; st != nil && st.Rank == r {
			f *= st.Factor
			why = append(why, fmt.Sprintf("straggler factor %g", st.Factor))
		}
		if shares[r] > 1 && len(why) > 0 {
			why = append(why, fmt.Sprintf("share %d of %d", shares[r], s.GlobalBatch(size)))
		}
		if d := float64(compute) * f; d > float64(MaxStepCompute) {
			return fmt.Errorf("rank %d's compute would take %.3g hours a step (the plan's %v at %s): more than %v, so the run would not end; a speed is relative to 1 (0.5 takes twice as long), a straggler's factor multiplies its compute",
				r, d/float64(time.Hour), compute, strings.Join(why, ", "), MaxStepCompute)
		}
	}
	return nil
}

// World names a world of size ranks and its ranks for a message: "the
// world of 4 ranks (0..3)", "the world of 1 rank (rank 0)".
func World(size int) string {
	if size == 1 {
		return "the world of 1 rank (rank 0)"
	}
	return fmt.Sprintf("the world of %d ranks (0..%d)", size, size-1)
}

// GlobalBatch is the batch the shares sum to: Batch, or one per rank.
func (s *Spec) GlobalBatch(size int) int {
	if s.Batch > 0 {
		return s.Batch
	}
	return size
}

// InitialShares are the shares of the first step: in proportion to the
// declared speeds with Static, else even.
func (s *Spec) InitialShares(size int) []int {
	w := make([]float64, size)
	for r := range w {
		w[r] = 1
		if s.Balance == Static {
			w[r] = s.Speed(r)
		}
	}
	return Shares(s.GlobalBatch(size), w)
}

// Factor is how much longer than its plan duration a rank's simulated
// compute takes at step: its share over an even share (the plan's
// durations are those of an even share), over its speed, times the
// straggler's factor when it applies.
func (s *Spec) Factor(rank, step, share, size int) float64 {
	even := float64(s.GlobalBatch(size)) / float64(size)
	f := float64(share) / even / s.Speed(rank)
	if st := s.Straggler; st != nil && st.Rank == rank && step >= st.From {
		f *= st.Factor
	}
	return f
}

// Delay is the jitter's extra delay for rank at step (0 without jitter).
func (s *Spec) Delay(rank, step int) time.Duration {
	j := s.Jitter
	if j == nil || j.Max <= 0 {
		return 0
	}
	x := mix(j.Seed ^ mix(uint64(rank)<<32|uint64(uint32(step))))
	return time.Duration(x % uint64(j.Max))
}

// Rebalances reports whether the shares are recomputed after step (0
// based): with Dynamic, after every Every steps.
func (s *Spec) Rebalances(step int) bool {
	return s.Balance == Dynamic && s.Every > 0 && (step+1)%s.Every == 0
}

// Rebalance returns the shares in proportion to the ranks' measured
// speeds: perSample[r] is rank r's compute time per sample over the last
// period, the same values on every rank (an allgather's result). A rank
// without a figure (0) keeps the even weight of the others' mean.
func Rebalance(batch int, perSample []float64) []int {
	w := make([]float64, len(perSample))
	var sum float64
	var n int
	for r, t := range perSample {
		if t > 0 && !math.IsInf(t, 0) && !math.IsNaN(t) {
			w[r] = 1 / t
			sum += w[r]
			n++
		}
	}
	for r := range w {
		if w[r] == 0 {
			w[r] = 1
			if n > 0 {
				w[r] = sum / float64(n)
			}
		}
	}
	return Shares(batch, w)
}

// Balanced is what balancing by measured speed would make of a step:
// perSample[r] is rank r's mean compute per sample (0: no figure), the
// shares are those that Rebalance gives for them (whole samples, at
// least one a rank when batch allows, summing to batch), and longest is
// the longest compute they would take, max over ranks of share times
// compute per sample, in perSample's unit. The step waits for its
// longest compute, and whole samples bound how close the ranks can get:
// a rank that one sample already makes the slowest stays so.
func Balanced(batch int, perSample []float64) (shares []int, longest float64) {
	shares = Rebalance(batch, perSample)
	for r, t := range perSample {
		if t > 0 && !math.IsInf(t, 0) && !math.IsNaN(t) {
			longest = max(longest, float64(shares[r])*t)
		}
	}
	return shares, longest
}

// Shares splits batch whole samples among len(weights) ranks in
// proportion to the weights (positive) by the largest remainder method,
// ties going to the lower rank; then a rank left without a sample takes
// one from the largest share (the lowest such rank). The shares always sum
// to batch, every rank has one when batch >= len(weights), and the same
// weights always give the same shares.
func Shares(batch int, weights []float64) []int {
	n := len(weights)
	out := make([]int, n)
	if n == 0 {
		return out
	}
	var sum float64
	for _, w := range weights {
		sum += max(w, 0)
	}
	if sum <= 0 {
		sum = float64(n)
		weights = slices.Repeat([]float64{1}, n)
	}
	type rem struct {
		rank int
		frac float64
	}
	rems := make([]rem, n)
	given := 0
	for r, w := range weights {
		q := float64(batch) * max(w, 0) / sum
		whole := int(math.Floor(q))
		out[r] = whole
		given += whole
		rems[r] = rem{r, q - float64(whole)}
	}
	sort.SliceStable(rems, func(i, j int) bool { return rems[i].frac > rems[j].frac })
	// Floating-point rounding could floor a quotient up past its true
	// value: such a sample goes back from the smallest remainder.
	for i := n - 1; given > batch; i = (i + n - 1) % n {
		if r := rems[i].rank; out[r] > 0 {
			out[r]--
			given--
		}
	}
	for i := 0; given < batch; i++ {
		out[rems[i%n].rank]++
		given++
	}
	if batch < n {
		return out
	}
	for r := range out {
		if out[r] == 0 {
			out[slices.Index(out, slices.Max(out))]--
			out[r] = 1
		}
	}
	return out
}

// mix is splitmix64's finaliser: a well-spread hash of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

package runtime

// --speed, --straggler, --jitter, --batch and --balance: rehearsing a
// cluster of unequal ranks (runtime/internal/hetero has the arithmetic).

import (
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// heteroFlags are the flags' values as given; resolveHetero parses them.
type heteroFlags struct {
	speeds    []string
	straggler string
	jitter    string
	batch     int
	balance   string
	// twice is the first of --straggler, --jitter, --batch and --balance
	// given a second time (onceFlag): the flag package would let the last
	// win.
	twice error
	// steps and warmup point to the run's --steps and --warmup, which
	// bound --straggler's FROMSTEP; nil: unbounded.
	steps, warmup *int
	// balanceFrom is the plan's ranks declaration's position when the
	// balance is its default, not a --balance given: an error about it
	// then names the plan and not a flag that was not given.
	balanceFrom string
}

// maxBatch bounds --batch: samples a step, not a typo.
const maxBatch = 1<<31 - 1

// onceFlag is a string flag of the heterogeneity flags that may be given
// once. A second value is recorded in *twice (resolveHetero refuses it)
// rather than returned, so that the error is the flag's own words.
type onceFlag struct {
	name  string
	val   *string
	set   *bool
	twice *error
}

func (f onceFlag) String() string {
	if f.val == nil {
		return ""
	}
	return *f.val
}

func (f onceFlag) Set(s string) error {
	if *f.set && *f.twice == nil {
		*f.twice = fmt.Errorf("--%s given twice (%q, then %q): give it once", f.name, *f.val, s)
	}
	*f.set, *f.val = true, s
	return nil
}

// onceIntFlag is --batch: a count given at most once (as onceFlag).
type onceIntFlag struct {
	name  string
	val   *int
	set   *bool
	twice *error
}

func (f onceIntFlag) String() string {
	if f.val == nil {
		return ""
	}
	return strconv.Itoa(*f.val)
}

func (f onceIntFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxBatch {
		return fmt.Errorf("want a number of samples from 0 to %d (0: one a rank)", maxBatch)
	}
	if *f.set && *f.twice == nil {
		*f.twice = fmt.Errorf("--%s given twice (%d, then %d): give it once", f.name, *f.val, n)
	}
	*f.set, *f.val = true, n
	return nil
}

// onceFlags returns the flags --straggler, --jitter, --batch and
// --balance for f, each to be given at most once.
func (f *heteroFlags) onceFlags() (straggler, jitter, balance onceFlag, batch onceIntFlag) {
	set := new([4]bool)
	return onceFlag{"straggler", &f.straggler, &set[0], &f.twice},
		onceFlag{"jitter", &f.jitter, &set[1], &f.twice},
		onceFlag{"balance", &f.balance, &set[2], &f.twice},
		onceIntFlag{"batch", &f.batch, &set[3], &f.twice}
}

// listFlag collects a repeatable flag whose values may also be joined by
// commas.
type listFlag struct{ vals *[]string }

func (f listFlag) String() string {
	if f.vals == nil {
		return ""
	}
	return strings.Join(*f.vals, ",")
}

func (f listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*f.vals = append(*f.vals, v)
		}
	}
	return nil
}

// defaultBalanceEvery is dynamic balancing's period when --balance
// dynamic names none: long enough to average a step's jitter, short
// enough to follow a straggler within a short run.
const defaultBalanceEvery = 5

// resolveHetero parses the heterogeneity flags. A rank beyond the world
// is refused here when the launcher says its size, else once MPI has
// started (hetero.Spec.Check).
func resolveHetero(f heteroFlags) (hetero.Spec, error) {
	var s hetero.Spec
	if f.twice != nil {
		return s, f.twice
	}
	size, sized := proc.LauncherSize()
	outside := func(flag, spec string, r int) error {
		if sized && r >= size {
			return fmt.Errorf("%s %q: rank %d is outside %s", flag, spec, r, hetero.World(size))
		}
		return nil
	}
	// The plan's ranks declaration refuses overlapping ranges, and so do
	// the flags: which of two speeds a rank has would be the order's.
	speedOf := map[int]string{}
	for _, spec := range f.speeds {
		ranks, val, ok := strings.Cut(spec, "=")
		lo, hi, err := rankRange(ranks)
		v, verr := strconv.ParseFloat(val, 64)
		if !ok || err != nil || verr != nil || !(v > 0) || math.IsInf(v, 0) {
			return s, fmt.Errorf("--speed %q: want RANK=SPEED or FIRST..LAST=SPEED with a positive speed relative to 1, e.g. 3=0.5 or 4..7=0.6", spec)
		}
		if err := outside("--speed", spec, hi); err != nil {
			return s, err
		}
		if s.Speeds == nil {
			s.Speeds = map[int]float64{}
		}
		for r := lo; r <= hi; r++ {
			if prev, ok := speedOf[r]; ok {
				return s, fmt.Errorf("--speed %q: rank %d already has a speed from --speed %q: give each rank one speed", spec, r, prev)
			}
			speedOf[r] = spec
			s.Speeds[r] = v
		}
	}
	if spec := f.straggler; spec != "" {
		parts := strings.Split(spec, ":")
		st := &hetero.Straggler{}
		var err1, err2, err3 error
		if len(parts) == 2 || len(parts) == 3 {
			st.Rank, err1 = strconv.Atoi(parts[0])
			st.Factor, err2 = strconv.ParseFloat(parts[1], 64)
			if len(parts) == 3 {
				st.From, err3 = strconv.Atoi(parts[2])
			}
		}
		if len(parts) < 2 || len(parts) > 3 || err1 != nil || err2 != nil || err3 != nil || st.Rank < 0 || !(st.Factor > 0) || math.IsInf(st.Factor, 0) || st.From < 0 {
			return s, fmt.Errorf("--straggler %q: want RANK:FACTOR[:FROMSTEP], e.g. 2:3 (rank 2 three times slower) or 2:3:10 (from step 10, warm-up counted)", spec)
		}
		if err := outside("--straggler", spec, st.Rank); err != nil {
			return s, err
		}
		if f.steps != nil && f.warmup != nil {
			if last := *f.steps + *f.warmup - 1; st.From > last {
				return s, fmt.Errorf("--straggler %q: step %d is past the run's last step, %d (warm-up counted): give a FROMSTEP from 0 to %d, or more --steps", spec, st.From, last, last)
			}
		}
		s.Straggler = st
	}
	if spec := f.jitter; spec != "" {
		seed, dur, ok := strings.Cut(spec, ":")
		n, err := strconv.ParseUint(seed, 10, 64)
		d, derr := time.ParseDuration(dur)
		if !ok || err != nil || derr != nil || d <= 0 {
			return s, fmt.Errorf("--jitter %q: want SEED:MAXDUR, e.g. 7:5ms (each rank's compute gets up to 5ms more a step, drawn from seed 7)", spec)
		}
		s.Jitter = &hetero.Jitter{Seed: n, Max: d}
	}
	if f.batch < 0 || f.batch > maxBatch {
		return s, fmt.Errorf("--batch %d: want a number of samples from 0 to %d (0: one a rank)", f.batch, maxBatch)
	}
	s.Batch = f.batch
	switch rule, every, hasEvery := strings.Cut(f.balance, ":"); rule {
	case "", "off":
		if hasEvery {
			return s, fmt.Errorf("--balance %q: only dynamic takes a period", f.balance)
		}
	case "static":
		if hasEvery {
			return s, fmt.Errorf("--balance %q: only dynamic takes a period", f.balance)
		}
		s.Balance = hetero.Static
	case "dynamic":
		s.Balance, s.Every = hetero.Dynamic, defaultBalanceEvery
		if hasEvery {
			n, err := strconv.Atoi(every)
			if err != nil || n <= 0 {
				return s, fmt.Errorf("--balance %q: want dynamic:K with K a number of steps, 1 or more", f.balance)
			}
			s.Every = n
		}
	default:
		return s, fmt.Errorf("--balance %q: want off, static or dynamic[:K]", f.balance)
	}
	if s.Balance != hetero.Even && s.Batch == 0 {
		if f.balanceFrom != "" {
			return s, fmt.Errorf("the plan's ranks declaration (%s) has balance %s, which needs a global batch to share, and --batch 0 leaves none: give --batch N (samples, at least one a rank), or --balance off", f.balanceFrom, s.Balance)
		}
		return s, fmt.Errorf("--balance %s needs a global batch to share: give --batch N (samples, at least one a rank)", s.Balance)
	}
	return s, nil
}

// planHeteroDefaults are the defaults of --batch and --balance: the
// plan's ranks declaration's, else none.
func planHeteroDefaults(pr *plan.Ranks) (batch int, balance string) {
	if pr == nil {
		return 0, "off"
	}
	switch pr.Balance {
	case "static":
		return pr.Batch, "static"
	case "dynamic":
		if pr.Every > 0 {
			return pr.Batch, fmt.Sprintf("dynamic:%d", pr.Every)
		}
		return pr.Batch, "dynamic"
	}
	return pr.Batch, "off"
}

// fromPlanRanks says in s.From where the heterogeneity came from when the
// plan declares ranks, and returns the plan's speeds unless --speed
// (given: the flags given) replaces them.
func fromPlanRanks(s *hetero.Spec, pr *plan.Ranks, given map[string]bool) []plan.RankSpeed {
	if pr == nil {
		return nil
	}
	var flags []string
	for _, name := range []string{"speed", "batch", "balance"} {
		if given[name] {
			flags = append(flags, "--"+name)
		}
	}
	s.From = "the plan's ranks, " + string(pr.At)
	if len(flags) > 0 {
		s.From += "; " + strings.Join(flags, ", ") + " from the flags"
	}
	if given["speed"] {
		return nil
	}
	return pr.Speeds
}

// usePlanSpeeds checks that the plan's speeds name only ranks of the world
// of size, and puts them into s. The error names the plan's entry and the
// first of its ranks outside the world.
func usePlanSpeeds(s *hetero.Spec, speeds []plan.RankSpeed, size int) error {
	for _, e := range speeds {
		if e.Last >= size {
			// The ranks needed, e.Last+1, counted in uint64: e.Last may
			// be the largest int.
			need := strconv.FormatUint(uint64(e.Last)+1, 10)
			return fmt.Errorf("%s: the plan's ranks give rank %d a speed, but it is outside the world of %d rank%s (ranks 0..%d); run with at least %s ranks (mpirun -np %s), remove it from the plan's ranks, or give --speed, which replaces the plan's speeds",
				e.At, max(e.First, size), size, text.Plural(size), size-1, need, need)
		}
	}
	for _, e := range speeds {
		if s.Speeds == nil {
			s.Speeds = map[int]float64{}
		}
		for r := e.First; r <= e.Last; r++ {
			s.Speeds[r] = e.Speed
		}
	}
	return nil
}

// rankRange parses RANK or FIRST..LAST.
func rankRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "..")
	if lo, err = strconv.Atoi(a); err != nil || lo < 0 {
		return 0, 0, fmt.Errorf("bad rank")
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil || hi < lo {
			return 0, 0, fmt.Errorf("bad range")
		}
	}
	return lo, hi, nil
}

// heteroSignature writes s as the flags that give it, in a canonical order,
// in at most n bytes (a longer one ends in a hash of the whole), for the
// comparison of every rank's flags: ranks that disagreed on the shares
// would compute different weights and stretch different steps.
func heteroSignature(s hetero.Spec, n int) string {
	var parts []string
	var ranks []int
	for r := range s.Speeds {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	for _, r := range ranks {
		parts = append(parts, fmt.Sprintf("--speed %d=%g", r, s.Speeds[r]))
	}
	if st := s.Straggler; st != nil {
		parts = append(parts, fmt.Sprintf("--straggler %d:%g:%d", st.Rank, st.Factor, st.From))
	}
	if j := s.Jitter; j != nil {
		parts = append(parts, fmt.Sprintf("--jitter %d:%v", j.Seed, j.Max))
	}
	if s.Batch > 0 {
		parts = append(parts, fmt.Sprintf("--batch %d", s.Batch))
	}
	switch s.Balance {
	case hetero.Static:
		parts = append(parts, "--balance static")
	case hetero.Dynamic:
		parts = append(parts, fmt.Sprintf("--balance dynamic:%d", s.Every))
	}
	out := strings.Join(parts, " ")
	if len(out) > n {
		sum := sha256.Sum256([]byte(out))
		tail := fmt.Sprintf("... #%x", sum[:6])
		out = out[:n-len(tail)] + tail
	}
	return out
}

package hetero

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSharesSumAndProportion(t *testing.T) {
	cases := []struct {
		batch   int
		weights []float64
		want    []int
	}{
		{256, []float64{1, 1, 1, 1}, []int{64, 64, 64, 64}},
		{256, []float64{1, 1, 1, 0.5}, []int{73, 73, 73, 37}},
		{10, []float64{1, 1, 1}, []int{4, 3, 3}}, // the tie goes to the lowest rank
		{3, []float64{100, 1, 1}, []int{1, 1, 1}},
		{7, []float64{2, 1}, []int{5, 2}},
	}
	for _, c := range cases {
		got := Shares(c.batch, c.weights)
		for r, v := range got {
			if v != c.want[r] {
				t.Errorf("Shares(%d, %v) = %v, want %v", c.batch, c.weights, got, c.want)
				break
			}
		}
	}
}

func TestSharesAlwaysSum(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for batch := n; batch < 300; batch += 7 {
			w := make([]float64, n)
			for r := range w {
				w[r] = 0.1 + float64((r*37+batch)%11)/3
			}
			s := Shares(batch, w)
			sum := 0
			for _, v := range s {
				if v < 1 {
					t.Fatalf("Shares(%d, %v) = %v: a rank without a sample", batch, w, s)
				}
				sum += v
			}
			if sum != batch {
				t.Fatalf("Shares(%d, %v) = %v sums to %d", batch, w, s, sum)
			}
		}
	}
}

func TestFactor(t *testing.T) {
	s := &Spec{Speeds: map[int]float64{3: 0.5}, Batch: 8, Straggler: &Straggler{Rank: 1, Factor: 3, From: 5}}
	if f := s.Factor(0, 0, 2, 4); f != 1 {
		t.Errorf("even share at speed 1: factor %v, want 1", f)
	}
	if f := s.Factor(3, 0, 2, 4); f != 2 {
		t.Errorf("even share at speed 0.5: factor %v, want 2", f)
	}
	if f := s.Factor(3, 0, 1, 4); f != 1 {
		t.Errorf("half a share at speed 0.5: factor %v, want 1", f)
	}
	if f := s.Factor(1, 4, 2, 4); f != 1 {
		t.Errorf("straggler before its step: factor %v, want 1", f)
	}
	if f := s.Factor(1, 5, 2, 4); f != 3 {
		t.Errorf("straggler from its step: factor %v, want 3", f)
	}
}

func TestStaticAndRebalance(t *testing.T) {
	s := &Spec{Speeds: map[int]float64{3: 0.5}, Batch: 280, Balance: Static}
	got := s.InitialShares(4)
	want := []int{80, 80, 80, 40}
	for r := range want {
		if got[r] != want[r] {
			t.Fatalf("static shares %v, want %v", got, want)
		}
	}
	// Per-sample times of an even split with rank 3 at half speed.
	re := Rebalance(280, []float64{1, 1, 1, 2})
	for r := range want {
		if re[r] != want[r] {
			t.Fatalf("rebalanced shares %v, want %v", re, want)
		}
	}
	if (&Spec{Balance: Dynamic}).InitialShares(3)[2] != 1 {
		t.Errorf("dynamic without a batch: want one sample a rank")
	}
}

func TestDelayDeterministicAndBounded(t *testing.T) {
	s := &Spec{Jitter: &Jitter{Seed: 7, Max: 5 * time.Millisecond}}
	distinct := map[time.Duration]bool{}
	for r := 0; r < 4; r++ {
		for step := 0; step < 50; step++ {
			d := s.Delay(r, step)
			if d < 0 || d >= 5*time.Millisecond {
				t.Fatalf("delay %v outside [0, 5ms)", d)
			}
			if d != s.Delay(r, step) {
				t.Fatalf("delay of rank %d step %d not deterministic", r, step)
			}
			distinct[d] = true
		}
	}
	if len(distinct) < 150 {
		t.Errorf("only %d distinct delays of 200", len(distinct))
	}
	if (&Spec{}).Delay(0, 0) != 0 {
		t.Errorf("no jitter: want no delay")
	}
}

func TestCheck(t *testing.T) {
	if err := (&Spec{Speeds: map[int]float64{5: 0.5}}).Check(4); err == nil {
		t.Errorf("rank 5 in a world of 4: want an error")
	}
	if err := (&Spec{Straggler: &Straggler{Rank: 4, Factor: 2}}).Check(4); err == nil {
		t.Errorf("straggler 4 in a world of 4: want an error")
	}
	if err := (&Spec{Batch: 3}).Check(4); err == nil {
		t.Errorf("batch 3 on 4 ranks: want an error")
	}
	if err := (&Spec{Speeds: map[int]float64{3: 0.5}, Batch: 4}).Check(4); err != nil {
		t.Errorf("valid spec: %v", err)
	}
}

// Balanced's shares are whole samples, at least one a rank, so its
// longest compute is what those shares take and not the ideal of
// fractional shares: with 4 samples on 4 ranks nothing can move, and a
// rank 10 times slower still takes 10 times as long on its one sample.
func TestBalancedWholeSamples(t *testing.T) {
	cases := []struct {
		batch     int
		perSample []float64
		shares    []int
		longest   float64
	}{
		// Every rank keeps its one sample: the slow rank's 2 ms stays.
		{4, []float64{2, 1, 1, 1}, []int{1, 1, 1, 1}, 2},
		// A rank 10 times slower: proportional shares would be 0.64
		// and 6.36 samples; whole samples give it 1, the other 6.
		{7, []float64{10, 1}, []int{1, 6}, 10},
		// Half speed on 10 samples: 1 3 3 3, the fast ranks' 3 samples
		// the longest, not 10/3.5 of them.
		{10, []float64{2, 1, 1, 1}, []int{1, 3, 3, 3}, 3},
		// Enough samples: within a sample of the speed ratio.
		{256, []float64{2, 1, 1, 1}, []int{37, 73, 73, 73}, 74},
		// A rank without a figure keeps the others' mean weight and is
		// left out of the longest.
		{6, []float64{1, 0, 1}, []int{2, 2, 2}, 2},
	}
	for _, c := range cases {
		shares, longest := Balanced(c.batch, c.perSample)
		if !slices.Equal(shares, c.shares) || longest != c.longest {
			t.Errorf("Balanced(%d, %v) = %v, %v; want %v, %v", c.batch, c.perSample, shares, longest, c.shares, c.longest)
		}
	}
}

// A rank outside a world of one is named in the singular.
func TestCheckWorldOfOne(t *testing.T) {
	s := &Spec{Speeds: map[int]float64{3: 0.5}}
	if err := s.Check(1); err == nil || err.Error() != "--speed names rank 3, outside the world of 1 rank (rank 0)" {
		t.Errorf("Check(1) = %v", err)
	}
	s = &Spec{Batch: 3}
	if err := s.Check(4); err == nil || err.Error() != "--batch 3 is smaller than the world of 4 ranks (0..3): every rank needs at least one sample" {
		t.Errorf("Check(4) = %v", err)
	}
}

// TestCheckStretch: a speed or straggler that stretches a step's compute
// past MaxStepCompute on some rank is refused, naming the rank, what it
// would take and why; up to the bound it is accepted.
func TestCheckStretch(t *testing.T) {
	const compute = 20 * time.Millisecond
	// 20 ms at speed 1e-9 is 2e7 s, 5556 hours.
	err := (&Spec{Speeds: map[int]float64{1: 1e-9}}).CheckStretch(2, compute)
	if err == nil || !strings.Contains(err.Error(), "rank 1's compute would take 5.56e+03 hours a step (the plan's 20ms at speed 1e-09)") {
		t.Errorf("speed 1e-9: %v", err)
	}
	err = (&Spec{Straggler: &Straggler{Rank: 0, Factor: 1e6, From: 3}}).CheckStretch(2, compute)
	if err == nil || !strings.Contains(err.Error(), "rank 0's compute would take 5.56 hours a step (the plan's 20ms at straggler factor 1e+06)") {
		t.Errorf("straggler 1e6: %v", err)
	}
	// Static shares in proportion to the speeds: rank 0 takes 99 of 100
	// samples at speed 1, 1.98 times an even share.
	err = (&Spec{Speeds: map[int]float64{1: 0.0101}, Batch: 100, Balance: Static}).CheckStretch(2, time.Hour/2)
	if err != nil {
		t.Errorf("static shares: %v", err)
	}
	if err := (&Spec{Speeds: map[int]float64{1: 0.5}}).CheckStretch(2, MaxStepCompute/2); err != nil {
		t.Errorf("compute of MaxStepCompute, the bound: %v", err)
	}
	err = (&Spec{Jitter: &Jitter{Seed: 1, Max: 2 * time.Hour}}).CheckStretch(2, compute)
	if err == nil || !strings.Contains(err.Error(), "--jitter's MAXDUR 2h0m0s is more than 1h0m0s a step") {
		t.Errorf("jitter 2h: %v", err)
	}
	for _, s := range []*Spec{
		{Jitter: &Jitter{Seed: 1, Max: time.Hour}},
		{Speeds: map[int]float64{1: 0.5}, Straggler: &Straggler{Rank: 1, Factor: 3}},
		{Speeds: map[int]float64{1: 20 * float64(compute) / float64(MaxStepCompute)}},
		{},
	} {
		if err := s.CheckStretch(2, compute); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// TestCheckPlanBatch: a world larger than the plan's batch is refused
// with the plan's ranks declaration named, not a --batch never given;
// with --batch given (no position), the error names --batch.
func TestCheckPlanBatch(t *testing.T) {
	s := Spec{Batch: 2, BatchAt: "rb.sync:3"}
	err := s.Check(3)
	if err == nil || !strings.HasPrefix(err.Error(), "rb.sync:3: the plan's ranks declare batch 2, fewer samples than the world of 3 ranks (0..2)") ||
		!strings.Contains(err.Error(), "mpirun -np 2") {
		t.Errorf("batch 2 at 3 ranks: %v", err)
	}
	for _, size := range []int{2, 1} {
		if err := s.Check(size); err != nil {
			t.Errorf("batch 2, %d ranks: %v", size, err)
		}
	}
	s.BatchAt = ""
	if err := s.Check(3); err == nil || !strings.HasPrefix(err.Error(), "--batch 2 is smaller than the world of 3 ranks") {
		t.Errorf("--batch 2 at 3 ranks: %v", err)
	}
}

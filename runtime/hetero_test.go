package runtime_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// heteroJSON is the part of --json that a heterogeneous run adds.
type heteroJSON struct {
	Summary struct {
		Wrong int64 `json:"wrong"`
	} `json:"summary"`
	Hetero *struct {
		Batch     int `json:"batch"`
		Slowest   int `json:"slowest_rank"`
		WaitedFor int `json:"waited_for_rank"`
		Ranks     []struct {
			Rank      int     `json:"rank"`
			ComputeMs float64 `json:"compute_ms"`
			WaitMs    float64 `json:"wait_first_collective_ms"`
			Score     float64 `json:"speed_score"`
		} `json:"ranks"`
		Shares []struct {
			From   int   `json:"from_step"`
			Shares []int `json:"shares"`
		} `json:"shares"`
		BalancedShares []int   `json:"balanced_shares"`
		SavingMs       float64 `json:"balanced_saving_ms"`
		LongestRank    int     `json:"longest_compute_rank"`
	} `json:"heterogeneous"`
}

// heteroRun runs the basic plan (backward 20ms) with np ranks and the
// given flags, and reads its JSON.
func heteroRun(t *testing.T, np int, args ...string) heteroJSON {
	j, _ := heteroRunOut(t, np, args...)
	return j
}

// heteroRunOut is heteroRun that also returns the run's output.
func heteroRunOut(t *testing.T, np int, args ...string) (heteroJSON, result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.json")
	r := ok(t, np, append([]string{"basic", "--json", path, "--quiet"}, args...)...)
	mustContain(t, r, "# slowest rank ")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j heteroJSON
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if j.Hetero == nil || len(j.Hetero.Ranks) != np || len(j.Hetero.Shares) == 0 {
		t.Fatalf("np %d %v: no per-rank figures in the JSON:\n%s", np, args, data)
	}
	for _, s := range j.Hetero.Shares {
		sum := 0
		for _, v := range s.Shares {
			sum += v
		}
		if len(s.Shares) != np || sum != j.Hetero.Batch {
			t.Errorf("np %d: shares from step %d are %v: want %d summing to %d", np, s.From, s.Shares, np, j.Hetero.Batch)
		}
	}
	return j, r
}

// With the last rank at half speed, dynamic balancing moves the shares to
// within 10% of the speed ratio in a few rounds, and the report names the
// slow rank. The shares follow the simulated durations, so a loaded
// machine does not move them.
func TestDynamicBalancingFollowsSpeeds(t *testing.T) {
	for _, np := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(np), func(t *testing.T) {
			slow := np - 1
			j := heteroRun(t, np, "--steps", "6", "--warmup", "0", "--check", "3", "--batch", "240",
				"--speed", fmt.Sprintf("%d=0.5", slow), "--balance", "dynamic:2")
			h := j.Hetero
			if h.Shares[0].From != 0 || len(h.Shares) < 2 || h.Shares[1].From > 4 {
				t.Fatalf("shares did not move within two rounds: %+v", h.Shares)
			}
			last := h.Shares[len(h.Shares)-1].Shares
			ratio := float64(last[slow]) / float64(last[0])
			if math.Abs(ratio-0.5) > 0.05 {
				t.Errorf("final shares %v: slow over fast %.3f, want 0.5 within 10%%", last, ratio)
			}
			if h.Slowest != slow {
				t.Errorf("slowest rank %d, want %d", h.Slowest, slow)
			}
		})
	}
}

// A straggler from step 1 on is the rank that the report names, the one
// the others wait for at the first collective.
func TestStragglerIsNamed(t *testing.T) {
	j := heteroRun(t, 3, "--steps", "4", "--warmup", "1", "--check", "5", "--straggler", "1:3:1")
	h := j.Hetero
	if h.Slowest != 1 || h.WaitedFor != 1 {
		t.Fatalf("slowest %d, waited for %d: want rank 1 both", h.Slowest, h.WaitedFor)
	}
	if h.Ranks[1].Score > 0.6 || h.Ranks[0].WaitMs <= h.Ranks[1].WaitMs {
		t.Errorf("rank figures %+v: want rank 1 slow (score near 1/3) and waited for", h.Ranks)
	}
}

// The rank named as the one the others waited for is the one whose late
// arrivals cost them the most, not the one last most often: rank 0, a
// little slow, is last in the first 4 steps by about 5ms, rank 1, a
// straggler from step 4, in the last 2 by about 35ms. And with one
// sample a rank nothing can move, so the what-if saves nothing (in
// proportion to the speeds, fractional shares would have saved about 5ms
// a step), nor can balancing every step.
func TestWaitedForAndWholeSampleWhatIf(t *testing.T) {
	j, r := heteroRunOut(t, 2, "--steps", "6", "--warmup", "0", "--check", "6", "--batch", "2",
		"--speed", "0=0.8", "--straggler", "1:3:4", "--balance", "dynamic:1")
	mustContain(t, r, "# ranks: global batch 2, balance dynamic every 1 step\n")
	h := j.Hetero
	if h.WaitedFor != 1 {
		t.Errorf("waited for rank %d, want 1, the straggler (figures %+v)", h.WaitedFor, h.Ranks)
	}
	if !slices.Equal(h.BalancedShares, []int{1, 1}) || h.SavingMs != 0 || h.LongestRank != 1 {
		t.Errorf("what if: shares %v saving %v ms on rank %d; want [1 1], 0 on rank 1", h.BalancedShares, h.SavingMs, h.LongestRank)
	}
}

// Static shares follow the declared speeds from the first step, and
// every rank's compute is then about the same.
func TestStaticBalancing(t *testing.T) {
	j := heteroRun(t, 2, "--steps", "3", "--warmup", "0", "--batch", "90", "--speed", "0=0.5", "--balance", "static")
	if got := j.Hetero.Shares; len(got) != 1 || got[0].Shares[0] != 30 || got[0].Shares[1] != 60 {
		t.Fatalf("static shares %+v, want [30 60] throughout", got)
	}
}

func TestHeteroRankOutsideWorld(t *testing.T) {
	r := mpirun(t, 2, nil, 60*time.Second, "basic", "--straggler", "2:3")
	if r.code == 0 || !strings.Contains(r.out, "rank 2 is outside the world of 2 ranks") {
		t.Fatalf("exit %d, want a rank error:\n%s", r.code, r.out)
	}
}

// A speed that would stretch a step's compute past an hour (a slip:
// 1e-9 for 0.9) stops the run before the first step, naming the rank.
func TestHeteroSpeedTooSlow(t *testing.T) {
	r := mpirun(t, 2, nil, 60*time.Second, "basic", "--speed", "1=1e-9")
	if r.code != 2 || !strings.Contains(r.out, "rank 1's compute would take") || !strings.Contains(r.out, "at speed 1e-09): more than 1h0m0s, so the run would not end") {
		t.Fatalf("exit %d, want 2 and the rank's compute:\n%s", r.code, r.out)
	}
}

// op wavg is exact on every element of every float dtype and reducing
// collective, with shares that change during the run (dynamic balancing)
// and with none (one sample a rank). No shares are computed for a step
// past the run.
func TestWeightedAverageExact(t *testing.T) {
	for _, np := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(np), func(t *testing.T) {
			r := ok(t, np, "wavg", "--steps", "4", "--warmup", "0", "--check", "1", "--batch", "120",
				"--speed", fmt.Sprintf("%d=0.5", np-1), "--balance", "dynamic:2")
			mustContain(t, r, "shares from step 0: ", "; from step 2: ")
		})
	}
	r := ok(t, 2, "wavg", "--steps", "2", "--warmup", "0", "--batch", "120", "--speed", "1=0.5", "--balance", "dynamic:2")
	if strings.Contains(r.out, "from step 2") {
		t.Errorf("shares for step 2 of a 2-step run:\n%s", r.out)
	}
	ok(t, 3, "wavg", "--steps", "2", "--warmup", "0", "--check", "1")
}

// Where a weighted sum of three ranks can leave a dtype's exact range
// (bf16 with a batch of 1024), the checker counts those elements as
// unchecked instead of guessing, and the others still pass. (At two ranks
// a sum is one rounding, which the checker predicts.)
func TestWeightedAverageBeyondExactRange(t *testing.T) {
	r := mpirun(t, 3, nil, 90*time.Second, "wavg", "--steps", "1", "--warmup", "0", "--check", "1", "--batch", "1024", "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	mustContain(t, r, "# 0 wrong", " unchecked (values beyond the exact range")
}

// rankSharesRun runs the ranks plan (ranks batch 90 balance static { 1
// speed 0.5 }) with np ranks and args, and returns its JSON.
func rankSharesRun(t *testing.T, np int, args ...string) ([]int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.json")
	r := ok(t, np, append([]string{"ranks", "--steps", "2", "--warmup", "0", "--json", path, "--quiet"}, args...)...)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Hetero *struct {
			From   string `json:"from"`
			Shares []struct {
				Shares []int `json:"shares"`
			} `json:"shares"`
		} `json:"heterogeneous"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if j.Hetero == nil || len(j.Hetero.Shares) != 1 {
		t.Fatalf("%v: want one set of static shares in the JSON:\n%s\n%s", args, data, r.out)
	}
	return j.Hetero.Shares[0].Shares, j.Hetero.From
}

// The plan's ranks declaration gives the static shares from its speeds;
// a --speed given replaces the plan's speeds, and the report says where
// they came from.
func TestPlanRanksDefaults(t *testing.T) {
	shares, from := rankSharesRun(t, 2)
	if !slices.Equal(shares, []int{60, 30}) || from != "the plan's ranks, test.sync:3" {
		t.Errorf("plan's speeds: shares %v from %q, want [60 30] from the plan's ranks, test.sync:3", shares, from)
	}
	shares, from = rankSharesRun(t, 2, "--speed", "0=0.5")
	if !slices.Equal(shares, []int{30, 60}) || !strings.Contains(from, "--speed from the flags") {
		t.Errorf("--speed 0=0.5: shares %v from %q, want [30 60] with --speed from the flags", shares, from)
	}
}

// A rank of the plan's ranks outside the world stops the run at start
// with the plan's line; --speed, which replaces the plan's speeds, lets
// it run.
func TestPlanRankOutsideWorld(t *testing.T) {
	r := mpirun(t, 2, nil, 60*time.Second, "ranks:3")
	want := "testprog: error: the plan cannot run on 2 ranks:\ntest.sync:4: the plan's ranks give rank 3 a speed, but it is outside the world of 2 ranks (ranks 0..1); run with at least 4 ranks (mpirun -np 4)"
	if r.code != 2 || strings.Count(r.out, want) != 1 || strings.Contains(r.out, "# syncgen:") {
		t.Fatalf("exit %d, want 2 and one message %q:\n%s", r.code, want, r.out)
	}
	shares, _ := rankSharesRun(t, 2, "--speed", "1=0.5")
	if !slices.Equal(shares, []int{60, 30}) {
		t.Errorf("with --speed 1=0.5: shares %v, want [60 30]", shares)
	}
}

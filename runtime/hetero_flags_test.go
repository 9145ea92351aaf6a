package runtime

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

func TestResolveHetero(t *testing.T) {
	s, err := resolveHetero(heteroFlags{speeds: []string{"0..2=1.0", "3=0.5"}, straggler: "1:2.5:10", jitter: "7:5ms", batch: 256, balance: "dynamic:4"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Speed(2) != 1 || s.Speed(3) != 0.5 || s.Speed(9) != 1 || s.Batch != 256 || s.Balance != hetero.Dynamic || s.Every != 4 {
		t.Errorf("spec %+v", s)
	}
	if *s.Straggler != (hetero.Straggler{Rank: 1, Factor: 2.5, From: 10}) || *s.Jitter != (hetero.Jitter{Seed: 7, Max: 5 * time.Millisecond}) {
		t.Errorf("straggler %+v, jitter %+v", *s.Straggler, *s.Jitter)
	}
	if s, err := resolveHetero(heteroFlags{batch: 8, balance: "dynamic"}); err != nil || s.Every != defaultBalanceEvery {
		t.Errorf("dynamic without a period: %+v, %v", s, err)
	}
	bad := []struct {
		f    heteroFlags
		want string
	}{
		{heteroFlags{speeds: []string{"3"}}, "want RANK=SPEED"},
		{heteroFlags{speeds: []string{"3=0"}}, "positive speed"},
		{heteroFlags{speeds: []string{"3..1=1"}}, "FIRST..LAST"},
		{heteroFlags{straggler: "1"}, "RANK:FACTOR"},
		{heteroFlags{straggler: "1:-2"}, "RANK:FACTOR"},
		{heteroFlags{jitter: "x:5ms"}, "SEED:MAXDUR"},
		{heteroFlags{jitter: "1:5"}, "SEED:MAXDUR"},
		{heteroFlags{balance: "static"}, "needs a global batch"},
		{heteroFlags{batch: 8, balance: "static:3"}, "only dynamic takes a period"},
		{heteroFlags{batch: 8, balance: "dynamic:0"}, "dynamic:K"},
		{heteroFlags{batch: 8, balance: "fair"}, "want off, static or dynamic"},
		{heteroFlags{batch: -1}, "--batch -1"},
		// The plan's balance, with --batch 0: the plan's, not a flag.
		{heteroFlags{balance: "dynamic:5", balanceFrom: "mixed.sync:8"}, "the plan's ranks declaration (mixed.sync:8) has balance dynamic, which needs a global batch to share, and --batch 0 leaves none"},
	}
	for _, c := range bad {
		if _, err := resolveHetero(c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.f, err, c.want)
		}
	}
}

func TestHeteroSignature(t *testing.T) {
	s, err := resolveHetero(heteroFlags{speeds: []string{"3=0.5", "1=0.75"}, batch: 64, balance: "dynamic:3"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := heteroSignature(s, 96), "--speed 1=0.75 --speed 3=0.5 --batch 64 --balance dynamic:3"; got != want {
		t.Errorf("signature %q, want %q", got, want)
	}
	// Long ones are cut to n bytes and still tell specs apart.
	a, _ := resolveHetero(heteroFlags{speeds: []string{"0..40=0.5"}})
	b, _ := resolveHetero(heteroFlags{speeds: []string{"0..39=0.5", "40=0.25"}})
	sa, sb := heteroSignature(a, 96), heteroSignature(b, 96)
	if len(sa) > 96 || len(sb) > 96 || sa == sb {
		t.Errorf("long signatures %q and %q: want different, at most 96 bytes", sa, sb)
	}
	if heteroSignature(hetero.Spec{}, 96) != "" {
		t.Errorf("no heterogeneity: want an empty signature")
	}
}

// A plan's rank outside the world is refused with the ranks it needs,
// counted without overflow: the largest int asked for at least
// -9223372036854775808 ranks.
func TestUsePlanSpeedsOutsideTheWorld(t *testing.T) {
	for _, tc := range []struct {
		first, last int
		want        string
	}{
		{2, 3, "run with at least 4 ranks (mpirun -np 4)"},
		{5000000000, 5000000000, "run with at least 5000000001 ranks (mpirun -np 5000000001)"},
		{math.MaxInt, math.MaxInt, "run with at least 9223372036854775808 ranks (mpirun -np 9223372036854775808)"},
	} {
		var s hetero.Spec
		err := usePlanSpeeds(&s, []plan.RankSpeed{{First: tc.first, Last: tc.last, Speed: 1}}, 2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ranks %d..%d in a world of 2: %v, want %q", tc.first, tc.last, err, tc.want)
		}
	}
}

// TestHeteroFlagsOnce checks what the flag package would let pass
// silently: a single-valued flag given twice (the last won), overlapping
// --speed ranges (the order picked the speed), a straggler past the run,
// an empty dynamic period (it meant 5) and a batch beyond 32 bits.
func TestHeteroFlagsOnce(t *testing.T) {
	p := &plan.Plan{Name: "m", Source: "m.sync", Run: Run{Steps: 2, Warmup: 0, CheckEvery: 1}}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--straggler", "1:2", "--straggler", "0:3"}, `--straggler given twice ("1:2", then "0:3"): give it once`},
		{[]string{"--jitter", "1:5ms", "--jitter=2:5ms"}, `--jitter given twice ("1:5ms", then "2:5ms")`},
		{[]string{"--batch", "8", "--batch", "16"}, "--batch given twice (8, then 16)"},
		{[]string{"--batch", "8", "--balance", "static", "--balance", "dynamic"}, `--balance given twice ("static", then "dynamic")`},
		{[]string{"--speed", "0..1=0.5,1=2"}, `--speed "1=2": rank 1 already has a speed from --speed "0..1=0.5"`},
		{[]string{"--speed", "1=0.5", "--speed", "1=2"}, `rank 1 already has a speed`},
		{[]string{"--straggler", "1:2:99"}, `--straggler "1:2:99": step 99 is past the run's last step, 1`},
		{[]string{"--straggler", "1:2:2"}, "past the run's last step"},
		{[]string{"--batch", "8", "--balance", "dynamic:"}, `--balance "dynamic:": want dynamic:K`},
		{[]string{"--batch", "99999999999999"}, "want a number of samples from 0 to 2147483647"},
		{[]string{"--straggler", "1:2:1", "--jitter", "1:5ms", "--batch", "2147483647", "--balance", "dynamic:1", "--speed", "0=1,1..2=0.5"}, ""},
	} {
		_, err := parseOptions(p, "prog", c.args, io.Discard)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
	}
}

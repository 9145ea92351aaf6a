package runtime_test

import (
	"testing"
	"time"
)

// At two ranks the checker predicts reductions of fractions, each one
// rounding whatever the order: the pairs plan, whose shares of a batch of
// 9 make fractions of its weighted averages and whose averages divided
// before the sum leave halves, is checked in full on every float dtype
// through the CPU backend's operators, and a changed element among those
// fractions (bf16.wavg.sum, bucket 12) is found.
func TestPairReductionsChecked(t *testing.T) {
	ok(t, 2, "pairs", "--batch", "9", "--steps", "2", "--warmup", "0", "--quiet")
	r := mpirun(t, 2, []string{"SYNCGEN_TEST_CORRUPT=1:1:12:3"}, 60*time.Second, "pairs", "--batch", "9", "--steps", "2", "--warmup", "0", "--quiet")
	if r.code == 0 {
		t.Fatalf("a wrong element passed:\n%s", r.out)
	}
	mustContain(t, r, "# 1 wrong, 2 checks", `rank 1: step 1: bucket "bf16.wavg.sum": 1 wrong`)
}

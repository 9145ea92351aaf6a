//go:build syncgen_testhooks

package cpu

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/proc"
)

// testPieceTime is the test hook SYNCGEN_TEST_PIECE_TIME=DUR: the warm-up's
// time of a piece, in place of the measured one, when the backend sizes its
// pieces, so that a test can make it choose a size; 0 when unset. It is
// read once.
var testPieceTime = sync.OnceValue(func() time.Duration {
	v := os.Getenv("SYNCGEN_TEST_PIECE_TIME")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		fmt.Fprintf(os.Stderr, "%s: ignoring SYNCGEN_TEST_PIECE_TIME=%q: want a duration like 1ms\n", proc.Name(), v)
		return 0
	}
	return d
})

package runtime

import (
	"testing"
	"time"
)

func TestSettleFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{
		{"", defaultSettle},
		{"0", 0},
		{"off", 0},
		{"OFF", 0},
		{"20ms", 20 * time.Millisecond},
		{" 1s ", time.Second},
		{"-1s", defaultSettle},  // negative: ignored
		{"2m", defaultSettle},   // over a minute: ignored
		{"soon", defaultSettle}, // not a duration: ignored
	} {
		t.Setenv("SYNCGEN_SETTLE", c.env)
		if got := settleFromEnv(); got != c.want {
			t.Errorf("SYNCGEN_SETTLE=%q: %v, want %v", c.env, got, c.want)
		}
	}
}

// The pieces grow from 4 MiB while a piece is expected to take at most
// pieceTarget, and never beyond 16 MiB (glibc's mmap threshold).
func TestPieceBytes(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		took time.Duration
		want int64
	}{
		{100 * time.Microsecond, 16 * mib},
		{750 * time.Microsecond, 16 * mib},
		{760 * time.Microsecond, 8 * mib},
		{1500 * time.Microsecond, 8 * mib},
		{1510 * time.Microsecond, 4 * mib},
		{10 * time.Millisecond, 4 * mib},
	} {
		if got := pieceBytes(4*mib, c.took); got != c.want {
			t.Errorf("pieceBytes(4 MiB, %v) = %s, want %s", c.took, formatBytes(got), formatBytes(c.want))
		}
	}
	for w, want := range map[int]int{0: -1, 1: -1, 2: -1, 3: -1, 4: 2, 5: 3, 10: 8} {
		if got := sizingStep(w); got != want {
			t.Errorf("sizingStep(%d) = %d, want %d", w, got, want)
		}
	}
}

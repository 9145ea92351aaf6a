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

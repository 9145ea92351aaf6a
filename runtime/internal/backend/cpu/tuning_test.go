package cpu

import (
	"io"
	"math"
	"os"
	"strings"
	"testing"
)

// parseSize takes binary units in any case, saturates what int64 cannot
// hold (no split) and refuses what is not a size: NaN and Inf once became
// pieces of one element.
func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4MiB", 4 << 20, true},
		{"4mib", 4 << 20, true},
		{"512K", 512 << 10, true},
		{"1.5m", 3 << 19, true},
		{" 1048576 ", 1 << 20, true},
		{"off", 0, true},
		{"0", 0, true},
		{"1e30", math.MaxInt64, true},
		{"1e400", math.MaxInt64, true},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"-Inf", 0, false},
		{"-1M", 0, false},
		{"0.5", 0, false},
		{"4 bytes", 0, false},
	} {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// A bad variable is reported by the first rank only: every rank has the
// same environment.
func TestWarnEnvOnce(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	t.Setenv("SYNCGEN_CPU_CHUNK", "NaN")
	if out := captureStderr(t, func() { TuningFromEnv() }); out != "" {
		t.Errorf("rank 1 warned: %q", out)
	}
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	if out := captureStderr(t, func() { TuningFromEnv() }); !strings.Contains(out, `ignoring SYNCGEN_CPU_CHUNK="NaN": want a size like 4MiB`) {
		t.Errorf("rank 0 said %q", out)
	}
}

// captureStderr returns what fn writes to os.Stderr.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	fn()
	os.Stderr = old
	w.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

// TestDivideAheadNeedsSpareProcessors pins auto's rule: ahead only when
// every rank has a processor for its divider and one is left over.
func TestDivideAheadNeedsSpareProcessors(t *testing.T) {
	cases := []struct {
		choice           divideChoice
		localRanks, cpus int
		want             bool
	}{
		{divideAuto, 2, 16, true},
		{divideAuto, 4, 16, true},
		{divideAuto, 7, 16, true},
		{divideAuto, 8, 16, false}, // twice: the dividers crowd out MPI's progress
		{divideAuto, 16, 16, false},
		{divideAuto, 0, 16, false},
		{divideInline, 2, 16, false},
		{divideAhead, 16, 16, true},
	}
	for _, c := range cases {
		if got := c.choice.ahead(c.localRanks, c.cpus); got != c.want {
			t.Errorf("choice %d, %d ranks on %d processors: ahead = %v, want %v", c.choice, c.localRanks, c.cpus, got, c.want)
		}
	}
}

// Ranks compare the knobs' values, not where they came from: the default
// and SYNCGEN_CPU_CHUNK set to the same size split alike, so they match.
func TestSignatureComparesValues(t *testing.T) {
	t.Setenv("SYNCGEN_CPU_CHUNK", "")
	def := TuningFromEnv()
	t.Setenv("SYNCGEN_CPU_CHUNK", "1MiB")
	set := TuningFromEnv()
	if def.Signature() != set.Signature() {
		t.Errorf("default %q and SYNCGEN_CPU_CHUNK=1MiB %q differ", def.Signature(), set.Signature())
	}
	if !strings.Contains(set.String(), "(SYNCGEN_CPU_CHUNK)") {
		t.Errorf("the header's %q does not say the size was set", set.String())
	}
	t.Setenv("SYNCGEN_CPU_CHUNK", "2MiB")
	if other := TuningFromEnv(); other.Signature() == def.Signature() {
		t.Errorf("2 MiB and the default both read %q", def.Signature())
	}
}

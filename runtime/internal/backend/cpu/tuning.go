package cpu

// The CPU backend's tuning knobs, read from the environment so that the generated program's
// flags stay those of the design. Every rank must use the same values (they
// decide how collectives are split, and MPI matches the pieces): the plan
// check compares them across ranks. Open MPI's mpirun passes the launching
// shell's environment to the ranks on one host; across hosts, use -x.
//
//	SYNCGEN_CPU_CHUNK   piece size of the CPU backend's collectives
//	                    (default 1MiB; 0 or off: no splitting).
//	SYNCGEN_CPU_MODE    blocking (default) or nonblocking: how the CPU
//	                    backend runs collectives (coll.go, nb.go).
//	SYNCGEN_CPU_INFLIGHT  pieces of one collective in flight in the
//	                    nonblocking mode (default 2).
//	SYNCGEN_CPU_DIVIDE  auto (default), inline or ahead: where the blocking
//	                    mode divides an average (divide.go). It changes no
//	                    value and no MPI call, so ranks may differ in it.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/proc"
)

// defaultCPUChunk is the piece size when SYNCGEN_CPU_CHUNK is not set:
// small enough that a piece, its scratch and the peer's piece stay in a
// core's L2 cache while MPI reduces them, large enough that the calls'
// own cost stays small. Measured against 512 KiB to 16 MiB pieces at 2 to
// 8 ranks (docs/performance.md, "Pieces of large collectives").
const defaultCPUChunk = 1 << 20

// TuningFromEnv reads the CPU backend's knobs.
func TuningFromEnv() Tuning {
	t := Tuning{chunkBytes: defaultCPUChunk, inflight: 2}
	switch v := os.Getenv("SYNCGEN_CPU_MODE"); v {
	case "", "blocking":
	case "nonblocking":
		t.nonblocking = true
	default:
		proc.WarnEnv("SYNCGEN_CPU_MODE=%q: want blocking or nonblocking", v)
	}
	switch v := os.Getenv("SYNCGEN_CPU_DIVIDE"); v {
	case "", "auto":
	case "inline":
		t.divide = divideInline
	case "ahead":
		t.divide = divideAhead
	default:
		proc.WarnEnv("SYNCGEN_CPU_DIVIDE=%q: want auto, inline or ahead", v)
	}
	if v := os.Getenv("SYNCGEN_CPU_INFLIGHT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			proc.WarnEnv("SYNCGEN_CPU_INFLIGHT=%q: want 1 to 64", v)
		} else {
			t.inflight = n
		}
	}
	if v := os.Getenv("SYNCGEN_CPU_CHUNK"); v != "" {
		n, err := parseSize(v)
		switch {
		case err != nil:
			proc.WarnEnv("SYNCGEN_CPU_CHUNK=%q: %v", v, err)
		case n == 0:
			t.chunkBytes, t.chunkSet = math.MaxInt64, true
		default:
			t.chunkBytes, t.chunkSet = n, true
		}
	}
	return t
}

// parseSize parses "4MiB", "512K", "1.5m", "1048576" or "off" (0). Units
// are binary and their case does not matter. A size too large for int64
// is math.MaxInt64 (no split); NaN, infinities, negative sizes and
// fractions of a byte are refused (strconv.ParseFloat accepts "NaN" and
// "Inf", which once became pieces of one element).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if n := len(s) - len(u.suffix); n >= 0 && strings.EqualFold(s[n:], u.suffix) {
			s, mult = s[:n], u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if errors.Is(err, strconv.ErrRange) && f > 0 {
		return math.MaxInt64, nil // 1e400
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("want a size like 4MiB")
	}
	bytes := f * float64(mult)
	switch {
	case bytes >= math.MaxInt64:
		return math.MaxInt64, nil
	case bytes != math.Trunc(bytes):
		return 0, fmt.Errorf("%v bytes is not a whole number of bytes", bytes)
	}
	return int64(bytes), nil
}

// Signature describes the knobs for the comparison between ranks, which
// must agree on them (they decide how collectives are split, and MPI
// matches the pieces); it fits in 80 bytes. It names the values, not
// where they came from: SYNCGEN_CPU_CHUNK=1MiB on one rank and the
// default on another split alike.
func (t Tuning) Signature() string {
	mode := "blocking"
	if t.nonblocking {
		mode = "nonblocking"
	}
	return mode + ", " + t.summary(false)
}

package runtime

// Every rank must run the same plan: MPI matches collectives by their order
// on a communicator, so a rank with another plan would hang the job or
// corrupt it. Each rank hashes its plan (the plan's own Hash, its tables and
// the recorded statements) and its tuning; an allgather compares them.

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/backend/cpu"
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// The record each rank contributes to the comparison: its plan digest,
// its CPU tuning, the run's flags that every rank must share, a digest of
// the environment warnings it recorded, and a label for messages.
const (
	recDigest      = 0   // 32 bytes: planDigest
	recTuning      = 32  // 80 bytes: the CPU backend's knobs, described
	recSteps       = 112 // 8 bytes each: --steps, --warmup, --check
	recWarmup      = 120
	recCheck       = 128
	recBackend     = 136 // 16 bytes: --backend, zero-padded
	recHetero      = 152 // 96 bytes: the heterogeneity flags (heteroSignature)
	recWarnings    = 248 // 32 bytes: warningsDigest
	recLabel       = 280 // the plan's hash, source and name, zero-padded
	planRecordSize = recLabel + 120
)

// checkSamePlan compares every rank's plan digest, tuning and run flags; a
// mismatch is an error (the same on every rank) that names the ranks that
// differ. MPI matches collectives by their order, so ranks that run
// different plans, split buckets differently or run a different number of
// steps would hang in a collective or mix up their data.
func checkSamePlan(h *mpihost.Host, p *plan.Plan, prog *plan.Program, tune cpu.Tuning, o *options) error {
	rec := make([]byte, planRecordSize)
	d := plan.Digest(p, prog)
	copy(rec[recDigest:], d[:])
	copy(rec[recTuning:recSteps], tune.Signature())
	binary.LittleEndian.PutUint64(rec[recSteps:], uint64(o.steps))
	binary.LittleEndian.PutUint64(rec[recWarmup:], uint64(o.warmup))
	binary.LittleEndian.PutUint64(rec[recCheck:], uint64(o.checkEvery))
	copy(rec[recBackend:recHetero], o.backend)
	copy(rec[recHetero:recWarnings], heteroSignature(o.hetero, recWarnings-recHetero))
	warnings := proc.EnvWarnings()
	wd := warningsDigest(warnings)
	copy(rec[recWarnings:], wd[:])
	hash := p.Hash
	if len(hash) > 12 {
		hash = hash[:12] // as the report's header shows it
	}
	copy(rec[recLabel:], "plan "+hash+" from "+p.Source+" ("+p.Name+")")
	all, err := h.Allgather(rec)
	if err != nil {
		return fmt.Errorf("comparing plans between ranks: %w", err)
	}
	field := func(x []byte, from, to int) string { return strings.TrimRight(string(x[from:to]), "\x00") }
	if h.Rank != 0 && string(all[0][recWarnings:recLabel]) != string(wd[:]) {
		// Rank 0 printed its own warnings; this rank's environment differs.
		for _, w := range warnings {
			fmt.Fprintf(os.Stderr, "%s: rank %d: %s\n", proc.Name(), h.Rank, w)
		}
	}

	plans := groupRanks(all, func(x []byte) string { return string(x[recDigest:recTuning]) })
	if len(plans) > 1 {
		var lines []string
		for _, g := range plans {
			lines = append(lines, fmt.Sprintf("  %s %s", verb(g), field(all[g[0]], recLabel, planRecordSize)))
		}
		return fmt.Errorf("the ranks do not all run the same plan (every rank must run the same program, built from the same .sync file):\n%s",
			strings.Join(lines, "\n"))
	}
	tunings := groupRanks(all, func(x []byte) string { return string(x[recTuning:recSteps]) })
	if len(tunings) > 1 {
		var parts []string
		for _, g := range tunings {
			parts = append(parts, fmt.Sprintf("%s: %s", text.RankList(g), field(all[g[0]], recTuning, recSteps)))
		}
		return fmt.Errorf("the CPU backend's tuning (SYNCGEN_CPU_CHUNK, SYNCGEN_CPU_MODE, SYNCGEN_CPU_INFLIGHT) differs between ranks (%s); set it the same everywhere (mpirun -x NAME)",
			strings.Join(parts, "; "))
	}
	flags := groupRanks(all, func(x []byte) string { return string(x[recSteps:recWarnings]) })
	if len(flags) > 1 {
		var lines []string
		for _, g := range flags {
			x := all[g[0]]
			check := fmt.Sprint(binary.LittleEndian.Uint64(x[recCheck:]))
			if check == "0" {
				check = "off"
			}
			line := fmt.Sprintf("  %s --steps %d --warmup %d --check %s --backend %s", verb(g),
				binary.LittleEndian.Uint64(x[recSteps:]), binary.LittleEndian.Uint64(x[recWarmup:]), check, field(x, recBackend, recHetero))
			if h := field(x, recHetero, recWarnings); h != "" {
				line += " " + h
			}
			lines = append(lines, line)
		}
		return fmt.Errorf("the ranks were started with different flags (every rank must run the same steps, checks, backend and heterogeneity; give them the same flags):\n%s",
			strings.Join(lines, "\n"))
	}
	return nil
}

// warningsDigest identifies a rank's environment warnings, so that ranks
// can compare them in a fixed-size record.
func warningsDigest(warnings []string) [32]byte {
	return sha256.Sum256([]byte(strings.Join(warnings, "\n")))
}

// groupRanks groups the ranks by key(record), in the order of each group's
// first rank.
func groupRanks(all [][]byte, key func([]byte) string) [][]int {
	index := map[string]int{}
	var groups [][]int
	for r, x := range all {
		k := key(x)
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// verb is "rank 3 runs" or "ranks 0, 2 run".
func verb(rs []int) string {
	if len(rs) == 1 {
		return text.RankList(rs) + " runs"
	}
	return text.RankList(rs) + " run"
}

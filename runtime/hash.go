package runtime

// Every rank must run the same plan: MPI matches collectives by their order
// on a communicator, so a rank with another plan would hang the job or
// corrupt it. Each rank hashes its plan (the plan's own Hash, its tables and
// the recorded statements) and its tuning; an allgather compares them.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
)

// planDigest hashes everything that must agree between ranks.
func planDigest(p *Plan, prog *program) [32]byte {
	h := sha256.New()
	w := func(vals ...any) {
		for _, v := range vals {
			switch x := v.(type) {
			case string:
				_ = binary.Write(h, binary.LittleEndian, int64(len(x)))
				_, _ = io.WriteString(h, x)
			case int:
				_ = binary.Write(h, binary.LittleEndian, int64(x))
			case int64:
				_ = binary.Write(h, binary.LittleEndian, x)
			case bool:
				_ = binary.Write(h, binary.LittleEndian, x)
			default:
				_ = binary.Write(h, binary.LittleEndian, x)
			}
		}
	}
	w(p.Hash, len(p.Tensors), len(p.Streams), len(p.Buckets))
	for _, t := range p.Tensors {
		w(t.Name, uint8(t.DType), len(t.Shape), t.Frozen, t.Bucket, t.Offset)
		for _, d := range t.Shape {
			w(d)
		}
	}
	for _, s := range p.Streams {
		w(s.Name, uint8(s.Priority))
	}
	for _, b := range p.Buckets {
		w(b.Name, uint8(b.Wire), b.Elems, len(b.Tensors))
		for _, t := range b.Tensors {
			w(t)
		}
	}
	var stmts func(ss []stmt)
	stmts = func(ss []stmt) {
		w(len(ss))
		for _, s := range ss {
			w(uint8(s.kind), string(s.at), s.stream, int64(s.d), uint8(s.coll), uint8(s.op), s.root,
				s.after.kind, s.after.stream, len(s.buckets))
			for _, b := range s.buckets {
				w(b)
			}
			stmts(s.body)
		}
	}
	stmts(prog.init)
	stmts(prog.step)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// planRecordSize is the size of the record each rank contributes.
const planRecordSize = 32 + 8 + 120

// checkSamePlan compares every rank's plan digest and tuning; a mismatch is
// an error (the same on every rank) that names the ranks that differ.
func checkSamePlan(h *mpiHost, p *Plan, prog *program, tune cpuTuning) error {
	rec := make([]byte, planRecordSize)
	d := planDigest(p, prog)
	copy(rec, d[:])
	binary.LittleEndian.PutUint64(rec[32:], uint64(tune.chunkBytes)^uint64(tune.inflight)<<56)
	if tune.nonblocking {
		rec[32+7] ^= 0x80
	}
	copy(rec[40:], p.Source+" ("+p.Name+")")
	all, err := h.Allgather(rec)
	if err != nil {
		return fmt.Errorf("comparing plans between ranks: %w", err)
	}
	groups := map[string][]int{}
	label := map[string]string{}
	for r, x := range all {
		key := string(x[:32])
		groups[key] = append(groups[key], r)
		label[key] = fmt.Sprintf("plan %s from %s", hex.EncodeToString(x[:6]), strings.TrimRight(string(x[40:]), "\x00"))
	}
	if len(groups) > 1 {
		keys := make([]string, 0, len(groups))
		for k := range groups {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return groups[keys[i]][0] < groups[keys[j]][0] })
		var lines []string
		for _, k := range keys {
			lines = append(lines, fmt.Sprintf("  %s run %s", rankList(groups[k]), label[k]))
		}
		return fmt.Errorf("the ranks do not all run the same plan (every rank must run the same program, built from the same .sync file):\n%s",
			strings.Join(lines, "\n"))
	}
	chunks := map[uint64][]int{}
	for r, x := range all {
		c := binary.LittleEndian.Uint64(x[32:])
		chunks[c] = append(chunks[c], r)
	}
	if len(chunks) > 1 {
		var parts []string
		for c, rs := range chunks {
			parts = append(parts, fmt.Sprintf("%s use %#x", rankList(rs), c))
		}
		sort.Strings(parts)
		return fmt.Errorf("the CPU backend's tuning (SYNCGEN_CPU_CHUNK, SYNCGEN_CPU_MODE, SYNCGEN_CPU_INFLIGHT) differs between ranks (%s); set it the same everywhere (mpirun -x NAME)",
			strings.Join(parts, ", "))
	}
	return nil
}

// rankList renders ranks as "rank 3" or "ranks 0, 2".
func rankList(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprint(r)
	}
	return "ranks " + strings.Join(parts, ", ")
}

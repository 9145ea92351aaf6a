package cpu

// Sizing the pieces of large collectives from the warm-up.
//
// Two bounds decide how large a piece of a collective can be (coll.go
// says why collectives are split at all). From above, glibc: a piece of
// 32 MiB or more makes Open MPI's scratch buffer a fresh mmap on every
// call, so a piece is never larger than 16 MiB. And Go: a call into C that
// lasts longer than 10 ms lets Go's system monitor take the rank's
// processor and start polling every 20 us (yieldEvery), so a piece must end
// well within that. Within these bounds larger pieces are better (fewer
// calls, as C makes), but how long one takes depends on the machine and on
// how many ranks share its cores, which only a measurement tells.
//
// So the pieces start at 4 MiB and the streams time them during the
// warm-up, from its second step on (the first touches the buffers' and
// MPI's scratch memory for the first time). Then the ranks agree on the
// slowest rank's quickest piece and grow the pieces to 8 or 16 MiB where
// such a piece is still expected to last at most pieceTarget. The
// quickest, because whatever disturbs a rank only makes a piece slower,
// and the warm-up, before the settle (settle.go), is disturbed more than
// the measured steps.
//
// The sizing happens before the last two warm-up steps, which then run
// with the new size: the first measured step must not pay for glibc's
// first use of the larger scratch buffers, and that takes two calls (the
// first maps a fresh block and raises the threshold as it frees it, the
// second grows the heap and faults its pages in). So plans with fewer
// than 4 warm-up steps (the default is 2) keep 4 MiB pieces.
// SYNCGEN_CPU_CHUNK, when set, fixes the size instead.
//
// The piece times and paired runs behind these bounds:
// bench/results/2026-12-runtime-comments.md, "Pieces of large collectives".

import (
	"encoding/binary"
	"slices"
	"time"
)

const (
	// pieceTarget is how long a grown piece may be expected to take,
	// well within the 10 ms after which Go's system monitor takes the
	// processor of a thread in a call into C. No looser: pieces timed
	// while the host sleeps in a backward are quicker than in the steps,
	// and a looser target grew them where ranks share cores.
	pieceTarget = 3 * time.Millisecond
	// maxPiece keeps Open MPI's scratch buffers below glibc's 32 MiB
	// mmap threshold ceiling.
	maxPiece = 16 << 20
	// maxPieceSamples bounds the piece times a stream keeps.
	maxPieceSamples = 256
)

// TimePieces starts timing the pieces of large collectives, when the
// warm-up sizes them.
func (b *cpuBackend) TimePieces() {
	b.timingPieces = b.tune.autoChunk && b.prog == nil
}

// samplePiece records how long the batch that ran one whole piece of a
// collective took (not the first piece, whose batch also holds the step's
// barriers, which wait for the other ranks).
func (s *cpuStream) samplePiece(d time.Duration) {
	if len(s.pieceTimes) < maxPieceSamples {
		s.pieceTimes = append(s.pieceTimes, d)
	}
}

// SizePieces ends the timing of pieces and sets the piece size from it.
// Every rank calls it (it is collective), whatever its tuning: ranks whose
// tuning differs were stopped before the run (checkSamePlan).
func (b *cpuBackend) SizePieces() error {
	b.timingPieces, b.piecesSized = false, true
	mine := time.Duration(-1) // no piece timed
	var all []time.Duration
	for _, s := range b.streams {
		all = append(all, s.pieceTimes...)
		s.pieceTimes = nil
	}
	if len(all) > 0 {
		mine = slices.Min(all)
	}
	if d := testPieceTime(); d > 0 {
		mine = d
	}
	rec := binary.LittleEndian.AppendUint64(nil, uint64(mine))
	recs, err := b.h.Allgather(rec)
	if err != nil {
		return err
	}
	if !b.tune.autoChunk || b.prog != nil {
		return nil
	}
	slowest := time.Duration(0)
	for _, r := range recs {
		t := time.Duration(binary.LittleEndian.Uint64(r))
		if t < 0 {
			return nil // some rank timed no piece: keep the size
		}
		slowest = max(slowest, t)
	}
	b.tune.chunkBytes = pieceBytes(b.tune.chunkBytes, slowest)
	b.pieceTime = slowest
	return nil
}

// pieceBytes is the size of the pieces when one of chunk bytes took t: the
// largest of chunk, 2*chunk, 4*chunk ... up to maxPiece whose piece is
// expected to take at most pieceTarget.
func pieceBytes(chunk int64, t time.Duration) int64 {
	for chunk*2 <= maxPiece && t*2 <= pieceTarget {
		chunk, t = chunk*2, t*2
	}
	return chunk
}

// sizingStep says before which step (counted from 0) the engine sizes the
// pieces: the last warm-up step but one, having timed those from step 1;
// -1 (never) with fewer than 4 warm-up steps.
func sizingStep(warmup int) int {
	if warmup < 4 {
		return -1
	}
	return warmup - 2
}

// SizingStep implements backend.PieceSizer.
func (b *cpuBackend) SizingStep(warmup int) int { return sizingStep(warmup) }

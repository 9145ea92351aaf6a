package cpu

import (
	"unsafe"

	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// Where the blocking mode divides an average.
//
// An average is MPI's sum, then a division of every element by the number
// of ranks: a second pass over the buffer, as long as the collective's own
// last pass. Inline, the MPI thread divides each piece after its call, and
// the pass adds to the collective's time. Ahead, a divider thread of the
// C layer divides piece k while the MPI thread runs piece k+1, and the two
// split the last piece, so that only half of the last piece's division is
// left on the critical path (runtime/mpi's sg_mpi.c). That needs a core
// to spare for each rank: on a host with as many ranks as cores, the
// divider would take the core of a rank that is still reducing. A
// collective of one piece is divided inline either way, or at two ranks
// inside MPI's operator (batch.go's addPiece). The values are the
// same either way: the division is the same code on the same elements.

// divideChoice is SYNCGEN_CPU_DIVIDE.
type divideChoice uint8

const (
	divideAuto divideChoice = iota
	divideInline
	divideAhead
)

// ahead says whether averages are divided ahead, for localRanks ranks on
// this host and cpus processors this process may run on: always or never
// when the user chose, else when every rank of the host has a processor
// to spare for its divider and one is still left over: with exactly two
// processors a rank, the dividers' spinning takes the processors that MPI's
// progress and the system need, and dividing ahead costs more than inline.
func (d divideChoice) ahead(localRanks, cpus int) bool {
	switch d {
	case divideInline:
		return false
	case divideAhead:
		return true
	}
	return localRanks > 0 && 2*localRanks < cpus
}

// divideAvg divides every element of b (of dtype dt) by size, as an
// average's sum is divided, with runtime/mpi's C code: vectorised, and by a
// multiplication or an exponent change for powers of two, where the
// checker's elem.AvgDivide is a scalar loop of divisions and software
// conversions many times slower. The values are the same
// (runtime/mpi's TestAvgDivideMatchesGo).
func divideAvg(b []byte, dt elem.DType, size int) {
	if len(b) == 0 {
		return
	}
	mpi.AvgDivide(unsafe.Pointer(&b[0]), dt, int64(len(b))/dt.Size(), size)
}

package cpu

// Hierarchical allreduce (`algo hierarchical`), Horovod's form: each piece
// is reduce-scattered among the ranks of one host, each rank's block is
// allreduced across the hosts (with the ranks of the same local rank), and
// the blocks are allgathered inside the host. Each element is the same
// reduction of every rank's input as a flat allreduce; an average is
// divided after the last phase, as a flat one is.
//
// The form needs every host to hold the same number of ranks of the
// stream's communicator: otherwise the inter-host communicators differ in
// size and a block would miss some hosts. Then the allreduce runs flat,
// and the header says so (HierNote).

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/text"
	"github.com/syncgen/syncgen/runtime/mpi"
)

// hierComms are a stream's communicators for hierarchical allreduces.
type hierComms struct {
	intra, inter mpi.Comm
	lrank, lsize int
	hosts        int
	// even: every host holds lsize ranks; false runs the allreduces flat.
	even bool
}

// WithHierarchical returns t with the streams' communicators for
// hierarchical allreduces made when on (the plan has one).
func (t Tuning) WithHierarchical(on bool) Tuning {
	t.hier = on
	return t
}

// newHierComms splits comm into the ranks of this host and the ranks of
// the same local rank on every host (collective over comm), and finds out
// whether every host holds the same number of ranks.
func newHierComms(comm mpi.Comm, rank int) (*hierComms, error) {
	intra, err := comm.SplitShared()
	if err != nil {
		return nil, err
	}
	hc := &hierComms{intra: intra}
	if hc.lrank, err = intra.Rank(); err != nil {
		return nil, err
	}
	if hc.lsize, err = intra.Size(); err != nil {
		return nil, err
	}
	if hc.inter, err = comm.Split(hc.lrank, rank); err != nil {
		return nil, err
	}
	rec := binary.LittleEndian.AppendUint32(nil, uint32(hc.lsize))
	all, err := comm.AllgatherBytes(rec)
	if err != nil {
		return nil, err
	}
	hc.even = true
	for _, r := range all {
		if int(binary.LittleEndian.Uint32(r)) != hc.lsize {
			hc.even = false
		}
	}
	hc.hosts = len(all) / hc.lsize
	return hc, nil
}

// free releases the communicators.
func (hc *hierComms) free() error {
	if err := hc.intra.Free(); err != nil {
		return err
	}
	return hc.inter.Free()
}

// HierNote says how hierarchical allreduces run, for the header's
// "algo hierarchical" line; "" when the plan has none. It starts with
// "runs flat:" where they run flat (the report reads it so).
func (b *cpuBackend) HierNote() string {
	if len(b.streams) == 0 || b.streams[0].hier == nil {
		return ""
	}
	hc := b.streams[0].hier
	if b.prog != nil {
		return "runs flat: the nonblocking mode (SYNCGEN_CPU_MODE=nonblocking) has no hierarchical form"
	}
	if !hc.even {
		return "runs flat: the hosts hold different numbers of ranks"
	}
	return fmt.Sprintf("reduce-scatter inside each host (%d rank%s), allreduce of each slice across %d host%s, allgather inside the host",
		hc.lsize, text.Plural(hc.lsize), hc.hosts, text.Plural(hc.hosts))
}

// Phase figures: the C layer times each phase of every piece around its
// MPI call (mpi.Batch.Phases); the stream sums them over the pieces of the
// hierarchical allreduce in progress and hands the sums to the first
// marker recorded after it (the collective's end event), where the engine
// reads them with Phases. In a group, a stream's allreduces share that end
// event and their sums add up.

// addPhases adds one piece's phase nanoseconds to the stream's sums.
func (s *cpuStream) addPhases(ns [3]int64) {
	for i, v := range ns {
		s.phases[i] += time.Duration(v)
	}
	s.phased = true
}

// takePhases moves the stream's phase sums, if any, to m.
func (s *cpuStream) takePhases(m *cpuMarker) {
	if !s.phased {
		return
	}
	m.phases, m.phased = s.phases, true
	s.phases, s.phased = [3]time.Duration{}, false
}

// Phases returns the phase times that end, a completed event recorded
// after a hierarchical allreduce, carries: the reduce-scatter inside the
// host, the allreduce across hosts and the allgather inside the host,
// summed over the allreduce's pieces. ok is false for any other event.
func (b *cpuBackend) Phases(end backend.Event) (phases [3]time.Duration, ok bool) {
	e, isCPU := end.(*cpuEvent)
	if !isCPU {
		return phases, false
	}
	m := e.get()
	if m == nil || !m.completed() || !m.phased {
		return phases, false
	}
	return m.phases, true
}

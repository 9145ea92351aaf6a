package runtime

import (
	"github.com/syncgen/syncgen/runtime/internal/mpihost"
	"github.com/syncgen/syncgen/runtime/internal/plan"
)

// ncclHierAlgo decides what `algo hierarchical` becomes on NCCL, before
// any communicator starts: the NCCL_ALGO to set ("" to leave the
// environment as it is) and the note the header prints. NCCL chooses its
// algorithm per call from NCCL_ALGO, which it reads as a communicator
// starts, for the whole process; since NCCL 2.24 it may name one
// collective ("allreduce:tree"). NCCL's tree (a chain inside each node, a
// tree across nodes) is its hierarchical allreduce, so a plan whose
// allreduces are all hierarchical, on more than one host, gets
// NCCL_ALGO=allreduce:tree; otherwise NCCL keeps its own choice and the
// note says why. userAlgo is NCCL_ALGO as the user set it; hosts is the
// number of hosts of the job. Every rank decides alike: the plan and the
// host count are the same on every rank.
func ncclHierAlgo(prog *plan.Program, userAlgo string, hosts int) (set, note string) {
	const head = "`algo hierarchical` on nccl: "
	switch {
	case !prog.Hierarchical():
		return "", ""
	case userAlgo != "":
		return "", head + "NCCL_ALGO=" + userAlgo + " as set, for the collectives it names, process-wide"
	case hosts < 2:
		return "", head + "one host, where a hierarchical allreduce is a flat one: NCCL chooses its algorithm by size and topology"
	case !prog.AllAllreducesHierarchical():
		return "", head + "the plan also has flat allreduces, and NCCL_ALGO sets one algorithm for every allreduce of the process, so NCCL chooses by size and topology (NCCL_ALGO=allreduce:tree makes them all NCCL's tree)"
	}
	return "allreduce:tree", head + "NCCL_ALGO=allreduce:tree, NCCL's tree for every allreduce (a chain inside each host, a tree across hosts; NCCL 2.24 or newer reads it per collective)"
}

// countHosts is the number of hosts of the job: the ranks that are local
// rank 0 of their host.
func countHosts(h *mpihost.Host) (int, error) {
	first := []byte{0}
	if h.LocalRank == 0 {
		first[0] = 1
	}
	all, err := h.Allgather(first)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range all {
		n += int(r[0])
	}
	return n, nil
}

package plan

import "fmt"

// Coll names a collective operation.
type Coll uint8

// The collectives. All work in place on one buffer, as NCCL's in-place
// forms do; CollInfo describes each.
const (
	CollNone Coll = iota
	CollAllReduce
	CollBroadcast
	CollReduce
	CollAllGather
	CollReduceScatter
)

// CollInfo is everything the runtime needs to know about one collective
// apart from how a backend runs it, in one record per collective (as
// nccl-tests keeps one testColl per collective) rather than in switches
// spread over the packages that use it.
type CollInfo struct {
	// Name is the collective's keyword in the .sync language.
	Name string
	// Reduces: the collective applies a reduction operator (op).
	Reduces bool
	// RootWord is the keyword that names its root rank in .sync ("from",
	// "to"), or "" for a collective without a root.
	RootWord string
	// Sliced: the buffer is size slices of Elems/size elements, one per
	// rank, so a bucket it touches is padded to a multiple of the world
	// size, and it moves the whole padded buffer (Coll.Elems).
	Sliced bool
	// BusFactor is nccl-tests' factor from algorithm bandwidth to bus
	// bandwidth with n ranks.
	BusFactor func(n int) float64
	// Result says what every rank's buffer holds afterwards: the semantics
	// that the backends implement and the checker replays.
	Result string
}

// colls is indexed by Coll.
var colls = [...]CollInfo{
	CollNone: {Name: "none", BusFactor: one},
	CollAllReduce: {Name: "allreduce", Reduces: true, BusFactor: func(n int) float64 { return 2 * float64(n-1) / float64(n) },
		Result: "every rank ends with the reduction of all ranks' buffers"},
	CollBroadcast: {Name: "broadcast", RootWord: "from", BusFactor: one,
		Result: "every rank ends with Root's buffer"},
	CollReduce: {Name: "reduce", Reduces: true, RootWord: "to", BusFactor: one,
		Result: "Root ends with the reduction; the others' buffers are unchanged"},
	CollAllGather: {Name: "allgather", Sliced: true, BusFactor: sliceFactor,
		Result: "every rank ends with slice r of rank r in slice r, for every r"},
	CollReduceScatter: {Name: "reducescatter", Reduces: true, Sliced: true, BusFactor: sliceFactor,
		Result: "rank r ends with the reduction of slice r of all ranks in its slice r (the slice stays where it is, as in ncclReduceScatter with recvbuff = sendbuff + r*Count/size); the other slices are undefined afterwards"},
}

func one(int) float64 { return 1 }

func sliceFactor(n int) float64 { return float64(n-1) / float64(n) }

// Info returns the collective's description; an unknown Coll gets
// CollNone's.
func (c Coll) Info() *CollInfo {
	if int(c) < len(colls) {
		return &colls[c]
	}
	return &colls[CollNone]
}

// String returns the collective's keyword in the .sync language.
func (c Coll) String() string {
	if int(c) < len(colls) {
		return colls[c].Name
	}
	return fmt.Sprintf("coll(%d)", c)
}

// Elems is how many elements the collective moves of a bucket of elems
// elements whose buffer holds padded (elems, or more for a sliced
// collective's padding): a sliced collective moves the whole padded
// buffer, the others the bucket.
func (c Coll) Elems(elems, padded int64) int64 {
	if c.Info().Sliced {
		return padded
	}
	return elems
}

// Reduces reports whether the collective applies a reduction operator.
func (c Coll) Reduces() bool { return c.Info().Reduces }

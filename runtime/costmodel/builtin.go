package costmodel

import (
	"fmt"
	"sort"
	"strings"
)

// The built-in profiles describe fabrics by NCCL's own tuning model
// (src/graph/tuning.cc): a ring algorithm's time is its base latency, plus
// a hardware latency per ring step, plus the bytes over the bus bandwidth.
// Two protocols are modelled: LL (low latency, a quarter of the bus
// bandwidth for allreduce and a third for the others) for small sizes and
// Simple for large ones, split where their times cross, as NCCL picks the
// faster one. Tree algorithms, LL128 and CollNet are not modelled.
const nccl = "NCCL src/graph/tuning.cc at commit 01afd20a77b5 (baseLat, hwLat, the LL bandwidth share)"

// The latencies of tuning.cc (microseconds) for the ring algorithm.
const (
	baseLatLL     = 3.6
	baseLatSimple = 8.4
)

// hwLat is tuning.cc's hardware latency per ring step: LL, Simple.
var hwLat = map[string][2]float64{
	"nvlink": {0.47, 3.4},
	"pci":    {1.0, 5.7},
	"net":    {2.7, 9.6},
}

// fabric is one built-in profile's hardware.
type fabric struct {
	hw     string  // a key of hwLat
	busGBs float64 // the ring's bus bandwidth with the Simple protocol
	memGBs float64 // the GPU's memory bandwidth (casts, updates)
	about  string  // where busGBs and memGBs come from
}

var fabrics = map[string]fabric{
	"nvlink-a100": {"nvlink", 235, 2039, "bus bandwidth: tuning.cc's cap for compute capability 8.0 (235 GB/s); memory: A100 80GB SXM data sheet (2039 GB/s)"},
	"nvlink-h100": {"nvlink", 450, 3350, "bus bandwidth: NVLink 4 per direction (900 GB/s bidirectional, H100 SXM data sheet); memory: 3350 GB/s (same)"},
	"nvlink-h200": {"nvlink", 450, 4800, "bus bandwidth: NVLink 4 per direction (900 GB/s bidirectional, H200 data sheet); memory: 4800 GB/s (same)"},
	"pcie-gen4":   {"pci", 24, 2039, "bus bandwidth: PCIe 4.0 x16 (32 GB/s raw, 24 GB/s achieved is typical); memory: A100 (2039 GB/s)"},
	"ib-hdr":      {"net", 25, 2039, "bus bandwidth: InfiniBand HDR, 200 Gb/s a GPU (one NIC a GPU); memory: A100 (2039 GB/s)"},
	"ib-ndr":      {"net", 50, 3350, "bus bandwidth: InfiniBand NDR, 400 Gb/s a GPU (one NIC a GPU); memory: H100 (3350 GB/s)"},
}

// BuiltinNames lists the built-in profiles, sorted.
func BuiltinNames() []string {
	var names []string
	for n := range fabrics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Builtin returns the built-in profile name for a world of n ranks, or
// false when there is none of that name.
func Builtin(name string, n int) (*Profile, bool) {
	fb, ok := fabrics[name]
	if !ok {
		return nil, false
	}
	lat := hwLat[fb.hw]
	p := &Profile{Format: Format, Name: name, Backend: "nccl", MemGBs: fb.memGBs,
		Source: fmt.Sprintf("built-in: latencies and protocol shares from %s; %s", nccl, fb.about)}
	for _, coll := range Collectives {
		llShare := 1.0 / 3
		if coll == "allreduce" {
			llShare = 1.0 / 4
		}
		ll := Segment{AlphaUs: baseLatLL, StepUs: lat[0], BusGBs: fb.busGBs * llShare}
		simple := Segment{AlphaUs: baseLatSimple, StepUs: lat[1], BusGBs: fb.busGBs}
		simple.FromBytes = crossover(coll, n, ll, simple)
		p.Curves = append(p.Curves, Curve{Collective: coll, Segments: []Segment{ll, simple}})
	}
	return p, true
}

// crossover is the first size (a power of two) at which the Simple
// protocol is faster than LL, at least 1 byte.
func crossover(coll string, n int, ll, simple Segment) int64 {
	for b := int64(1); b < 1<<40; b *= 2 {
		if simple.Us(coll, b, n) < ll.Us(coll, b, n) {
			return b
		}
	}
	return 1 << 40
}

// Resolve returns the profile that a --profile argument names: a built-in
// profile's name, or the path of a profile file. n is the world size the
// prediction is for; a file measured at another size is used (its
// segments scale with the ranks) with a warning.
func Resolve(arg string, n int) (p *Profile, warning string, err error) {
	if b, ok := Builtin(arg, n); ok {
		return b, "", nil
	}
	p, err = ReadProfile(arg)
	if err != nil {
		if !strings.ContainsAny(arg, "/.") {
			err = fmt.Errorf("%w (the built-in profiles are %s)", err, strings.Join(BuiltinNames(), ", "))
		}
		return nil, "", err
	}
	if p.Ranks > 0 && p.Ranks != n {
		warning = otherRanksWarning(arg, p, n)
	}
	return p, warning, nil
}

// otherRanksWarning says what a prediction for n ranks takes from profile
// p (named arg), measured at another number of ranks: the bus bandwidths
// as measured, the bytes weighted by the bus factor at n ranks; the
// latencies scaled only by their term per ring step (step_us), which a
// calibrated profile does not have, so its latencies are used as
// measured. A profile measured at one rank has a copy's figures, not the
// network's.
func otherRanksWarning(arg string, p *Profile, n int) string {
	if p.Ranks == 1 {
		return fmt.Sprintf("profile %s was measured at 1 rank and is used for %d: at one rank a collective moves nothing between ranks, so its latencies and bandwidths are a memory copy's, not the network's; calibrate at %d ranks for figures of the network",
			arg, n, n)
	}
	steps := false
	for _, c := range p.Curves {
		for _, s := range c.Segments {
			steps = steps || s.StepUs > 0
		}
	}
	lat := fmt.Sprintf("its latencies (alpha_us) are used as measured at %d ranks, unscaled (it has no latency per ring step, step_us, to scale them by)", p.Ranks)
	if steps {
		lat = fmt.Sprintf("its latencies grow with the ring's steps at %d ranks (step_us)", n)
	}
	return fmt.Sprintf("profile %s was measured at %d ranks and is used for %d: %s, and its bus bandwidths are used as measured, the bytes weighted by the bus factor at %d ranks: an estimate; calibrate at %d ranks for a measured one",
		arg, p.Ranks, n, lat, n, n)
}

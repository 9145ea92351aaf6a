package report

import "strings"

// ranHierarchical reports whether the run's hierarchical allreduces ran
// in that form: on the CPU backend, whose header line "algo hierarchical"
// starts with "runs flat:" where they did not.
func ranHierarchical(info *Info) bool {
	if info.backend != "cpu" {
		return false
	}
	for _, kv := range info.Versions {
		if kv.Key == "algo hierarchical" {
			return !strings.HasPrefix(kv.Value, "runs flat:")
		}
	}
	return false
}

// crossHostBytes returns the bytes that each rank sends to other hosts in
// a hierarchical allreduce of a bucket of n bytes on the CPU backend,
// where hosts names each rank's host: 2(h-1)/h · n/l for h hosts of l
// ranks each. Each rank allreduces one l-th of the bucket across the h
// hosts, which the ring formula counts as 2(h-1)/h times the slice; the
// phases inside a host cross none. When n does not split evenly into l
// slices, it is the mean over the host's ranks. ok is false where the
// allreduce runs flat (see ranHierarchical; hosts with different numbers
// of ranks), or there is no rank.
func crossHostBytes(ran bool, hosts []string, n int64) (bytes float64, ok bool) {
	if !ran || len(hosts) == 0 {
		return 0, false
	}
	per := map[string]int{}
	for _, h := range hosts {
		per[h]++
	}
	l := per[hosts[0]]
	for _, c := range per {
		if c != l {
			return 0, false
		}
	}
	h := float64(len(per))
	return 2 * (h - 1) / h * float64(n) / float64(l), true
}

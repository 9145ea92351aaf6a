package report

import (
	"fmt"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/text"
)

// hostRanks is one host of the run and the ranks on it, in rank order.
type hostRanks struct {
	Host  string `json:"host"`
	Ranks []int  `json:"ranks"`
}

// topology returns the run's hosts in the order of their lowest rank, each
// with its ranks: the map of which rank runs where, from the host names
// that every rank gave (MPI_Get_processor_name).
func (info *Info) topology() []hostRanks {
	hosts := []hostRanks{}
	at := map[string]int{}
	for r, h := range info.hosts {
		i, ok := at[h]
		if !ok {
			i = len(hosts)
			at[h] = i
			hosts = append(hosts, hostRanks{Host: h})
		}
		hosts[i].Ranks = append(hosts[i].Ranks, r)
	}
	return hosts
}

// topologyLine renders the topology as "a (ranks 0-1), b (ranks 2-3)".
func topologyLine(hosts []hostRanks) string {
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = fmt.Sprintf("%s (%s)", text.Printable(h.Host), rankRanges(h.Ranks))
	}
	return strings.Join(parts, ", ")
}

// rankRanges renders ascending ranks with runs folded: "rank 3",
// "ranks 0-3", "ranks 0, 2-3".
func rankRanges(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(rs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		}
		i = j + 1
	}
	return "ranks " + strings.Join(parts, ", ")
}

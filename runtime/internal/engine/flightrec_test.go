package engine

import (
	"fmt"
	"slices"
	"testing"
)

// A flight record lists every rank's host as runs of ranks; ranks dealt
// round-robin to more hosts than maxHostRuns allows are not listed.
func TestHostRuns(t *testing.T) {
	got := hostRuns([]string{"a", "a", "b", "b", "b", "a"})
	want := []HostRanks{{"a", 0, 1}, {"b", 2, 4}, {"a", 5, 5}}
	if !slices.Equal(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	var dealt []string
	for r := range 2 * maxHostRuns {
		dealt = append(dealt, fmt.Sprint("node", r%2))
	}
	if got := hostRuns(dealt); got != nil {
		t.Errorf("%d ranks dealt to 2 hosts in turn: %d runs, want none listed", len(dealt), len(got))
	}
	if got := hostRuns(dealt[:maxHostRuns]); len(got) != maxHostRuns {
		t.Errorf("%d runs: %d listed", maxHostRuns, len(got))
	}
}

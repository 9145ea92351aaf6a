package engine

import (
	"strings"
	"testing"
	"time"
)

// A delayed rank says where its host is while it waits, for the watchdog's
// report and the flight record, as a hung one does; after the delay it
// says nothing.
func TestFaultDelayIsRecorded(t *testing.T) {
	e := &Engine{rank: 1, cfg: Config{Faults: []Fault{{Kind: FaultDelay, Rank: 1, Step: 3, Delay: 300 * time.Millisecond}}}}
	done := make(chan struct{})
	go func() {
		e.faultAt(FaultDelay, 3)
		close(done)
	}()
	time.Sleep(100 * time.Millisecond)
	if at := e.hostAt.get(); !strings.Contains(at, "--fault delay: rank 1 starts step 3 300ms late on purpose") {
		t.Errorf("during the delay the host is at %q", at)
	}
	<-done
	if at := e.hostAt.get(); at != "" {
		t.Errorf("after the delay the host is at %q", at)
	}
}

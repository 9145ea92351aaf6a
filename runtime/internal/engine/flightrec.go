package engine

// The flight recorder: on a timeout every rank that can still run writes
// what its streams were doing (one JSON file per rank), and `syncgen
// flightrec DIR` merges the files against the plan's fixed sequence of
// collectives to name the rank missing from which collective. The field
// names follow PyTorch's flight recorder where they mean the same.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/result"
)

// FlightRecord is one rank's file.
type FlightRecord struct {
	Version   string `json:"version"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	Host      string `json:"host"`
	Plan      string `json:"plan"`
	PlanHash  string `json:"plan_hash"`
	// Job names the job that wrote the record, the same in every rank's
	// record of it: rank 0's clock when the ranks agreed on the run's time
	// origin (RFC 3339, UTC). Records of other jobs in the same directory
	// have another.
	Job string `json:"job,omitempty"`
	// Step is the step the rank was in (counted from 0, warm-up
	// included); HostAt what its host was waiting at; Reason why it wrote.
	Step   int    `json:"step"`
	HostAt string `json:"host_at,omitempty"`
	Reason string `json:"reason"`
	// LateMs is how long after --timeout the rank's own watchdog fired: a
	// rank that was stopped or frozen fires late, when it runs again.
	LateMs  float64 `json:"late_ms,omitempty"`
	Streams []struct {
		Name string `json:"pg_name"`
		// CollectivesPerStep is how many collectives the stream issues a
		// step: collective_seq_id = step * it + the index in the step.
		CollectivesPerStep int `json:"collectives_per_step"`
	} `json:"streams"`
	Entries []FlightEntry `json:"entries"`
}

// FlightEntry is one collective of the rank's current step.
type FlightEntry struct {
	// Stream is the stream (PyTorch's process group) by name;
	// CollectiveSeqID numbers its collectives from the run's start.
	Stream          string `json:"pg_name"`
	CollectiveSeqID int    `json:"collective_seq_id"`
	ProfilingName   string `json:"profiling_name"`
	Bucket          string `json:"bucket"`
	Src             string `json:"src"`
	Bytes           int64  `json:"bytes"`
	// State is scheduled (queued), started or completed.
	State string `json:"state"`
}

// flightWritten: this rank wrote its flight record.
var flightWritten atomic.Bool

// recordOnTerm writes the flight record when mpirun terminates this rank
// (SIGTERM: another rank died or failed, and mpirun ends the job), then
// exits as the signal would have.
func (e *Engine) recordOnTerm() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		reason := fmt.Sprintf("terminated (SIGTERM) in step %s: mpirun ends the job (another rank failed or the job was stopped)", e.stepName())
		e.writeFlightRecord(reason, 0)
		e.onAbort(reason)
		os.Exit(128 + int(syscall.SIGTERM))
	}()
}

// FlightVersion names the file's format.
const FlightVersion = "syncgen-flightrec-1"

// JobID is the flight records' name of the job whose ranks agreed on time
// origin origin ("" before they did).
func JobID(origin time.Time) string {
	if origin.IsZero() {
		return ""
	}
	return origin.UTC().Format(time.RFC3339Nano)
}

// FlightName is rank's file in the flight recorder's directory.
func FlightName(rank int) string { return fmt.Sprintf("flightrec-rank-%05d.json", rank) }

// collectivesPerStep counts each stream's collectives of one step.
func (e *Engine) collectivesPerStep() []int {
	n := make([]int, len(e.streams))
	for _, s := range e.flatStep {
		if s.Kind.String() == "collective" {
			n[s.Stream] += len(s.Buckets)
		}
	}
	return n
}

// writeFlightRecord writes this rank's flight record into the directory
// of cfg.FlightDir (nothing without one), saying why.
func (e *Engine) writeFlightRecord(reason string, late time.Duration) {
	dir := e.cfg.FlightDir
	if dir == "" || !flightWritten.CompareAndSwap(false, true) {
		return // none asked for, or written already (the first reason counts)
	}
	fr := FlightRecord{Version: FlightVersion, Rank: e.rank, WorldSize: e.size, Host: e.h.Name, Plan: e.plan.Name,
		PlanHash: e.plan.Hash, Step: e.stepNo, HostAt: e.hostAt.get(), Reason: reason, LateMs: float64(late) / 1e6}
	per := e.collectivesPerStep()
	for i, s := range e.plan.Streams {
		fr.Streams = append(fr.Streams, struct {
			Name               string `json:"pg_name"`
			CollectivesPerStep int    `json:"collectives_per_step"`
		}{s.Name, per[i]})
	}
	e.mu.Lock()
	recs := append([]result.Record(nil), e.recs...)
	fr.Job = JobID(e.origin)
	e.mu.Unlock()
	k := make([]int, len(e.streams))
	for _, r := range recs {
		if r.Kind != result.Collective || e.stepNo < 0 {
			continue
		}
		state := "scheduled"
		if ok, _ := r.End.Query(); ok {
			state = "completed"
		} else if ok, _ := r.Start.Query(); ok {
			state = "started"
		}
		fr.Entries = append(fr.Entries, FlightEntry{Stream: e.plan.Streams[r.Stream].Name, CollectiveSeqID: e.stepNo*per[r.Stream] + k[r.Stream],
			ProfilingName: r.Coll.String(), Bucket: r.Name, Src: string(r.At), Bytes: r.Bytes, State: state})
		k[r.Stream]++
	}
	data, _ := json.MarshalIndent(fr, "", " ")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(dir, FlightName(e.rank)), append(data, '\n'), 0o644)
		if err == nil {
			fmt.Fprintf(os.Stderr, "%s: rank %d: flight record in %s (syncgen flightrec %s merges them)\n", e.plan.Name, e.rank, filepath.Join(dir, FlightName(e.rank)), dir)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "rank %d: could not write the flight record into %s\n", e.rank, dir)
}

// onAbort runs the OnAbort hook once.
func (e *Engine) onAbort(reason string) {
	if e.cfg.OnAbort != nil && abortReported.CompareAndSwap(false, true) {
		e.cfg.OnAbort(reason)
	}
}

// abortReported: OnAbort ran.
var abortReported atomic.Bool

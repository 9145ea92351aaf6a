package engine

// The flight recorder: on a timeout, an error of a rank's own or a
// SIGTERM, every rank that can still run writes what its streams were
// doing and why it wrote (one JSON file per rank), and `syncgen
// flightrec DIR` merges the files against the plan's fixed sequence of
// collectives to name the rank that ended the job, or the one missing
// from which collective. The field
// names follow PyTorch's flight recorder where they mean the same.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// FlightRecord is one rank's file.
type FlightRecord struct {
	Version   string `json:"version"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	Host      string `json:"host"`
	// Hosts is every rank's host, as runs of consecutive ranks, so that
	// the merge names the host of a rank that wrote no record (killed).
	Hosts    []HostRanks `json:"hosts,omitempty"`
	Plan     string      `json:"plan"`
	PlanHash string      `json:"plan_hash"`
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

// HostRanks is a run of consecutive ranks on one host: ranks First to
// Last.
type HostRanks struct {
	Host  string `json:"host"`
	First int    `json:"first"`
	Last  int    `json:"last"`
}

// SetHosts gives the engine every rank's host (by rank), for its flight
// records: as runs of ranks, at most maxHostRuns of them, else none (ranks
// dealt to hosts round-robin would make every record as long as the
// world, in every rank's file).
func (e *Engine) SetHosts(hosts []string) {
	e.hosts = hostRuns(hosts)
}

// maxHostRuns bounds the runs of ranks a flight record lists.
const maxHostRuns = 1024

// hostRuns returns hosts (by rank) as runs of consecutive ranks on one
// host, nil when there would be more than maxHostRuns.
func hostRuns(hosts []string) []HostRanks {
	var runs []HostRanks
	for r, h := range hosts {
		if n := len(runs); n > 0 && runs[n-1].Host == h {
			runs[n-1].Last = r
			continue
		}
		if len(runs) == maxHostRuns {
			return nil
		}
		runs = append(runs, HostRanks{Host: h, First: r, Last: r})
	}
	return runs
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

// recordOnTerm writes the flight record when this rank is terminated
// (SIGTERM), saying by whom, then exits as the signal would have.
func (e *Engine) recordOnTerm() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	watchTermSender()
	go func() {
		<-sigs
		reason := termReason(e.stepName())
		e.writeFlightRecord(reason, 0)
		e.onAbort(reason)
		os.Exit(128 + int(syscall.SIGTERM))
	}()
}

// termReason is a flight record's reason for a SIGTERM in step: from the
// rank's launcher (launchedBy), which ends the job because another rank
// died or failed or the job was stopped; or from another process, outside
// the job, which ended this rank first: the merge then names this rank as
// the cause. Where the sender is not known, it is taken for the launcher,
// the usual sender.
func termReason(step string) string {
	const ends = "mpirun ends the job (another rank failed or the job was stopped)"
	pid, ok := termSender()
	if !ok {
		return fmt.Sprintf("terminated (SIGTERM) in step %s: %s", step, ends)
	}
	if launchedBy(pid) {
		return fmt.Sprintf("terminated (SIGTERM) in step %s by its launcher (%s): %s", step, describePid(pid), ends)
	}
	return fmt.Sprintf("terminated from outside (SIGTERM from %s, not its launcher) in step %s: a process outside the job ended this rank, and mpirun then the job", describePid(pid), step)
}

// launchedBy reports whether pid is this rank's launcher: its parent
// (mpirun, Open MPI's orted on another host, Slurm's slurmstepd), or Open
// MPI's daemon of this host, which its session directory names
// (PMIX_SERVER_TMPDIR=.../pid.N) when a wrapper (a shell, a debugger)
// stands between them. Not any ancestor: the shell that started mpirun is
// one, and a kill from it is from outside the job.
func launchedBy(pid int) bool {
	if pid == os.Getppid() {
		return true
	}
	for _, dir := range strings.Split(os.Getenv("PMIX_SERVER_TMPDIR"), "/") {
		if n, ok := strings.CutPrefix(dir, "pid."); ok && n == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

// describePid names a process: "process 123 (bash)", or "process 123"
// when it is gone.
func describePid(pid int) string {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return fmt.Sprintf("process %d", pid)
	}
	return fmt.Sprintf("process %d (%s)", pid, strings.TrimSpace(string(comm)))
}

// RecordFailure writes this rank's flight record for err, an error of its
// own that is about to end the job (the runtime aborts it next), and runs
// OnAbort with the same reason, so that the records name this rank rather
// than the ranks that mpirun then terminates: the reason starts with
// "error", which the merge takes as the job's cause. Before the steps start no rank records (the watchdog arms
// the recorder), so it writes nothing then.
func (e *Engine) RecordFailure(err error) {
	if e.wd == nil {
		return
	}
	// The first line alone: a panic's stack follows its message.
	msg, _, _ := strings.Cut(err.Error(), "\n")
	where := "in step " + e.stepName()
	select {
	case <-e.wd.stop:
		where = "after the steps" // gathering the results, closing
	default:
	}
	reason := fmt.Sprintf("error %s: %s", where, text.Clip(msg, maxReason))
	e.writeFlightRecord(reason, 0)
	e.onAbort(reason)
}

// maxReason bounds the error a flight record quotes.
const maxReason = 2000

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
	fr := FlightRecord{Version: FlightVersion, Rank: e.rank, WorldSize: e.size, Host: e.h.Name, Hosts: e.hosts, Plan: e.plan.Name,
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

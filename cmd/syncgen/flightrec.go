package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

func flightrecCommand() *cli.Command {
	return &cli.Command{
		Name:      "flightrec",
		Usage:     "merge the ranks' flight records of a failed run and name who is missing where",
		ArgsUsage: "DIR",
		Description: `flightrec reads the flight records that the ranks of a generated program
wrote into DIR when the job failed (--flight-dir, default flightrec), one
file per rank, each listing its streams' collectives of the step it was in.
Every rank issues the same collectives in the same order on each stream, so
the records say exactly which collective each stream is stuck in and which
rank is missing from it, named with its host: one that never issued it (and
where its host was), one that issued it but never started it, or one that
wrote no record at all (it was killed or stopped). A rank that ended the job itself, on an
error of its own or terminated by a process outside the job, is named as
the cause. Records of an older job in DIR, and files
that are not records (one cut short by a rank killed as it wrote), are left
out, and the merge says which.

Example:
   mpirun -np 4 ./model_sync --timeout 60s     # ... timeout
   syncgen flightrec flightrec`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("flightrec: want one DIR; usage: syncgen flightrec DIR", 2)
			}
			recs, skipped, err := readFlightRecords(c.Args().First())
			if err != nil {
				return cli.Exit("flightrec: "+err.Error(), 1)
			}
			job, older := newestJob(recs, time.Time{})
			printSkipped(c.App.Writer, skipped)
			printOlder(c.App.Writer, older)
			mergeFlightRecords(c.App.Writer, job)
			return nil
		},
	}
}

// flightRecord is a rank's file, as engine.FlightRecord writes it.
type flightRecord struct {
	Version   string `json:"version"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	Host      string `json:"host"`
	// Hosts is every rank's host, as runs of ranks First..Last.
	Hosts []struct {
		Host  string `json:"host"`
		First int    `json:"first"`
		Last  int    `json:"last"`
	} `json:"hosts"`
	Plan     string  `json:"plan"`
	PlanHash string  `json:"plan_hash"`
	Job      string  `json:"job"`
	Step     int     `json:"step"`
	HostAt   string  `json:"host_at"`
	Reason   string  `json:"reason"`
	LateMs   float64 `json:"late_ms"`
	Streams  []struct {
		Name string `json:"pg_name"`
		Per  int    `json:"collectives_per_step"`
	} `json:"streams"`
	Entries []struct {
		Stream string `json:"pg_name"`
		Seq    int    `json:"collective_seq_id"`
		Name   string `json:"profiling_name"`
		Bucket string `json:"bucket"`
		Src    string `json:"src"`
		State  string `json:"state"`
	} `json:"entries"`
	// written is when the file was last written (its modification time).
	written time.Time
}

// readFlightRecords reads every flight record in dir, of whichever job
// wrote it. A file that is not a record it can merge (cut short by a rank
// killed as it wrote, or another program's) is left out and named in
// skipped, so that the others still say who is missing; it is an error
// only when no record is left.
func readFlightRecords(dir string) (recs []*flightRecord, skipped []string, err error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("%s: %v: give the directory the ranks wrote their flight records into (the program's --flight-dir, default flightrec)", dir, unwrapPathError(err))
	} else if !st.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory: give the directory the ranks wrote their flight records into (the program's --flight-dir, default flightrec)", dir)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "flightrec-rank-*.json"))
	for _, f := range files {
		r, err := readFlightRecord(f)
		if err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		msg := fmt.Sprintf("%s holds no flight record (flightrec-rank-*.json): the ranks write them only when a step times out, a rank fails mid-run or a rank is terminated", dir)
		if len(skipped) > 0 {
			msg = fmt.Sprintf("%s holds no flight record that can be read: %s", dir, strings.Join(skipped, "; "))
		}
		return nil, skipped, errors.New(msg)
	}
	return recs, skipped, nil
}

// Bounds of a record's numbers, so that the merge's arithmetic stays in
// range: ranks as MPI numbers them, steps as the fill pattern does (32
// bits), and collectives per step below 2^31.
const (
	maxRecordStep = math.MaxUint32
	maxPerStep    = math.MaxInt32
)

// readFlightRecord reads and checks the record at path.
func readFlightRecord(path string) (*flightRecord, error) {
	// Only a plain file: reading a named pipe of that name would wait for
	// a writer for good.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a flight record (not a regular file)", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, unwrapPathError(err))
	}
	r, err := parseFlightRecord(path, data)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(path); err == nil {
		r.written = st.ModTime()
	}
	return r, nil
}

// parseFlightRecord reads and checks one rank's record, the contents of
// the file at path.
func parseFlightRecord(path string, data []byte) (*flightRecord, error) {
	var r flightRecord
	if err := json.Unmarshal(data, &r); err != nil {
		if bytes.Contains(data, []byte(flightVersion)) {
			return nil, fmt.Errorf("%s is cut short or damaged (%v)", path, err)
		}
		return nil, fmt.Errorf("%s is not a flight record", path)
	}
	if r.Version != flightVersion {
		return nil, fmt.Errorf("%s is not a flight record (version %q, want %q)", path, r.Version, flightVersion)
	}
	// A step of -1 is a rank still setting up, before step 0.
	bad := r.WorldSize < 1 || r.WorldSize > maxRanks || r.Rank < 0 || r.Rank >= r.WorldSize || r.Step < -1 || r.Step > maxRecordStep
	for _, s := range r.Streams {
		bad = bad || s.Per < 0 || s.Per > maxPerStep
	}
	for _, e := range r.Entries {
		bad = bad || e.Seq < 0 || e.Seq > (maxRecordStep+1)*maxPerStep
	}
	for _, h := range r.Hosts {
		bad = bad || h.First < 0 || h.Last < h.First || h.Last >= r.WorldSize
	}
	if bad {
		return nil, fmt.Errorf("%s is damaged: rank %d of %d ranks in step %d, or a stream or collective numbered out of range", path, r.Rank, r.WorldSize, r.Step)
	}
	return &r, nil
}

// flightVersion is the records' format, as engine.FlightVersion names it.
const flightVersion = "syncgen-flightrec-1"

// printSkipped says which files were left out as not records.
func printSkipped(w io.Writer, skipped []string) {
	for _, s := range skipped {
		fmt.Fprintf(w, "(left out: %s)\n", s)
	}
}

// jobKey is what every rank's record of one job shares.
func (r *flightRecord) jobKey() string { return r.Job + "\x00" + r.PlanHash }

// jobStart is when the record's job started, for picking the newest: its
// job's time, or, for a record without one, when the file was written.
func (r *flightRecord) jobStart() time.Time {
	if t, err := time.Parse(time.RFC3339Nano, r.Job); err == nil {
		return t
	}
	return r.written
}

// newestJob returns, by rank, the records of the newest job among those
// written at or after since (every record when since is zero), and the
// records of older jobs, which a directory keeps until a later job's ranks
// overwrite them: merged with the newest job's, a stale record of a rank
// that the newest job killed before it could write told of a step of
// another run.
func newestJob(recs []*flightRecord, since time.Time) (map[int]*flightRecord, []*flightRecord) {
	var newest *flightRecord
	for _, r := range recs {
		if r.written.Before(since) {
			continue
		}
		if newest == nil || r.jobStart().After(newest.jobStart()) {
			newest = r
		}
	}
	job := map[int]*flightRecord{}
	var older []*flightRecord
	for _, r := range recs {
		if newest != nil && r.jobKey() == newest.jobKey() && !r.written.Before(since) {
			job[r.Rank] = r
		} else {
			older = append(older, r)
		}
	}
	return job, older
}

// printOlder says which records were left out as another job's.
func printOlder(w io.Writer, older []*flightRecord) {
	if len(older) == 0 {
		return
	}
	sort.Slice(older, func(i, j int) bool { return older[i].Rank < older[j].Rank })
	var ranks []string
	for _, r := range older {
		ranks = append(ranks, fmt.Sprint(r.Rank))
	}
	what := "the record of rank " + ranks[0]
	if len(ranks) > 1 {
		what = "the records of ranks " + strings.Join(ranks, ", ")
	}
	fmt.Fprintf(w, "(left out: %s, of an older job: %s)\n", what, describeJob(older[0]))
}

// describeJob names a record's job for people.
func describeJob(r *flightRecord) string {
	if t, err := time.Parse(time.RFC3339Nano, r.Job); err == nil {
		return fmt.Sprintf("plan %s started %s", r.Plan, t.Local().Format("2006-01-02 15:04:05"))
	}
	return fmt.Sprintf("plan %s, written %s", r.Plan, r.written.Local().Format("2006-01-02 15:04:05"))
}

// mergeFlightRecords prints where each stream is stuck and who is
// missing, from the records of one job (newestJob).
func mergeFlightRecords(w io.Writer, recs map[int]*flightRecord) {
	var ranks []int
	for r := range recs {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	// Every record of one job tells the same plan and world; the lowest
	// rank's is read, so that the output does not depend on map order.
	any := recs[ranks[0]]
	hosts := hostsOf(recs, ranks)
	// The ranks without a record, as spans between those with one: a
	// world of thousands with a few records is a few spans, not a loop
	// over the world.
	var missing [][2]int
	from := 0
	for _, r := range append(ranks, any.WorldSize) {
		if r > from {
			missing = append(missing, [2]int{from, r - 1})
		}
		from = max(from, r+1)
	}
	timedOut := false
	for _, r := range ranks {
		timedOut = timedOut || strings.HasPrefix(recs[r].Reason, "timeout")
	}
	// The earliest watchdog fired on time; one that fired much later ran
	// only once mpirun woke it to end the job.
	earliest := -1.0
	for _, r := range ranks {
		if strings.HasPrefix(recs[r].Reason, "timeout") && (earliest < 0 || recs[r].LateMs < earliest) {
			earliest = recs[r].LateMs
		}
	}
	// A rank that ended on an error of its own, or that a process outside
	// the job terminated, ended the job: mpirun then terminated the
	// others, whose records say only that.
	var causes []int
	for _, r := range ranks {
		if endedTheJob(recs[r].Reason) {
			causes = append(causes, r)
		}
	}
	var frozen []int
	for _, r := range ranks {
		terminated := timedOut && strings.HasPrefix(recs[r].Reason, "terminated") && !slices.Contains(causes, r)
		late := strings.HasPrefix(recs[r].Reason, "timeout") && recs[r].LateMs > earliest+1000
		if terminated || late {
			frozen = append(frozen, r)
		}
	}
	fmt.Fprintf(w, "plan %s, %d ranks; records of %d\n", any.Plan, any.WorldSize, len(recs))
	for _, r := range ranks {
		rec := recs[r]
		step := fmt.Sprintf("step %d", rec.Step)
		if rec.Step < 0 {
			step = "setting up, before step 0"
		}
		fmt.Fprintf(w, "  %s: %s; %s", rankName(hosts, r, r), step, rec.Reason)
		if rec.HostAt != "" {
			fmt.Fprintf(w, "; host at %s", rec.HostAt)
		}
		fmt.Fprintln(w)
	}
	if len(causes) > 0 && len(missing) == 0 && !timedOut {
		// Every other rank wrote that it was ended with the job: where
		// their streams stood says nothing of why.
		for _, r := range causes {
			fmt.Fprintf(w, "%s ended the job: %s (its record above)\n", rankName(hosts, r, r), causeOf(recs[r].Reason))
		}
		if len(causes) < len(ranks) {
			fmt.Fprintln(w, "the other ranks were ended with the job (mpirun terminated them)")
		}
		return
	}
	for _, s := range any.Streams {
		if s.Per == 0 {
			continue
		}
		// next[r] is the first collective of the stream that rank r has
		// not completed; state[r] what it is doing with it.
		next, state := map[int]int{}, map[int]string{}
		stuck, name := -1, ""
		for _, r := range ranks {
			rec := recs[r]
			next[r], state[r] = (rec.Step+1)*s.Per, "" // all of its step issued and done
			issued := max(rec.Step, 0) * s.Per         // none while setting up (step -1)
			for _, e := range rec.Entries {
				if e.Stream != s.Name {
					continue
				}
				issued = e.Seq + 1
				if e.State != "completed" && e.Seq < next[r] {
					next[r], state[r] = e.Seq, e.State
				}
			}
			if state[r] == "" && issued < next[r] {
				next[r], state[r] = issued, "not issued"
			}
			if stuck < 0 || next[r] < stuck {
				stuck = next[r]
			}
		}
		for _, r := range ranks {
			for _, e := range recs[r].Entries {
				if e.Stream == s.Name && e.Seq == stuck {
					name = fmt.Sprintf("%s %s (%s)", e.Name, e.Bucket, e.Src)
				}
			}
		}
		if name == "" {
			// No record holds it: no rank issued it, so it has no name
			// to give; say so rather than leave a blank.
			name = "(the stream's next collective, which no rank issued)"
		}
		var waiting, queued, notIssued, done []string
		for _, r := range ranks {
			if next[r] != stuck || slices.Contains(frozen, r) || slices.Contains(causes, r) {
				continue
			}
			switch state[r] {
			case "started":
				waiting = append(waiting, fmt.Sprint(r))
			case "scheduled":
				queued = append(queued, fmt.Sprint(r))
			case "":
				done = append(done, fmt.Sprint(r))
				fallthrough
			default:
				notIssued = append(notIssued, fmt.Sprintf("%s never issued it (last done: %s; its host at: %s)", rankName(hosts, r, r), lastDone(stuck), orNone(recs[r].HostAt)))
			}
		}
		// A stream on which every rank that wrote a record has done all of
		// its step's collectives, and none has issued the next, is not
		// where the job stopped (another stream is, or the host): its
		// ranks did not fail to issue the next step's first collective.
		idle := len(waiting) == 0 && len(queued) == 0 && len(done) > 0 && len(done) == len(notIssued)
		if idle {
			notIssued = nil
		}
		var parts []string
		for _, m := range missing {
			parts = append(parts, rankName(hosts, m[0], m[1])+" wrote no flight record (killed, stopped or unreachable)")
		}
		// A rank that did not time out while others did was not running
		// (stopped, frozen): it recorded only when mpirun ended the job.
		for _, r := range frozen {
			parts = append(parts, fmt.Sprintf("%s was stopped or frozen: it did not time out with the others, and recorded only when it ran again", rankName(hosts, r, r)))
		}
		for _, r := range causes {
			parts = append(parts, fmt.Sprintf("%s ended the job: %s (its record above)", rankName(hosts, r, r), causeOf(recs[r].Reason)))
		}
		parts = append(parts, notIssued...)
		if len(queued) > 0 {
			parts = append(parts, plural("rank", queued)+" issued it but never started it")
		}
		if len(waiting) > 0 {
			parts = append(parts, plural("rank", waiting)+" waiting in it")
		}
		if idle {
			their := "their"
			if len(done) == 1 {
				their = "its"
			}
			parts = append([]string{plural("rank", done) + " did all of " + their + " step's collectives on it (none is stuck in one)"}, parts...)
			where := fmt.Sprintf("after #%d", stuck-1)
			if stuck == 0 {
				where = "before its first collective"
			}
			fmt.Fprintf(w, "stream %s %s: %s\n", s.Name, where, strings.Join(parts, "; "))
			continue
		}
		if len(missing) == 0 && len(frozen) == 0 && len(notIssued) == 0 && len(causes) == 0 {
			// Every rank issued it: none is missing from it.
			parts = append(parts, "no rank is missing (every rank issued it): it was slow rather than stuck; give a --timeout longer than a step takes, or look at the network between the ranks")
		}
		fmt.Fprintf(w, "stream %s #%d %s: %s\n", s.Name, stuck, name, strings.Join(parts, "; "))
	}
	// A rank without a record was killed (SIGKILL writes none) or could
	// not be reached: say where to look for why.
	if len(missing) > 0 {
		var who []string
		for _, m := range missing[:min(len(missing), 3)] {
			who = append(who, rankName(hosts, m[0], m[1]))
		}
		fmt.Fprintf(w, "what to do: mpirun's output names how %s ended (a signal or an exit status); a SIGKILL that no one sent is the kernel's OOM killer, which `dmesg` on that host shows\n",
			strings.Join(who, ", "))
	}
}

// hostSpan is a run of ranks First..Last on one host.
type hostSpan struct {
	host        string
	first, last int
}

// hostsOf returns every known rank's host, as runs of ranks in order: the
// list that the records carry of every rank (the lowest rank's record
// that has one), else each record's own host.
func hostsOf(recs map[int]*flightRecord, ranks []int) []hostSpan {
	var spans []hostSpan
	for _, r := range ranks {
		if len(recs[r].Hosts) == 0 {
			continue
		}
		for _, h := range recs[r].Hosts {
			spans = append(spans, hostSpan{h.Host, h.First, h.Last})
		}
		return spans
	}
	for _, r := range ranks {
		if recs[r].Host != "" {
			spans = append(spans, hostSpan{recs[r].Host, r, r})
		}
	}
	return spans
}

// rankName names ranks lo..hi with their hosts: "rank 1 (node2)", "ranks
// 4, 5 (node2)", "ranks 2..9 (node1, node2)", so that a rank that wrote no
// record (killed) is named with the host to look at. A rank of no known
// host is named alone.
func rankName(hosts []hostSpan, lo, hi int) string {
	who := fmt.Sprintf("rank %d", lo)
	switch {
	case hi == lo+1:
		who = fmt.Sprintf("ranks %d, %d", lo, hi)
	case hi > lo:
		who = fmt.Sprintf("ranks %d..%d", lo, hi)
	}
	var on []string
	for _, h := range hosts {
		// A host name is at most 64 bytes (HOST_NAME_MAX): a longer one,
		// in a damaged record, is cut, so the merge stays short.
		name := h.host
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		if h.last >= lo && h.first <= hi && !slices.Contains(on, name) {
			on = append(on, name)
		}
	}
	switch {
	case len(on) == 0:
		return who
	case len(on) > 3:
		return fmt.Sprintf("%s (%s and %d more hosts)", who, strings.Join(on[:3], ", "), len(on)-3)
	}
	return fmt.Sprintf("%s (%s)", who, strings.Join(on, ", "))
}

// endedTheJob reports whether a record's reason says that its rank ended
// the job: an error of its own (engine.RecordFailure), or a SIGTERM from a
// process outside the job.
func endedTheJob(reason string) bool {
	return strings.HasPrefix(reason, "error") || strings.HasPrefix(reason, "terminated from outside")
}

// causeOf says how a rank ended the job (endedTheJob).
func causeOf(reason string) string {
	if strings.HasPrefix(reason, "error") {
		return "an error of its own"
	}
	return "a process outside the job terminated it"
}

// lastDone names the collective before seq on its stream: "#5", or
// "none" for the first.
func lastDone(seq int) string {
	if seq <= 0 {
		return "none"
	}
	return fmt.Sprintf("#%d", seq-1)
}

func orNone(s string) string {
	if s == "" {
		return "nothing recorded"
	}
	return s
}

// plural writes "rank 3" or "ranks 0, 1".
func plural(word string, items []string) string {
	if len(items) == 1 {
		return word + " " + items[0]
	}
	return word + "s " + strings.Join(items, ", ")
}

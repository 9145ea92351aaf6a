package main

import (
	"encoding/json"
	"fmt"
	"io"
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
rank is missing from it: one that never issued it (and where its host
was), one that issued it but never started it, or one that wrote no record
at all (it was killed or stopped).

Example:
   mpirun -np 4 ./model_sync --timeout 60s     # ... timeout
   syncgen flightrec flightrec`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("flightrec: want one DIR; usage: syncgen flightrec DIR", 2)
			}
			recs, err := readFlightRecords(c.Args().First())
			if err != nil {
				return cli.Exit("flightrec: "+err.Error(), 1)
			}
			job, older := newestJob(recs, time.Time{})
			printOlder(c.App.Writer, older)
			mergeFlightRecords(c.App.Writer, job)
			return nil
		},
	}
}

// flightRecord is a rank's file, as engine.FlightRecord writes it.
type flightRecord struct {
	Version   string  `json:"version"`
	Rank      int     `json:"rank"`
	WorldSize int     `json:"world_size"`
	Plan      string  `json:"plan"`
	PlanHash  string  `json:"plan_hash"`
	Job       string  `json:"job"`
	Step      int     `json:"step"`
	HostAt    string  `json:"host_at"`
	Reason    string  `json:"reason"`
	LateMs    float64 `json:"late_ms"`
	Streams   []struct {
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
// wrote it.
func readFlightRecords(dir string) ([]*flightRecord, error) {
	files, err := filepath.Glob(filepath.Join(dir, "flightrec-rank-*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%s holds no flight record (flightrec-rank-*.json)", dir)
	}
	var recs []*flightRecord
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r flightRecord
		if err := json.Unmarshal(data, &r); err != nil || r.Version != "syncgen-flightrec-1" {
			return nil, fmt.Errorf("%s is not a flight record", f)
		}
		if st, err := os.Stat(f); err == nil {
			r.written = st.ModTime()
		}
		recs = append(recs, &r)
	}
	return recs, nil
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
	var any *flightRecord
	var ranks []int
	for r, rec := range recs {
		ranks = append(ranks, r)
		any = rec
	}
	sort.Ints(ranks)
	var missing []int
	for r := 0; r < any.WorldSize; r++ {
		if recs[r] == nil {
			missing = append(missing, r)
		}
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
	var frozen []int
	for _, r := range ranks {
		terminated := timedOut && strings.HasPrefix(recs[r].Reason, "terminated")
		late := strings.HasPrefix(recs[r].Reason, "timeout") && recs[r].LateMs > earliest+1000
		if terminated || late {
			frozen = append(frozen, r)
		}
	}
	fmt.Fprintf(w, "plan %s, %d ranks; records of %d\n", any.Plan, any.WorldSize, len(recs))
	for _, r := range ranks {
		rec := recs[r]
		fmt.Fprintf(w, "  rank %d: step %d; %s", r, rec.Step, rec.Reason)
		if rec.HostAt != "" {
			fmt.Fprintf(w, "; host at %s", rec.HostAt)
		}
		fmt.Fprintln(w)
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
			issued := rec.Step * s.Per
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
		var waiting, queued, notIssued []string
		for _, r := range ranks {
			if next[r] != stuck || slices.Contains(frozen, r) {
				continue
			}
			switch state[r] {
			case "started":
				waiting = append(waiting, fmt.Sprint(r))
			case "scheduled":
				queued = append(queued, fmt.Sprint(r))
			default:
				notIssued = append(notIssued, fmt.Sprintf("rank %d never issued it (last done: %s; its host at: %s)", r, lastDone(stuck), orNone(recs[r].HostAt)))
			}
		}
		var parts []string
		for _, r := range missing {
			parts = append(parts, fmt.Sprintf("rank %d wrote no flight record (killed, stopped or unreachable)", r))
		}
		// A rank that did not time out while others did was not running
		// (stopped, frozen): it recorded only when mpirun ended the job.
		for _, r := range frozen {
			parts = append(parts, fmt.Sprintf("rank %d was stopped or frozen: it did not time out with the others, and recorded only when it ran again", r))
		}
		parts = append(parts, notIssued...)
		if len(queued) > 0 {
			parts = append(parts, plural("rank", queued)+" issued it but never started it")
		}
		if len(waiting) > 0 {
			parts = append(parts, plural("rank", waiting)+" waiting in it")
		}
		fmt.Fprintf(w, "stream %s #%d %s: %s\n", s.Name, stuck, name, strings.Join(parts, "; "))
	}
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

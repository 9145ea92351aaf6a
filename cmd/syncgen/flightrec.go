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
			mergeFlightRecords(c.App.Writer, recs)
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
}

// readFlightRecords reads every rank's file in dir, by rank.
func readFlightRecords(dir string) (map[int]*flightRecord, error) {
	files, err := filepath.Glob(filepath.Join(dir, "flightrec-rank-*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%s holds no flight record (flightrec-rank-*.json)", dir)
	}
	recs := map[int]*flightRecord{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r flightRecord
		if err := json.Unmarshal(data, &r); err != nil || r.Version != "syncgen-flightrec-1" {
			return nil, fmt.Errorf("%s is not a flight record", f)
		}
		recs[r.Rank] = &r
	}
	return recs, nil
}

// mergeFlightRecords prints where each stream is stuck and who is
// missing.
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
				notIssued = append(notIssued, fmt.Sprintf("rank %d never issued it (last done #%d; its host at: %s)", r, stuck-1, orNone(recs[r].HostAt)))
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

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFlightRecord writes rank's flight record of a job of plan zs on 2
// ranks, stuck in step, into dir, dated written.
func writeFlightRecord(t *testing.T, dir, job string, rank, step int, written time.Time) {
	t.Helper()
	rec := fmt.Sprintf(`{"version": "syncgen-flightrec-1", "rank": %d, "world_size": 2, "plan": "zs", "plan_hash": "abc", "job": %q,
 "step": %d, "host_at": "the end of the step (waiting for every stream)",
 "reason": "terminated (SIGTERM) in step %d: mpirun ends the job",
 "streams": [{"pg_name": "compute", "collectives_per_step": 0}, {"pg_name": "comm", "collectives_per_step": 4}],
 "entries": [{"pg_name": "comm", "collective_seq_id": %d, "profiling_name": "reducescatter", "bucket": "grads[0]", "src": "zs.sync:9:5", "state": "scheduled"}]}`,
		rank, job, step, step, 4*step)
	path := filepath.Join(dir, fmt.Sprintf("flightrec-rank-%05d.json", rank))
	if err := os.WriteFile(path, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, written, written); err != nil {
		t.Fatal(err)
	}
}

// A directory holds rank 0's record of an older job (its rank 1 was
// killed) and rank 1's of the newest (its rank 0 was killed): the merge
// takes the newest job's alone and names rank 0 as the one that wrote
// none, saying which record it left out; explainFailure's merge takes
// only the records written since the launch.
func TestFlightRecordsOfTheNewestJob(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Minute)
	writeFlightRecord(t, dir, t0.UTC().Format(time.RFC3339Nano), 0, 5, t0.Add(time.Second))
	t1 := t0.Add(30 * time.Second)
	writeFlightRecord(t, dir, t1.UTC().Format(time.RFC3339Nano), 1, 2, t1.Add(time.Second))
	all, err := readFlightRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	job, older := newestJob(all, time.Time{})
	var b strings.Builder
	printOlder(&b, older)
	mergeFlightRecords(&b, job)
	out := b.String()
	for _, want := range []string{
		"(left out: the record of rank 0, of an older job: plan zs started ",
		"records of 1\n",
		"  rank 1: step 2;",
		"stream comm #8 reducescatter grads[0] (zs.sync:9:5): rank 0 wrote no flight record",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("merge lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "step 5") {
		t.Errorf("merge shows the older job's record:\n%s", out)
	}
	// Since the newest launch: its records only; since later: none.
	if job, _ := newestJob(all, t1); len(job) != 1 || job[1] == nil {
		t.Errorf("since the newest launch: %v", job)
	}
	if job, _ := newestJob(all, t1.Add(time.Minute)); len(job) != 0 {
		t.Errorf("since after every record: %v", job)
	}
}

// A rank that hangs before its first collective has done none: the merge
// says so, not "#-1".
func TestFlightRecordHangAtStepZero(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	job := now.UTC().Format(time.RFC3339Nano)
	writeFlightRecord(t, dir, job, 0, 0, now) // waiting in comm #0
	rec := `{"version": "syncgen-flightrec-1", "rank": 1, "world_size": 2, "plan": "zs", "plan_hash": "abc", "job": "` + job + `",
 "step": 0, "host_at": "--fault hang: rank 1 stopped at the start of step 0 on purpose", "reason": "timeout: step 0 ran for 2s",
 "streams": [{"pg_name": "compute", "collectives_per_step": 0}, {"pg_name": "comm", "collectives_per_step": 4}], "entries": []}`
	if err := os.WriteFile(filepath.Join(dir, "flightrec-rank-00001.json"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := readFlightRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := newestJob(all, time.Time{})
	var b strings.Builder
	mergeFlightRecords(&b, recs)
	if want := "rank 1 never issued it (last done: none; its host at: --fault hang"; !strings.Contains(b.String(), want) {
		t.Errorf("merge lacks %q:\n%s", want, b.String())
	}
}

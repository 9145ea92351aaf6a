package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeFlightRecord writes rank's flight record of a job of plan zs on 2
// ranks, stuck in step, into dir, dated written.
func writeFlightRecord(t *testing.T, dir, job string, rank, step int, written time.Time) {
	t.Helper()
	writeFlightRecordWhy(t, dir, job, rank, step, written, fmt.Sprintf("terminated (SIGTERM) in step %d: mpirun ends the job", step))
}

// writeFlightRecordWhy is writeFlightRecord with the record's reason.
func writeFlightRecordWhy(t *testing.T, dir, job string, rank, step int, written time.Time, reason string) {
	t.Helper()
	rec := fmt.Sprintf(`{"version": "syncgen-flightrec-1", "rank": %d, "world_size": 2, "plan": "zs", "plan_hash": "abc", "job": %q,
 "step": %d, "host_at": "the end of the step (waiting for every stream)",
 "reason": %q,
 "streams": [{"pg_name": "compute", "collectives_per_step": 0}, {"pg_name": "comm", "collectives_per_step": 4}],
 "entries": [{"pg_name": "comm", "collective_seq_id": %d, "profiling_name": "reducescatter", "bucket": "grads[0]", "src": "zs.sync:9:5", "state": "scheduled"}]}`,
		rank, job, step, reason, 4*step)
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
	all, _, err := readFlightRecords(dir)
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
	if out, want := mergedRecords(t, dir), "rank 1 never issued it (last done: none; its host at: --fault hang"; !strings.Contains(out, want) {
		t.Errorf("merge lacks %q:\n%s", want, out)
	}
}

// FuzzFlightRecords feeds the merge two files' contents as ranks 0's and
// 1's records: parsing and merging never panic, and what is printed stays
// within a bound of the input (a world of 2^31 ranks with one record is
// a span of missing ranks, not a line for each).
func FuzzFlightRecords(f *testing.F) {
	rec := func(rank, world, step int, job string) []byte {
		return fmt.Appendf(nil, `{"version": "syncgen-flightrec-1", "rank": %d, "world_size": %d, "plan": "zs", "plan_hash": "abc", "job": %q,
 "step": %d, "host_at": "wait comm", "reason": "timeout: step %d ran for 2s", "late_ms": 3,
 "streams": [{"pg_name": "compute", "collectives_per_step": 0}, {"pg_name": "comm", "collectives_per_step": 2}],
 "entries": [{"pg_name": "comm", "collective_seq_id": %d, "profiling_name": "allreduce", "bucket": "grads[0]", "src": "zs.sync:9:5", "state": "started"}]}`,
			rank, world, job, step, step, 2*max(step, 0))
	}
	job := "2026-01-02T03:04:05Z"
	f.Add(rec(0, 2, 3, job), rec(1, 2, 3, job))
	f.Add(rec(0, 2, 3, job), rec(1, 2, 1, "2025-01-02T03:04:05Z"))
	f.Add(rec(0, 2147483647, 0, job), rec(1, 2147483647, 0, job))
	f.Add(rec(0, 2, 3, job), []byte("{"))
	f.Add(rec(0, 4, -1, job), rec(3, 4, 4294967295, job))
	f.Add(rec(5, 2, -7, job), []byte(`{"version": "syncgen-flightrec-1", "rank": 1, "world_size": 2`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		// The files' contents as readFlightRecords parses them, without
		// the files: the reading of files is the unit tests' part.
		var all []*flightRecord
		var skipped []string
		for rank, data := range [][]byte{a, b} {
			r, err := parseFlightRecord(fmt.Sprintf("flightrec-rank-%05d.json", rank), data)
			if err != nil {
				skipped = append(skipped, err.Error())
				continue
			}
			all = append(all, r)
		}
		if len(all) == 0 {
			return
		}
		var out strings.Builder
		job, older := newestJob(all, time.Time{})
		printSkipped(&out, skipped)
		printOlder(&out, older)
		mergeFlightRecords(&out, job)
		if limit := 64*(len(a)+len(b)) + 4096; out.Len() > limit {
			t.Fatalf("merged %d and %d bytes into %d bytes of output:\n%.2000s", len(a), len(b), out.Len(), out.String())
		}
	})
}

// A directory of records where one rank's was cut short (killed as it
// wrote) and a huge world has few records: the merge leaves the damaged
// file out and says so, and names the ranks without a record as spans.
// An empty directory, one of unrelated files, a missing one and a file
// are each named as such, with what to give.
func TestFlightrecDamagedAndEmpty(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	job := now.UTC().Format(time.RFC3339Nano)
	writeFlightRecord(t, dir, job, 0, 3, now)
	cut := filepath.Join(dir, "flightrec-rank-00001.json")
	if err := os.WriteFile(cut, []byte(`{"version": "syncgen-flightrec-1", "rank": 1, "world_s`), 0o644); err != nil {
		t.Fatal(err)
	}
	all, skipped, err := readFlightRecords(dir)
	if err != nil || len(all) != 1 || len(skipped) != 1 || !strings.Contains(skipped[0], cut+" is cut short or damaged") {
		t.Fatalf("read %d records, left out %q: %v", len(all), skipped, err)
	}
	all[0].WorldSize = 1 << 30
	recs, _ := newestJob(all, time.Time{})
	var b strings.Builder
	mergeFlightRecords(&b, recs)
	if want := "ranks 1..1073741823 wrote no flight record"; !strings.Contains(b.String(), want) {
		t.Errorf("merge lacks %q:\n%s", want, b.String())
	}

	empty, other := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644)
	// A named pipe of a record's name, which no one writes, is left out
	// rather than read (and waited on) for good.
	if err := syscall.Mkfifo(filepath.Join(other, "flightrec-rank-00001.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "flightrec-rank-00000.json"), []byte(`{"a": 1}`), 0o644)
	for d, want := range map[string]string{
		empty:                             "holds no flight record (flightrec-rank-*.json): the ranks write them only when",
		other:                             "holds no flight record that can be read: " + filepath.Join(other, "flightrec-rank-00000.json") + " is not a flight record",
		filepath.Join(empty, "none"):      "none: no such file or directory: give the directory",
		filepath.Join(other, "notes.txt"): "notes.txt is not a directory: give the directory",
	} {
		if _, _, err := readFlightRecords(d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", d, err, want)
		}
	}
}

// When every rank issued the collective a stream waits in, no rank is
// missing: the merge says so and what to do, rather than leave the user
// to look for a culprit.
func TestFlightRecordNoRankMissing(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	job := now.UTC().Format(time.RFC3339Nano)
	writeFlightRecord(t, dir, job, 0, 3, now)
	writeFlightRecord(t, dir, job, 1, 3, now)
	if out, want := mergedRecords(t, dir), "ranks 0, 1 issued it but never started it; no rank is missing (every rank issued it): it was slow rather than stuck; give a --timeout longer"; !strings.Contains(out, want) {
		t.Errorf("merge lacks %q:\n%s", want, out)
	}
}

// A rank that ended the job itself, on an error of its own or terminated
// by a process outside the job, is named as the cause: its record says so
// (engine.RecordFailure, termReason). With every other rank's record there
// and no timeout, where the streams stood says nothing of why, and is not
// shown: the merge once said that no rank was missing and the step was
// slow. With a rank's record missing, the streams are shown too.
func TestFlightRecordNamesTheRankThatEndedTheJob(t *testing.T) {
	now := time.Now()
	job := now.UTC().Format(time.RFC3339Nano)
	dir := t.TempDir()
	writeFlightRecordWhy(t, dir, job, 0, 3, now, "terminated (SIGTERM) in step 3 by its launcher (process 9 (mpirun)): mpirun ends the job")
	writeFlightRecordWhy(t, dir, job, 1, 3, now, "error in step 3: checkpoint after 4 steps: no space left on device")
	out := mergedRecords(t, dir)
	want := "rank 1 ended the job: an error of its own (its record above)\nthe other ranks were ended with the job (mpirun terminated them)\n"
	if !strings.HasSuffix(out, want) || strings.Contains(out, "stream comm") {
		t.Errorf("a rank's own error: merge does not end with %q alone:\n%s", want, out)
	}
	dir = t.TempDir()
	writeFlightRecordWhy(t, dir, job, 1, 3, now, "terminated from outside (SIGTERM from process 7 (bash), not its launcher) in step 3: a process outside the job ended this rank")
	out = mergedRecords(t, dir)
	want = "stream comm #12 reducescatter grads[0] (zs.sync:9:5): rank 0 wrote no flight record (killed, stopped or unreachable); rank 1 ended the job: a process outside the job terminated it (its record above)\n" +
		"what to do: mpirun's output names how rank 0 ended"
	if !strings.Contains(out, want) {
		t.Errorf("a SIGTERM from outside, rank 0's record missing: merge lacks %q:\n%s", want, out)
	}
}

// mergedRecords returns what the merge prints of the newest job's flight
// records in dir.
func mergedRecords(t *testing.T, dir string) string {
	t.Helper()
	all, _, err := readFlightRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := newestJob(all, time.Time{})
	var b strings.Builder
	mergeFlightRecords(&b, recs)
	return b.String()
}

// The merge names each rank with its host, from the hosts of every rank
// that the records list, so that a rank that wrote no record (killed) is
// named with the host to look at; records without that list (an older
// program's) name the hosts of the ranks that wrote them.
func TestFlightRecordNamesTheHosts(t *testing.T) {
	now := time.Now()
	job := now.UTC().Format(time.RFC3339Nano)
	write := func(dir string, rank int, hosts string) {
		rec := fmt.Sprintf(`{"version": "syncgen-flightrec-1", "rank": %d, "world_size": 6, "host": "n%d", %s "plan": "zs", "plan_hash": "abc", "job": %q,
 "step": 3, "reason": "terminated (SIGTERM) in step 3 by its launcher (process 9 (mpirun)): mpirun ends the job",
 "streams": [{"pg_name": "comm", "collectives_per_step": 1}],
 "entries": [{"pg_name": "comm", "collective_seq_id": 3, "profiling_name": "allreduce", "bucket": "g", "src": "zs.sync:9:5", "state": "started"}]}`,
			rank, rank/2, hosts, job)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("flightrec-rank-%05d.json", rank)), []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hosts := `"hosts": [{"host": "n0", "first": 0, "last": 1}, {"host": "n1", "first": 2, "last": 3}, {"host": "n2", "first": 4, "last": 5}],`
	dir := t.TempDir()
	write(dir, 0, hosts)
	write(dir, 4, hosts)
	out := mergedRecords(t, dir)
	for _, want := range []string{
		"  rank 0 (n0): step 3;",
		"  rank 4 (n2): step 3;",
		"stream comm #3 allreduce g (zs.sync:9:5): ranks 1..3 (n0, n1) wrote no flight record (killed, stopped or unreachable); rank 5 (n2) wrote no flight record",
		"what to do: mpirun's output names how ranks 1..3 (n0, n1), rank 5 (n2) ended (a signal or an exit status); a SIGKILL that no one sent is the kernel's OOM killer, which `dmesg` on that host shows\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("merge lacks %q:\n%s", want, out)
		}
	}
	dir = t.TempDir()
	write(dir, 0, "")
	write(dir, 4, "")
	out = mergedRecords(t, dir)
	if want := "  rank 4 (n2): step 3;"; !strings.Contains(out, want) || !strings.Contains(out, "ranks 1..3 wrote no flight record") {
		t.Errorf("records without every rank's host: merge lacks %q, or names a host it does not know:\n%s", want, out)
	}
	// A list that names ranks outside the world is a damaged record.
	write(dir, 0, `"hosts": [{"host": "n0", "first": 0, "last": 6}],`)
	if _, err := readFlightRecord(filepath.Join(dir, "flightrec-rank-00000.json")); err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Errorf("a host list past the world: %v, want it damaged", err)
	}
}

// A stream on which every rank that wrote a record did all of its step's
// collectives is not where the job stopped: the merge says so, and names
// the killed rank there too, where it once said that ranks 0 and 2 never
// issued the stream's next collective, which is the next step's.
func TestFlightRecordStreamDoneWithItsStep(t *testing.T) {
	now := time.Now()
	job := now.UTC().Format(time.RFC3339Nano)
	dir := t.TempDir()
	for _, rank := range []int{0, 2} {
		rec := fmt.Sprintf(`{"version": "syncgen-flightrec-1", "rank": %d, "world_size": 3, "host": "vm", "plan": "zs", "plan_hash": "abc", "job": %q,
 "step": 5, "host_at": "the end of the step (waiting for every stream)", "reason": "terminated (SIGTERM) in step 5 by its launcher (process 9 (mpirun)): mpirun ends the job",
 "streams": [{"pg_name": "c0", "collectives_per_step": 2}, {"pg_name": "c1", "collectives_per_step": 1}],
 "entries": [{"pg_name": "c0", "collective_seq_id": 10, "profiling_name": "allreduce", "bucket": "a", "src": "zs.sync:9:5", "state": "completed"},
  {"pg_name": "c0", "collective_seq_id": 11, "profiling_name": "allreduce", "bucket": "b", "src": "zs.sync:9:5", "state": "completed"},
  {"pg_name": "c1", "collective_seq_id": 5, "profiling_name": "allreduce", "bucket": "c", "src": "zs.sync:10:5", "state": "started"}]}`, rank, job)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("flightrec-rank-%05d.json", rank)), []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := mergedRecords(t, dir)
	for _, want := range []string{
		"stream c0 after #11: ranks 0, 2 did all of their step's collectives on it (none is stuck in one); rank 1 wrote no flight record (killed, stopped or unreachable)\n",
		"stream c1 #5 allreduce c (zs.sync:10:5): rank 1 wrote no flight record (killed, stopped or unreachable); ranks 0, 2 waiting in it\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("merge lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "never issued") {
		t.Errorf("merge blames a rank that did its step's collectives:\n%s", out)
	}
	os.Remove(filepath.Join(dir, "flightrec-rank-00002.json"))
	if out, want := mergedRecords(t, dir), "stream c0 after #11: rank 0 did all of its step's collectives on it (none is stuck in one); ranks 1, 2 wrote no flight record"; !strings.Contains(out, want) {
		t.Errorf("merge lacks %q:\n%s", want, out)
	}
}

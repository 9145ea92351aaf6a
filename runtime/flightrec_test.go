package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// flightReason reads the reason of rank's flight record in dir.
func flightReason(t *testing.T, dir string, rank int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("flightrec-rank-%05d.json", rank)))
	if err != nil {
		t.Fatalf("rank %d's flight record: %v", rank, err)
	}
	var rec struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("rank %d's flight record: %v", rank, err)
	}
	return rec.Reason
}

// A rank that fails on its own mid-run (here a panic; a full disk, a
// backend's error alike) writes its flight record with the error before it
// aborts the job, so that the records name it; the rank that mpirun then
// terminates says that its launcher did. The failed rank once wrote no
// record, and the merge blamed the others.
func TestFlightRecordOfARanksOwnError(t *testing.T) {
	fr := filepath.Join(t.TempDir(), "fr")
	r := mpirun(t, 2, []string{"SYNCGEN_TEST_PANIC=1:2"}, 60*time.Second, "basic", "--steps", "4", "--warmup", "0", "--flight-dir", fr, "--quiet")
	if r.code == 0 {
		t.Fatalf("exit 0:\n%s", r.out)
	}
	if got, want := flightReason(t, fr, 1), "error in step 2: panic: SYNCGEN_TEST_PANIC: rank 1 panics in step 2 on purpose"; got != want {
		t.Errorf("rank 1's reason %q, want %q", got, want)
	}
	if got := flightReason(t, fr, 0); !strings.HasPrefix(got, "terminated (SIGTERM) in step 2 by its launcher (process ") {
		t.Errorf("rank 0's reason %q, want mpirun's SIGTERM", got)
	}
}

// A SIGTERM that a process outside the job sends one rank is recorded as
// such, naming the sender: that rank ended the job, and the merge names
// it, where its record once said that mpirun had ended the job. The
// launcher's SIGTERM to the other rank is recorded as the launcher's.
func TestFlightRecordOfASIGTERMFromOutside(t *testing.T) {
	fr := filepath.Join(t.TempDir(), "fr")
	mpirunPid, rank1, out, err := signalDelayedRank(t, syscall.SIGTERM, "--flight-dir", fr)
	if rank1 <= 0 || err == nil {
		t.Fatalf("rank 1 not found or exit 0 (%v):\n%s", err, out)
	}
	want := fmt.Sprintf("terminated from outside (SIGTERM from process %d (", os.Getpid())
	if got := flightReason(t, fr, 1); !strings.HasPrefix(got, want) || !strings.Contains(got, "not its launcher) in step 2") {
		t.Errorf("rank 1's reason %q, want %q...", got, want)
	}
	if got := flightReason(t, fr, 0); !strings.HasPrefix(got, "terminated (SIGTERM) in step 2 by its launcher (process "+strconv.Itoa(mpirunPid)+" (") {
		t.Errorf("rank 0's reason %q, want mpirun's (process %d)", got, mpirunPid)
	}
}

// A rank that the Go runtime ends on a fatal signal (a SIGSEGV that kill
// sent, as a fault in C code would end it too) dies by a signal after its
// stack dump, so that mpirun ends with 128 + that signal, not with Go's
// status 2, the status of a job that cannot run as started, which syncgen
// run --restarts would not restart.
func TestFatalSignalIsNotAUsageError(t *testing.T) {
	_, rank1, out, err := signalDelayedRank(t, syscall.SIGSEGV, "--flight-dir", "")
	ee, isExit := err.(*exec.ExitError)
	if rank1 <= 0 || !isExit || ee.ExitCode() <= 128 || !strings.Contains(out, "SIGSEGV") {
		t.Fatalf("rank 1 (process %d) sent SIGSEGV: %v, want an exit status of 128 + a signal and the signal named:\n%s", rank1, err, out)
	}
}

// signalDelayedRank runs basic at 2 ranks, rank 1 delayed at the start of
// step 2, and sends sig to rank 1 there. It returns mpirun's process,
// rank 1's (0 when not found), the output and how mpirun ended.
func signalDelayedRank(t *testing.T, sig syscall.Signal, args ...string) (mpirunPid, rank1 int, out string, err error) {
	t.Helper()
	needMPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append(mpirunArgv(), "-np", "2", testprog, "basic", "--steps", "6", "--warmup", "0",
		"--fault", "delay:1:2:50s", "--timeout", "55s", "--quiet")
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = t.TempDir()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	delayed := make(chan bool, 1)
	var b strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "rank 1: --fault delay: starting step 2") {
				delayed <- true
			}
		}
	}()
	select {
	case <-delayed:
	case <-done:
	}
	rank1 = childWithRank(t, cmd.Process.Pid, 1)
	if rank1 > 0 {
		syscall.Kill(rank1, sig)
	}
	err = cmd.Wait()
	pw.Close()
	<-done
	return cmd.Process.Pid, rank1, b.String(), err
}

// childWithRank is the pid of the child of parent that is MPI rank rank
// (its environment says so), 0 when there is none.
func childWithRank(t *testing.T, parent, rank int) int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		dir := filepath.Dir(st)
		env, _ := os.ReadFile(filepath.Join(dir, "environ"))
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "OMPI_COMM_WORLD_RANK="+strconv.Itoa(rank) {
				pid, _ := strconv.Atoi(filepath.Base(dir))
				return pid
			}
		}
	}
	return 0
}

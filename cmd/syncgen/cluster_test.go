package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// clusterScript is the script that makes several hosts on this machine.
const clusterScript = "../../scripts/cluster.sh"

// inCluster runs a shell command line inside a cluster of hosts a and b
// (scripts/cluster.sh --hosts a:2,b:2) and returns its exit status and
// output. It skips the test, with the script's reason, where the cluster
// cannot be made (not root, no namespaces).
func inCluster(t *testing.T, line string) (int, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: scripts/cluster.sh needs root (namespaces, veth pairs); CI runs as root")
	}
	cmd := exec.Command("sh", clusterScript, "--hosts", "a:2,b:2", "--", "sh", "-c", line)
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("cluster.sh: %v", err)
	}
	if code == 77 {
		t.Skipf("skipped: %s", strings.TrimSpace(string(out)))
	}
	return code, string(out)
}

// TestClusterTwoHosts runs an example on 2 hosts x 2 ranks, one job over
// TCP between hosts and shared memory inside them, and requires 0 wrong
// elements and a report that puts ranks 0-1 on a and 2-3 on b.
func TestClusterTwoHosts(t *testing.T) {
	needToolchain(t)
	bin := filepath.Join(t.TempDir(), "hello_sync")
	t.Setenv("SYNCGEN_CACHE", filepath.Join(t.TempDir(), "cache"))
	if code, out, errOut := syncgen(t, "build", "../../examples/hello.sync", "-o", bin); code != 0 {
		t.Fatalf("syncgen build: exit %d\n%s%s", code, out, errOut)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	code, out := inCluster(t, "mpirun --allow-run-as-root --oversubscribe --bind-to none --host a:2,b:2 -np 4 "+
		bin+" --steps 2 --warmup 1 --check 1 --backend cpu --json "+report)
	if code != 0 {
		t.Fatalf("2 hosts x 2 ranks: exit %d\n%s", code, out)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("no JSON report: %v\n%s", err, out)
	}
	var r struct {
		Ranks int      `json:"ranks"`
		Hosts []string `json:"hosts"`
		Topo  []struct {
			Host  string `json:"host"`
			Ranks []int  `json:"ranks"`
		} `json:"topology"`
		Summary struct {
			Wrong  int64 `json:"wrong"`
			Checks int   `json:"checks"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("JSON report does not parse: %v", err)
	}
	if want := []string{"a", "a", "b", "b"}; !reflect.DeepEqual(r.Hosts, want) {
		t.Errorf("report's hosts per rank %q, want %q", r.Hosts, want)
	}
	if len(r.Topo) != 2 || r.Topo[0].Host != "a" || !reflect.DeepEqual(r.Topo[0].Ranks, []int{0, 1}) ||
		r.Topo[1].Host != "b" || !reflect.DeepEqual(r.Topo[1].Ranks, []int{2, 3}) {
		t.Errorf("report's topology %+v, want a with ranks 0-1 and b with ranks 2-3", r.Topo)
	}
	if !strings.Contains(out, "hosts: a (ranks 0-1), b (ranks 2-3)") {
		t.Errorf("the header does not list the hosts and their ranks (want %q)\n%s", "hosts: a (ranks 0-1), b (ranks 2-3)", out)
	}
	if r.Ranks != 4 || r.Summary.Wrong != 0 || r.Summary.Checks == 0 {
		t.Errorf("report says ranks %d, %d wrong, %d checks; want 4 ranks, 0 wrong, some checks", r.Ranks, r.Summary.Wrong, r.Summary.Checks)
	}
}

// TestClusterHostLost kills host b's Open MPI daemon in the middle of a
// long run: the job must end non-zero, and the output name the host.
func TestClusterHostLost(t *testing.T) {
	needToolchain(t)
	bin := filepath.Join(t.TempDir(), "hello_sync")
	t.Setenv("SYNCGEN_CACHE", filepath.Join(t.TempDir(), "cache"))
	if code, out, errOut := syncgen(t, "build", "../../examples/hello.sync", "-o", bin); code != 0 {
		t.Fatalf("syncgen build: exit %d\n%s%s", code, out, errOut)
	}
	script, err := filepath.Abs(clusterScript)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, out := inCluster(t, "cd "+dir+"; (sleep 3; sh "+script+" kill b) & "+
		"mpirun --allow-run-as-root --oversubscribe --bind-to none --host a:2,b:2 -np 4 "+
		bin+" --steps 1000000 --backend cpu --quiet --timeout 30s")
	if code == 0 {
		t.Fatalf("a job that lost host b ended with status 0\n%s", out)
	}
	if !strings.Contains(out, "on node b") {
		t.Errorf("the output of a job that lost host b does not name it (want %q)\n%s", "on node b", out)
	}
}

// TestClusterRunHostfile runs `syncgen run --hostfile` on 2 hosts x 2
// ranks: -np comes from the hostfile's slots, Open MPI's --hostfile gets
// the file (in Slurm's form, a line a rank, which Open MPI sums), and the
// report lists both hosts with 0 wrong. Then on a file of a and b without
// slots: one rank each, passed as --host, where Open MPI would have given
// a as many slots as it has cores and put both ranks on it.
func TestClusterRunHostfile(t *testing.T) {
	needToolchain(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	sg := filepath.Join(dir, "syncgen")
	if out, err := exec.Command("go", "build", "-o", sg, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	hostfile, bare := filepath.Join(dir, "hosts"), filepath.Join(dir, "bare")
	if err := os.WriteFile(hostfile, []byte("# the cluster's two hosts, a line a rank\na\na\nb // the second\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bare, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := filepath.Abs("../../examples/hello.sync")
	if err != nil {
		t.Fatal(err)
	}
	run := sg + " run -o " + dir + "/ " + plan + " --hostfile "
	flags := " -- --steps 2 --warmup 1 --check 1 --backend cpu"
	code, out := inCluster(t, run+hostfile+flags+" && "+run+bare+flags)
	if code != 0 {
		t.Fatalf("syncgen run --hostfile: exit %d\n%s", code, out)
	}
	for _, want := range []string{"-np 4 --hostfile " + hostfile, "hosts: a (ranks 0-1), b (ranks 2-3)", "# 0 wrong",
		"-np 2 --host a:1,b:1", "hosts: a (rank 0), b (rank 1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("syncgen run --hostfile: output lacks %q\n%s", want, out)
		}
	}
}

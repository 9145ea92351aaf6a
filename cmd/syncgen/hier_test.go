package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hierPlan has hierarchical allreduces of f32 and bf16, avg and sum, a
// bucket larger than a 256 KiB piece and one smaller than a block per
// local rank, and a flat one beside them.
const hierPlan = `tensor big.{0..1} f32[70001]
tensor half bf16[150001]
tensor halfsum bf16[1001]
tensor tiny f32[3]
tensor flat f32[1000]
stream compute
stream comm
bucket big { big.* }
bucket half { half }
bucket halfsum { halfsum }
bucket tiny { tiny }
bucket flat { flat }
step {
    backward 1ms on compute
    allreduce big op avg algo hierarchical on comm after ready
    allreduce half op avg algo hierarchical on comm after ready
    allreduce halfsum op sum algo hierarchical on comm after ready
    allreduce tiny op avg algo hierarchical on comm after ready
    allreduce flat op avg on comm after ready
    wait comm
}
`

// hierReport is what the hierarchical tests read of the JSON report.
type hierReport struct {
	Summary struct {
		Wrong  int64 `json:"wrong"`
		Checks int   `json:"checks"`
	} `json:"summary"`
	Buckets []struct {
		Bucket     string      `json:"bucket"`
		Bytes      int64       `json:"bytes"`
		Algo       string      `json:"algo"`
		CrossBytes *float64    `json:"cross_host_bytes_per_rank"`
		Phases     []hierPhase `json:"phases"`
	} `json:"buckets"`
}

// hierPhase is one phase of a hierarchical allreduce in the JSON report.
type hierPhase struct {
	Phase  string  `json:"phase"`
	Ranks  int     `json:"ranks"`
	Bytes  float64 `json:"bytes"`
	TimeUs float64 `json:"time_us"`
}

// buildHierPlan writes and builds hierPlan, returning the program.
func buildHierPlan(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	src := filepath.Join(dir, "hier.sync")
	if err := os.WriteFile(src, []byte(hierPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hier_sync")
	if code, out, errOut := syncgen(t, "build", src, "-o", bin); code != 0 {
		t.Fatalf("syncgen build: exit %d\n%s%s", code, out, errOut)
	}
	return bin
}

// readHierReport reads a run's JSON report and requires 0 wrong elements
// and some checks, algo hierarchical on every bucket but flat, hierCross
// (flatCross) of the bytes of each hierarchical (flat) allreduce crossing
// hosts per rank, and phase figures on the hierarchical ones where they
// ran so (ran).
func readHierReport(t *testing.T, path, out string, hierCross, flatCross float64, ran bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no JSON report: %v\n%s", err, out)
	}
	var r hierReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("JSON report does not parse: %v", err)
	}
	if r.Summary.Wrong != 0 || r.Summary.Checks == 0 {
		t.Errorf("%d wrong, %d checks; want 0 wrong and some checks\n%s", r.Summary.Wrong, r.Summary.Checks, out)
	}
	if len(r.Buckets) != 5 {
		t.Fatalf("report has %d buckets, want 5", len(r.Buckets))
	}
	for _, b := range r.Buckets {
		wantAlgo, cross := "hierarchical", hierCross
		if b.Bucket == "flat" {
			wantAlgo, cross = "", flatCross
		}
		if b.Algo != wantAlgo {
			t.Errorf("bucket %s: algo %q, want %q", b.Bucket, b.Algo, wantAlgo)
		}
		if want := cross * float64(b.Bytes); b.CrossBytes == nil || math.Abs(*b.CrossBytes-want) > 1e-9*want {
			t.Errorf("bucket %s of %d bytes: cross-host bytes %v, want %v", b.Bucket, b.Bytes, b.CrossBytes, want)
		}
		checkPhases(t, b.Bucket, b.Bytes, b.Phases, wantAlgo != "" && ran)
	}
}

// checkPhases requires of a bucket's phase figures, where want, the
// reduce-scatter, allreduce and allgather in that order, each timed, the
// intra-host ones over the bucket's bytes and the inter-host one over a
// host's rank's slice of them; none otherwise.
func checkPhases(t *testing.T, bucket string, bytes int64, phases []hierPhase, want bool) {
	t.Helper()
	if !want {
		if len(phases) != 0 {
			t.Errorf("bucket %s: phase figures %+v, want none", bucket, phases)
		}
		return
	}
	if len(phases) != 3 {
		t.Fatalf("bucket %s: %d phases, want 3", bucket, len(phases))
	}
	rs, ar, ag := phases[0], phases[1], phases[2]
	if rs.Phase != "reduce_scatter_intra" || ar.Phase != "allreduce_inter" || ag.Phase != "allgather_intra" {
		t.Errorf("bucket %s: phases %q, %q, %q", bucket, rs.Phase, ar.Phase, ag.Phase)
	}
	if rs.Bytes != float64(bytes) || ag.Bytes != float64(bytes) || rs.Ranks < 1 || ar.Bytes != float64(bytes)/float64(rs.Ranks) {
		t.Errorf("bucket %s of %d bytes: phase bytes %v, %v, %v over %d ranks in a host", bucket, bytes, rs.Bytes, ar.Bytes, ag.Bytes, rs.Ranks)
	}
	if rs.TimeUs <= 0 || ar.TimeUs <= 0 || ag.TimeUs <= 0 {
		t.Errorf("bucket %s: phase times %v, %v, %v us, want all > 0", bucket, rs.TimeUs, ar.TimeUs, ag.TimeUs)
	}
}

// TestHierarchicalOneHost runs hierarchical allreduces on one host with 2
// and 4 ranks, in pieces of 256 KiB: every element must be what the
// checker computes for the flat form. The nonblocking mode runs them flat
// and says so.
func TestHierarchicalOneHost(t *testing.T) {
	needToolchain(t)
	mpirun := needMPIRun(t)
	bin := buildHierPlan(t)
	cases := []struct {
		np   int
		mode string
		want string
		ran  bool
	}{
		{2, "blocking", "algo hierarchical: reduce-scatter inside each host (2 ranks), allreduce of each slice across 1 host,", true},
		{4, "blocking", "algo hierarchical: reduce-scatter inside each host (4 ranks), allreduce of each slice across 1 host,", true},
		{2, "nonblocking", "algo hierarchical: runs flat: the nonblocking mode", false},
	}
	for _, c := range cases {
		report := filepath.Join(t.TempDir(), fmt.Sprintf("np%d-%s.json", c.np, c.mode))
		args := []string{"-np", fmt.Sprint(c.np), "--bind-to", "none", "-x", "SYNCGEN_CPU_CHUNK=256KiB", "-x", "SYNCGEN_CPU_MODE=" + c.mode}
		if os.Geteuid() == 0 {
			args = append(args, "--allow-run-as-root")
		}
		if c.np > runtime.NumCPU() {
			args = append(args, "--oversubscribe")
		}
		args = append(args, bin, "--steps", "2", "--warmup", "1", "--check", "1", "--backend", "cpu", "--json", report)
		out, err := exec.Command(mpirun, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("mpirun -np %d, %s: %v\n%s", c.np, c.mode, err, out)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("-np %d, %s: the header does not say %q\n%s", c.np, c.mode, c.want, out)
		}
		readHierReport(t, report, string(out), 0, 0, c.ran)
	}
}

// TestClusterHierarchical runs the hierarchical allreduces on 2 hosts x 2
// ranks (scripts/cluster.sh): the slices cross hosts over TCP. Then on 2
// ranks of a and 1 of b, where they must run flat and say so.
func TestClusterHierarchical(t *testing.T) {
	needToolchain(t)
	bin := buildHierPlan(t)
	report := filepath.Join(t.TempDir(), "report.json")
	trace := filepath.Join(t.TempDir(), "trace.json")
	code, out := inCluster(t, "mpirun --allow-run-as-root --oversubscribe --bind-to none --host a:2,b:2 -np 4 "+
		bin+" --steps 2 --warmup 1 --check 1 --backend cpu --json "+report+" --trace "+trace)
	if code != 0 {
		t.Fatalf("2 hosts x 2 ranks: exit %d\n%s", code, out)
	}
	want := "reduce-scatter inside each host (2 ranks), allreduce of each slice across 2 hosts,"
	if !strings.Contains(out, want) {
		t.Errorf("the header does not say %q\n%s", want, out)
	}
	// Hierarchical: 2(h-1)/h · S/l with h = 2 hosts of l = 2 ranks, S/2.
	// Flat, a ring in rank order: ranks 1 and 3 send 2(n-1)/n · S = 3S/2
	// to the other host, 3S/4 a rank.
	readHierReport(t, report, out, 0.5, 0.75, true)
	if !strings.Contains(out, "hierarchical allreduces by phase") || !strings.Contains(out, "allreduce across hosts") {
		t.Errorf("the report has no table of the phases\n%s", out)
	}
	checkHostTrace(t, trace)

	uneven := filepath.Join(t.TempDir(), "uneven.json")
	code, out = inCluster(t, "mpirun --allow-run-as-root --oversubscribe --bind-to none --host a:2,b:1 -np 3 "+
		bin+" --steps 2 --warmup 1 --check 1 --backend cpu --json "+uneven)
	if code != 0 {
		t.Fatalf("2 ranks on a, 1 on b: exit %d\n%s", code, out)
	}
	if want := "algo hierarchical: runs flat: the hosts hold different numbers of ranks"; !strings.Contains(out, want) {
		t.Errorf("2 ranks on a, 1 on b: the header does not say %q\n%s", want, out)
	}
	// All flat, a ring over a, a, b: ranks 1 and 2 send 2(n-1)/n · S =
	// 4S/3 to the other host, 8S/9 a rank.
	readHierReport(t, uneven, out, 8.0/9, 8.0/9, false)
}

// checkHostTrace requires of a trace of 2 hosts x 2 ranks the ranks'
// processes labelled with their hosts and sorted by host, and each
// hierarchical allreduce's three phases as sub-spans on every rank.
func checkHostTrace(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no trace: %v", err)
	}
	var tr struct {
		Events []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Pid  int            `json:"pid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("trace does not parse: %v", err)
	}
	labels := map[int]any{}
	phases := map[string]int{}
	for _, e := range tr.Events {
		switch {
		case e.Name == "process_labels":
			labels[e.Pid] = e.Args["labels"]
		case e.Cat == "phase":
			phases[fmt.Sprint(e.Pid, " ", e.Args["phase"])]++
		}
	}
	want := map[int]any{0: "host a", 1: "host a", 2: "host b", 3: "host b"}
	if fmt.Sprint(labels) != fmt.Sprint(want) {
		t.Errorf("trace's process labels %v, want %v", labels, want)
	}
	for pid := 0; pid < 4; pid++ {
		for _, ph := range []string{"reduce_scatter_intra", "allreduce_inter", "allgather_intra"} {
			// 4 hierarchical buckets, 3 traced steps.
			if n := phases[fmt.Sprint(pid, " ", ph)]; n != 12 {
				t.Errorf("rank %d: %d sub-spans of phase %s in the trace, want 12 (4 buckets x 3 steps)", pid, n, ph)
			}
		}
	}
}

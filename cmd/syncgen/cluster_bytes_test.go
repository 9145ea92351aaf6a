package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// bytesPlan is one allreduce of a 4 MiB bucket, flat or hierarchical.
const bytesPlan = `tensor g f32[1048576]
stream compute
stream comm
bucket g { g }
step {
    backward 1ms on compute
    allreduce g op sum algo %s on comm after ready
    wait comm
}
`

// Tolerances of the counted bytes against the formula. A host's eth0
// counts whole frames: its TCP segments' Ethernet, IP and TCP headers (66
// bytes on at most 1448 of payload without offloads, 4.6%), the
// acknowledgements of what it receives (66 bytes per two segments, 2.3%)
// and Open MPI's own fragment headers, so counted >= formula and, with
// room, <= formula · 1.1. Beside the collective, a step sends its
// barrier's few small messages, each at least a frame and an
// acknowledgement: stepSlack covers those.
const (
	countedRatio = 1.1
	stepSlack    = 16 << 10
)

// TestClusterCountedBytes runs a flat and a hierarchical allreduce of 4
// MiB on 2 hosts x 2 ranks with Open MPI's allreduce pinned to its ring
// (the algorithm the flat formula assumes), and requires each host's
// bytes counted on eth0 over the measured steps (SYNCGEN_NET_IFACE, which
// cluster.sh sets) to agree with the formula: a ring in rank order
// crosses hosts from ranks 1 and 3, each sending 2(n-1)/n · S = 3S/2; the
// hierarchical form sends 2(h-1)/h · S/l = S/2 from every rank, S a host.
func TestClusterCountedBytes(t *testing.T) {
	needToolchain(t)
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	const s = 4 << 20
	want := map[string]float64{"flat": 1.5 * s, "hierarchical": 1.0 * s}
	line := ""
	for _, algo := range []string{"flat", "hierarchical"} {
		src := filepath.Join(dir, algo+".sync")
		if err := os.WriteFile(src, []byte(fmt.Sprintf(bytesPlan, algo)), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, algo+"_sync")
		if code, out, errOut := syncgen(t, "build", src, "-o", bin); code != 0 {
			t.Fatalf("syncgen build: exit %d\n%s%s", code, out, errOut)
		}
		line += "mpirun --allow-run-as-root --oversubscribe --bind-to none --host a:2,b:2 -np 4 " +
			"-x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_allreduce_algorithm=4 " +
			bin + " --steps 3 --warmup 1 --check 1 --backend cpu --quiet --json " + filepath.Join(dir, algo+".json") + " || exit 1; "
	}
	code, out := inCluster(t, line)
	if code != 0 {
		t.Fatalf("2 hosts x 2 ranks: exit %d\n%s", code, out)
	}
	sentInJobs := map[string]float64{}
	for _, algo := range []string{"flat", "hierarchical"} {
		data, err := os.ReadFile(filepath.Join(dir, algo+".json"))
		if err != nil {
			t.Fatalf("%s: no JSON report: %v\n%s", algo, err, out)
		}
		var r struct {
			Summary struct {
				Wrong int64 `json:"wrong"`
			} `json:"summary"`
			Buckets []struct {
				PerHost *float64 `json:"cross_host_bytes_per_host"`
				Algo    string   `json:"cross_host_algorithm"`
			} `json:"buckets"`
			Network *struct {
				Iface string `json:"iface"`
				Steps int    `json:"steps"`
				Hosts []struct {
					Host    string   `json:"host"`
					Tx      float64  `json:"tx_bytes"`
					PerStep float64  `json:"tx_bytes_per_step"`
					Formula *float64 `json:"formula_tx_bytes_per_step"`
				} `json:"hosts"`
			} `json:"network"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%s: JSON report does not parse: %v", algo, err)
		}
		w := want[algo]
		if r.Summary.Wrong != 0 || len(r.Buckets) != 1 || r.Buckets[0].PerHost == nil || *r.Buckets[0].PerHost != w {
			t.Errorf("%s: %d wrong, buckets %+v; want 0 wrong and %v bytes a host across hosts", algo, r.Summary.Wrong, r.Buckets, w)
		}
		n := r.Network
		if n == nil || n.Iface != "eth0" || n.Steps != 3 || len(n.Hosts) != 2 {
			t.Fatalf("%s: network %+v; want eth0's counts over 3 steps on 2 hosts", algo, n)
		}
		for _, h := range n.Hosts {
			if h.Formula == nil || *h.Formula != w {
				t.Errorf("%s: host %s: formula %v a step, want %v", algo, h.Host, h.Formula, w)
			}
			if h.PerStep < w || h.PerStep > w*countedRatio+stepSlack {
				t.Errorf("%s: host %s sent %.0f bytes a step on eth0, want %.0f to %.0f (the formula's %.0f, plus headers)",
					algo, h.Host, h.PerStep, w, w*countedRatio+stepSlack, w)
			}
			sentInJobs[h.Host] += h.Tx
		}
	}
	// cluster.sh counts the whole command: both jobs, launches included.
	for _, m := range regexp.MustCompile(`host (\w+): eth0 sent (\d+) bytes`).FindAllStringSubmatch(out, -1) {
		sent, _ := strconv.ParseFloat(m[2], 64)
		if sent < sentInJobs[m[1]] {
			t.Errorf("cluster.sh says host %s sent %.0f bytes, less than the jobs' measured steps (%.0f)", m[1], sent, sentInJobs[m[1]])
		}
		delete(sentInJobs, m[1])
	}
	if len(sentInJobs) != 0 {
		t.Errorf("cluster.sh did not report the bytes of hosts %v\n%s", sentInJobs, out)
	}
}

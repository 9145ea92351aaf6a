package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
)

// clusterMaxBytesPerRank bounds the buffers of an example run on the
// emulated cluster: its ranks share the CI machine's few cores, and a
// plan of more than this a rank (bert_large, zero, gpt2_xl) moves its
// gigabytes over the bridge's TCP on those same cores, beyond the suite's
// time budget for this test.
// Those run on one host in TestExamples where they fit there (else on the
// GPU machine) and are named, with their size, in this test's log.
const clusterMaxBytesPerRank = 512 << 20

// TestClusterExamples runs every example of examples/ (new ones too) on 2
// hosts x 2 ranks through scripts/cluster.sh, in one cluster: one
// warm-up and one measured step, both checked, on the CPU backend. Each
// must end with status 0, 0 wrong elements and both hosts in its report.
func TestClusterExamples(t *testing.T) {
	needToolchain(t)
	examples, _ := filepath.Glob("../../examples/*.sync")
	if len(examples) < 7 {
		t.Fatalf("found %d examples in ../../examples, want at least 7", len(examples))
	}
	dir := t.TempDir()
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	var script strings.Builder
	var ran []string
	for _, ex := range examples {
		name := stem(ex)
		prog, diags := dsl.Load(ex)
		if diags.HasErrors() {
			var b strings.Builder
			diags.Render(&b)
			t.Fatalf("%s has errors:\n%s", ex, b.String())
		}
		if perRank := bytesPerRank(prog); perRank > clusterMaxBytesPerRank {
			t.Logf("%s: not run on the cluster: %d MiB of buffers a rank, above %d MiB (4 ranks and their TCP traffic on one small machine); it runs on one host in TestExamples where it fits there, else on the GPU machine",
				name, perRank>>20, clusterMaxBytesPerRank>>20)
			continue
		}
		bin := filepath.Join(dir, name+"_sync")
		if code, out, errOut := syncgen(t, "build", ex, "-o", bin); code != 0 {
			t.Fatalf("syncgen build %s: exit %d\n%s%s", ex, code, out, errOut)
		}
		report := filepath.Join(dir, name+".json")
		fmt.Fprintf(&script, "mpirun --allow-run-as-root --oversubscribe --bind-to none --host a:2,b:2 -np 4 %s --steps 1 --warmup 1 --check 1 --backend cpu --quiet --json %s; echo \"example %s: exit $?\"\n",
			bin, report, name)
		ran = append(ran, name)
	}
	if len(ran) == 0 {
		t.Fatal("no example is small enough for the cluster")
	}
	_, out := inCluster(t, script.String())
	exits := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^example (\S+): exit (\d+)$`).FindAllStringSubmatch(out, -1) {
		exits[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, name := range ran {
		t.Run(name, func(t *testing.T) {
			code, ok := exits[name]
			if !ok || code != 0 {
				t.Fatalf("2 hosts x 2 ranks: exit %d (ran: %v)\n%s", code, ok, out)
			}
			data, err := os.ReadFile(filepath.Join(dir, name+".json"))
			if err != nil {
				t.Fatalf("no JSON report: %v", err)
			}
			var r struct {
				Ranks   int      `json:"ranks"`
				Hosts   []string `json:"hosts"`
				Summary struct {
					Wrong  int64 `json:"wrong"`
					Checks int   `json:"checks"`
				} `json:"summary"`
			}
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("JSON report does not parse: %v", err)
			}
			if r.Ranks != 4 || r.Summary.Wrong != 0 || r.Summary.Checks < 2 || strings.Join(r.Hosts, ",") != "a,a,b,b" {
				t.Errorf("report says %d ranks on hosts %v, %d wrong, %d checks; want 4 ranks on a,a,b,b, 0 wrong, 2 checks",
					r.Ranks, r.Hosts, r.Summary.Wrong, r.Summary.Checks)
			}
		})
	}
}

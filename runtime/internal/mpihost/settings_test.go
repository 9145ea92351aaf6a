package mpihost

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/text"
)

func TestChooseMPISettings(t *testing.T) {
	const v4 = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
	const v5 = "Open MPI v5.0.7, package: Debian OpenMPI, ident: 5.0.7, repo rev: v5.0.7, Feb 14, 2025"
	vader := []text.KV{{Key: "OMPI_MCA_btl_vader_eager_limit", Value: "32768"}, {Key: "OMPI_MCA_btl_vader_fbox_size", Value: "32768"}}
	for _, c := range []struct {
		name      string
		library   string
		env       map[string]string
		wantEnv   []text.KV
		wantRules bool
		wantWarn  string
	}{
		{"open mpi 4", v4, nil, vader, true, ""},
		{"open mpi 5", v5, nil, []text.KV{{Key: "OMPI_MCA_btl_sm_eager_limit", Value: "32768"}, {Key: "OMPI_MCA_btl_sm_fbox_size", Value: "32768"}}, false, ""},
		{"on", v4, map[string]string{"SYNCGEN_MPI_TUNING": "on"}, vader, true, ""},
		{"OFF", v4, map[string]string{"SYNCGEN_MPI_TUNING": "OFF"}, nil, false, ""},
		{"0", v4, map[string]string{"SYNCGEN_MPI_TUNING": "0"}, nil, false, ""},
		{"user's eager limit", v4, map[string]string{"OMPI_MCA_btl_vader_eager_limit": "4096"}, []text.KV{{Key: "OMPI_MCA_btl_vader_fbox_size", Value: "32768"}}, true, ""},
		{"user's name of the other component", v5, map[string]string{"OMPI_MCA_btl_vader_fbox_size": "4096"}, []text.KV{{Key: "OMPI_MCA_btl_sm_eager_limit", Value: "32768"}}, false, ""},
		{"user's rules", v4, map[string]string{"OMPI_MCA_coll_tuned_use_dynamic_rules": "0"}, vader, false, ""},
		{"user's algorithm", v4, map[string]string{"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}, vader, false, ""},
		{"off", v4, map[string]string{"SYNCGEN_MPI_TUNING": "off"}, nil, false, ""},
		{"another MPI", "MPICH Version: 4.0.2", nil, nil, false, ""},
		{"spaces", v4, map[string]string{"SYNCGEN_MPI_TUNING": " off "}, nil, false, ""},
		{"spaces on", v4, map[string]string{"SYNCGEN_MPI_TUNING": " on"}, vader, true, ""},
		{"yes", v4, map[string]string{"SYNCGEN_MPI_TUNING": "True"}, vader, true, ""},
		// A bad value is a warning and the default, as every knob's.
		{"bad value", v4, map[string]string{"SYNCGEN_MPI_TUNING": "maybe"}, vader, true, `SYNCGEN_MPI_TUNING="maybe": want on or off (or yes/no, true/false, 1/0, in any case); leaving it on`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var warned []string
			warn := func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
			got := chooseMPISettings(c.library, func(k string) string { return c.env[k] }, warn)
			if want := []string{c.wantWarn}; c.wantWarn == "" && warned != nil || c.wantWarn != "" && !reflect.DeepEqual(warned, want) {
				t.Errorf("warned %q, want %q", warned, c.wantWarn)
			}
			if !reflect.DeepEqual(got.env, c.wantEnv) || got.allreduceRules != c.wantRules {
				t.Errorf("got %v rules %v, want %v rules %v", got.env, got.allreduceRules, c.wantEnv, c.wantRules)
			}
		})
	}
}

// The rules file holds what allreduceRules says, and its numbers are what
// Open MPI 4's reader expects: 1 collective (id 2), 2 communicator sizes
// with 3 and 1 message sizes of 4 numbers each. It is written once, in the
// user's cache directory, and a file that differs is replaced.
func TestRulesFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path, err := rulesFile()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, f := range strings.Fields(string(data)) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil {
			t.Fatalf("field %q is not a number", f)
		}
		nums = append(nums, n)
	}
	want := []int{1, 2, 2, 2, 3, 0, 0, 0, 0, 4096, 3, 0, 0, 8192, 0, 0, 0, 3, 1, 0, 0, 0, 0}
	if !reflect.DeepEqual(nums, want) {
		t.Errorf("rules %v, want %v", nums, want)
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := rulesFile()
	if err != nil || again != path {
		t.Fatalf("second call: %q, %v; want %q", again, err, path)
	}
	if data, _ := os.ReadFile(path); string(data) != allreduceRules {
		t.Errorf("a changed file was not rewritten: %q", data)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

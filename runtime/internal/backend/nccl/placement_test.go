package nccl

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/backend"
)

// rank describes one rank for the placement tables: its host, local rank,
// CUDA_VISIBLE_DEVICES ("-" for unset) and the bus ids of the devices it
// sees (nil: the ids are unknown and it sees n devices).
type rank struct {
	host string
	lr   int
	cvd  string
	ids  []string
	n    int
}

func views(rs []rank) []gpuView {
	local := map[string]int{}
	for _, r := range rs {
		local[r.host]++
	}
	vs := make([]gpuView, len(rs))
	for i, r := range rs {
		n := r.n
		if r.ids != nil {
			n = len(r.ids)
		}
		vs[i] = gpuView{Host: r.host, LocalRank: r.lr, LocalSize: local[r.host], N: n, IDs: r.ids}
		if r.cvd != "-" {
			vs[i].Visible, vs[i].VisibleSet = r.cvd, true
		}
	}
	return vs
}

func ids(s ...string) []string { return s }

func TestGPUPlacement(t *testing.T) {
	const a, b, c, d = "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"
	for _, tc := range []struct {
		name  string
		ranks []rank
		want  string // "" to accept, else what every rank's reason contains
	}{
		{"one rank, one GPU", []rank{{"h", 0, "-", ids(a), 0}}, ""},
		{"ranks see the whole host", []rank{{"h", 0, "-", ids(a, b), 0}, {"h", 1, "-", ids(a, b), 0}}, ""},
		{"more ranks than GPUs", []rank{{"h", 0, "-", ids(a), 0}, {"h", 1, "-", ids(a), 0}},
			"2 ranks on host h but 1 GPU(s): NCCL needs a GPU per rank"},
		// Slurm --gpus-per-task with a CUDA_VISIBLE_DEVICES each, numbered
		// as the host numbers them.
		{"a CUDA_VISIBLE_DEVICES per rank", []rank{{"vm", 0, "0", ids(a), 0}, {"vm", 1, "1", ids(b), 0}}, ""},
		// The same with the devices cgroup: every rank sees its GPU as 0;
		// the bus ids tell them apart.
		{"every rank's own GPU numbered 0", []rank{{"vm", 0, "0", ids(a), 0}, {"vm", 1, "0", ids(b), 0}}, ""},
		{"two GPUs per task", []rank{{"h", 0, "0,1", ids(a, b), 0}, {"h", 1, "0,1", ids(a, b), 0},
			{"h", 2, "2,3", ids(c, d), 0}, {"h", 3, "2,3", ids(c, d), 0}}, ""},
		{"one GPU for all, by CUDA_VISIBLE_DEVICES", []rank{{"vm", 0, "0", ids(a), 0}, {"vm", 1, "0", ids(a), 0}},
			`2 ranks on host vm but 1 GPU(s) visible (CUDA_VISIBLE_DEVICES="0"): NCCL needs a GPU per rank`},
		{"same list in another order", []rank{{"h", 0, "0,1", ids(a, b), 0}, {"h", 1, "1,0", ids(b, a), 0}},
			"local ranks 0 and 1 on host h would share one GPU (pci 0000:01:00.0)"},
		{"other hosts do not count", []rank{{"h", 0, "-", ids(a), 0}, {"g", 0, "-", ids(a), 0}}, ""},
		// Counts only: differing CUDA_VISIBLE_DEVICES are distinct GPUs.
		{"counts, distinct CUDA_VISIBLE_DEVICES", []rank{{"vm", 0, "0", nil, 1}, {"vm", 1, "1", nil, 1}}, ""},
		{"counts, same CUDA_VISIBLE_DEVICES", []rank{{"vm", 0, "0", nil, 1}, {"vm", 1, "0", nil, 1}},
			"2 ranks on host vm but 1 GPU(s)"},
		{"counts, unset", []rank{{"h", 0, "-", nil, 1}, {"h", 1, "-", nil, 1}}, "2 ranks on host h but 1 GPU(s): NCCL"},
		{"counts, whole host", []rank{{"h", 0, "-", nil, 2}, {"h", 1, "-", nil, 2}}, ""},
		// Ids known on one rank only: all compare by CUDA_VISIBLE_DEVICES.
		{"ids missing on one rank", []rank{{"vm", 0, "0", ids(a), 0}, {"vm", 1, "0", nil, 1}}, "2 ranks on host vm but 1 GPU(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := views(tc.ranks)
			for me := range vs {
				ok, why := gpuPlacement(vs, me)
				switch {
				case tc.want == "" && !ok:
					t.Errorf("rank %d refused: %s", me, why)
				case tc.want != "" && ok:
					t.Errorf("rank %d accepted, want %q", me, tc.want)
				case tc.want != "" && !strings.Contains(why, tc.want):
					t.Errorf("rank %d: %q does not say %q", me, why, tc.want)
				}
			}
		})
	}
}

func TestGPUPlacementLocalOnly(t *testing.T) {
	// Without the other ranks' views the rank counts its host's ranks.
	v := gpuView{Host: "h", LocalRank: 0, LocalSize: 4, N: 2, IDs: ids("x", "y")}
	if ok, why := gpuPlacement([]gpuView{v}, 0); ok || !strings.Contains(why, "4 ranks on host h but 2 GPU(s)") {
		t.Errorf("got %v, %q", ok, why)
	}
	v.Err = "libnccl.so.2: cannot open shared object file"
	if ok, why := gpuPlacement([]gpuView{v}, 0); ok || why != v.Err {
		t.Errorf("got %v, %q", ok, why)
	}
}

func TestGPUViewRecord(t *testing.T) {
	for _, v := range []gpuView{
		{Host: "vm", LocalRank: 1, LocalSize: 2, Visible: "1", VisibleSet: true, N: 1, IDs: ids("0000:02:00.0")},
		{Host: "h", LocalSize: 1, N: 2, IDs: ids("a", "b")},
		{Host: "h", LocalSize: 1, Visible: "", VisibleSet: true, Err: "no CUDA device visible"},
		{Host: "h", LocalSize: 3, LocalRank: 2, N: 1},
	} {
		got, err := decodeView(encodeView(v))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip: got %+v, want %+v", got, v)
		}
	}
	// Too many ids: only the rank's own device's is sent.
	many := make([]string, 200)
	for i := range many {
		many[i] = "00000000:00:00.0"
	}
	many[5] = "00000000:05:00.0"
	got, err := decodeView(encodeView(gpuView{Host: "h", LocalRank: 5, LocalSize: 8, N: 200, IDs: many}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.IDs) != 200 || got.IDs[5] != many[5] || got.IDs[0] != "" {
		t.Errorf("trimmed ids: %d, %q, %q", len(got.IDs), got.IDs[5], got.IDs[0])
	}
	if _, err := decodeView(make([]byte, viewRecordSize)); err == nil {
		t.Error("an empty record decoded")
	}
}

func TestPickDevice(t *testing.T) {
	for _, c := range []struct {
		lr, n   int
		perRank bool
		dev     int
		ok      bool
	}{
		{0, 1, false, 0, true}, {1, 2, false, 1, true}, {1, 1, false, 0, false},
		{1, 1, true, 0, true}, {3, 2, true, 1, true}, {0, 0, true, 0, false},
	} {
		if d, ok := pickDevice(c.lr, c.n, c.perRank); d != c.dev || ok != c.ok {
			t.Errorf("pickDevice(%d, %d, %v) = %d, %v; want %d, %v", c.lr, c.n, c.perRank, d, ok, c.dev, c.ok)
		}
	}
}

// gatherBoot records that the probe gathered, and fails the gather.
type gatherBoot struct{ calls int }

func (g *gatherBoot) Bcast(root int, buf []byte) error { return nil }
func (g *gatherBoot) Allgather(rec []byte) ([][]byte, error) {
	g.calls++
	if len(rec) != viewRecordSize {
		return nil, errors.New("record of the wrong size")
	}
	return nil, errors.New("bootstrap down")
}

func TestGPUProbeGathersOnEveryPath(t *testing.T) {
	// Here the libraries may not load: the probe must gather all the same,
	// or the other ranks' collectives would not match.
	g := &gatherBoot{}
	ok, why := gpuProbe(&backend.Env{Size: 2, LocalSize: 2, Host: "h", Boot: g})
	if g.calls != 1 {
		t.Errorf("the probe gathered %d times, want 1", g.calls)
	}
	if ok || !strings.Contains(why, "bootstrap down") {
		t.Errorf("probe = %v, %q", ok, why)
	}
}

package nccl

// Tests of the NCCL backend that need no GPU. gpu_device_test.go has those
// that do; they skip here.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/cuda"
	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	ncclapi "github.com/syncgen/syncgen/runtime/nccl"
)

func peerRec(host, bus string, version int) []byte {
	rec := make([]byte, 256)
	copy(rec, fmt.Sprintf("%s\x00%s\x00%d\x00", host, bus, version))
	return rec
}

func TestCheckPeersDuplicateGPU(t *testing.T) {
	recs := [][]byte{
		peerRec("a", "0000:01:00.0", 22708),
		peerRec("a", "0000:02:00.0", 22708),
		peerRec("b", "0000:01:00.0", 22708), // another host: not a duplicate
		peerRec("a", "0000:02:00.0", 22708),
	}
	err := checkPeers(recs)
	if err == nil {
		t.Fatal("two ranks on one GPU passed")
	}
	for _, want := range []string{"ranks 1 and 3", "0000:02:00.0", "host a", "--backend cpu"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	if err := checkPeers(recs[:3]); err != nil {
		t.Errorf("distinct GPUs refused: %v", err)
	}
}

func TestCheckPeersVersionMismatch(t *testing.T) {
	err := checkPeers([][]byte{peerRec("a", "0", 22708), peerRec("a", "1", 22708), peerRec("b", "0", 21903)})
	if err == nil {
		t.Fatal("mismatched NCCL versions passed")
	}
	for _, want := range []string{"rank 2", "2.19.3", "2.27.8", "rank 2 on b: NCCL 2.19.3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestDivideAfter(t *testing.T) {
	for _, c := range []struct {
		op   plan.RedOp
		dt   elem.DType
		size int
		want bool
	}{
		{plan.Avg, elem.F32, 1, false}, {plan.Avg, elem.F32, 2, false}, {plan.Avg, elem.F32, 4, false},
		{plan.Avg, elem.F32, 3, true}, {plan.Avg, elem.BF16, 6, true}, {plan.Avg, elem.F64, 5, true},
		{plan.Avg, elem.I32, 3, false}, // NCCL sums and divides integers, as the CPU does
		{plan.Sum, elem.F32, 3, false},
	} {
		if got := divideAfter(c.op, c.dt, c.size); got != c.want {
			t.Errorf("divideAfter(%s, %s, %d) = %v, want %v", c.op, c.dt, c.size, got, c.want)
		}
	}
}

func TestGPUTables(t *testing.T) {
	for dt := elem.F64; dt <= elem.U8; dt++ {
		if _, ok := ncclTypes[dt]; !ok {
			t.Errorf("no NCCL type for %s", dt)
		}
	}
	for _, op := range []plan.RedOp{plan.Sum, plan.Avg, plan.Min, plan.Max, plan.Prod} {
		if _, ok := ncclOps[op]; !ok {
			t.Errorf("no NCCL operator for %s", op)
		}
	}
	// The kernels take runtime.DType codes.
	for dt, c := range map[elem.DType]int{elem.F64: cuda.F64, elem.F32: cuda.F32, elem.F16: cuda.F16, elem.BF16: cuda.BF16, elem.I64: cuda.I64, elem.I32: cuda.I32, elem.I8: cuda.I8, elem.U8: cuda.U8} {
		if int(dt) != c {
			t.Errorf("cuda's code for %s is %d, runtime's %d", dt, c, dt)
		}
	}
}

func TestGPUProbeWithoutLibrary(t *testing.T) {
	if gpuLoad() == nil {
		t.Skip("the GPU libraries load here")
	}
	t.Setenv(ncclapi.EnvLib, "/nonexistent/libnccl.so.2")
	ok, why := gpuProbe(&backend.Env{Size: 1, LocalSize: 1, Host: "h"})
	if ok || why == "" {
		t.Fatalf("probe = %v, %q without CUDA or NCCL", ok, why)
	}
	if !strings.Contains(why, "libcudart") && !strings.Contains(why, "libnccl") {
		t.Errorf("the reason %q names no library", why)
	}
	if _, err := newGPUBackend(&backend.Env{Size: 1, LocalSize: 1, Host: "h"}); err == nil || !strings.Contains(err.Error(), "--backend cpu") {
		t.Errorf("newGPUBackend without libraries: %v", err)
	}
}

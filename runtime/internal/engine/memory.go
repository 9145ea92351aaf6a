package engine

// Before the buffers are allocated, each rank of the CPU backend checks
// that its host has the memory that its local ranks will take: a plan
// larger than the host otherwise ran for tens of seconds and was then
// killed by the kernel's OOM killer, without a word.

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/optim"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// planBytes is what one rank allocates for plan p: the buckets' wire
// buffers (padded where a sliced collective needs it), the storage of the
// tensors that live apart from them, and the updated buckets' parameters
// and optimizer state.
func planBytes(p *plan.Plan, prog *plan.Program, size int) (buffers, train int64) {
	sliced := backend.SlicedBuckets(prog, len(p.Buckets))
	for i, b := range p.Buckets {
		n := b.Elems
		if sliced[i] && n%int64(size) != 0 {
			n += int64(size) - n%int64(size)
		}
		buffers += n * b.Wire.Size()
	}
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if t.Bucket < 0 || t.DType != p.Buckets[t.Bucket].Wire {
			buffers += t.Elems() * t.DType.Size()
		}
	}
	for _, s := range plan.Flat(prog.Step) {
		if s.Kind != plan.StmtUpdate {
			continue
		}
		for _, b := range s.Buckets {
			if b < 0 || b >= len(p.Buckets) || len(p.Buckets[b].Tensors) == 0 {
				continue
			}
			dt := optim.Spec.ParamDType(s.Optim, p.Tensors[p.Buckets[b].Tensors[0]].DType)
			train += int64(1+s.Optim.States()) * p.Buckets[b].Elems * dt.Size()
		}
	}
	return buffers, train
}

// memAvailable reads MemAvailable from /proc/meminfo (false where there
// is none).
func memAvailable() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// checkHostMemory refuses a plan whose buffers, times the ranks on this
// host, pass the host's available memory (CPU backend only: a GPU's
// buffers are on the device).
func (e *Engine) checkHostMemory() error {
	if e.be.Name() != "cpu" {
		return nil
	}
	avail, ok := memAvailable()
	if !ok {
		return nil
	}
	buffers, train := planBytes(e.plan, e.prog, e.size)
	local := int64(max(e.h.LocalSize, 1))
	need := (buffers + train) * local
	if need <= avail {
		return nil
	}
	return fmt.Errorf("this host's %d rank%s need about %s for the plan's buffers (%s each: %s of gradients, %s of parameters and optimizer state), "+
		"and the host has %s available: run fewer ranks on each host, a smaller model or bucket layout, or --backend nccl where there are GPUs (their buffers are on the device)",
		local, text.Plural(int(local)), text.Bytes(need), text.Bytes(buffers+train), text.Bytes(buffers), text.Bytes(train), text.Bytes(avail))
}

package engine

// Checkpoints of the training step's state: every rank writes its shard of
// the parameters and optimizer state (ckpt), rank 0 commits them with the
// run's facts; a resumed run reads them back and continues at the step
// after, bit for bit as if it had never stopped.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/ckpt"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/scaler"
)

// Checkpointing says when and where checkpoints are written.
type Checkpointing struct {
	// Every writes a checkpoint after every Every steps (0: never), into
	// Dir/step-NNNNNNNN, keeping the newest Keep committed ones.
	Every int
	Dir   string
	Keep  int
}

// CheckDir makes sure that the checkpoints' directory can be written,
// before the first step rather than at the first save.
func (c Checkpointing) CheckDir() error {
	if c.Every <= 0 {
		return nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("the checkpoint directory: %w", err)
	}
	f, err := os.CreateTemp(c.Dir, ".writable-*")
	if err != nil {
		return fmt.Errorf("the checkpoint directory %s cannot be written: %w", c.Dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// shardTensors copies this rank's state to the host as the shard's
// tensors: each updated bucket's parameters and optimizer state.
func (e *Engine) shardTensors() ([]ckpt.Tensor, []ckpt.BucketInfo, error) {
	var tensors []ckpt.Tensor
	var buckets []ckpt.BucketInfo
	for b, pm := range e.tr.params {
		if pm.Param.Buf == nil {
			continue
		}
		name := e.plan.Buckets[b].Name
		info := ckpt.BucketInfo{Name: name, DType: pm.DType.String(), Elems: e.plan.Buckets[b].Elems, States: pm.Spec.States()}
		if pm.Sharded {
			info.Sharded, info.Slice = true, e.mem.Buckets[b].Elems/int64(e.size)
		}
		buckets = append(buckets, info)
		spans := []backend.Span{pm.Param, pm.State[0], pm.State[1]}
		for k, sp := range spans[:1+pm.Spec.States()] {
			data := make([]byte, sp.Bytes())
			if sp.N > 0 {
				if err := e.be.CopyToHost(data, sp); err != nil {
					return nil, nil, fmt.Errorf("reading the state of bucket %q: %w", name, err)
				}
			}
			tensors = append(tensors, ckpt.Tensor{Name: stateName(k, name), DType: pm.DType, Shape: []int64{sp.N}, Data: data})
		}
	}
	return tensors, buckets, nil
}

// stateName names a bucket's parameters (k 0) and state (k 1, 2) in a
// shard.
func stateName(k int, bucket string) string {
	return [...]string{"param/", "state0/", "state1/"}[k] + bucket
}

// saveCheckpoint writes the checkpoint after steps steps: this rank's
// shard, then rank 0 gathers the shards' sizes and checksums, writes the
// metadata and commits it, and prunes the old checkpoints.
func (e *Engine) saveCheckpoint(steps int) error {
	c := e.cfg.Checkpoint
	dir := ckpt.StepDir(c.Dir, steps)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tensors, buckets, err := e.shardTensors()
	if err != nil {
		return err
	}
	meta := map[string]string{"format": ckpt.Format, "plan_hash": e.plan.Hash, "rank": fmt.Sprint(e.rank),
		"world_size": fmt.Sprint(e.size), "steps": fmt.Sprint(steps)}
	size, sum, err := ckpt.WriteShard(filepath.Join(dir, ckpt.ShardName(e.rank)), meta, tensors)
	if err != nil {
		return err
	}
	rec, _ := json.Marshal(ckpt.ShardInfo{File: ckpt.ShardName(e.rank), Bytes: size, SHA256: sum})
	all, err := e.h.Gather(rec)
	if err != nil {
		return fmt.Errorf("gathering the shards' checksums: %w", err)
	}
	if e.rank != 0 {
		return nil
	}
	md := &ckpt.Metadata{Format: ckpt.Format, PlanHash: e.plan.Hash, PlanName: e.plan.Name, Source: e.plan.Source,
		Steps: steps, WorldSize: e.size, Applied: e.tr.applied, Buckets: buckets}
	if e.tr.sc != nil {
		md.Scaler, _ = json.Marshal(e.tr.sc.State())
	}
	for _, r := range all {
		var s ckpt.ShardInfo
		if err := json.Unmarshal(r, &s); err != nil {
			return fmt.Errorf("a rank's shard record: %w", err)
		}
		md.Shards = append(md.Shards, s)
	}
	if err := ckpt.SyncDir(dir); err != nil {
		return err
	}
	if err := ckpt.Commit(dir, md); err != nil {
		return err
	}
	return ckpt.Prune(c.Dir, c.Keep)
}

// Resume restores the state of the checkpoint in dir and makes Run start
// at the step after it. It refuses a checkpoint of another plan or world
// size, and a shard whose size or checksum is not the metadata's.
func (e *Engine) Resume(dir string) error {
	md, err := ckpt.ReadMetadata(dir)
	if err != nil {
		return err
	}
	p := e.plan
	if md.PlanHash != p.Hash {
		return fmt.Errorf("%s is a checkpoint of plan %q (%s, hash %.12s), not of this program's %q (%s, hash %.12s): resume a checkpoint of the same plan",
			dir, md.PlanName, md.Source, md.PlanHash, p.Name, p.Source, p.Hash)
	}
	if md.WorldSize != e.size {
		return fmt.Errorf("%s was written by %d ranks; this run has %d: run it with mpirun -np %d (resuming at another world size is not supported yet)",
			dir, md.WorldSize, e.size, md.WorldSize)
	}
	if len(md.Shards) != e.size {
		return fmt.Errorf("%s: the metadata lists %d shards for %d ranks", dir, len(md.Shards), e.size)
	}
	if total := e.cfg.Warmup + e.cfg.Steps; md.Steps >= total {
		return fmt.Errorf("%s is after step %d, and this run has %d steps (warm-up included): nothing is left to run; give more --steps", dir, md.Steps, total)
	}
	shards := make([]*ckpt.Shard, e.size)
	read := func(r int) (*ckpt.Shard, error) {
		if shards[r] == nil {
			s, err := ckpt.ReadShard(filepath.Join(dir, md.Shards[r].File), md.Shards[r])
			if err != nil {
				return nil, err
			}
			shards[r] = s
		}
		return shards[r], nil
	}
	mine, err := read(e.rank)
	if err != nil {
		return err
	}
	byName := map[string]ckpt.BucketInfo{}
	for _, bi := range md.Buckets {
		byName[bi.Name] = bi
	}
	for b, pm := range e.tr.params {
		if pm.Param.Buf == nil {
			continue
		}
		name := p.Buckets[b].Name
		if bi, ok := byName[name]; !ok || bi.DType != pm.DType.String() || bi.Elems != p.Buckets[b].Elems {
			return fmt.Errorf("%s has no state of bucket %q (%s, %d elements) as this plan has it", dir, name, pm.DType, p.Buckets[b].Elems)
		}
		spans := []backend.Span{pm.Param, pm.State[0], pm.State[1]}
		for k, sp := range spans[:1+pm.Spec.States()] {
			t, ok := mine.Tensors[stateName(k, name)]
			if !ok || int64(len(t.Data)) != sp.Bytes() {
				return fmt.Errorf("%s: shard of rank %d lacks %s as this plan has it", dir, e.rank, stateName(k, name))
			}
			if sp.N > 0 {
				if err := e.be.CopyFromHost(sp, t.Data); err != nil {
					return err
				}
			}
		}
		if e.cfg.CheckEvery > 0 {
			if err := e.resumeReference(b, pm, byName[name], read); err != nil {
				return err
			}
		}
	}
	if e.tr.sc != nil {
		var st scaler.State
		if err := json.Unmarshal(md.Scaler, &st); err != nil {
			return fmt.Errorf("%s: the loss scaler's state: %v", dir, err)
		}
		if err := e.tr.sc.Restore(st); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		e.tr.scale = e.tr.sc.Scale()
	}
	e.tr.applied = md.Applied
	e.first = md.Steps
	return nil
}

// resumeReference gives the checker's reference of bucket b the
// checkpoint's values: every rank's slice of a sharded bucket (from every
// shard, each checked), or this rank's whole bucket.
func (e *Engine) resumeReference(b int, pm ParamMem, bi ckpt.BucketInfo, read func(int) (*ckpt.Shard, error)) error {
	n := e.plan.Buckets[b].Elems
	vals := [3][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	name := e.plan.Buckets[b].Name
	owners := []int{e.rank}
	if bi.Sharded {
		owners = owners[:0]
		for r := range e.size {
			owners = append(owners, r)
		}
	}
	for _, r := range owners {
		s, err := read(r)
		if err != nil {
			return err
		}
		lo := int64(0)
		if bi.Sharded {
			lo = int64(r) * bi.Slice
		}
		for k := range 1 + pm.Spec.States() {
			t := s.Tensors[stateName(k, name)]
			cnt := int64(len(t.Data)) / pm.DType.Size()
			if lo+cnt > n {
				return fmt.Errorf("shard of rank %d: %s holds %d elements from %d, past the bucket's %d", r, stateName(k, name), cnt, lo, n)
			}
			elem.LoadAll(vals[k][lo:lo+cnt], t.Data, pm.DType)
		}
	}
	e.model.SetReference(b, vals[0], vals[1], vals[2])
	return nil
}

package engine

// Checkpoints of the training step's state: every rank writes its shard of
// the parameters and optimizer state (ckpt), rank 0 commits them with the
// run's facts; a resumed run reads them back and continues at the step
// after, bit for bit as if it had never stopped.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/ckpt"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/result"
	"github.com/syncgen/syncgen/runtime/internal/scaler"
	"github.com/syncgen/syncgen/runtime/internal/text"
)

// Checkpointing says when and where checkpoints are written.
type Checkpointing struct {
	// Every writes a checkpoint after every Every steps (0: never), into
	// Dir/step-NNNNNNNN, keeping the newest Keep committed ones.
	Every int
	Dir   string
	Keep  int
	// Async writes each shard in the background while the next step
	// runs, from a copy staged on the host at the save; the checkpoint is
	// committed at the end of that next step (or of the run).
	Async bool
}

// CheckDir makes sure that the checkpoints' directory can be written,
// before the first step rather than at the first save.
func (c Checkpointing) CheckDir() error {
	if c.Every <= 0 {
		return nil
	}
	const todo = "give --checkpoint-dir a directory that every rank can write"
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("the checkpoint directory %s cannot be made (%v): %s", c.Dir, err, todo)
	}
	f, err := os.CreateTemp(c.Dir, ".writable-*")
	if err != nil {
		// The cause alone, not the probe's random name: the ranks then
		// find the same error, which rank 0 prints once.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("the checkpoint directory %s cannot be written (%v): %s", c.Dir, err, todo)
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

// pendingSave is a checkpoint whose shard is being written in the
// background: what its commit needs once the write ends.
type pendingSave struct {
	steps   int
	dir     string
	md      ckpt.Metadata // the run's facts at the save: the scaler's state, the updates applied
	tensors []ckpt.Tensor // the staged state, until written
	done    chan struct{}
	size    int64
	sum     string
	// failed is what failed on this rank (nil: nothing), set before done
	// is closed.
	failed *saveFailure
	staged time.Duration // the synchronous part: copying the state to the host
	began  time.Time     // when the save began
	// simulated and samples are this rank's part of md.Balance at the
	// save, which rank 0 gathers with the shards' checksums.
	simulated time.Duration
	samples   int
	// committed reports rank 0's background commit (async saves; nil on
	// the other ranks, which wait for rank 0's word in awaitCommit).
	committed chan error
}

// saveFailure is what failed on one rank in a checkpoint's save, in words
// that are the same on every rank that failed alike (no rank's own file),
// so that rank 0 says it once for them all.
type saveFailure struct {
	// Doing is what the rank was doing ("writing its shard into
	// ck/step-00000004"), Cause the error ("no space left on device",
	// with what to do on a full disk).
	Doing string `json:"doing"`
	Cause string `json:"cause"`
}

// failure describes err, met while doing.
func failure(doing string, err error) *saveFailure {
	cause := err.Error()
	// The system's error alone, without the file: a rank's own shard
	// would make every rank's line differ.
	var pe *os.PathError
	if errors.As(err, &pe) {
		cause = pe.Err.Error() + ckpt.FullHint(err)
	}
	return &saveFailure{Doing: doing, Cause: cause}
}

// FailedSave is a checkpoint's save that failed, which every rank returns
// at the same point of the run, having agreed on it: the run ends without
// aborting the job, rank 0 prints Msg once (the other ranks have none),
// and every rank finalises MPI: one error says who failed, not a line per
// rank and MPI_Abort's noise.
type FailedSave struct{ Msg string }

func (f *FailedSave) Error() string {
	if f.Msg == "" {
		return "a checkpoint's save failed (rank 0 says why)"
	}
	return f.Msg
}

// saveCheckpoint writes the checkpoint after steps steps: this rank's
// shard, then rank 0 gathers the shards' sizes and checksums, writes the
// metadata and commits it, and prunes the old checkpoints. With Async
// the shard is only staged here (copied to the host: the bytes current
// now, whatever the steps do after) and written in the background; the
// commit follows at the end of the next step (commitPending). It returns
// the size of this rank's shard (0 while it is being written). A rank
// whose part fails still takes part in the agreement (commitSave), so
// that every rank ends the run together (*FailedSave).
func (e *Engine) saveCheckpoint(steps int) (int64, error) {
	e.watchSave(steps)
	defer watchIdle(e)
	t0 := time.Now()
	p := e.stageCheckpoint(steps)
	p.staged, p.began = time.Since(t0), t0
	if p.failed != nil {
		close(p.done)
	} else {
		go func() {
			defer close(p.done)
			meta := map[string]string{"format": ckpt.Format, "plan_hash": e.plan.Hash, "rank": fmt.Sprint(e.rank),
				"world_size": fmt.Sprint(e.size), "steps": fmt.Sprint(steps)}
			path := filepath.Join(p.dir, ckpt.ShardName(e.rank))
			var err error
			p.size, p.sum, err = ckpt.WriteShard(path, meta, p.tensors)
			if err == nil {
				err = e.hooks.failSave(e, steps, path)
			}
			if err != nil {
				p.failed = failure("writing its shard into "+p.dir, err)
			} else {
				e.faultAt(FaultCrashInSave, steps)
				e.hooks.inSave(e, steps)
			}
			p.tensors = nil
		}()
	}
	if e.cfg.Checkpoint.Async {
		e.pending = p
		return 0, nil
	}
	return e.commitSave(p)
}

// stageCheckpoint copies this rank's state to the host and notes the
// run's facts at this point; what fails is in the save's failed.
func (e *Engine) stageCheckpoint(steps int) *pendingSave {
	dir := ckpt.StepDir(e.cfg.Checkpoint.Dir, steps)
	p := &pendingSave{steps: steps, dir: dir, done: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.failed = failure("making the directory "+dir, err)
		return p
	}
	// Every rank uncommits the directory before it writes its shard, so
	// that it is uncommitted before any shard changes; rank 0 commits it
	// again only after every rank's shard is written (commitSave).
	if err := ckpt.Uncommit(dir); err != nil {
		p.failed = failure("uncommitting "+dir+" before writing it again", err)
		return p
	}
	tensors, buckets, err := e.shardTensors()
	if err != nil {
		p.failed = &saveFailure{Doing: "copying its state to the host", Cause: err.Error()}
		return p
	}
	p.tensors = tensors
	p.md = ckpt.Metadata{Format: ckpt.Format, PlanHash: e.plan.Hash, PlanName: e.plan.Name, Source: e.plan.Source, StateHash: e.plan.StateHash,
		Steps: steps, WorldSize: e.size, Applied: e.tr.applied, Buckets: buckets}
	if e.tr.sc != nil {
		p.md.Scaler, _ = json.Marshal(e.tr.sc.State())
	}
	if h := &e.het; h.on && h.spec.Balance == hetero.Dynamic {
		p.md.Balance = &ckpt.Balance{Every: h.spec.Every, Shares: slices.Clone(h.shares)}
		p.simulated, p.samples = h.simulated, h.samples
	}
	return p
}

// shardRecord is what each rank tells rank 0 of its part of a checkpoint:
// its shard, or what failed, and its part of dynamic balancing's state.
type shardRecord struct {
	ckpt.ShardInfo
	SimulatedNs int64        `json:"simulated_ns"`
	Samples     int          `json:"samples"`
	Host        string       `json:"host"`
	Failed      *saveFailure `json:"failed,omitempty"`
}

// commitSave waits for p's shard and gathers every rank's size and
// checksum, or what failed, on rank 0. When every shard was written, rank
// 0 commits the checkpoint and prunes the old ones (with Async, in the
// background: the fsyncs and the rename need no other rank). Rank 0 then
// tells every rank whether the save failed, and it is a *FailedSave on
// every rank alike. Every rank calls it at the same point of the run.
func (e *Engine) commitSave(p *pendingSave) (int64, error) {
	defer e.hostAt.set("")
	e.hostAt.set("writing its shard of the checkpoint after " + stepCount(p.steps))
	<-p.done
	rec, _ := json.Marshal(shardRecord{ShardInfo: ckpt.ShardInfo{File: ckpt.ShardName(e.rank), Bytes: p.size, SHA256: p.sum},
		SimulatedNs: int64(p.simulated), Samples: p.samples, Host: e.h.Name, Failed: p.failed})
	e.hostAt.set("gathering the shards' checksums of the checkpoint after " + stepCount(p.steps))
	all, err := e.h.Gather(rec)
	if err != nil {
		return 0, fmt.Errorf("gathering the shards' checksums: %w", err)
	}
	var msg string
	if e.rank == 0 {
		msg = e.commitShards(p, all)
	}
	if err := e.agreeOnSave(p, msg); err != nil {
		return 0, err
	}
	if e.cfg.Checkpoint.Async {
		e.committing = p
	}
	return p.size, nil
}

// commitShards is rank 0's part of commitSave: it reads every rank's
// record and commits the checkpoint (starts committing it, with Async).
// It returns why the save failed ("" when it did not).
func (e *Engine) commitShards(p *pendingSave, all [][]byte) string {
	md := p.md
	if md.Balance != nil {
		b := *md.Balance
		md.Balance = &b
	}
	recs := make([]shardRecord, len(all))
	for r, data := range all {
		if err := json.Unmarshal(data, &recs[r]); err != nil {
			recs[r].Failed = &saveFailure{Doing: "telling rank 0 of its shard", Cause: err.Error()}
		}
	}
	if msg := describeFailures(p.steps, recs); msg != "" {
		return msg
	}
	for _, s := range recs {
		md.Shards = append(md.Shards, s.ShardInfo)
		if md.Balance != nil {
			md.Balance.SimulatedNs = append(md.Balance.SimulatedNs, s.SimulatedNs)
			md.Balance.Samples = append(md.Balance.Samples, s.Samples)
		}
	}
	commit := func() string {
		if err := ckpt.SyncDir(p.dir); err != nil {
			return e.commitFailure(p.steps, failure("making "+p.dir+" durable", err))
		}
		if err := ckpt.Commit(p.dir, &md); err != nil {
			return e.commitFailure(p.steps, failure("committing it (writing "+filepath.Join(p.dir, ckpt.MetadataName)+")", err))
		}
		// The checkpoint the run resumed from stays until the run has
		// committed a later one: whatever a directory holds, pruning never
		// leaves the run with less than it started from.
		protect := ""
		if e.resumedFrom.MD != nil && md.Steps <= e.resumedFrom.Steps() {
			protect = e.resumedFrom.Dir
		}
		err := ckpt.Prune(e.cfg.Checkpoint.Dir, e.cfg.Checkpoint.Keep, e.plan.Hash, e.plan.StateHash, protect)
		if err == nil {
			err = ckpt.PruneUncommitted(e.cfg.Checkpoint.Dir, e.plan.Hash, md.Steps)
		}
		if err != nil {
			return fmt.Sprintf("the checkpoint after %s (after step %d) is committed, but removing the older checkpoints in %s failed on rank 0 (%s): %v",
				stepCount(p.steps), p.steps-1, e.cfg.Checkpoint.Dir, e.h.Name, err)
		}
		return ""
	}
	if !e.cfg.Checkpoint.Async {
		e.hostAt.set("committing the checkpoint after " + stepCount(p.steps))
		return commit()
	}
	p.committed = make(chan error, 1)
	go func() {
		if msg := commit(); msg != "" {
			p.committed <- errors.New(msg)
		}
		close(p.committed)
	}()
	return ""
}

// commitFailure says that rank 0's commit of the checkpoint after steps
// steps failed (f).
func (e *Engine) commitFailure(steps int, f *saveFailure) string {
	return fmt.Sprintf("the checkpoint after %s (after step %d) failed on rank 0 (%s): %s: %s%s", stepCount(steps), steps-1, e.h.Name, f.Doing, f.Cause, wholeNote(f.Cause))
}

// wholeNote says that the checkpoints committed before a failed one are
// whole, unless cause says it already (ckpt.FullHint).
func wholeNote(cause string) string {
	if strings.Contains(cause, "checkpoints committed before") {
		return ""
	}
	return " (it is left uncommitted; the checkpoints committed before it are whole, and --resume auto takes the newest of them)"
}

// describeFailures says which ranks' parts of the checkpoint after steps
// steps failed and why, one line for the ranks that failed alike ("" when
// none did).
func describeFailures(steps int, recs []shardRecord) string {
	type group struct {
		f     *saveFailure
		ranks []int
	}
	var groups []group
	for r, rec := range recs {
		if rec.Failed == nil {
			continue
		}
		i := slices.IndexFunc(groups, func(g group) bool { return *g.f == *rec.Failed })
		if i < 0 {
			i = len(groups)
			groups = append(groups, group{f: rec.Failed})
		}
		groups[i].ranks = append(groups[i].ranks, r)
	}
	if len(groups) == 0 {
		return ""
	}
	who := func(ranks []int) string {
		switch {
		case len(ranks) == len(recs) && len(recs) > 1:
			return "every rank"
		case len(ranks) == 1:
			return fmt.Sprintf("rank %d (%s)", ranks[0], recs[ranks[0]].Host)
		}
		return text.RankList(ranks)
	}
	head := fmt.Sprintf("the checkpoint after %s (after step %d) failed", stepCount(steps), steps-1)
	if len(groups) == 1 {
		g := groups[0]
		return fmt.Sprintf("%s on %s: %s: %s%s", head, who(g.ranks), g.f.Doing, g.f.Cause, wholeNote(g.f.Cause))
	}
	lines := []string{head + ":"}
	for _, g := range groups {
		lines = append(lines, fmt.Sprintf("  %s: %s: %s", who(g.ranks), g.f.Doing, g.f.Cause))
	}
	for _, g := range groups {
		if note := wholeNote(g.f.Cause); note != "" {
			lines = append(lines, "  "+strings.TrimSuffix(strings.TrimPrefix(note, " ("), ")"))
			break
		}
	}
	return strings.Join(lines, "\n")
}

// agreeOnSave tells every rank whether the save p failed, from rank 0,
// which knows why (msg, "" when it did not fail): a *FailedSave on every
// rank when it did.
func (e *Engine) agreeOnSave(p *pendingSave, msg string) error {
	if e.rank != 0 {
		e.hostAt.set("waiting for rank 0's word on the checkpoint after " + stepCount(p.steps))
	}
	word := []byte{0}
	if msg != "" {
		word[0] = 1
	}
	if err := e.h.Bcast(0, word); err != nil {
		return fmt.Errorf("agreeing on the checkpoint after %s: %w", stepCount(p.steps), err)
	}
	if word[0] != 0 {
		return &FailedSave{Msg: msg}
	}
	return nil
}

// watchSave puts the save of the checkpoint after steps steps under the
// watchdog: every rank waits there for the others' shards (watchBetween).
func (e *Engine) watchSave(steps int) {
	watchBetween(e, "saving the checkpoint after "+stepCount(steps))
}

// awaitCommit waits for rank 0's background commit of an async save, and
// tells every rank how it went (a *FailedSave when it failed).
func (e *Engine) awaitCommit() error {
	p := e.committing
	if p == nil {
		return nil
	}
	e.committing = nil
	e.watchSave(p.steps)
	defer watchIdle(e)
	e.hostAt.set("committing the checkpoint after " + stepCount(p.steps))
	defer e.hostAt.set("")
	var msg string
	if p.committed != nil {
		if err := <-p.committed; err != nil {
			msg = err.Error()
		}
	}
	return e.agreeOnSave(p, msg)
}

// commitPending commits the async save of an earlier step, if any: at the
// end of the step after it, or of the run. It returns the save's figures:
// its size and how long the steps stood still for it (the staging, and
// the wait for the write and the ranks' agreement).
func (e *Engine) commitPending() (result.Save, bool, error) {
	if err := e.awaitCommit(); err != nil {
		return result.Save{}, false, err
	}
	p := e.pending
	if p == nil {
		return result.Save{}, false, nil
	}
	e.pending = nil
	e.watchSave(p.steps)
	defer watchIdle(e)
	t0 := time.Now()
	n, err := e.commitSave(p)
	var failed *FailedSave
	if errors.As(err, &failed) {
		return result.Save{}, false, err
	}
	if err != nil {
		return result.Save{}, false, fmt.Errorf("checkpoint after %s: %w", stepCount(p.steps), err)
	}
	return result.Save{Steps: p.steps, Bytes: n, Time: p.staged + time.Since(t0), At: p.began.Sub(e.origin)}, true, nil
}

// ResumePoint is the checkpoint a run resumes from: its directory and its
// metadata (Dir "" and MD nil: the run starts at step 0), and, for
// --resume since:TIME, what rank 0 says of the choice.
type ResumePoint struct {
	Dir  string
	MD   *ckpt.Metadata
	Note string
}

// SincePrefix starts the --resume value of a restart: since:TIME resumes
// from the newest checkpoint of the plan committed at or after TIME (RFC
// 3339); since:TIME,else:VALUE, when there is none, resumes as --resume
// VALUE would have when the job began (VALUE a checkpoint's directory or
// auto: what the user's own --resume said), and plain since:TIME starts
// from step 0.
const SincePrefix = "since:"

// ElseSep separates since:TIME from the restart's fallback (SincePrefix).
const ElseSep = ",else:"

// ResumeForm is --resume's forms, for messages.
const ResumeForm = "DIR, auto, or since:TIME[,else:DIR|auto] (TIME in RFC 3339, e.g. 2006-01-02T15:04:05Z)"

// ParseSince splits a since:TIME[,else:VALUE] value of --resume (ok false
// for another form): when the job began, and the user's own --resume
// (fallback, "" for none). A malformed value is an error that says the
// form: a usage error, found before the run starts.
func ParseSince(value string) (since time.Time, fallback string, ok bool, err error) {
	rest, ok := strings.CutPrefix(value, SincePrefix)
	if !ok {
		return time.Time{}, "", false, nil
	}
	t, fallback, hasElse := strings.Cut(rest, ElseSep)
	since, err = time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return time.Time{}, "", true, fmt.Errorf("--resume %s: %q is not a time: want %sTIME or %sTIME%sDIR|auto, TIME in RFC 3339 (2006-01-02T15:04:05Z), as syncgen run --restarts gives it",
			value, t, SincePrefix, SincePrefix, ElseSep)
	}
	if hasElse && fallback == "" {
		return time.Time{}, "", true, fmt.Errorf("--resume %s: nothing after %q: want %sTIME%sDIR|auto, the checkpoint to resume when the job committed none since TIME", value, ElseSep, SincePrefix, ElseSep)
	}
	if _, first, nested, ferr := ParseSince(fallback); nested {
		// The flags of a restart given again: the first launch's own.
		if ferr != nil {
			return time.Time{}, "", true, ferr
		}
		fallback = first
	}
	return since, fallback, true, nil
}

// Steps is the number of steps the checkpoint holds the state after (0:
// none), which is also the number of the step the run starts at: steps
// count from 0, warm-up included, and the checkpoint step-0000000N holds
// the state after steps 0 to N-1.
func (rp ResumePoint) Steps() int {
	if rp.MD == nil {
		return 0
	}
	return rp.MD.Steps
}

// FindResume resolves --resume's value: a checkpoint's directory, auto
// (the newest committed checkpoint in root, the checkpoint directory), or
// since:TIME[,else:VALUE] (sinceCheckpoint, then VALUE as at the job's
// first launch), and checks what the metadata says against this run: a
// checkpoint of plan p, written by a world the metadata accounts for,
// with steps left of the run's total (warm-up included). It reads no
// shard: every rank finds the same, from the same files, before the
// backend starts.
func FindResume(value, root string, p *plan.Plan, total int) (ResumePoint, error) {
	since, fallback, isSince, err := ParseSince(value)
	if err != nil {
		return ResumePoint{}, err
	}
	if !isSince {
		return findResume(value, root, p, total, time.Time{}, "")
	}
	dir, note := sinceCheckpoint(root, p, since)
	if dir != "" {
		return findResume(dir, root, p, total, time.Time{}, note)
	}
	when := since.Local().Format("2006-01-02 15:04:05")
	none := fmt.Sprintf("%s holds no checkpoint of plan %q committed since %s, when the job began", root, p.Name, when)
	if fallback == "" {
		return ResumePoint{Note: "starting from step 0: " + none}, nil
	}
	// The checkpoint the job's first launch resumed: auto among those
	// committed before it began, as auto then found.
	rp, err := findResume(fallback, root, p, total, since, "")
	if err != nil {
		return ResumePoint{}, fmt.Errorf("%s; the job's own --resume %s: %w", none, fallback, err)
	}
	rp.Note = fmt.Sprintf("resuming from %s, what the job's own --resume %s took: %s", rp.Dir, fallback, none)
	return rp, nil
}

// findResume resolves a checkpoint's directory or auto (among the
// checkpoints committed before `before`, when it is not zero) and checks
// it against the run.
func findResume(value, root string, p *plan.Plan, total int, before time.Time, note string) (ResumePoint, error) {
	dir := value
	if value == "auto" {
		var err error
		if dir, note, err = autoCheckpoint(root, p, before); err != nil {
			return ResumePoint{}, err
		}
	}
	md, err := ckpt.ReadMetadata(dir)
	if err != nil {
		if cks, _ := ckpt.Committed(dir); len(cks) > 0 {
			// A checkpoint directory (--checkpoint-dir) given for a
			// checkpoint.
			return ResumePoint{}, fmt.Errorf("%s is a directory of checkpoints, not a checkpoint: give --checkpoint-dir %s --resume auto to resume its newest committed one, or --resume %s",
				dir, dir, cks[len(cks)-1])
		}
		return ResumePoint{}, err
	}
	if !samePlan(md, p) {
		return ResumePoint{}, fmt.Errorf("%s is a checkpoint of plan %q (%s, hash %.12s), not of this program's %q (%s, hash %.12s): resume a checkpoint of the same plan",
			dir, md.PlanName, md.Source, md.PlanHash, p.Name, p.Source, p.Hash)
	}
	if len(md.Shards) != md.WorldSize {
		return ResumePoint{}, fmt.Errorf("%s: the metadata lists %d shards for %d ranks", dir, len(md.Shards), md.WorldSize)
	}
	if md.Steps >= total {
		return ResumePoint{}, fmt.Errorf("%s holds the state after %s (steps 0 to %d), and this run has %s (steps 0 to %d, warm-up included): nothing is left to run; give more --steps",
			dir, stepCount(md.Steps), md.Steps-1, stepCount(total), total-1)
	}
	if md.PlanHash != p.Hash && note == "" {
		note = editedNote(dir, md, p)
	}
	return ResumePoint{Dir: dir, MD: md, Note: note}, nil
}

// samePlan reports whether the checkpoint md was written by plan p: by the
// same plan, or by p before an edit that changes none of the state the
// checkpoint holds (its run line, durations, streams), which StateHash
// tells.
func samePlan(md *ckpt.Metadata, p *plan.Plan) bool {
	return md.PlanHash == p.Hash || md.StateHash != "" && md.StateHash == p.StateHash
}

// editedNote says that the checkpoint at dir is of plan p as it was before
// an edit that changes none of its state (samePlan).
func editedNote(dir string, md *ckpt.Metadata, p *plan.Plan) string {
	return fmt.Sprintf("resuming from %s, a checkpoint of plan %q as it was before an edit that changes none of the state it holds (hash %.12s, now %.12s: the run line, durations or streams)",
		dir, p.Name, md.PlanHash, p.Hash)
}

// autoCheckpoint is the checkpoint --resume auto takes: the newest
// committed checkpoint of plan p in root (committed before `before`,
// when it is not zero) whose metadata reads. A checkpoint directory may
// hold other plans' checkpoints too (pruning leaves them alone), and they
// are passed over, as is one whose metadata was damaged after its commit
// (a disk error, a hand edit), which the note names, rather than refusing
// while an older one would do.
func autoCheckpoint(root string, p *plan.Plan, before time.Time) (dir, note string, err error) {
	cks, err := ckpt.Committed(root)
	if err != nil || len(cks) == 0 {
		return "", "", fmt.Errorf("auto: no committed checkpoint in %s%s", root, emptyHint(root))
	}
	var damaged, others []string
	for i := len(cks) - 1; i >= 0 && dir == ""; i-- {
		md, err := ckpt.ReadMetadata(cks[i])
		switch {
		case err != nil:
			damaged = append(damaged, err.Error())
		case !before.IsZero() && !md.CommittedAt(cks[i]).Before(before):
		case !samePlan(md, p):
			others = append(others, otherPlan(filepath.Base(cks[i]), md, p))
		default:
			dir = cks[i]
		}
	}
	if dir == "" {
		var held []string
		if len(others) > 0 {
			held = append(held, "those of other plans: "+strings.Join(others, ", "))
		}
		if len(damaged) > 0 {
			held = append(held, "those whose metadata does not read: "+strings.Join(damaged, "; "))
		}
		if len(held) == 0 {
			held = append(held, "only checkpoints committed since the job began")
		}
		return "", "", fmt.Errorf("auto: no committed checkpoint of plan %q in %s, which holds %s: run without --resume to start from step 0, or give the --checkpoint-dir that this plan's checkpoints were written to",
			p.Name, root, strings.Join(held, "; and "))
	}
	if len(damaged) > 0 {
		note = fmt.Sprintf("resuming from %s, the newest committed checkpoint whose metadata reads; passed over: %s", dir, strings.Join(damaged, "; "))
	}
	return dir, note, nil
}

// otherPlan names checkpoint base of another plan than p for a message:
// by the plan's name, and where the names are the same (the plan was
// edited since the checkpoint, so it cannot resume it) by both hashes.
func otherPlan(base string, md *ckpt.Metadata, p *plan.Plan) string {
	if md.PlanName == p.Name {
		return fmt.Sprintf("%s (plan %q as it was then, hash %.12s: this program's plan %q, hash %.12s, differs)", base, md.PlanName, md.PlanHash, p.Name, p.Hash)
	}
	return fmt.Sprintf("%s (plan %q)", base, md.PlanName)
}

// stepCount is "1 step" or "N steps".
func stepCount(n int) string { return fmt.Sprintf("%d step%s", n, text.Plural(n)) }

// sinceCheckpoint is the newest checkpoint in root of plan p committed at
// or after since ("" for none), and what rank 0 says of it: a restart
// (syncgen run --restarts) resumes only from a checkpoint its own job
// committed, never from another plan's or an earlier job's in the same
// directory.
func sinceCheckpoint(root string, p *plan.Plan, since time.Time) (string, string) {
	when := since.Local().Format("2006-01-02 15:04:05")
	cks, _ := ckpt.Committed(root)
	best, at := "", time.Time{}
	for _, dir := range cks {
		md, err := ckpt.ReadMetadata(dir)
		if err != nil || !samePlan(md, p) {
			continue
		}
		if t := md.CommittedAt(dir); !t.Before(since) && !t.Before(at) {
			best, at = dir, t
		}
	}
	if best == "" {
		return "", ""
	}
	return best, fmt.Sprintf("resuming from %s, the newest checkpoint of plan %q committed since %s", best, p.Name, when)
}

// emptyHint says why root holds no committed checkpoint, when its
// contents say more than its name, and what to do.
func emptyHint(root string) string {
	const todo = "run without --resume to start from step 0, or give the --checkpoint-dir that the checkpoints were written to"
	if _, err := os.Stat(root); err != nil {
		return " (it does not exist): " + todo
	}
	if started, _ := filepath.Glob(filepath.Join(root, "step-*")); len(started) > 0 {
		return fmt.Sprintf(" (it holds %d whose write was interrupted before the commit): %s", len(started), todo)
	}
	return ": " + todo
}

// Resume restores the state of the checkpoint rp (FindResume) and makes
// Run start at the step after it, in any world size: each bucket's state
// is put together from the shards by the checkpoint's ownership map and
// handed out by this world's. It refuses a shard whose size or checksum is
// not the metadata's, or that lacks a bucket's state as this plan has it.
// Ranks read different shards, so one rank may refuse where another does
// not.
func (e *Engine) Resume(rp ResumePoint) error {
	t0 := time.Now()
	defer func() { e.resumeTime = time.Since(t0) }()
	dir, md := rp.Dir, rp.MD
	e.resumedFrom = rp
	p := e.plan
	var err error
	shards := make([]*ckpt.Shard, md.WorldSize)
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
	byName := map[string]ckpt.BucketInfo{}
	for _, bi := range md.Buckets {
		byName[bi.Name] = bi
	}
	for b, pm := range e.tr.params {
		if pm.Param.Buf == nil {
			continue
		}
		name := p.Buckets[b].Name
		bi, ok := byName[name]
		if !ok || bi.DType != pm.DType.String() || bi.Elems != p.Buckets[b].Elems || bi.States != pm.Spec.States() {
			return fmt.Errorf("%s has no state of bucket %q (%s, %d elements) as this plan has it", dir, name, pm.DType, p.Buckets[b].Elems)
		}
		var full [3][]byte
		spans := []backend.Span{pm.Param, pm.State[0], pm.State[1]}
		for k, sp := range spans[:1+pm.Spec.States()] {
			if full[k], err = wholeBucket(bi, stateName(k, name), pm.DType, md.WorldSize, e.rank, read); err != nil {
				return fmt.Errorf("%s: %w%s", dir, err, olderHint(dir, p, md.Steps))
			}
			// This rank's part: its slice, in this world, or all of it.
			mine := full[k][pm.Base*pm.DType.Size():][:sp.Bytes()]
			if sp.N > 0 {
				if err := e.be.CopyFromHost(sp, mine); err != nil {
					return err
				}
			}
		}
		if e.cfg.CheckEvery > 0 {
			n := bi.Elems
			vals := [3][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
			for k := range 1 + pm.Spec.States() {
				ref := full[k]
				// Every rank's reference of a replicated bucket is rank 0's
				// copy, so that the checks find a rank whose own copy
				// differs (ranks that had diverged when it was saved, a
				// changed shard) instead of carrying it on unseen.
				if !bi.Sharded && min(e.rank, md.WorldSize-1) != 0 {
					if ref, err = wholeBucket(bi, stateName(k, name), pm.DType, md.WorldSize, 0, read); err != nil {
						return fmt.Errorf("%s: %w%s", dir, err, olderHint(dir, p, md.Steps))
					}
				}
				elem.LoadAll(vals[k], ref, pm.DType)
			}
			e.model.SetReference(b, vals[0], vals[1], vals[2])
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

// olderHint names, for an error that says to resume from another
// checkpoint than dir (a checkpoint after steps steps), the newest
// committed one of plan p before it in the same directory, which
// --resume auto would take again otherwise; "" when there is none.
func olderHint(dir string, p *plan.Plan, steps int) string {
	cks, _ := ckpt.Committed(filepath.Dir(dir))
	for i := len(cks) - 1; i >= 0; i-- {
		if md, err := ckpt.ReadMetadata(cks[i]); err == nil && samePlan(md, p) && md.Steps < steps {
			return fmt.Sprintf(" (the newest committed checkpoint of this plan before it: --resume %s)", cks[i])
		}
	}
	return ""
}

// wholeBucket assembles one array (the parameters or a state) of a bucket
// from the checkpoint, in the world it was written by: a replicated bucket
// from one shard (this rank's, or the last one's when the world was smaller), a
// sharded one from every rank's slice. Every shard read is checked.
func wholeBucket(bi ckpt.BucketInfo, name string, dt elem.DType, world, rank int, read func(int) (*ckpt.Shard, error)) ([]byte, error) {
	size := dt.Size()
	if !bi.Sharded {
		s, err := read(min(rank, world-1))
		if err != nil {
			return nil, err
		}
		t, ok := s.Tensors[name]
		if !ok || int64(len(t.Data)) != bi.Elems*size {
			return nil, fmt.Errorf("a shard lacks %s as the metadata describes it", name)
		}
		return t.Data, nil
	}
	out := make([]byte, bi.Elems*size)
	for r := range world {
		s, err := read(r)
		if err != nil {
			return nil, err
		}
		lo, hi := min(int64(r)*bi.Slice, bi.Elems), min(int64(r+1)*bi.Slice, bi.Elems)
		t, ok := s.Tensors[name]
		if !ok || int64(len(t.Data)) != (hi-lo)*size {
			return nil, fmt.Errorf("the shard of rank %d lacks %s (elements %d..%d) as the metadata describes it", r, name, lo, hi)
		}
		copy(out[lo*size:], t.Data)
	}
	return out, nil
}

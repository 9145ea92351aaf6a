package ckpt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// Tensor is one named buffer of a shard.
type Tensor struct {
	Name  string
	DType elem.DType
	Shape []int64
	Data  []byte
}

// safetensors' names of the dtypes.
var stNames = map[elem.DType]string{elem.F64: "F64", elem.F32: "F32", elem.F16: "F16", elem.BF16: "BF16",
	elem.I64: "I64", elem.I32: "I32", elem.I8: "I8", elem.U8: "U8"}

// ShardName is rank's file in a checkpoint directory.
func ShardName(rank int) string { return fmt.Sprintf("rank-%05d.safetensors", rank) }

// StepDir is the directory of the checkpoint after steps steps (the
// number of steps done: the state after steps 0 to steps-1).
func StepDir(root string, steps int) string {
	return filepath.Join(root, fmt.Sprintf("step-%08d", steps))
}

// MetadataName is the file whose presence commits a checkpoint.
const MetadataName = "metadata.json"

// WriteShard writes tensors as a safetensors file at path, with meta as
// its __metadata__, and fsyncs it. It returns the file's size and sha256.
// The header's keys are sorted and padded to 8 bytes, so the same tensors
// give the same bytes.
func WriteShard(path string, meta map[string]string, tensors []Tensor) (int64, string, error) {
	header := map[string]any{"__metadata__": meta}
	var off int64
	for _, t := range tensors {
		name, ok := stNames[t.DType]
		if !ok {
			return 0, "", fmt.Errorf("tensor %q: dtype %s", t.Name, t.DType)
		}
		n := int64(len(t.Data))
		header[t.Name] = map[string]any{"dtype": name, "shape": t.Shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	h, err := json.Marshal(header)
	if err != nil {
		return 0, "", err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, "", fmt.Errorf("writing %s: %w%s", path, err, FullHint(err))
	}
	var lenBytes [8]byte
	binary.LittleEndian.PutUint64(lenBytes[:], uint64(len(h)))
	parts := [][]byte{lenBytes[:], h}
	size := int64(8 + len(h))
	for _, t := range tensors {
		parts = append(parts, t.Data)
		size += int64(len(t.Data))
	}
	// The checksum is computed while the file is written, not after: the
	// save then takes the longer of the two, not their sum.
	sums := make(chan string, 1)
	go func() {
		sum := sha256.New()
		for _, p := range parts {
			sum.Write(p)
		}
		sums <- hex.EncodeToString(sum.Sum(nil))
	}()
	err = writeAll(f, parts...)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	sum := <-sums
	if err != nil {
		return 0, "", fmt.Errorf("writing %s: %w%s", path, err, FullHint(err))
	}
	return size, sum, nil
}

func writeAll(w io.Writer, bufs ...[]byte) error {
	for _, b := range bufs {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// Shard is a shard file read back: its metadata and tensors by name.
type Shard struct {
	Meta    map[string]string
	Tensors map[string]Tensor
}

// ReadShard reads the shard at path, checking its size and sha256 against
// what the metadata recorded (want).
func ReadShard(path string, want ShardInfo) (*Shard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("shard %s is missing: resume from another checkpoint, one that every rank of its world wrote", path)
		}
		return nil, err
	}
	if int64(len(data)) != want.Bytes {
		return nil, fmt.Errorf("shard %s has %d bytes; the checkpoint's metadata says %d: it is truncated or was changed; resume from another checkpoint", path, len(data), want.Bytes)
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want.SHA256 {
		return nil, fmt.Errorf("shard %s: sha256 %s, the checkpoint's metadata says %s: the file was changed or corrupted; resume from another checkpoint", path, hex.EncodeToString(got[:]), want.SHA256)
	}
	return parseShard(path, data)
}

// parseShard reads a safetensors file's header and tensors.
func parseShard(path string, data []byte) (*Shard, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("shard %s: truncated", path)
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("shard %s: header length %d beyond the file", path, n)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		return nil, fmt.Errorf("shard %s: header: %v", path, err)
	}
	body := data[8+n:]
	s := &Shard{Meta: map[string]string{}, Tensors: map[string]Tensor{}}
	for name, raw := range header {
		if name == "__metadata__" {
			if err := json.Unmarshal(raw, &s.Meta); err != nil {
				return nil, fmt.Errorf("shard %s: __metadata__: %v", path, err)
			}
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > int64(len(body)) {
			return nil, fmt.Errorf("shard %s: tensor %q: bad entry", path, name)
		}
		dt := elem.InvalidDType
		for d, sn := range stNames {
			if sn == e.DType {
				dt = d
			}
		}
		data := body[e.Offsets[0]:e.Offsets[1]]
		// A tensor is what its dtype and shape say it is: the engine
		// takes its bytes as that many elements.
		if !dt.Valid() {
			return nil, fmt.Errorf("shard %s: tensor %q: dtype %q is not one that syncgen writes", path, name, e.DType)
		}
		if n, ok := shapeBytes(e.Shape, dt.Size()); !ok || n != int64(len(data)) {
			return nil, fmt.Errorf("shard %s: tensor %q: shape %v of %s does not fit its %d bytes", path, name, e.Shape, e.DType, len(data))
		}
		s.Tensors[name] = Tensor{Name: name, DType: dt, Shape: e.Shape, Data: data}
	}
	return s, nil
}

// shapeBytes is the size of a tensor of shape and elements of size bytes;
// ok is false for a negative dimension or a size past int64.
func shapeBytes(shape []int64, size int64) (int64, bool) {
	n := size
	for _, d := range shape {
		if d < 0 || d > 0 && n > math.MaxInt64/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// Metadata commits a checkpoint.
type Metadata struct {
	Format string `json:"format"`
	// The plan: its hash, name and source file; the checkpoint of another
	// plan is refused.
	PlanHash string `json:"plan_hash"`
	PlanName string `json:"plan_name"`
	Source   string `json:"source"`
	// StateHash is plan.StateDigest's: what the state depends on, so that
	// the plan edited only elsewhere (its run line, durations) still
	// resumes it. Empty in checkpoints written before it was kept.
	StateHash string `json:"state_hash,omitempty"`
	// Steps done (the run continues at step Steps, counted from 0), the
	// world it was written by, and the updates applied (Adam's t).
	Steps     int `json:"steps"`
	WorldSize int `json:"world_size"`
	Applied   int `json:"applied_updates"`
	// Scaler is the loss scaler's state (scaler.State as JSON), if any.
	Scaler json.RawMessage `json:"scaler,omitempty"`
	// Buckets say who owns which bytes: for each updated bucket, its
	// parameters' dtype, its elements and whether each rank holds only its
	// slice (ZeRO) or the whole bucket.
	Buckets []BucketInfo `json:"buckets"`
	// Shards are the ranks' files, in rank order.
	Shards []ShardInfo `json:"shards"`
	// Balance is dynamic balancing's state after the checkpoint's step,
	// if the run balanced dynamically.
	Balance *Balance `json:"balance,omitempty"`
	// Committed is when rank 0 committed the checkpoint (RFC 3339, UTC;
	// Commit sets it): a restart resumes only from its own job's
	// checkpoints, and the newest are kept.
	Committed string `json:"committed,omitempty"`
}

// CommittedAt is when the checkpoint in dir, whose metadata md is, was
// committed: md.Committed, or, for a checkpoint that does not say, when
// its metadata file was written.
func (md *Metadata) CommittedAt(dir string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, md.Committed); err == nil {
		return t
	}
	if st, err := os.Stat(filepath.Join(dir, MetadataName)); err == nil {
		return st.ModTime()
	}
	return time.Time{}
}

// BucketInfo is one updated bucket's state in the checkpoint.
type BucketInfo struct {
	Name    string `json:"name"`
	DType   string `json:"dtype"`
	Elems   int64  `json:"elems"`
	States  int    `json:"states"`
	Sharded bool   `json:"sharded"`
	// Slice is the elements per rank slice of a sharded bucket (the
	// padded buffer's share): rank r holds [r*Slice, min((r+1)*Slice, Elems)).
	Slice int64 `json:"slice,omitempty"`
}

// ShardInfo is one rank's file.
type ShardInfo struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Balance is the state of dynamic balancing (--balance dynamic:Every)
// after a checkpoint's step: the shares of the global batch in force for
// the next step, and each rank's simulated compute and samples since the
// last rebalance, which the next rebalance divides. A run resumed with
// them rebalances as the run that wrote them would have.
type Balance struct {
	Every       int     `json:"every"`
	Shares      []int   `json:"shares"`
	SimulatedNs []int64 `json:"simulated_ns"`
	Samples     []int   `json:"samples"`
}

// Commit writes md into dir under a temporary name, fsyncs it, renames it
// to MetadataName and fsyncs the directory: the rename is the commit. It
// sets md.Committed to the time.
func Commit(dir string, md *Metadata) error {
	md.Committed = time.Now().UTC().Format(time.RFC3339Nano)
	data, err := json.MarshalIndent(md, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, MetadataName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, MetadataName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("committing the checkpoint %s: %w%s", dir, err, FullHint(err))
	}
	return nil
}

// FullHint says what to do when a checkpoint's write failed for want of
// space: the checkpoints committed before are whole, since a checkpoint
// counts only once its metadata is in place.
func FullHint(err error) string {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return ""
	}
	return " (the disk is full: free space there or give another --checkpoint-dir, or a smaller --checkpoint-keep; the checkpoints committed before this one are whole, and --resume auto takes the newest of them)"
}

// Uncommit makes dir, a checkpoint about to be written again (a run that
// reaches a step an earlier run of the directory reached), uncommitted
// before any of its shards is replaced: removing its metadata and making
// that durable. A crash while the new shards are written then leaves a
// directory that resume skips, never old metadata over new shards. A
// directory without metadata is left as it is.
func Uncommit(dir string) error {
	err := os.Remove(filepath.Join(dir, MetadataName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("uncommitting the checkpoint %s before writing it again: %w", dir, err)
	}
	return nil
}

// syncDir fsyncs a directory, so that the names in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SyncDir makes a new checkpoint directory's entry durable in its parent.
func SyncDir(dir string) error { return syncDir(dir) }

// ReadMetadata reads a committed checkpoint's metadata; a directory
// without it is a checkpoint that was never committed.
func ReadMetadata(dir string) (*Metadata, error) {
	data, err := os.ReadFile(filepath.Join(dir, MetadataName))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		const todo = "give a checkpoint's step-NNNNNNNN directory, or --checkpoint-dir DIR --resume auto for the newest committed one in DIR"
		if st, e := os.Stat(dir); e != nil {
			return nil, fmt.Errorf("%s does not exist: %s", dir, todo)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("%s is not a checkpoint (a step-NNNNNNNN directory): %s", dir, todo)
		}
		return nil, fmt.Errorf("%s has no %s: the checkpoint was never committed (its write was interrupted); resume from an earlier one, or with --checkpoint-dir %s --resume auto, which takes the newest committed one", dir, MetadataName, filepath.Dir(dir))
	}
	if err != nil {
		return nil, err
	}
	return parseMetadata(filepath.Join(dir, MetadataName), data)
}

// parseMetadata reads and checks the metadata file at path, of contents
// data.
func parseMetadata(path string, data []byte) (*Metadata, error) {
	var md Metadata
	if err := json.Unmarshal(data, &md); err != nil {
		if !bytes.Contains(data, []byte(Format)) {
			return nil, fmt.Errorf("%s: not a syncgen checkpoint's metadata", path)
		}
		// Ours, cut short or changed after its commit.
		return nil, fmt.Errorf("%s is damaged (%v): resume from another checkpoint", path, err)
	}
	if md.Format != Format {
		return nil, fmt.Errorf("%s: not a syncgen checkpoint's metadata (format %q, want %q)", path, md.Format, Format)
	}
	if err := md.check(); err != nil {
		return nil, fmt.Errorf("%s is damaged: %v: resume from another checkpoint", path, err)
	}
	return &md, nil
}

// check refuses metadata that syncgen never writes, so that what resume
// indexes and allocates by it stays in range: steps and updates counted
// from 0, a world of at least one rank with one shard each under its own
// name, buckets of known dtypes whose slices cover them, and dynamic
// balancing's state for every rank.
func (md *Metadata) check() error {
	if md.Steps < 0 {
		return fmt.Errorf("steps %d", md.Steps)
	}
	if md.Applied < 0 || md.Applied > md.Steps {
		return fmt.Errorf("%d updates applied in %d steps", md.Applied, md.Steps)
	}
	if md.WorldSize < 1 {
		return fmt.Errorf("world size %d", md.WorldSize)
	}
	if len(md.Shards) != md.WorldSize {
		return fmt.Errorf("%d shards for %d ranks", len(md.Shards), md.WorldSize)
	}
	for r, s := range md.Shards {
		if s.File != ShardName(r) || s.Bytes < 8 {
			return fmt.Errorf("shard %d: file %q of %d bytes, want %s", r, s.File, s.Bytes, ShardName(r))
		}
	}
	seen := map[string]bool{}
	for _, b := range md.Buckets {
		dt := elem.InvalidDType
		for d := range stNames {
			if d.String() == b.DType {
				dt = d
			}
		}
		switch {
		case seen[b.Name]:
			return fmt.Errorf("bucket %q listed twice", b.Name)
		case !dt.Valid():
			return fmt.Errorf("bucket %q: dtype %q", b.Name, b.DType)
		case b.Elems < 0 || b.Elems > math.MaxInt64/dt.Size():
			return fmt.Errorf("bucket %q: %d elements", b.Name, b.Elems)
		case b.States < 0 || b.States > 2:
			return fmt.Errorf("bucket %q: %d optimizer states", b.Name, b.States)
		case b.Sharded && (b.Slice < 0 || b.Slice < (b.Elems+int64(md.WorldSize)-1)/int64(md.WorldSize)):
			return fmt.Errorf("bucket %q: slices of %d elements do not cover its %d on %d ranks", b.Name, b.Slice, b.Elems, md.WorldSize)
		}
		seen[b.Name] = true
	}
	if b := md.Balance; b != nil {
		if b.Every < 1 || len(b.Shares) != md.WorldSize || len(b.SimulatedNs) != md.WorldSize || len(b.Samples) != md.WorldSize {
			return fmt.Errorf("balance: every %d, state of %d, %d and %d ranks for %d", b.Every, len(b.Shares), len(b.SimulatedNs), len(b.Samples), md.WorldSize)
		}
		for r := range md.WorldSize {
			if b.Shares[r] < 1 || b.SimulatedNs[r] < 0 || b.Samples[r] < 0 {
				return fmt.Errorf("balance: rank %d: share %d, %d ns, %d samples", r, b.Shares[r], b.SimulatedNs[r], b.Samples[r])
			}
		}
	}
	return nil
}

// Format names the metadata's format.
const Format = "syncgen-checkpoint-1"

// Committed lists root's committed checkpoints, oldest first.
func Committed(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	type ck struct {
		dir   string
		steps int
	}
	var cks []ck
	for _, e := range entries {
		steps, ok := stepOf(e)
		if !ok {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, MetadataName)); err == nil {
			cks = append(cks, ck{dir, steps})
		}
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].steps < cks[j].steps })
	out := make([]string, len(cks))
	for i, c := range cks {
		out[i] = c.dir
	}
	return out, nil
}

// Prune removes root's committed checkpoints of plan planHash but the
// newest keep (at least one: never the newest), newest by the time they
// were committed: a directory that an earlier run of the plan filled up to
// a later step keeps the checkpoint just committed. The plan's are also
// those of the same state hash (stateHash, "" for none): the plan before
// an edit that changed none of its state, whose checkpoints it resumes.
// Checkpoints of other plans, those whose metadata cannot be read, and
// protect (the checkpoint a run resumed from, until it has committed a
// later one; "" for none) are left alone.
func Prune(root string, keep int, planHash, stateHash, protect string) error {
	cks, err := Committed(root)
	if err != nil || len(cks) == 0 {
		return err
	}
	type ck struct {
		dir string
		at  time.Time
	}
	var own []ck
	for _, dir := range cks {
		md, err := ReadMetadata(dir)
		ours := err == nil && (md.PlanHash == planHash || stateHash != "" && md.StateHash == stateHash)
		if !ours || (protect != "" && sameDir(dir, protect)) {
			continue
		}
		own = append(own, ck{dir, md.CommittedAt(dir)})
	}
	// Committed lists them by step: a stable sort keeps that order among
	// equal times.
	sort.SliceStable(own, func(i, j int) bool { return own[i].at.Before(own[j].at) })
	keep = max(keep, 1)
	for _, c := range own[:max(len(own)-keep, 0)] {
		if err := os.RemoveAll(c.dir); err != nil {
			return err
		}
	}
	return nil
}

// PruneUncommitted removes the checkpoints of plan planHash in root that
// were never committed (a failed or interrupted save's partial shards,
// whose space nothing else frees) and that are below step below, the
// checkpoint just committed. Only a step-N directory without metadata
// that syncgen's save of this plan left is removed (leftBy): its shards
// whose headers read carry the plan's hash and N, at least one does, and
// it holds nothing else but an unfinished commit's metadata. So are left
// alone: other plans' directories (whose runs may be writing them now),
// an empty one or one whose shards do not read yet (whose plan is not
// known), and any at or past below, where a save of this run may be in
// progress (an async save is always of a later step than the one
// committed before it).
func PruneUncommitted(root, planHash string, below int) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		steps, ok := stepOf(e)
		if !ok || steps >= below {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if _, err := os.Lstat(filepath.Join(dir, MetadataName)); !errors.Is(err, fs.ErrNotExist) {
			continue // committed, or not known to be uncommitted
		}
		if leftBy(dir, planHash, steps) {
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("removing %s, a checkpoint never committed: %w", dir, err)
			}
		}
	}
	return nil
}

// stepOf is the steps of a step-N directory entry (ok false for any other
// entry): StepDir's names alone, digits without a sign.
func stepOf(e fs.DirEntry) (int, bool) {
	n, ok := strings.CutPrefix(e.Name(), "step-")
	if !e.IsDir() || !ok || n == "" || n[0] < '0' || n[0] > '9' {
		return 0, false
	}
	steps, err := strconv.Atoi(n)
	return steps, err == nil
}

// leftBy reports whether the uncommitted checkpoint directory dir of
// steps steps holds only what a save of plan planHash writes: shards
// (ShardName), at least one of whose headers reads and all of whose
// readable headers say this plan, format and steps, and perhaps the
// metadata of a commit that did not finish.
func leftBy(dir, planHash string, steps int) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	ours := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == MetadataName+".tmp" && e.Type().IsRegular():
		case strings.HasPrefix(name, "rank-") && strings.HasSuffix(name, ".safetensors") && e.Type().IsRegular():
			meta, ok := shardMeta(filepath.Join(dir, name))
			if !ok {
				continue // cut short before its header was whole
			}
			if meta["format"] != Format || meta["plan_hash"] != planHash || meta["steps"] != strconv.Itoa(steps) {
				return false
			}
			ours = true
		default:
			return false // not something a save writes
		}
	}
	return ours
}

// maxShardHeader bounds the header shardMeta reads: syncgen writes a few
// hundred bytes a bucket.
const maxShardHeader = 64 << 20

// shardMeta reads the __metadata__ of the shard at path from its header
// alone (ok false when the header does not read whole).
func shardMeta(path string) (map[string]string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var lenBytes [8]byte
	if _, err := io.ReadFull(f, lenBytes[:]); err != nil {
		return nil, false
	}
	n := binary.LittleEndian.Uint64(lenBytes[:])
	if n > maxShardHeader {
		return nil, false
	}
	h := make([]byte, n)
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, false
	}
	var header struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(h, &header); err != nil || header.Meta == nil {
		return nil, false
	}
	return header.Meta, true
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, erra := os.Stat(a)
	sb, errb := os.Stat(b)
	return erra == nil && errb == nil && os.SameFile(sa, sb)
}

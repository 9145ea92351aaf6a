package ckpt

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/runtime/internal/elem"
)

// FuzzShard: reading a shard never panics, and every tensor it accepts
// has a dtype syncgen writes and exactly the bytes its shape says.
func FuzzShard(f *testing.F) {
	dir := f.TempDir()
	good := filepath.Join(dir, "seed")
	if _, _, err := WriteShard(good, map[string]string{"rank": "0"}, []Tensor{
		{Name: "param/g", DType: elem.F32, Shape: []int64{2}, Data: make([]byte, 8)},
		{Name: "state0/g", DType: elem.BF16, Shape: []int64{1}, Data: make([]byte, 2)}}); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}              "))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\xff{}"))
	f.Add(rawShard(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}}`, 4))
	f.Add(rawShard(`{"a":{"dtype":"XX","shape":[1],"data_offsets":[0,4]}}`, 4))
	f.Add(rawShard(`{"a":{"dtype":"U8","shape":[-2,-2],"data_offsets":[0,4]}}`, 4))
	f.Add(rawShard(`{"a":{"dtype":"F64","shape":[4611686018427387904,2],"data_offsets":[0,0]}}`, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		// What ReadShard parses once the size and checksum match; the
		// file itself is the unit tests' part.
		s, err := parseShard("shard", data)
		if err != nil {
			return
		}
		for name, tn := range s.Tensors {
			n, ok := shapeBytes(tn.Shape, tn.DType.Size())
			if !tn.DType.Valid() || !ok || n != int64(len(tn.Data)) {
				t.Fatalf("accepted tensor %q: %s %v in %d bytes", name, tn.DType, tn.Shape, len(tn.Data))
			}
		}
	})
}

// rawShard is a safetensors file of header and n zero bytes of data.
func rawShard(header string, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), make([]byte, n)...)
}

// FuzzMetadata: reading a checkpoint's metadata never panics, and what it
// accepts is safe for resume to index and allocate by (Metadata.check).
func FuzzMetadata(f *testing.F) {
	f.Add([]byte(`{"format":"syncgen-checkpoint-1","plan_hash":"h","steps":4,"world_size":2,"applied_updates":4,
"buckets":[{"name":"grads","dtype":"f32","elems":5,"states":2,"sharded":true,"slice":3}],
"shards":[{"file":"rank-00000.safetensors","bytes":100,"sha256":"00"},{"file":"rank-00001.safetensors","bytes":100,"sha256":"00"}],
"balance":{"every":5,"shares":[3,1],"simulated_ns":[1,2],"samples":[6,2]}}`))
	f.Add([]byte(`{"format":"syncgen-checkpoint-1","steps":4,"world_size":0,"shards":[]}`))
	f.Add([]byte(`{"format":"syncgen-checkpoint-1","steps":-1,"world_size":1,"shards":[{"file":"../../x","bytes":9}]}`))
	f.Add([]byte(`{"format":"syncgen-checkpoint-1","steps":1,"world_size":2,"buckets":[{"name":"g","dtype":"f16","elems":9223372036854775807,"sharded":true,"slice":-1}]}`))
	f.Add([]byte(`{"format":"syncgen-checkpoint-1","steps":2,"world_size":1}x`))
	f.Add([]byte(`{"format":"syncgen-checkpoint-1","ste`))
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := parseMetadata(MetadataName, data)
		if err != nil {
			return
		}
		if md.Steps < 0 || md.Applied < 0 || md.Applied > md.Steps || md.WorldSize < 1 || len(md.Shards) != md.WorldSize {
			t.Fatalf("accepted steps %d, applied %d, world %d, %d shards", md.Steps, md.Applied, md.WorldSize, len(md.Shards))
		}
		for r, s := range md.Shards {
			if s.File != ShardName(r) {
				t.Fatalf("accepted shard %d as %q", r, s.File)
			}
		}
		for _, b := range md.Buckets {
			if b.Elems < 0 || b.States < 0 || b.States > 2 || b.Sharded && (b.Slice < 0 || b.Slice > 0 && int64(md.WorldSize) < (b.Elems+b.Slice-1)/b.Slice || b.Slice == 0 && b.Elems > 0) {
				t.Fatalf("accepted bucket %+v in a world of %d", b, md.WorldSize)
			}
			if b.Elems > math.MaxInt64/8 && b.DType == "f64" {
				t.Fatalf("accepted bucket %+v, larger than int64 bytes", b)
			}
		}
		if b := md.Balance; b != nil {
			if len(b.Shares) != md.WorldSize || len(b.SimulatedNs) != md.WorldSize || len(b.Samples) != md.WorldSize {
				t.Fatalf("accepted balance %+v in a world of %d", b, md.WorldSize)
			}
		}
	})
}

// FuzzCommitted: over a directory of step-N names (directories with or
// without metadata, plain files), Committed lists exactly the directories
// whose names StepDir writes and that hold metadata, by step; Prune then
// keeps at least the newest of the plan's and never touches another
// plan's or one whose metadata does not read. Each line of names is one
// entry: "d NAME" a directory with metadata (of plan "p", or "q" when the
// line ends in " q"; "x" when the line ends in " x", not readable
// metadata), "u NAME" one without, "f NAME" a file.
func FuzzCommitted(f *testing.F) {
	f.Add("d step-00000004\nd step-00000002 q\nu step-00000009\nf step-00000010\nd step-+1\nd step-7 x")
	f.Add("d step-00000001\nd step-1\nd step-\nd step--3\nd step-99999999999999999999")
	root := filepath.Join(f.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, names string) {
		// One directory for every input, emptied after an input that
		// made something in it: a fresh one each time would spend the
		// run creating and removing directories.
		defer func() {
			if entries, _ := os.ReadDir(root); len(entries) > 0 {
				if err := os.RemoveAll(root); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(root, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}()
		type entry struct{ plan string }
		made := map[string]entry{}
		for i, line := range strings.Split(names, "\n") {
			if i >= 8 {
				break
			}
			kind, rest, ok := strings.Cut(line, " ")
			name, plan, _ := strings.Cut(rest, " ")
			if !ok || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 64 {
				continue
			}
			if _, dup := made[name]; dup {
				continue
			}
			path := filepath.Join(root, name)
			switch kind {
			case "d", "u":
				if err := os.Mkdir(path, 0o755); err != nil {
					continue
				}
				made[name] = entry{}
				if kind == "u" {
					continue
				}
				if plan == "x" {
					if err := os.WriteFile(filepath.Join(path, MetadataName), []byte("{"), 0o644); err != nil {
						t.Fatal(err)
					}
					made[name] = entry{"x"}
					continue
				}
				if plan != "q" {
					plan = "p"
				}
				// Commit's fsyncs would dominate the run.
				md := `{"format": "` + Format + `", "plan_hash": "` + plan + `", "world_size": 1, "shards": [{"file": "` + ShardName(0) + `", "bytes": 8}]}`
				if err := os.WriteFile(filepath.Join(path, MetadataName), []byte(md), 0o644); err != nil {
					t.Fatal(err)
				}
				made[name] = entry{plan}
			case "f":
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					continue
				}
				made[name] = entry{}
			}
		}
		cks, err := Committed(root)
		if err != nil {
			t.Fatal(err)
		}
		last := -1
		listed := map[string]bool{}
		for _, dir := range cks {
			name := filepath.Base(dir)
			digits, _ := strings.CutPrefix(name, "step-")
			steps, err := strconv.Atoi(digits)
			if err != nil || digits == "" || digits[0] < '0' || digits[0] > '9' || made[name].plan == "" {
				t.Fatalf("listed %s", name)
			}
			if steps < last {
				t.Fatalf("listed %v out of order", cks)
			}
			last = steps
			listed[name] = true
		}
		own := 0
		for name, e := range made {
			if e.plan == "p" && listed[name] {
				own++
			}
		}
		if err := Prune(root, 1, "p", "", ""); err != nil {
			t.Fatal(err)
		}
		after, _ := Committed(root)
		kept := 0
		for _, dir := range after {
			if made[filepath.Base(dir)].plan == "p" {
				kept++
			}
		}
		if own > 0 && kept != 1 {
			t.Fatalf("pruning %d checkpoints of the plan to 1 kept %d", own, kept)
		}
		for name, e := range made {
			if listed[name] && e.plan != "p" {
				if _, err := os.Stat(filepath.Join(root, name)); err != nil {
					t.Fatalf("pruning removed %s (plan %q)", name, e.plan)
				}
			}
		}
	})
}

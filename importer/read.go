package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Read reads the model at path: a .safetensors file, a Hugging Face
// directory (its model.safetensors.index.json and the shards it names,
// or its one .safetensors file), an index file itself, or a parameter
// list written by scripts/dump-params.py (.json).
func Read(path string) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s does not exist: give a .safetensors file, a model directory, an .index.json or a parameter list (.json)", path)
		}
		return nil, fmt.Errorf("%s: %v", path, unwrapPath(err))
	}
	if st.IsDir() {
		return readDir(path)
	}
	switch {
	case strings.HasSuffix(path, ".safetensors"):
		params, err := ReadSafetensors(path)
		if err != nil {
			return nil, err
		}
		if len(params) == 0 {
			return nil, fmt.Errorf("%s: the file holds no tensors (its header lists none)", path)
		}
		return &Model{Params: params, Files: []string{path}}, nil
	case strings.HasSuffix(path, ".json"):
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, unwrapPath(err))
		}
		// (parseIndex and ParseParamList check that it is UTF-8.)
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(data, &probe); err != nil {
			return nil, fmt.Errorf("%s: not a JSON object: %s", path, jsonProblem(err, 0))
		}
		_, isIndex := probe["weight_map"]
		_, isList := probe["parameters"]
		var m *Model
		switch {
		case isIndex:
			m, err = readIndex(path, data)
		case isList:
			m, err = ParseParamList(path, data)
		default:
			return nil, fmt.Errorf("%s: neither a safetensors index (no \"weight_map\") nor a parameter list of scripts/dump-params.py (no \"parameters\")", path)
		}
		if err != nil {
			return nil, err
		}
		m.Files = append([]string{path}, m.Files...)
		return m, nil
	case pytorchPickle(path):
		return nil, fmt.Errorf("%s: named like a PyTorch checkpoint (a pickle), which syncgen does not read (loading one runs code): save the model as safetensors, or list its parameters with scripts/dump-params.py", path)
	}
	return nil, fmt.Errorf("%s: want a .safetensors file, a directory holding one or an index, an .index.json or a parameter list (.json)", path)
}

// pytorchPickle says whether path is named like a PyTorch checkpoint in
// pickle form (pytorch_model.bin, model.pt, weights.pth).
func pytorchPickle(path string) bool {
	for _, ext := range []string{".bin", ".pt", ".pth", ".ckpt"} {
		if strings.HasSuffix(path, ext) {
			return true
		}
	}
	return false
}

// unwrapPath drops an *os.PathError's operation and path, which the
// caller's message names already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readDir reads a Hugging Face model directory.
func readDir(dir string) (*Model, error) {
	if idx := filepath.Join(dir, "model.safetensors.index.json"); exists(idx) {
		return Read(idx)
	}
	indexes, _ := filepath.Glob(filepath.Join(dir, "*.safetensors.index.json"))
	if len(indexes) == 1 {
		return Read(indexes[0])
	}
	if one := filepath.Join(dir, "model.safetensors"); exists(one) {
		return Read(one)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(files) == 1 && len(indexes) == 0 {
		return Read(files[0])
	}
	if len(files) == 0 && len(indexes) == 0 {
		var pickles []string
		for _, pat := range []string{"*.bin", "*.pt", "*.pth", "*.ckpt"} {
			found, _ := filepath.Glob(filepath.Join(dir, pat))
			pickles = append(pickles, found...)
		}
		if len(pickles) > 0 {
			var names []string
			for _, p := range pickles[:min(len(pickles), 3)] {
				names = append(names, filepath.Base(p))
			}
			if len(pickles) > 3 {
				names = append(names, "...")
			}
			return nil, fmt.Errorf("%s: no safetensors file, only PyTorch pickles (%s), which syncgen does not read (loading one runs code): save the model as safetensors, or list its parameters with scripts/dump-params.py",
				dir, strings.Join(names, ", "))
		}
	}
	return nil, fmt.Errorf("%s: found %d index files and %d .safetensors files; name the one to import (a model directory has model.safetensors.index.json or model.safetensors)",
		dir, len(indexes), len(files))
}

func exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// index is model.safetensors.index.json.
type index struct {
	Metadata struct {
		TotalSize json.Number `json:"total_size"`
	} `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// parsedIndex is what an index says: the shards in the order they are
// read, the tensors the index puts in each, and the total size it gives.
type parsedIndex struct {
	weightMap map[string]string
	// shards are the shard file names, sorted (model-00001-of-00004
	// first); byShard their tensors.
	shards  []string
	byShard map[string][]string
	// totalSize is metadata.total_size, 0 when the index has none.
	totalSize int64
}

// parseIndex parses the index at path (its content data) without reading
// the shards: the weight map must name at least one tensor, each in a
// file beside the index, and metadata.total_size, where given, must be a
// whole number of bytes.
func parseIndex(path string, data []byte) (*parsedIndex, error) {
	if at := invalidUTF8(data); at >= 0 {
		return nil, fmt.Errorf("%s: byte %d is not UTF-8: JSON is UTF-8 text, tensor names included; the file is corrupt, or its writer is broken", path, at)
	}
	var idx index
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&idx); err != nil {
		return nil, fmt.Errorf("%s: not a safetensors index (an object with \"weight_map\", tensor names to shard files): %s", path, jsonProblem(err, 0))
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: the index's weight_map names no tensor", path)
	}
	pi := &parsedIndex{weightMap: idx.WeightMap, byShard: map[string][]string{}}
	for name, shard := range idx.WeightMap {
		if shard == "" || filepath.IsAbs(shard) || strings.Contains(shard, "..") {
			return nil, fmt.Errorf("%s: tensor %q: shard %q is not a file name beside the index", path, name, shard)
		}
		if pi.byShard[shard] == nil {
			pi.shards = append(pi.shards, shard)
		}
		pi.byShard[shard] = append(pi.byShard[shard], name)
	}
	sort.Strings(pi.shards)
	for _, names := range pi.byShard {
		sort.Strings(names)
	}
	if s := idx.Metadata.TotalSize.String(); s != "" {
		n, ok := byteCount(s)
		if !ok {
			return nil, fmt.Errorf("%s: metadata.total_size %s is not a byte count (a whole number, 0 or more)", path, s)
		}
		pi.totalSize = n
	}
	return pi, nil
}

// byteCount reads a JSON number that counts bytes: a whole number, also
// written as a float without a fraction (16060522496.0, 1.6e10), as some
// writers of indexes do.
func byteCount(s string) (int64, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n >= 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// readIndex reads an index and the shards it names: the shards in the
// order of their names (model-00001-of-00004 first), each in its data's
// order. Every tensor of the index must be in the shard it names, and
// every tensor of a shard in the index.
func readIndex(path string, data []byte) (*Model, error) {
	idx, err := parseIndex(path, data)
	if err != nil {
		return nil, err
	}
	m := &Model{TotalSize: idx.totalSize}
	dir := filepath.Dir(path)
	for _, shard := range idx.shards {
		file := filepath.Join(dir, shard)
		names := idx.byShard[shard]
		if !exists(file) {
			return nil, fmt.Errorf("%s: shard %s (of %s, %q first) is missing: download every shard the index names", path, file, count(len(names), "tensor"), names[0])
		}
		params, err := ReadSafetensors(file)
		if err != nil {
			return nil, err
		}
		in := map[string]bool{}
		for _, p := range params {
			in[p.Name] = true
			if got, ok := idx.weightMap[p.Name]; !ok {
				return nil, fmt.Errorf("%s: tensor %q is not in the index %s: the index and its shards disagree (an index from another download?)", file, p.Name, path)
			} else if got != shard {
				return nil, fmt.Errorf("%s: tensor %q is in this shard, but the index %s puts it in %q", file, p.Name, path, got)
			}
		}
		for _, name := range names {
			if !in[name] {
				return nil, fmt.Errorf("%s: the index names tensor %q in this shard, which does not have it", file, name)
			}
		}
		m.Params = append(m.Params, params...)
		m.Files = append(m.Files, file)
	}
	return m, nil
}

// paramList is what scripts/dump-params.py writes. Its fields are the
// only ones read: any other is an error, so that a misspelt "shape" is
// not read as a scalar.
type paramList struct {
	Format     string       `json:"format"`
	Module     string       `json:"module"`
	Parameters []paramEntry `json:"parameters"`
	Tied       [][]string   `json:"tied"`
}

// paramEntry is one parameter of a list.
type paramEntry struct {
	Name         string  `json:"name"`
	DType        string  `json:"dtype"`
	Shape        []int64 `json:"shape"`
	RequiresGrad *bool   `json:"requires_grad"`
}

// paramListFormat is the "format" that scripts/dump-params.py writes.
const paramListFormat = "syncgen-params"

// torchDTypes maps torch's dtype names to safetensors'.
var torchDTypes = map[string]string{
	"torch.float64": "F64", "torch.float32": "F32", "torch.float16": "F16", "torch.bfloat16": "BF16",
	"torch.int64": "I64", "torch.int32": "I32", "torch.int16": "I16", "torch.int8": "I8",
	"torch.uint64": "U64", "torch.uint32": "U32", "torch.uint16": "U16", "torch.uint8": "U8", "torch.bool": "BOOL",
	"torch.float8_e4m3fn": "F8_E4M3", "torch.float8_e5m2": "F8_E5M2", "torch.float8_e8m0fnu": "F8_E8M0",
	"torch.complex64": "C64",
}

// ParseParamList parses a parameter list (scripts/dump-params.py): the
// parameters in registration order, requires_grad, and the tied names.
// The names are UTF-8, each parameter's dtype a torch or a safetensors
// one, and a group of tied names starts with a parameter of the list and
// holds no other: the list gives each shared parameter once.
func ParseParamList(path string, data []byte) (*Model, error) {
	if at := invalidUTF8(data); at >= 0 {
		return nil, fmt.Errorf("%s: byte %d is not UTF-8: JSON is UTF-8 text, parameter names included; the file is corrupt, or its writer is broken", path, at)
	}
	var pl paramList
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pl); err != nil {
		return nil, fmt.Errorf("%s: not a parameter list of scripts/dump-params.py ({\"parameters\": [{\"name\", \"dtype\", \"shape\", \"requires_grad\"}, ...], \"tied\": [...]}): %s", path, jsonProblem(err, 0))
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("%s: byte %d: more after the parameter list's JSON object", path, len(data)-len(rest))
	}
	if pl.Format != "" && pl.Format != paramListFormat {
		return nil, fmt.Errorf("%s: format %q: want %q, what scripts/dump-params.py writes", path, pl.Format, paramListFormat)
	}
	m := &Model{FileOrder: true}
	seen := map[string]bool{}
	for i, p := range pl.Parameters {
		dt := p.DType
		if t, ok := torchDTypes[dt]; ok {
			dt = t
		}
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("%s: parameter %d has no name", path, i)
		case seen[p.Name]:
			return nil, fmt.Errorf("%s: parameter %q appears twice", path, p.Name)
		case dtypeBits[dt] == 0:
			return nil, fmt.Errorf("%s: parameter %q: unknown dtype %q: want a torch dtype (%s) or a safetensors one (%s)",
				path, p.Name, p.DType, strings.Join(sortedKeys(torchDTypes), ", "), strings.Join(sortedKeys(dtypeBits), ", "))
		}
		if _, err := shapeBytes(dt, p.Shape); err != nil {
			return nil, fmt.Errorf("%s: parameter %q: %w", path, p.Name, err)
		}
		seen[p.Name] = true
		m.Params = append(m.Params, Param{Name: p.Name, DType: dt, Shape: p.Shape, Frozen: p.RequiresGrad != nil && !*p.RequiresGrad,
			GradKnown: p.RequiresGrad != nil, Source: path})
	}
	if len(m.Params) == 0 {
		return nil, fmt.Errorf("%s: the list has no parameters", path)
	}
	tiedTo := map[string]string{}
	for g, group := range pl.Tied {
		if len(group) < 2 {
			continue // one name shares with nobody
		}
		if !seen[group[0]] {
			return nil, fmt.Errorf("%s: tied group %d (%q, ...): its first name is not a parameter of the list; the first name of a group is the one the list gives the shared parameter under", path, g, group[0])
		}
		for _, name := range group[1:] {
			switch {
			case seen[name]:
				return nil, fmt.Errorf("%s: tied group %d: %q is a parameter of the list, and also listed as sharing %q's storage: it would be declared twice; list a shared parameter once, under its group's first name", path, g, name, group[0])
			case tiedTo[name] != "" && tiedTo[name] != group[0]:
				return nil, fmt.Errorf("%s: tied group %d: %q shares %q's storage, and also %q's in another group", path, g, name, group[0], tiedTo[name])
			}
			tiedTo[name] = group[0]
		}
		m.Tied = append(m.Tied, group)
	}
	return m, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

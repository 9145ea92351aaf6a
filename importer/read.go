package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Read reads the model at path: a .safetensors file, a Hugging Face
// directory (its model.safetensors.index.json and the shards it names,
// or its one .safetensors file), an index file itself, or a parameter
// list written by scripts/dump-params.py (.json).
func Read(path string) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
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
		return &Model{Params: params, Files: []string{path}}, nil
	case strings.HasSuffix(path, ".json"):
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(data, &probe); err != nil {
			return nil, fmt.Errorf("%s: not a JSON object: %v", path, err)
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
	}
	return nil, fmt.Errorf("%s: want a .safetensors file, a directory holding one or an index, an .index.json or a parameter list (.json)", path)
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

// readIndex reads an index and the shards it names: the shards in the
// order of their names (model-00001-of-00004 first), each in its data's
// order. Every tensor of the index must be in the shard it names, and
// every tensor of a shard in the index.
func readIndex(path string, data []byte) (*Model, error) {
	var idx index
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&idx); err != nil {
		return nil, fmt.Errorf("%s: not an index: %v", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: the index's weight_map names no tensor", path)
	}
	var shards []string
	byShard := map[string][]string{}
	for name, shard := range idx.WeightMap {
		if shard == "" || filepath.IsAbs(shard) || strings.Contains(shard, "..") {
			return nil, fmt.Errorf("%s: tensor %q: shard %q is not a file name beside the index", path, name, shard)
		}
		if byShard[shard] == nil {
			shards = append(shards, shard)
		}
		byShard[shard] = append(byShard[shard], name)
	}
	sort.Strings(shards)
	m := &Model{}
	dir := filepath.Dir(path)
	for _, shard := range shards {
		file := filepath.Join(dir, shard)
		if !exists(file) {
			sort.Strings(byShard[shard])
			return nil, fmt.Errorf("%s: shard %s (of %d tensors, %q first) is missing: download every shard the index names", path, file, len(byShard[shard]), byShard[shard][0])
		}
		params, err := ReadSafetensors(file)
		if err != nil {
			return nil, err
		}
		in := map[string]bool{}
		for _, p := range params {
			in[p.Name] = true
			if got := idx.WeightMap[p.Name]; got != shard {
				return nil, fmt.Errorf("%s: tensor %q is not in the index under this shard (the index says %q)", file, p.Name, got)
			}
		}
		for _, name := range byShard[shard] {
			if !in[name] {
				return nil, fmt.Errorf("%s: the index names tensor %q in this shard, which does not have it", file, name)
			}
		}
		m.Params = append(m.Params, params...)
		m.Files = append(m.Files, file)
	}
	if s := idx.Metadata.TotalSize.String(); s != "" {
		if _, err := fmt.Sscan(s, &m.TotalSize); err != nil || m.TotalSize < 0 {
			return nil, fmt.Errorf("%s: metadata.total_size %q is not a byte count", path, s)
		}
	}
	return m, nil
}

// paramList is what scripts/dump-params.py writes.
type paramList struct {
	Parameters []struct {
		Name         string  `json:"name"`
		DType        string  `json:"dtype"`
		Shape        []int64 `json:"shape"`
		RequiresGrad *bool   `json:"requires_grad"`
	} `json:"parameters"`
	Tied [][]string `json:"tied"`
}

// torchDTypes maps torch's dtype names to safetensors'.
var torchDTypes = map[string]string{
	"torch.float64": "F64", "torch.float32": "F32", "torch.float16": "F16", "torch.bfloat16": "BF16",
	"torch.int64": "I64", "torch.int32": "I32", "torch.int16": "I16", "torch.int8": "I8", "torch.uint8": "U8", "torch.bool": "BOOL",
	"torch.float8_e4m3fn": "F8_E4M3", "torch.float8_e5m2": "F8_E5M2",
}

// ParseParamList parses a parameter list (scripts/dump-params.py): the
// parameters in registration order, requires_grad, and the tied names.
func ParseParamList(path string, data []byte) (*Model, error) {
	var pl paramList
	if err := json.Unmarshal(data, &pl); err != nil {
		return nil, fmt.Errorf("%s: not a parameter list: %v", path, err)
	}
	m := &Model{FileOrder: true, Tied: pl.Tied}
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
			return nil, fmt.Errorf("%s: parameter %q: unknown dtype %q", path, p.Name, p.DType)
		}
		if _, err := shapeBytes(dt, p.Shape); err != nil {
			return nil, fmt.Errorf("%s: parameter %q: %w", path, p.Name, err)
		}
		seen[p.Name] = true
		m.Params = append(m.Params, Param{Name: p.Name, DType: dt, Shape: p.Shape, Frozen: p.RequiresGrad != nil && !*p.RequiresGrad, Source: path})
	}
	if len(m.Params) == 0 {
		return nil, fmt.Errorf("%s: the list has no parameters", path)
	}
	return m, nil
}

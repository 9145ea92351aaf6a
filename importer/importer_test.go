package importer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
)

// st is one tensor of a synthetic safetensors file.
type st struct {
	name  string
	dtype string
	shape []int64
	// begin, end override the data offsets (-1: laid out in order).
	begin, end int64
}

// safetensorsBytes builds a safetensors file: tensors laid out one after
// another in the order given (unless their offsets say otherwise), and
// extra bytes of data after them.
func safetensorsBytes(t testing.TB, tensors []st, extra int) []byte {
	t.Helper()
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var pos int64
	for _, x := range tensors {
		n := int64(1)
		for _, d := range x.shape {
			n *= d
		}
		size, _ := tensorBytes(x.dtype, n)
		b, e := pos, pos+size
		if x.begin >= 0 && x.end >= 0 && (x.begin != 0 || x.end != 0) {
			b, e = x.begin, x.end
		}
		header[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int64{b, e}}
		pos = max(pos, e)
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	return append(out, make([]byte, pos+int64(extra))...)
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A valid file gives its tensors in the order of their data.
func TestReadSafetensors(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "m.safetensors", safetensorsBytes(t, []st{
		{name: "b.weight", dtype: "BF16", shape: []int64{3, 4}},
		{name: "a.bias", dtype: "F32", shape: []int64{5}},
		{name: "scalar", dtype: "I64", shape: []int64{}},
	}, 0))
	params, err := ReadSafetensors(p)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(params[0].Name, params[0].DType, params[0].Shape, params[1].Name, params[2].Name, params[2].Shape)
	if got != "b.weightBF16[3 4]a.biasscalar[]" || len(params) != 3 {
		t.Fatalf("params: %+v", params)
	}
}

// The header may be padded with whitespace after its JSON object (writers
// pad it with spaces so that the data is aligned), and __metadata__ may be
// null.
func TestSafetensorsPadding(t *testing.T) {
	for _, h := range []string{
		`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}      `,
		"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}\n\t\r ",
		`{"__metadata__": null, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}`,
		`{"__metadata__": {}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}`,
		"{\"é\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
	} {
		if params, err := ParseHeader([]byte(h), 4); err != nil || len(params) != 1 {
			t.Errorf("%q: %v", h, err)
		}
	}
}

// Every kind of broken file is an error naming the file and where.
func TestSafetensorsErrors(t *testing.T) {
	dir := t.TempDir()
	good := []st{{name: "a", dtype: "F32", shape: []int64{4}}, {name: "b", dtype: "F16", shape: []int64{2, 2}}}
	header := func(h string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "truncated: 3 bytes"},
		{"huge", binary.LittleEndian.AppendUint64(nil, 200<<20), "above the format's limit"},
		{"beyond", binary.LittleEndian.AppendUint64(nil, 1000), "reaches beyond the file's 8 bytes"},
		{"notjson", header("{not json}"), "not JSON"},
		{"array", header(`["a", "b"]`), "not a JSON object"},
		{"entry", header(`{"a": 3}`), `tensor "a": want {"dtype"`},
		{"dtype", header(`{"a": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}}`), `unknown dtype "F33"`},
		{"offsets", header(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}`), "data_offsets must be [begin, end]"},
		{"negative", header(`{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}`), "negative dimension"},
		{"truncated data", safetensorsBytes(t, []st{{name: "a", dtype: "F32", shape: []int64{4}}}, 0)[:8+61+8], "beyond the file's"},
		{"size", safetensorsBytes(t, []st{{name: "a", dtype: "F32", shape: []int64{4}, begin: 0, end: 12}}, 0), "is 16 bytes, but its data_offsets [0, 12] hold 12"},
		{"overlap", safetensorsBytes(t, []st{{name: "a", dtype: "F32", shape: []int64{4}, begin: 0, end: 16}, {name: "b", dtype: "F32", shape: []int64{2}, begin: 8, end: 16}}, 0), "overlaps tensor"},
		{"gap", safetensorsBytes(t, []st{{name: "a", dtype: "F32", shape: []int64{2}, begin: 8, end: 16}}, 0), "a gap of 8 bytes"},
		{"trailing", safetensorsBytes(t, good, 5), "5 bytes at byte"},
		{"twice", header(`{"a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}, "a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}`), `tensor "a" appears twice`},
		{"after json", header(`{"a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}  x`), `header byte 70: "x" after the header's JSON object`},
		{"second object", header(`{"a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}{}`), `header byte 68: "{}" after the header's JSON object`},
		{"nul padding", header("{}\x00\x00"), `header byte 10: "\x00\x00" after the header's JSON object`},
		{"name not utf-8", header("{\"a\xff\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}}"), "header byte 11 is not UTF-8"},
		{"metadata not utf-8", header("{\"__metadata__\": {\"x\": \"\xc3\"}}"), "header byte 32 is not UTF-8"},
		{"metadata number", header(`{"__metadata__": {"format": 1}}`), `__metadata__ must be an object of strings, such as {"format": "pt"}, not "{\"format\": 1}"`},
		{"metadata array", header(`{"__metadata__": ["pt"]}`), "__metadata__ must be an object of strings"},
		{"metadata string", header(`{"__metadata__": "pt"}`), "__metadata__ must be an object of strings"},
		// A header length shorter than the header cuts its JSON off; a
		// dimension that is not a whole number is named, not Go's type.
		// One too long takes in data bytes: said as such, not as a
		// tensor reaching beyond the (shortened) data.
		{"length long", append(binary.LittleEndian.AppendUint64(nil, 62+4), `{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}`+"\x01\x02\x03\x04"+strings.Repeat("\x00", 12)...),
			`header byte 70: "\x01\x02\x03\x04" after the header's JSON object, where only padding (spaces) may follow: the header length (bytes 0-7, 66) is too long`},
		{"length short", append(binary.LittleEndian.AppendUint64(nil, 20), `{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}    `...),
			`tensor "a": the header's JSON is cut off at byte 28, where the header length (bytes 0-7) says the header ends`},
		{"dimension", header(`{"a": {"dtype": "F32", "shape": [99999999999999999999], "data_offsets": [0, 4]}}`),
			`tensor "a": want {"dtype", "shape", "data_offsets"}: byte 61: "shape": want a whole number (at most 9223372036854775807), not number 99999999999999999999`},
	}
	for _, c := range cases {
		p := writeFile(t, dir, c.name+".safetensors", c.data)
		_, err := ReadSafetensors(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming %s with %q", c.name, err, p, c.want)
		}
	}
}

// An index with two shards: the tensors of both, the shards in order; a
// missing shard, a tensor the index puts elsewhere and one it names but
// the shard lacks are errors; total_size is kept for the summary.
func TestReadIndex(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "model-00001-of-00002.safetensors", safetensorsBytes(t, []st{{name: "h.0.w", dtype: "F32", shape: []int64{2}}}, 0))
	writeFile(t, dir, "model-00002-of-00002.safetensors", safetensorsBytes(t, []st{{name: "h.1.w", dtype: "F32", shape: []int64{2}}, {name: "lm_head.weight", dtype: "F32", shape: []int64{3}}}, 0))
	index := func(m map[string]string, total int) []byte {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]int{"total_size": total}, "weight_map": m})
		return b
	}
	wm := map[string]string{"h.0.w": "model-00001-of-00002.safetensors", "h.1.w": "model-00002-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}
	writeFile(t, dir, "model.safetensors.index.json", index(wm, 28))
	m, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Params) != 3 || m.Params[0].Name != "h.0.w" || m.TotalSize != 28 || StatsOf(m.Params).Total != 28 {
		t.Fatalf("model: %+v", m)
	}
	// Every file read is listed, so that the CLI can refuse to write over one.
	if got := strings.Join(m.Files, " "); got != strings.Join([]string{filepath.Join(dir, "model.safetensors.index.json"),
		filepath.Join(dir, "model-00001-of-00002.safetensors"), filepath.Join(dir, "model-00002-of-00002.safetensors")}, " ") {
		t.Errorf("files: %s", got)
	}
	bad := map[string]string{"h.0.w": "model-00001-of-00002.safetensors", "h.1.w": "model-00002-of-00002.safetensors"}
	missing := map[string]string{"x": "model-00009.safetensors"}
	lacks := map[string]string{"h.0.w": "model-00001-of-00002.safetensors", "ghost": "model-00001-of-00002.safetensors",
		"h.1.w": "model-00002-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}
	for _, c := range []struct {
		m    map[string]string
		want string
	}{
		{bad, `tensor "lm_head.weight" is not in the index `},
		{missing, "is missing"},
		{lacks, `names tensor "ghost" in this shard, which does not have it`},
		{map[string]string{"x": "../etc/passwd"}, "not a file name beside the index"},
		{map[string]string{"h.0.w": "model-00002-of-00002.safetensors", "h.1.w": "model-00001-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"},
			`model-00001-of-00002.safetensors: tensor "h.0.w" is in this shard, but the index`},
	} {
		p := writeFile(t, dir, "other.index.json", index(c.m, 0))
		if _, err := Read(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("index %v: error %v, want %q", c.m, err, c.want)
		}
	}
	// The index itself, read as it is written: UTF-8 (a name is never
	// replaced), a weight_map of the right kind, a total size that counts
	// bytes (some writers write it as a float without a fraction).
	for _, c := range []struct{ index, want string }{
		{"{\"weight_map\": {\"h.0.w\xff\": \"model-00001-of-00002.safetensors\"}}", "other.index.json: byte 22 is not UTF-8"},
		{`{"weight_map": ["h.0.w"]}`, `"weight_map": want an object, not array`},
		{`{"weight_map": {"h.0.w": 3}}`, `byte 26: "weight_map": want a string, not number`},
		{`{"metadata": {"total_size": 8.5}, "weight_map": {"x": "model-00009.safetensors"}}`, "metadata.total_size 8.5 is not a byte count"},
		{`{"metadata": {"total_size": -8}, "weight_map": {"x": "model-00009.safetensors"}}`, "metadata.total_size -8 is not a byte count"},
		{`{"weight_map": {"x": "model-00009.safetensors", "y": "model-00009.safetensors"}}`, `shard ` + filepath.Join(dir, "model-00009.safetensors") + ` (of 2 tensors, "x" first) is missing`},
		{`{"weight_map": {"x": "model-00009.safetensors"}}`, `(of 1 tensor, "x" first) is missing`},
	} {
		p := writeFile(t, dir, "other.index.json", []byte(c.index))
		if _, err := Read(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("index %s: error %v, want %q", c.index, err, c.want)
		}
	}
	writeFile(t, dir, "float.index.json", []byte(`{"metadata": {"total_size": 2.8e1}, "weight_map": `+string(must(json.Marshal(wm)))+`}`))
	if m, err := Read(filepath.Join(dir, "float.index.json")); err != nil || m.TotalSize != 28 {
		t.Errorf("total_size 2.8e1: %v, %+v", err, m)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Read names what it cannot read and why: a path that is not there, a
// PyTorch pickle (a file, or a directory holding only pickles), a file
// whose header lists no tensor.
func TestReadWhatItCannot(t *testing.T) {
	dir := t.TempDir()
	pickles := filepath.Join(dir, "pickles")
	os.Mkdir(pickles, 0o755)
	writeFile(t, pickles, "pytorch_model.bin", []byte("PK"))
	none := writeFile(t, dir, "none.safetensors", append(binary.LittleEndian.AppendUint64(nil, 28), `{"__metadata__": {"a": "b"}}`...))
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "nope.safetensors"), "nope.safetensors does not exist: give a .safetensors file"},
		{filepath.Join(pickles, "pytorch_model.bin"), "named like a PyTorch checkpoint (a pickle), which syncgen does not read"},
		{pickles, "no safetensors file, only PyTorch pickles (pytorch_model.bin)"},
		{none, "none.safetensors: the file holds no tensors"},
	} {
		if _, err := Read(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.path, err, c.want)
		}
	}
}

// Numbers in names order as numbers; the file's order is kept on request
// and for parameter lists.
func TestOrder(t *testing.T) {
	m := &Model{Params: []Param{{Name: "layers.10.w", DType: "F32"}, {Name: "layers.2.w", DType: "F32"}, {Name: "layers.2.b", DType: "F32"}, {Name: "emb", DType: "F32"}}}
	names := func(ts []Tensor) string {
		var s []string
		for _, x := range ts {
			s = append(s, x.Name)
		}
		return strings.Join(s, " ")
	}
	nat, err := Prepare(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(nat.Tensors); got != "emb layers.2.b layers.2.w layers.10.w" {
		t.Errorf("natural: %s", got)
	}
	file, _ := Prepare(m, Options{Order: "file"})
	if got := names(file.Tensors); got != "layers.10.w layers.2.w layers.2.b emb" {
		t.Errorf("file: %s", got)
	}
	m.FileOrder = true
	if got, _ := Prepare(m, Options{}); names(got.Tensors) != names(file.Tensors) {
		t.Errorf("a parameter list's order: %s", names(got.Tensors))
	}
}

// testMatch stands for the language's patterns, which the CLI passes in
// (cmd/syncgen's tests cover those): a name, or a prefix and `*`.
func testMatch(pattern string, names []string) ([]bool, error) {
	if strings.Contains(pattern, "[") {
		return nil, fmt.Errorf("invalid")
	}
	hit := make([]bool, len(names))
	for i, n := range names {
		pre, star := strings.CutSuffix(pattern, "*")
		hit[i] = n == pattern || star && strings.HasPrefix(n, pre)
	}
	return hit, nil
}

// Options: dtypes the language lacks, casts, frozen and excluded tensors,
// names it cannot hold.
func TestPrepareOptions(t *testing.T) {
	m := &Model{FileOrder: true, Params: []Param{{Name: "w", DType: "F32", Shape: []int64{2}, GradKnown: true}, {Name: "mask", DType: "BOOL", Shape: []int64{4}, GradKnown: true}, {Name: "pos.freq", DType: "I16", Shape: []int64{8}, GradKnown: true}}}
	if _, err := Prepare(m, Options{}); err == nil || !strings.Contains(err.Error(), `tensor "mask": dtype BOOL has no counterpart`) || !strings.Contains(err.Error(), "--cast BOOL=u8") {
		t.Errorf("BOOL: %v", err)
	}
	// Every dtype without a counterpart is named in one error, with the
	// casts, so that one run shows them all.
	many := &Model{FileOrder: true, Params: []Param{{Name: "a", DType: "BOOL"}, {Name: "b", DType: "I16"}, {Name: "c", DType: "BOOL"}, {Name: "d", DType: "F8_E4M3"}, {Name: "e", DType: "I16"}}}
	if _, err := Prepare(many, Options{Cast: map[string]string{"F8_E4M3": "bf16"}}); err == nil || !strings.HasSuffix(err.Error(),
		`(--exclude 'a') (2 tensors of BOOL in all); other dtypes without a counterpart: I16 (2 tensors): cast them too (--cast I16=i32)`) {
		t.Errorf("several dtypes: %v", err)
	}
	prep, err := Prepare(m, Options{Cast: map[string]string{"BOOL": "u8", "I16": "i32"}, Frozen: []string{"pos.*"}, Exclude: []string{"mask"}, Match: testMatch})
	if err != nil {
		t.Fatal(err)
	}
	ts := prep.Tensors
	if len(ts) != 2 || ts[1].DType != "i32" || !ts[1].Frozen || ts[0].Frozen {
		t.Errorf("tensors: %+v", ts)
	}
	if _, err := Prepare(m, Options{Cast: map[string]string{"BOOL": "u8", "I16": "i32"}, Frozen: []string{"nothing.*"}, Match: testMatch}); err == nil || !strings.Contains(err.Error(), `--frozen: pattern "nothing.*" matches no tensor of the 3 tensors read`) {
		t.Errorf("unused pattern: %v", err)
	}
	// An invalid pattern is a *PatternError (a usage error), with the
	// pattern as a shell takes it back.
	var pe *PatternError
	if _, err := Prepare(m, Options{Exclude: []string{"it's[0]"}, Match: testMatch}); !errors.As(err, &pe) || err.Error() != `--exclude 'it'\''s[0]': invalid` {
		t.Errorf("invalid pattern: %v", err)
	}
	if _, err := Prepare(m, Options{Exclude: []string{"w"}}); err == nil || !strings.Contains(err.Error(), "Options.Match is needed") {
		t.Errorf("no Match: %v", err)
	}
	// The hints' --exclude text works when pasted into a shell, and names
	// the tensor as a pattern.
	for _, c := range []struct{ name, dtype, want string }{
		{"mask", "BOOL", `(--exclude 'mask')`},
		{`a\b`, "BOOL", `(--exclude 'a\b')`},
		{"it's", "BOOL", `(--exclude 'it'\''s')`},
		{"t\tb", "BOOL", `(--exclude $'t\tb')`},
		{"n\nb", "F32", `(--exclude $'n\nb')`},
		{"a{b}.w", "BOOL", `(--exclude '"a{b}.w"')`},
		{`"s"`, "BOOL", `(--exclude '"\"s\""')`},
	} {
		one := &Model{Params: []Param{{Name: c.name, DType: c.dtype, Shape: []int64{1}}}}
		if _, err := Prepare(one, Options{}); err == nil || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to end with %s", c.name, err, c.want)
		}
	}
	star := &Model{Params: []Param{{Name: "a*b", DType: "F32"}}}
	if _, err := Prepare(star, Options{}); err == nil || !strings.Contains(err.Error(), "read as a pattern") {
		t.Errorf("a name with *: %v", err)
	}
}

// A parameter list: torch's dtype names, requires_grad, tied names.
func TestParamList(t *testing.T) {
	data := `{"parameters": [{"name": "wte.weight", "dtype": "torch.float32", "shape": [10, 4], "requires_grad": true},
		{"name": "pos", "dtype": "torch.bfloat16", "shape": [4], "requires_grad": false}], "tied": [["wte.weight", "lm_head.weight"]]}`
	m, err := ParseParamList("p.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Params) != 2 || m.Params[0].DType != "F32" || m.Params[1].DType != "BF16" || !m.Params[1].Frozen || !m.FileOrder || len(m.Tied) != 1 {
		t.Fatalf("model: %+v", m)
	}
	// torch's unsigned, complex and e8m0 dtypes are safetensors' too; a
	// tied group of one name shares nothing and is not reported.
	m, err = ParseParamList("p.json", []byte(`{"format": "syncgen-params", "module": "m:f", "parameters": [{"name": "u", "dtype": "torch.uint16", "shape": [2]},
		{"name": "c", "dtype": "torch.complex64", "shape": [2]}, {"name": "e", "dtype": "torch.float8_e8m0fnu", "shape": [2]}], "tied": [["u"]]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(m.Params[0].DType, " ", m.Params[1].DType, " ", m.Params[2].DType, " ", len(m.Tied)); got != "U16 C64 F8_E8M0 0" {
		t.Errorf("dtypes and tied groups: %s", got)
	}
	// An entry without a shape is a scalar; one with a dimension 0 is read
	// (Prepare leaves it out).
	m, err = ParseParamList("p.json", []byte(`{"parameters": [{"name": "logit_scale", "dtype": "torch.float32"},
		{"name": "e", "dtype": "torch.float32", "shape": [0, 4]}, {"name": "n", "dtype": "torch.int64", "shape": null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Params) != 3 || len(m.Params[0].Shape) != 0 || m.Params[0].Elems() != 1 || m.Params[1].Elems() != 0 || len(m.Params[2].Shape) != 0 {
		t.Fatalf("model: %+v", m)
	}
	for _, c := range []struct{ list, want string }{
		{`{"parameters": [{"name": "", "dtype": "torch.float32"}]}`, "parameter 0 has no name"},
		{`{"parameters": [{"name": "a", "dtype": "torch.complex128"}]}`, `unknown dtype "torch.complex128": want a torch dtype (torch.bfloat16,`},
		{`{"parameters": [{"name": "a", "dtype": "float32"}]}`, `or a safetensors one (BF16, BOOL,`},
		// Read as it is written: a misspelt field is not a scalar, a
		// value of the wrong kind is named, and so is a byte that is
		// not UTF-8 (never replaced, which would change the name).
		{`{"parameters": [{"name": "a", "dtype": "F32", "sahpe": [3]}]}`, `unknown field "sahpe"`},
		{`{"parameters": [{"name": "a", "dtype": "F32", "shape": [1.5]}]}`, `byte 59: "parameters.shape": want a whole number (at most 9223372036854775807), not number 1.5`},
		{`{"parameters": [{"name": "a", "dtype": "F32", "requires_grad": "no"}]}`, `"parameters.requires_grad": want true or false, not string`},
		{`{"parameters": {"a": 1}}`, `"parameters": want a list, not object`},
		{"{\"parameters\": [{\"name\": \"a\xffb\", \"dtype\": \"F32\"}]}", "byte 27 is not UTF-8"},
		{`{"parameters": [{"name": "a", "dtype": "F32"}]} {}`, "byte 48: more after the parameter list's JSON object"},
		{`{"format": "other", "parameters": [{"name": "a", "dtype": "F32"}]}`, `format "other": want "syncgen-params"`},
		// The tied groups agree with the list: a shared parameter is
		// listed once, under its group's first name.
		{`{"parameters": [{"name": "a", "dtype": "F32"}, {"name": "b", "dtype": "F32"}], "tied": [["a", "b"]]}`,
			`tied group 0: "b" is a parameter of the list, and also listed as sharing "a"'s storage: it would be declared twice`},
		{`{"parameters": [{"name": "a", "dtype": "F32"}], "tied": [["x", "a"]]}`, `tied group 0 ("x", ...): its first name is not a parameter of the list`},
		{`{"parameters": [{"name": "a", "dtype": "F32"}, {"name": "b", "dtype": "F32"}], "tied": [["a", "c"], ["b", "c"]]}`, `tied group 1: "c" shares "b"'s storage, and also "a"'s`},
		{`{"parameters": []}`, "the list has no parameters"},
		{`{"parameters": [{"name": "a", "dtype": "F32"}, {"name": "a", "dtype": "F32"}]}`, `parameter "a" appears twice`},
		{`{"parameters": [{"name": "a", "dtype": "F32", "shape": [2, -1]}]}`, `parameter "a": negative dimension in shape [2 -1]`},
		{`{"parameters": [{"name": "a", "dtype": "F32", "shape": [4611686018427387904, 4]}]}`, `parameter "a": shape [4611686018427387904 4] is too large`},
		{`{"parameters": [{"name": "a", "dtype": "U8", "shape": [9223372036854775807, 9223372036854775807, 0]}]}`, "is too large"},
		{`{"parameters": [{"name": "a", "dtype": "F4", "shape": [3]}]}`, "F4[3] is 3 elements of 4 bits, which is not a whole number of bytes"},
	} {
		_, err := ParseParamList("p.json", []byte(c.list))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "p.json: ") {
			t.Errorf("%s: error %v, want %q", c.list, err, c.want)
		}
	}
}

// Repeated layers become templates: a transformer's blocks one loop, a
// ResNet's stages and blocks two nested ones, one repeated tensor a brace
// range; names the templates cannot hold stay as they are.
func TestModuleTemplates(t *testing.T) {
	var ts []Tensor
	ts = append(ts, Tensor{Name: "wte.weight", DType: "f32", Shape: []int64{100, 8}})
	for i := range 12 {
		for _, n := range []string{"ln_1.weight", "attn.c_attn.weight", "mlp.c_fc.weight"} {
			ts = append(ts, Tensor{Name: fmt.Sprintf("h.%d.%s", i, n), DType: "f32", Shape: []int64{8}})
		}
	}
	for l := 1; l <= 4; l++ {
		for b := range 3 {
			ts = append(ts, Tensor{Name: fmt.Sprintf("layer%d.%d.conv1.weight", l, b), DType: "bf16", Shape: []int64{4}},
				Tensor{Name: fmt.Sprintf("layer%d.%d.bn1.weight", l, b), DType: "f32", Shape: []int64{4}, Frozen: true})
		}
	}
	for i := range 5 {
		ts = append(ts, Tensor{Name: fmt.Sprintf("head.%d.bias", i), DType: "f16", Shape: []int64{3}})
	}
	ts = append(ts, Tensor{Name: "odd name/x", DType: "u8", Shape: []int64{2}}, Tensor{Name: "pad.07.w", DType: "f32", Shape: []int64{1}}, Tensor{Name: "pad.08.w", DType: "f32", Shape: []int64{1}})
	got := Module(ts, "test")
	want := `tensor wte.weight f32[100, 8]
for i in 0..11 {
    tensor h.{i}.ln_1.weight f32[8]
    tensor h.{i}.attn.c_attn.weight f32[8]
    tensor h.{i}.mlp.c_fc.weight f32[8]
}
for i in 1..4 {
    for j in 0..2 {
        tensor layer{i}.{j}.conv1.weight bf16[4]
        tensor layer{i}.{j}.bn1.weight f32[4] frozen
    }
}
tensor head.{0..4}.bias f16[3]
tensor "odd name/x" u8[2]
tensor pad.07.w f32[1]
tensor pad.08.w f32[1]
`
	if !strings.HasSuffix(got, want) {
		t.Errorf("module:\n%s\nwant it to end with:\n%s", got, want)
	}
}

// A scalar (shape []) is declared as shape [1], the language having no
// scalars; a tensor without elements (a dimension 0) is left out and
// named, whatever its dtype or name; an --exclude or --frozen pattern
// that takes only such tensors still matches.
func TestPrepareScalarsAndEmpty(t *testing.T) {
	m := &Model{FileOrder: true, Params: []Param{
		{Name: "bn.num_batches_tracked", DType: "I64", Shape: []int64{}},
		{Name: "logit_scale", DType: "F32"},
		{Name: "w", DType: "F32", Shape: []int64{2, 3}},
		{Name: "empty", DType: "F32", Shape: []int64{0}},
		{Name: "mask", DType: "BOOL", Shape: []int64{4, 0}},
		{Name: "odd\tname", DType: "F16", Shape: []int64{0, 0}},
		{Name: "gone", DType: "F32", Shape: []int64{0}},
	}}
	prep, err := Prepare(m, Options{Exclude: []string{"gone"}, Frozen: []string{"empty"}, Match: testMatch})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range prep.Tensors {
		got = append(got, x.Name+x.DType+fmt.Sprint(x.Shape))
	}
	if strings.Join(got, " ") != "bn.num_batches_trackedi64[1] logit_scalef32[1] wf32[2 3]" {
		t.Errorf("tensors: %v", got)
	}
	if fmt.Sprint(prep.Empty) != "[empty mask odd\tname]" || fmt.Sprint(prep.Excluded) != "[gone]" {
		t.Errorf("empty %q, excluded %q", prep.Empty, prep.Excluded)
	}
	if st := StatsOf(m.Params); st.Params != 8 || st.Total != 8+4+24 {
		t.Errorf("stats: %+v", st)
	}
	none := &Model{Params: []Param{{Name: "e", DType: "F32", Shape: []int64{0}}}}
	if _, err := Prepare(none, Options{}); err == nil || !strings.Contains(err.Error(), "the 1 tensor without elements") {
		t.Errorf("only empty tensors: %v", err)
	}
}

// A tensor without elements may stand anywhere inside the data: at the
// start of another tensor's bytes (sorted before it, as the reference
// implementation sorts by begin then end), inside them, or at the end.
func TestSafetensorsEmptyRanges(t *testing.T) {
	dir := t.TempDir()
	file := func(name, header string, data int) string {
		b := append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header...)
		return writeFile(t, dir, name, append(b, make([]byte, data)...))
	}
	p := file("e.safetensors", `{"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
		"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
		"at_b": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]},
		"inside_a": {"dtype": "U8", "shape": [0, 5], "data_offsets": [4, 4]},
		"at_end": {"dtype": "BF16", "shape": [3, 0], "data_offsets": [16, 16]},
		"at_start": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}`, 16)
	params, err := ReadSafetensors(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range params {
		got = append(got, x.Name)
	}
	if strings.Join(got, " ") != "at_start a inside_a at_b b at_end" {
		t.Errorf("order: %v", got)
	}
	// An empty range beyond the data is still an error.
	beyond := file("beyond.safetensors", `{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
		"far": {"dtype": "F32", "shape": [0], "data_offsets": [9, 9]}}`, 8)
	if _, err := ReadSafetensors(beyond); err == nil || !strings.Contains(err.Error(), `tensor "far": data_offsets [9, 9] reach beyond`) {
		t.Errorf("beyond: %v", err)
	}
}

// The FP4 and FP6 formats take 4 and 6 bits an element, packed, as in the
// reference implementation; a count of elements whose bits are not a
// whole number of bytes is an error.
func TestSafetensorsSubByteDTypes(t *testing.T) {
	dir := t.TempDir()
	header := func(h string, data int) []byte {
		b := append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
		return append(b, make([]byte, data)...)
	}
	for _, c := range []struct {
		name, header string
		data         int
		want         string // "" for valid
	}{
		{"f4", `{"w": {"dtype": "F4", "shape": [4, 8], "data_offsets": [0, 16]}}`, 16, ""},
		{"f6", `{"a": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]}, "b": {"dtype": "F6_E3M2", "shape": [8], "data_offsets": [3, 9]}}`, 9, ""},
		{"mixed", `{"s": {"dtype": "F8_E8M0", "shape": [2], "data_offsets": [0, 2]}, "w": {"dtype": "F4", "shape": [2], "data_offsets": [2, 3]}}`, 3, ""},
		{"f4 as bytes", `{"w": {"dtype": "F4", "shape": [4], "data_offsets": [0, 4]}}`, 4, "F4[4] is 2 bytes, but its data_offsets [0, 4] hold 4"},
		{"odd f4", `{"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}`, 2, "F4[3] is 3 elements of 4 bits, which is not a whole number of bytes"},
		{"f6 of 2", `{"w": {"dtype": "F6_E3M2", "shape": [2], "data_offsets": [0, 2]}}`, 2, "F6_E3M2[2] is 2 elements of 6 bits"},
	} {
		p := writeFile(t, dir, c.name+".safetensors", header(c.header, c.data))
		params, err := ReadSafetensors(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "":
			if st := StatsOf(params); st.Total != int64(c.data) {
				t.Errorf("%s: %d bytes in the summary, want %d", c.name, st.Total, c.data)
			}
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// A name that holds braces of its own is written quoted, which the
// language takes literally, and never enters a template, where braces in
// a quoted name are placeholders; quotes and backslashes are escaped.
func TestModuleLiteralNames(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"a{b}.w"}, `tensor "a{b}.w" f32[1]` + "\n"},
		{[]string{"a.{0..3}.w", "b"}, `tensor "a.{0..3}.w" f32[1]` + "\ntensor b f32[1]\n"},
		{[]string{"x{1}.0.w", "x{1}.1.w", "x{1}.2.w"}, `tensor "x{1}.0.w" f32[1]` + "\n" + `tensor "x{1}.1.w" f32[1]` + "\n" + `tensor "x{1}.2.w" f32[1]` + "\n"},
		{[]string{"h.0.w", "{i}", "h.1.w", "h.2.w", "h.3.w"}, "tensor h.0.w f32[1]\ntensor \"{i}\" f32[1]\ntensor h.{1..3}.w f32[1]\n"},
		{[]string{`q"x\y`, "}"}, `tensor "q\"x\\y" f32[1]` + "\n" + `tensor "}" f32[1]` + "\n"},
	} {
		var ts []Tensor
		for _, n := range c.names {
			ts = append(ts, Tensor{Name: n, DType: "f32", Shape: []int64{1}})
		}
		if got := Module(ts, "test"); !strings.HasSuffix(got, "\n\n"+c.want) {
			t.Errorf("%q: module:\n%s\nwant it to end with:\n%s", c.names, got, c.want)
		}
	}
	// Such names are declarable: Prepare does not refuse them.
	m := &Model{Params: []Param{{Name: "a{b}.w", DType: "F32", Shape: []int64{1}}, {Name: `q"x\y`, DType: "F32", Shape: []int64{1}}}}
	if _, err := Prepare(m, Options{}); err != nil {
		t.Error(err)
	}
}

// The summary and the module's header say "1 tensor" and "1 parameter",
// and plurals otherwise.
func TestSingulars(t *testing.T) {
	for _, c := range []struct {
		params        []Param
		stats, header string
	}{
		{[]Param{{Name: "w", DType: "F32", Shape: []int64{1}}}, "1 tensor (0 frozen), 1 parameter, 4 B (F32 4 B)", ": 1 tensor, 1 parameter,\n"},
		{[]Param{{Name: "w", DType: "F32", Shape: []int64{2}}}, "1 tensor (0 frozen), 2 parameters, 8 B (F32 8 B)", ": 1 tensor, 2 parameters,\n"},
		{[]Param{{Name: "w", DType: "F16", Shape: []int64{1000}}, {Name: "b", DType: "F16", Frozen: true}}, "2 tensors (1 frozen), 1,001 parameters, 2.0 KiB (F16 2.0 KiB)", ": 2 tensors, 1,001 parameters,\n"},
	} {
		if got := StatsOf(c.params).String(); got != c.stats {
			t.Errorf("stats %q, want %q", got, c.stats)
		}
		prep, err := Prepare(&Model{Params: c.params}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := Module(prep.Tensors, "m"); !strings.Contains(got, c.header) {
			t.Errorf("module header:\n%s\nwant %q", got, c.header)
		}
	}
}

// Tensors that add up to more than a program holds (a parameter list
// has no data to bound them) are refused by Prepare with the tensor where
// the sum passes 2^63-1, not by the checker as a bug of the import; the
// summary's sums saturate instead of wrapping to negative counts.
func TestTotalsBeyondAProgram(t *testing.T) {
	var params []Param
	for i := range 200 {
		params = append(params, Param{Name: fmt.Sprintf("l.%d.w", i), DType: "F64", Shape: []int64{1 << 56}})
	}
	_, err := Prepare(&Model{Params: params, FileOrder: true}, Options{})
	if err == nil || err.Error() != `the tensors add up to 2^63 bytes or more from tensor "l.15.w" on (f64[72057594037927936]), more than a program holds: check the shapes, or leave tensors out (--exclude)` {
		t.Errorf("Prepare: %v", err)
	}
	// A cast widens the bytes: 64 F4 tensors of 2^56 elements are 2^61
	// bytes in the file, but 2^63 as bf16.
	var f4 []Param
	for i := range 64 {
		f4 = append(f4, Param{Name: fmt.Sprintf("q.%d", i), DType: "F4", Shape: []int64{1 << 56}})
	}
	if _, err := Prepare(&Model{Params: f4, FileOrder: true}, Options{Cast: map[string]string{"F4": "bf16"}}); err == nil || !strings.Contains(err.Error(), `from tensor "q.63" on`) {
		t.Errorf("Prepare, F4 as bf16: %v", err)
	}
	if got := StatsOf(params).String(); got != "200 tensors (0 frozen), 9,223,372,036,854,775,807 parameters, 8.00 EiB (F64 8.00 EiB)" {
		t.Errorf("stats: %s", got)
	}
	if got := StatsOf(params[:2]).String(); got != "2 tensors (0 frozen), 144,115,188,075,855,872 parameters, 1.00 EiB (F64 1.00 EiB)" {
		t.Errorf("stats: %s", got)
	}
}

// FuzzHeader: no header or parameter list makes the readers panic, what
// the header reader accepts tiles the data exactly, and what either
// accepts, once prepared, makes a module that the language's checker
// reads as exactly those tensors, in order (as the CLI checks it).
func FuzzHeader(f *testing.F) {
	f.Add([]byte(`{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}`), int64(8))
	f.Add([]byte(`{"__metadata__": {"x": "y"}, "b": {"dtype": "BF16", "shape": [], "data_offsets": [0, 2]}}`), int64(2))
	f.Add([]byte(`{"a": {"dtype": "F32", "shape": [1, -1], "data_offsets": [0, 0]}}`), int64(0))
	f.Add([]byte(`[1, 2]`), int64(0))
	f.Add([]byte(`{"a": {"dtype": "U8", "shape": [9223372036854775807, 2], "data_offsets": [0, 0]}}`), int64(0))
	f.Add([]byte(`{"a": {"dtype": "F4", "shape": [3, 5], "data_offsets": [0, 8]}}`), int64(8))
	f.Add([]byte(`{"a": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]}, "z": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}`), int64(3))
	f.Add([]byte("{\"a\xff\": {}}  \x00"), int64(0))
	f.Add([]byte(`{"__metadata__": {"a": 1}}`), int64(0))
	f.Add([]byte(`{"h.0.w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "h.1.w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}, "a{b}.{0..2}": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]}}`), int64(16))
	f.Add([]byte(`{"parameters": [{"name": "l.0.w", "dtype": "torch.float32", "shape": [2]}, {"name": "l.1.w", "dtype": "torch.float32"}, {"name": "q\"{i}", "dtype": "F4", "shape": [2, 0]}]}`), int64(0))
	f.Fuzz(func(t *testing.T, header []byte, data int64) {
		if m, err := ParseParamList("p.json", header); err == nil {
			checkDeclares(t, m)
		}
		params, err := ParseHeader(header, data)
		if err != nil {
			return
		}
		var sum int64
		for i := range params {
			size, whole := tensorBytes(params[i].DType, params[i].Elems())
			if !whole {
				t.Fatalf("accepted %s%v, not a whole number of bytes", params[i].DType, params[i].Shape)
			}
			sum += size
		}
		if sum != data {
			t.Fatalf("accepted tensors of %d bytes in %d bytes of data", sum, data)
		}
		checkDeclares(t, &Model{Params: params})
	})
}

// FuzzIndex: no index makes the index reader panic, and what it accepts
// holds each tensor of its shards once, from the shard the index names
// for it, and makes a module of exactly those tensors. The shards it may
// name are two fixed files beside it.
func FuzzIndex(f *testing.F) {
	dir := f.TempDir()
	writeFile(f, dir, "a.safetensors", safetensorsBytes(f, []st{{name: "h.0.w", dtype: "F32", shape: []int64{2}}, {name: "s", dtype: "I64", shape: []int64{}}}, 0))
	writeFile(f, dir, "b.safetensors", safetensorsBytes(f, []st{{name: "h.1.w", dtype: "BF16", shape: []int64{2, 0}}}, 0))
	f.Add([]byte(`{"metadata": {"total_size": 16}, "weight_map": {"h.0.w": "a.safetensors", "s": "a.safetensors", "h.1.w": "b.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"h.0.w": "a.safetensors", "s": "b.safetensors", "h.1.w": "b.safetensors"}}`))
	f.Add([]byte(`{"metadata": {"total_size": 1.6e1}, "weight_map": {"h.0.w": "a.safetensors", "s": "a.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"x": "../a.safetensors", "y": null}}`))
	f.Add([]byte("{\"weight_map\": {\"h.0.w\xff\": \"a.safetensors\"}}"))
	f.Add([]byte(`{"weight_map": ["a.safetensors"], "metadata": {"total_size": "x"}}`))
	path := filepath.Join(dir, "model.safetensors.index.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := readIndex(path, data)
		if err != nil {
			return
		}
		idx, err := parseIndex(path, data)
		if err != nil {
			t.Fatalf("readIndex accepted an index that parseIndex refuses: %v", err)
		}
		seen := map[string]bool{}
		for _, p := range m.Params {
			if seen[p.Name] || filepath.Join(dir, idx.weightMap[p.Name]) != p.Source {
				t.Fatalf("tensor %q from %s: twice, or not from the shard the index names (%q)", p.Name, p.Source, idx.weightMap[p.Name])
			}
			seen[p.Name] = true
		}
		if len(seen) != len(idx.weightMap) {
			t.Fatalf("read %d tensors of the %d the index names", len(seen), len(idx.weightMap))
		}
		checkDeclares(t, m)
	})
}

// checkDeclares prepares m (every dtype cast to one of the language's)
// and checks that its module declares exactly the tensors prepared.
func checkDeclares(t *testing.T, m *Model) {
	cast := map[string]string{}
	for dt := range dtypeBits {
		if _, ok := languageDTypes[dt]; !ok {
			cast[dt] = "u8"
		}
	}
	prep, err := Prepare(m, Options{Cast: cast})
	if err != nil {
		return // a name the language cannot hold, or nothing to declare
	}
	text := Module(prep.Tensors, "fuzz")
	prog, diags := dsl.Check("m.sync", []byte(text))
	if diags.HasErrors() {
		var b strings.Builder
		diags.Render(&b)
		t.Fatalf("the module does not check:\n%s\n%s", text, b.String())
	}
	if len(prog.Tensors) != len(prep.Tensors) {
		t.Fatalf("the module declares %d tensors, not %d:\n%s", len(prog.Tensors), len(prep.Tensors), text)
	}
	for i, x := range prog.Tensors {
		w := prep.Tensors[i]
		if x.Name != w.Name || x.DType.String() != w.DType || fmt.Sprint(x.Shape) != fmt.Sprint(w.Shape) || x.Frozen != w.Frozen {
			t.Fatalf("tensor %d is %q %s%v, not %q %s%v:\n%s", i, x.Name, x.DType, x.Shape, w.Name, w.DType, w.Shape, text)
		}
	}
}

// BenchmarkImport10k: ordering and writing a 10,000-tensor model.
func BenchmarkImport10k(b *testing.B) {
	var params []Param
	for i := range 400 {
		for k := range 25 {
			params = append(params, Param{Name: fmt.Sprintf("model.layers.%d.block.%d.weight", i, k), DType: "BF16", Shape: []int64{64, int64(k + 1)}})
		}
	}
	m := &Model{Params: params}
	for b.Loop() {
		prep, err := Prepare(m, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(Module(prep.Tensors, "bench")) == 0 {
			b.Fatal("empty module")
		}
	}
}

// TestPrepareGradless: an integer or bool tensor, or a norm's running
// statistics, of an input that does not say which tensors have gradients
// (safetensors) is declared frozen and named in Gradless; one whose
// requires_grad the input gives (a parameter list) keeps it, and other
// floating-point tensors are left alone.
func TestPrepareGradless(t *testing.T) {
	m := &Model{Params: []Param{
		{Name: "w", DType: "F32", Shape: []int64{2}},
		{Name: "bn.num_batches_tracked", DType: "I64"},
		{Name: "fp8", DType: "F8_E4M3", Shape: []int64{2}},
		{Name: "mask", DType: "BOOL", Shape: []int64{4}},
		{Name: "listed", DType: "I32", Shape: []int64{3}, GradKnown: true},
		{Name: "ids", DType: "U8", Shape: []int64{3}, Frozen: true},
		{Name: "bn.running_mean", DType: "F32", Shape: []int64{4}},
		{Name: "layer/bn/running_var", DType: "F16", Shape: []int64{4}},
		{Name: "listed.running_var", DType: "F32", Shape: []int64{4}, GradKnown: true},
		{Name: "running_variance", DType: "F32", Shape: []int64{4}},
	}}
	prep, err := Prepare(m, Options{Order: "file", Cast: map[string]string{"BOOL": "u8", "F8_E4M3": "bf16"}})
	if err != nil {
		t.Fatal(err)
	}
	var frozen []string
	for _, ts := range prep.Tensors {
		if ts.Frozen {
			frozen = append(frozen, ts.Name)
		}
	}
	wantGradless := []string{"bn.num_batches_tracked", "mask", "bn.running_mean", "layer/bn/running_var"}
	if !slices.Equal(frozen, []string{"bn.num_batches_tracked", "mask", "ids", "bn.running_mean", "layer/bn/running_var"}) || !slices.Equal(prep.Gradless, wantGradless) {
		t.Errorf("frozen %q, gradless %q; want the I64 and BOOL tensors and running statistics without requires_grad frozen, and ids frozen as read", frozen, prep.Gradless)
	}
}

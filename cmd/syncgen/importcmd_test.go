package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/importer"
	"github.com/syncgen/syncgen/stdlib"
)

// gpt2Tensors are GPT-2 small's parameters (HuggingFace GPT2Model, gpt2):
// 148 tensors, 124,439,808 parameters.
func gpt2Tensors() map[string][]int64 {
	m := map[string][]int64{"wte.weight": {50257, 768}, "wpe.weight": {1024, 768}, "ln_f.weight": {768}, "ln_f.bias": {768}}
	for i := range 12 {
		for name, shape := range map[string][]int64{
			"ln_1.weight": {768}, "ln_1.bias": {768}, "attn.c_attn.weight": {768, 2304}, "attn.c_attn.bias": {2304},
			"attn.c_proj.weight": {768, 768}, "attn.c_proj.bias": {768}, "ln_2.weight": {768}, "ln_2.bias": {768},
			"mlp.c_fc.weight": {768, 3072}, "mlp.c_fc.bias": {3072}, "mlp.c_proj.weight": {3072, 768}, "mlp.c_proj.bias": {768},
		} {
			m[fmt.Sprintf("h.%d.%s", i, name)] = shape
		}
	}
	return m
}

// writeSafetensors writes a safetensors file of f32 tensors, laid out in
// the order of their names as the reference writer does; its data is a
// hole (the file is sparse): the importer reads only the header.
func writeSafetensors(t *testing.T, path string, tensors map[string][]int64) {
	t.Helper()
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var pos int64
	for _, n := range names {
		size := int64(4)
		for _, d := range tensors[n] {
			size *= d
		}
		header[n] = map[string]any{"dtype": "F32", "shape": tensors[n], "data_offsets": []int64{pos, pos + size}}
		pos += size
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	data := append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(len(data))+pos); err != nil {
		t.Fatal(err)
	}
}

// GPT-2's header imports as a module of templates, which a plan imports,
// builds and runs under mpirun at 2 ranks with every element checked.
func TestImportGPT2EndToEnd(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, st, gpt2Tensors())
	mod := filepath.Join(dir, "gpt2.sync")
	code, out, errOut := syncgen(t, "import", dir, "-o", mod)
	if code != 0 || out != "" {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "148 tensors (0 frozen), 124,439,808 parameters") {
		t.Errorf("summary: %s", errOut)
	}
	text, _ := os.ReadFile(mod)
	if !strings.Contains(string(text), "for i in 0..11 {\n    tensor h.{i}.attn.c_attn.bias f32[2304]\n") {
		t.Errorf("module:\n%s", text)
	}
	// The module is what syncgen fmt would write.
	if code, out, errOut := syncgen(t, "fmt", "-l", mod); code != 0 || out != "" {
		t.Errorf("fmt -l: exit %d, %q %s", code, out, errOut)
	}
	plan := writeFile(t, dir, "train.sync", `import "gpt2.sync"
stream compute
stream comm priority high
bucket grads { * } cap 25MiB order reverse
step {
    backward 20ms on compute
    allreduce grads op avg on comm after ready
}
run steps 1 warmup 0 check every 1
`)
	prog, diags := dsl.Load(plan)
	if diags.HasErrors() || len(prog.Tensors) != 148 {
		t.Fatalf("the plan: %v", diags)
	}
	needToolchain(t)
	mpirun := needMPIRun(t)
	bin := filepath.Join(dir, "train_sync")
	t.Setenv("SYNCGEN_CACHE", filepath.Join(dir, "cache"))
	if code, out, errOut := syncgen(t, "build", plan, "-o", bin); code != 0 {
		t.Fatalf("build: exit %d\n%s%s", code, out, errOut)
	}
	runExample(t, mpirun, bin, 2, []string{"--steps", "1", "--warmup", "0"})
}

// Every stdlib model, written as a parameter list in its order, imports
// to a module that declares the same tensors: names, dtypes, shapes,
// frozen marks and order, so the stdlib's counts stay exact.
func TestImportRegeneratesStdlib(t *testing.T) {
	dir := t.TempDir()
	for _, module := range stdlib.Modules() {
		t.Run(module, func(t *testing.T) {
			prog, diags := dsl.Check("t.sync", []byte(`import "`+module+`"`+"\n"))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			type param struct {
				Name         string  `json:"name"`
				DType        string  `json:"dtype"`
				Shape        []int64 `json:"shape"`
				RequiresGrad bool    `json:"requires_grad"`
			}
			torch := map[string]string{"f64": "torch.float64", "f32": "torch.float32", "f16": "torch.float16", "bf16": "torch.bfloat16",
				"i64": "torch.int64", "i32": "torch.int32", "i8": "torch.int8", "u8": "torch.uint8"}
			var list struct {
				Parameters []param `json:"parameters"`
			}
			for _, tn := range prog.Tensors {
				list.Parameters = append(list.Parameters, param{tn.Name, torch[tn.DType.String()], tn.Shape, !tn.Frozen})
			}
			data, _ := json.Marshal(list)
			in := filepath.Join(dir, filepath.Base(module)+".json")
			if err := os.WriteFile(in, data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, filepath.Base(module)+".sync")
			// import itself checks that the module expands to the list.
			if code, o, e := syncgen(t, "import", in, "-o", out); code != 0 {
				t.Fatalf("import: exit %d\n%s%s", code, o, e)
			}
			got, diags := dsl.Load(out)
			if diags.HasErrors() || len(got.Tensors) != len(prog.Tensors) {
				t.Fatalf("%d tensors, want %d: %v", len(got.Tensors), len(prog.Tensors), diags)
			}
			for i := range got.Tensors {
				a, b := got.Tensors[i], prog.Tensors[i]
				if a.Name != b.Name || a.DType != b.DType || a.Elems != b.Elems || a.Frozen != b.Frozen {
					t.Fatalf("tensor %d: %+v, want %+v", i, a, b)
				}
			}
		})
	}
}

// Bad input fails with the file and what is wrong, and leaves no module
// behind (nor touches one that was there); usage errors exit 2.
func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.safetensors")
	if err := os.WriteFile(broken, []byte{200, 0, 0, 0, 0, 0, 0, 0, '{'}, 0o644); err != nil {
		t.Fatal(err)
	}
	out := writeFile(t, dir, "keep.sync", "// the user's own\n")
	code, _, errOut := syncgen(t, "import", broken, "-o", out)
	if code != 1 || !strings.Contains(errOut, broken) || !strings.Contains(errOut, "header length 200 (bytes 0-7) reaches beyond the file's 9 bytes") {
		t.Errorf("broken: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(out); string(b) != "// the user's own\n" {
		t.Errorf("the output file changed: %q", b)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".keep.sync.*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"import"}, "want one FILE or DIR"},
		{[]string{"import", broken, "--order", "random"}, `--order "random": want natural or file`},
		{[]string{"import", broken, "--cast", "I16=i16"}, `--cast "I16=i16": want FROM=TO`},
		// A FROM that no file has is a typo, not a cast that never
		// applies; one dtype cast two ways is a contradiction.
		{[]string{"import", broken, "--cast", "BOOLEAN=u8"}, `--cast "BOOLEAN=u8": FROM is not a dtype of safetensors (BF16 BOOL`},
		{[]string{"import", broken, "--cast", "=u8"}, `--cast "=u8": FROM is not a dtype`},
		{[]string{"import", broken, "--cast", "BOOL=u8", "--cast", "bool=i8"}, "--cast BOOL=u8 and --cast BOOL=i8: give one cast a dtype"},
	} {
		if code, _, errOut := syncgen(t, c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, errOut)
		}
	}
	m := map[string][]int64{"a.weight": {4}}
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, m)
	// --cast takes either side in either case, and torch's names of a
	// file dtype (a parameter list's): F32 to bf16 here.
	for _, cast := range []string{"f32=BF16", "torch.float32=bf16"} {
		if code, out, errOut := syncgen(t, "import", st, "--cast", cast); code != 0 || !strings.Contains(out, "tensor a.weight bf16[4]") {
			t.Errorf("--cast %s: exit %d\n%s%s", cast, code, out, errOut)
		}
	}
	if code, _, errOut := syncgen(t, "import", st, "--frozen", "b.*"); code != 1 || !strings.Contains(errOut, `pattern "b.*" matches no tensor`) {
		t.Errorf("unused --frozen: exit %d: %s", code, errOut)
	}
}

// torchvision's ResNet-50, as scripts/dump-params.py wrote it on a machine
// with PyTorch (importer/testdata/resnet50.json), imports to exactly the
// stdlib's models/resnet50: the same 161 tensors in the same order.
func TestImportTorchvisionResNet50(t *testing.T) {
	out := filepath.Join(t.TempDir(), "resnet50.sync")
	code, o, e := syncgen(t, "import", "../../importer/testdata/resnet50.json", "-o", out)
	if code != 0 || !strings.Contains(e, "161 tensors (0 frozen), 25,557,032 parameters") {
		t.Fatalf("import: exit %d\n%s%s", code, o, e)
	}
	got, diags := dsl.Load(out)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want, _ := dsl.Check("t.sync", []byte(`import "models/resnet50"`+"\n"))
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for i := range got.Tensors {
		a, b := got.Tensors[i], want.Tensors[i]
		if a.Name != b.Name || a.DType != b.DType || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) || a.Frozen != b.Frozen {
			t.Fatalf("tensor %d: %s %s%v, the stdlib's %s %s%v", i, a.Name, a.DType, a.Shape, b.Name, b.DType, b.Shape)
		}
	}
}

// A parameter list's tied names are reported, and requires_grad false
// becomes frozen (importer/testdata/tied.json: an LM head tied to the
// embedding, a bias that does not train).
func TestImportTiedAndFrozen(t *testing.T) {
	code, out, errOut := syncgen(t, "import", "../../importer/testdata/tied.json")
	if code != 0 || !strings.Contains(errOut, "tied: head.weight shares the storage of emb.weight, declared once") ||
		!strings.Contains(out, "tensor block.bias f32[16] frozen") || !strings.Contains(errOut, "3 tensors (1 frozen)") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// scripts/dump-params.py, run against a stand-in for PyTorch (a module
// "torch" with what the script uses), writes a list that syncgen import
// reads: registration order, dtypes, requires_grad, the tied names; and
// it answers a missing module, factory or PyTorch with one line, not a
// traceback.
func TestDumpParamsScript(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	stubs := filepath.Join(dir, "stubs")
	os.MkdirAll(filepath.Join(stubs, "torch"), 0o755)
	writeFile(t, stubs, "torch/__init__.py", `import contextlib
class _DType:
    def __init__(self, name): self.name = name
    def __str__(self): return "torch." + self.name
float32, bfloat16 = _DType("float32"), _DType("bfloat16")
@contextlib.contextmanager
def device(name):
    yield
`)
	writeFile(t, stubs, "tinymodel.py", `import torch
class P:
    def __init__(self, shape, dtype=torch.float32, grad=True): self.shape, self.dtype, self.requires_grad = shape, dtype, grad
class LM:
    def __init__(self, layers):
        emb = P((100, 8))
        self.params = [("emb.weight", emb)] + [("h.%d.w" % i, P((8, 8), torch.bfloat16)) for i in range(layers)] + [("norm.bias", P((8,), grad=False)), ("head.weight", emb)]
    def named_parameters(self, remove_duplicate=True):
        seen = set()
        for name, p in self.params:
            if remove_duplicate and id(p) in seen: continue
            seen.add(id(p))
            yield name, p
def build(layers=2): return LM(layers)
`)
	script, _ := filepath.Abs("../../scripts/dump-params.py")
	dump := func(stubs string, args ...string) (string, string, error) {
		cmd := exec.Command(python, append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+stubs)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	out, errOut, err := dump(stubs, "tinymodel:build", `{"layers": 3}`)
	if err != nil {
		t.Fatalf("dump-params.py: %v\n%s", err, errOut)
	}
	list := writeFile(t, dir, "params.json", out)
	code, module, summary := syncgen(t, "import", list)
	if code != 0 || !strings.Contains(summary, "tied: head.weight shares the storage of emb.weight, declared once") ||
		!strings.Contains(module, "tensor emb.weight f32[100, 8]\ntensor h.{0..2}.w bf16[8, 8]\ntensor norm.bias f32[8] frozen\n") {
		t.Fatalf("import of the script's list: exit %d\n%s%s\n%s", code, module, summary, out)
	}
	for _, c := range []struct {
		stubs string
		args  []string
		want  string
	}{
		{stubs, []string{"nosuchmodel:build"}, "dump-params.py: cannot import module 'nosuchmodel' (No module named 'nosuchmodel'): put its package on PYTHONPATH"},
		{stubs, []string{"tinymodel:nothing"}, "dump-params.py: module 'tinymodel' has no callable 'nothing'"},
		{stubs, []string{"tinymodel:build", "{layers: 3}"}, "dump-params.py: KWARGS_JSON '{layers: 3}' is not JSON"},
		{dir, []string{"tinymodel:build"}, "dump-params.py: needs PyTorch (No module named 'torch')"},
	} {
		if _, errOut, err := dump(c.stubs, c.args...); err == nil || !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: %v, stderr %q; want one line starting %q", c.args, err, errOut, c.want)
		}
	}
}

// -o that names a file the import reads (the safetensors file, a shard or
// the index of a directory, the parameter list), spelled otherwise or
// linked, is refused with exit 2 and leaves the file as it was.
func TestImportRefusesOutputOverInput(t *testing.T) {
	dir := t.TempDir()
	single := filepath.Join(dir, "v.safetensors")
	writeSafetensors(t, single, map[string][]int64{"w": {4}})
	hf := filepath.Join(dir, "hf")
	if err := os.Mkdir(hf, 0o755); err != nil {
		t.Fatal(err)
	}
	shard1, shard2 := filepath.Join(hf, "model-00001-of-00002.safetensors"), filepath.Join(hf, "model-00002-of-00002.safetensors")
	writeSafetensors(t, shard1, map[string][]int64{"a.w": {2}})
	writeSafetensors(t, shard2, map[string][]int64{"b.w": {3}})
	index := writeFile(t, hf, "model.safetensors.index.json",
		`{"metadata": {"total_size": 20}, "weight_map": {"a.w": "model-00001-of-00002.safetensors", "b.w": "model-00002-of-00002.safetensors"}}`)
	list := writeFile(t, dir, "p.json", `{"parameters": [{"name": "w", "dtype": "torch.float32", "shape": [4]}]}`)
	link := filepath.Join(dir, "link.sync")
	if err := os.Symlink(shard2, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.sync")
	if err := os.Link(single, hard); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in, out, victim string
	}{
		{single, single, single},
		{single, filepath.Join(dir, ".", "v.safetensors"), single},
		{single, hard, single},
		{hf, shard1, shard1},
		{hf, link, shard2},
		{hf, index, index},
		{index, shard2, shard2},
		{list, list, list},
	} {
		before, _ := os.ReadFile(c.victim)
		code, _, errOut := syncgen(t, "import", c.in, "-o", c.out)
		if code != 2 || !strings.Contains(errOut, "-o "+c.out+" is a file this import reads") || !strings.Contains(errOut, "give -o another path") {
			t.Errorf("import %s -o %s: exit %d: %s", c.in, c.out, code, errOut)
		}
		if after, _ := os.ReadFile(c.victim); string(after) != string(before) {
			t.Errorf("import %s -o %s changed %s", c.in, c.out, c.victim)
		}
	}
}

// writeAtomic (import's -o, and tune's, calibrate's and predict's files)
// creates missing directories, refuses what is not a file to write, and
// names the user's path in its errors, never the temporary file.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "odir")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := writeFile(t, dir, "plain", "x")
	// A named pipe in the test's directory stands for the special files
	// (never /dev/null: a writer that renames over it would replace it).
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want string // "" for success
	}{
		{filepath.Join(dir, "new", "sub", "x.sync"), ""},
		{plain, ""},
		{existing, existing + " is a directory, not a file: give the path of a file to write"},
		{filepath.Join(dir, "nodir") + "/", filepath.Join(dir, "nodir") + "/ names a directory"},
		{filepath.Join(plain, "x.sync"), filepath.Join(plain, "x.sync") + ": creating its directory"},
		{fifo, fifo + " is a named pipe, not a file"},
	} {
		err := writeAtomic(c.path, []byte("data\n"))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.path, err)
		case c.want == "":
			if b, _ := os.ReadFile(c.path); string(b) != "data\n" {
				t.Errorf("%s holds %q", c.path, b)
			}
		case err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "/."+filepath.Base(c.path)+"."):
			t.Errorf("%s: error %v, want one with %q that names no temporary file", c.path, err, c.want)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// import -o creates missing directories, and refuses a directory (exit 2)
// before reading anything.
func TestImportOutputPaths(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "v.safetensors")
	writeSafetensors(t, st, map[string][]int64{"w": {4}})
	deep := filepath.Join(dir, "newdir", "sub", "x.sync")
	if code, _, errOut := syncgen(t, "import", st, "-o", deep); code != 0 || !strings.HasPrefix(errOut, "read 1 tensor (0 frozen), 4 parameters, 16 B") {
		t.Fatalf("-o %s: exit %d: %s", deep, code, errOut)
	}
	if b, _ := os.ReadFile(deep); !strings.Contains(string(b), "tensor w f32[4]") {
		t.Errorf("%s: %q", deep, b)
	}
	odir := filepath.Join(dir, "odir")
	if err := os.Mkdir(odir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{odir, odir + "/"} {
		code, _, errOut := syncgen(t, "import", st, "-o", out)
		if code != 2 || !strings.Contains(errOut, "import: -o "+out+" ") || !strings.Contains(errOut, "such as "+filepath.Join(odir, "model.sync")) {
			t.Errorf("-o %s: exit %d: %s", out, code, errOut)
		}
	}
	// A path under a file is refused before the model is read, as every
	// command's output is.
	under := filepath.Join(st, "x.sync")
	if code, _, errOut := syncgen(t, "import", st, "-o", under); code != 2 || errOut != "syncgen: import: -o "+under+": "+st+" is a file, not a directory, so the file cannot be written under it; give -o another path\n" {
		t.Errorf("-o %s: exit %d: %q", under, code, errOut)
	}
}

// Scalars (BatchNorm's num_batches_tracked, CLIP's logit_scale) are
// declared as shape [1]; tensors without elements are left out with a
// note naming them; from safetensors and from a parameter list alike.
// The integer num_batches_tracked is frozen from both: the list says so,
// and a safetensors file's integer tensor is a buffer (with a note).
func TestImportScalarsAndEmpty(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "m.safetensors")
	header := `{"__metadata__": {"format": "pt"},
		"bn.num_batches_tracked": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]},
		"bn.running_mean": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]},
		"conv.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]},
		"logit_scale": {"dtype": "F32", "shape": [], "data_offsets": [24, 28]}}`
	data := append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header...)
	if err := os.WriteFile(st, append(data, make([]byte, 28)...), 0o644); err != nil {
		t.Fatal(err)
	}
	list := writeFile(t, dir, "p.json", `{"parameters": [{"name": "logit_scale", "dtype": "torch.float32"},
		{"name": "proj.weight", "dtype": "torch.float32", "shape": [4, 0]},
		{"name": "bn.num_batches_tracked", "dtype": "torch.int64", "shape": [], "requires_grad": false},
		{"name": "conv.weight", "dtype": "torch.float32", "shape": [2, 2]}]}`)
	// A safetensors file does not say the model's order: the summary
	// says which order the module took; a parameter list's is the model's.
	const orderNote = "note: declared in the names' order, numbers as numbers (layers.2 before layers.10): safetensors files do not record the model's own order"
	for _, c := range []struct {
		in, module, note string
		orderNote        bool
	}{
		{st, "tensor bn.num_batches_tracked i64[1] frozen\ntensor conv.weight f32[2, 2]\ntensor logit_scale f32[1]\n", `"bn.running_mean"`, true},
		{list, "tensor logit_scale f32[1]\ntensor bn.num_batches_tracked i64[1] frozen\ntensor conv.weight f32[2, 2]\n", `"proj.weight"`, false},
	} {
		out := filepath.Join(dir, "out.sync")
		code, _, errOut := syncgen(t, "import", c.in, "-o", out)
		if code != 0 {
			t.Fatalf("import %s: exit %d: %s", c.in, code, errOut)
		}
		if !strings.Contains(errOut, "note: left out 1 tensor without elements (a dimension 0, so no gradient bytes; the language's dimensions are at least 1): "+c.note+"\n") ||
			!strings.Contains(errOut, "declared 3 of them (1 without elements left out)") || !strings.Contains(errOut, "read 4 tensors") ||
			strings.Contains(errOut, orderNote) != c.orderNote ||
			strings.Contains(errOut, `note: declared 1 tensor frozen (no gradient): integer and bool tensors and normalisation layers' running_mean and running_var are buffers in a PyTorch checkpoint, not parameters whose gradients training synchronises: "bn.num_batches_tracked"`) != c.orderNote {
			t.Errorf("import %s: summary:\n%s", c.in, errOut)
		}
		text, _ := os.ReadFile(out)
		if !strings.HasSuffix(string(text), "\n\n"+c.module) {
			t.Errorf("import %s: module:\n%s", c.in, text)
		}
		if prog, diags := dsl.Load(out); diags.HasErrors() || len(prog.Tensors) != 3 {
			t.Errorf("import %s: the module: %v", c.in, diags)
		}
	}
}

// An FP4 checkpoint (4 bits an element) imports, cast to a dtype of the
// language, and the summary counts its packed bytes.
func TestImportFP4(t *testing.T) {
	st := filepath.Join(t.TempDir(), "q.safetensors")
	header := `{"w": {"dtype": "F4", "shape": [4, 8], "data_offsets": [0, 16]}, "scale": {"dtype": "F8_E8M0", "shape": [4], "data_offsets": [16, 20]}}`
	data := append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header...)
	if err := os.WriteFile(st, append(data, make([]byte, 20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := syncgen(t, "import", st, "--cast", "F4=bf16", "--cast", "F8_E8M0=u8")
	if code != 0 || !strings.Contains(out, "tensor w bf16[4, 8]") || !strings.Contains(errOut, "20 B (F4 16 B, F8_E8M0 4 B)") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// A parameter list whose shape is too large for any tensor is an error
// about the list (exit 1), not a module that does not check.
func TestImportParamListTooLarge(t *testing.T) {
	list := writeFile(t, t.TempDir(), "p.json", `{"parameters": [{"name": "w", "dtype": "torch.float32", "shape": [4611686018427387904, 4]}]}`)
	code, _, errOut := syncgen(t, "import", list)
	if code != 1 || !strings.Contains(errOut, `p.json: parameter "w": shape [4611686018427387904 4] is too large`) || strings.Contains(errOut, "a bug") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// Names that hold braces, quotes or backslashes import as exactly those
// tensors: one each, named literally.
func TestImportLiteralNames(t *testing.T) {
	names := []string{"a{b}.w", "a.{0..3}.w", "x{1}.0.w", "x{1}.1.w", "x{1}.2.w", "h.0.w", "h.1.w", "h.2.w", `q"x\y`, "{i}.0", "{i}.1"}
	type param struct {
		Name  string  `json:"name"`
		DType string  `json:"dtype"`
		Shape []int64 `json:"shape"`
	}
	var list struct {
		Parameters []param `json:"parameters"`
	}
	for _, n := range names {
		list.Parameters = append(list.Parameters, param{n, "torch.float32", []int64{2}})
	}
	data, _ := json.Marshal(list)
	dir := t.TempDir()
	in := writeFile(t, dir, "p.json", string(data))
	out := filepath.Join(dir, "m.sync")
	if code, o, e := syncgen(t, "import", in, "-o", out); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, o, e)
	}
	prog, diags := dsl.Load(out)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, tn := range prog.Tensors {
		got = append(got, tn.Name)
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", names) {
		t.Errorf("tensors %q, want %q", got, names)
	}
}

// --exclude and --frozen patterns match as the language's bucket
// patterns do: `*` over '/' too, brace ranges, and characters a bare
// pattern lacks taken literally; an invalid one is a usage error in the
// checker's words (exit 2), and one that matches nothing an error (exit 1).
func TestImportPatterns(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, map[string][]int64{"h/0/w": {2}, "h/1/w": {2}, "h[0].w": {2}, "l.0.w": {2}, "l.1.w": {2}, "l.2.w": {2},
		"l.02.w": {2}, "a{b}.w": {2}, "a b": {2}, `q"x\y`: {2}, "emb.weight": {2}})
	for _, c := range []struct {
		pattern string
		frozen  []string // "" for an error
		code    int
		errWant string
	}{
		{"*", []string{"h/0/w", "h/1/w", "h[0].w", "l.0.w", "l.1.w", "l.2.w", "l.02.w", "a{b}.w", "a b", `q"x\y`, "emb.weight"}, 0, ""},
		{"h/0/w", []string{"h/0/w"}, 0, ""},
		{"h/*/w", []string{"h/0/w", "h/1/w"}, 0, ""},
		{"h[0].w", []string{"h[0].w"}, 0, ""},
		{"l.{0..1}.w", []string{"l.0.w", "l.1.w"}, 0, ""},
		{"l.{00..02}.w", []string{"l.02.w"}, 0, ""},
		{"l.?.w", []string{"l.0.w", "l.1.w", "l.2.w"}, 0, ""},
		{"a{b}.w", []string{"a{b}.w"}, 0, ""},
		{`"a{b}.w"`, []string{"a{b}.w"}, 0, ""},
		{"a b", []string{"a b"}, 0, ""},
		{`q"x\y`, []string{`q"x\y`}, 0, ""},
		{`"q\"x\\y"`, []string{`q"x\y`}, 0, ""},
		{`"emb.*"`, []string{"emb.weight"}, 0, ""},
		{"emb", nil, 1, `--frozen: pattern "emb" matches no tensor of the 11 tensors read`},
		{"l.{0..1}", nil, 1, "matches no tensor"},
		{"l.{2..1}.w", nil, 2, "--frozen 'l.{2..1}.w': range `{2..1}` is descending"},
		{"l.{a..b}.w", nil, 2, "--frozen 'l.{a..b}.w': invalid brace range `{a..b}`"},
		{`"a\q"`, nil, 2, "unknown escape"},
	} {
		code, out, errOut := syncgen(t, "import", st, "--frozen", c.pattern, "--order", "file")
		if code != c.code || !strings.Contains(errOut, c.errWant) {
			t.Errorf("--frozen %s: exit %d, want %d with %q: %s", c.pattern, code, c.code, c.errWant, errOut)
			continue
		}
		if code != 0 {
			continue
		}
		var frozen []string
		prog, diags := dsl.Check("m.sync", []byte(out))
		if diags.HasErrors() {
			t.Fatalf("--frozen %s: %v", c.pattern, diags)
		}
		for _, tn := range prog.Tensors {
			if tn.Frozen {
				frozen = append(frozen, tn.Name)
			}
		}
		sort.Strings(frozen)
		want := append([]string{}, c.frozen...)
		sort.Strings(want)
		if fmt.Sprintf("%q", frozen) != fmt.Sprintf("%q", want) {
			t.Errorf("--frozen %s: froze %q, want %q", c.pattern, frozen, want)
		}
	}
	// --exclude takes the same patterns.
	code, out, errOut := syncgen(t, "import", st, "--exclude", "h/*", "--exclude", "l.{0..2}.w")
	if code != 0 || strings.Contains(out, "h/") || strings.Contains(out, "l.1.w") || !strings.Contains(out, "l.02.w") || !strings.Contains(errOut, "--exclude left 5 out") {
		t.Errorf("--exclude: exit %d\n%s%s", code, out, errOut)
	}
}

// matchPattern finds names that no quoted name can hold (control
// characters, * and ?, bytes that are not UTF-8, and the private-use
// characters that stand in for them), and the hints' --exclude text,
// pasted into a shell, names the tensor.
func TestMatchPatternOddNames(t *testing.T) {
	names := []string{"n\nb", "t\tb", "a*b", "a?b", "bad\xffname", "bad\xfename", "pua\U000F0000", "a\\b", "it's", "a{b}", `"s"`, "nul\x00"}
	for i, name := range names {
		hit, err := dsl.MatchNames(importer.NamePattern(name), names)
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		for j, ok := range hit {
			// The * and ? of a*b and a?b are globs: their patterns match
			// a*b, a?b and a\b.
			glob := names[i] == "a*b" || names[i] == "a?b"
			want := i == j || glob && (names[j] == "a*b" || names[j] == "a?b" || names[j] == `a\b`)
			if ok != want {
				t.Errorf("pattern for %q: matches %q: %v", name, names[j], ok)
			}
		}
	}
	if hit, _ := dsl.MatchNames("a?b", names); !hit[2] || !hit[3] || hit[0] {
		t.Errorf("a?b: %v", hit)
	}
	if hit, _ := dsl.MatchNames("*", names); slices.Contains(hit, false) {
		t.Errorf("*: %v", hit)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to paste the hints into")
	}
	for _, name := range names[:len(names)-1] { // a shell argument cannot hold a NUL
		quoted := importer.ShellQuote(importer.NamePattern(name))
		got, err := exec.Command(bash, "-c", "printf %s "+quoted).Output()
		if err != nil || string(got) != importer.NamePattern(name) {
			t.Errorf("%q: bash read %s as %q (%v)", name, quoted, got, err)
		}
	}
}

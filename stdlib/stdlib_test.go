package stdlib_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/syncgen/syncgen/dsl"
	"github.com/syncgen/syncgen/ir"
	"github.com/syncgen/syncgen/stdlib"
)

// model is what a stdlib module must declare.
type model struct {
	module  string
	tensors int   // all tensors, frozen included
	params  int64 // all elements, frozen included
	frozen  int   // frozen tensors
	// frozenParams is the number of elements in frozen tensors.
	frozenParams int64
	// dtypes counts tensors per dtype.
	dtypes map[ir.DType]int
}

// models lists every module with its published (or, for the small test
// models, stated) figures.
var models = []model{
	// torchvision ResNet-50: 161 parameter tensors, 25,557,032 parameters.
	{module: "models/resnet50", tensors: 161, params: 25_557_032, dtypes: map[ir.DType]int{ir.F32: 161}},
	// HuggingFace BertModel bert-large-uncased with pooler: 335,141,888 parameters.
	{module: "models/bert_large", tensors: 391, params: 335_141_888, dtypes: map[ir.DType]int{ir.F32: 391}},
	// HuggingFace GPT2Model gpt2-xl: 1,557,611,200 parameters.
	{module: "models/gpt2_xl", tensors: 580, params: 1_557_611_200, dtypes: map[ir.DType]int{ir.F32: 580}},
	// Llama-2-7b LlamaForCausalLM: 6,738,415,616 parameters.
	{module: "models/llama2_7b", tensors: 291, params: 6_738_415_616, dtypes: map[ir.DType]int{ir.F32: 291}},
	// The small test models: the totals stated in their headers.
	{module: "models/tiny_mlp", tensors: 10, params: 75_402, frozen: 1, frozenParams: 16_384,
		dtypes: map[ir.DType]int{ir.F32: 10}},
	{module: "models/tiny_mixed", tensors: 11, params: 82_106, frozen: 1, frozenParams: 32,
		dtypes: map[ir.DType]int{ir.F32: 5, ir.F16: 3, ir.BF16: 2, ir.I32: 1}},
}

func load(t *testing.T, module string) *ir.Program {
	t.Helper()
	src := []byte(`import "` + module + `"` + "\n")
	prog, diags := dsl.Check("t.sync", src)
	if diags.HasErrors() {
		var b bytes.Buffer
		diags.Render(&b)
		t.Fatalf("import %q: errors:\n%s", module, b.String())
	}
	if prog == nil {
		t.Fatalf("import %q: no program and no errors", module)
	}
	return prog
}

func TestModelCounts(t *testing.T) {
	for _, m := range models {
		t.Run(strings.TrimPrefix(m.module, "models/"), func(t *testing.T) {
			prog := load(t, m.module)
			var params, frozenParams int64
			var frozen int
			dtypes := map[ir.DType]int{}
			seen := map[string]bool{}
			for _, tn := range prog.Tensors {
				var n int64 = 1
				for _, d := range tn.Shape {
					n *= d
				}
				if n != tn.Elems {
					t.Errorf("%s: Elems %d, product of shape %v is %d", tn.Name, tn.Elems, tn.Shape, n)
				}
				if seen[tn.Name] {
					t.Errorf("%s declared twice", tn.Name)
				}
				seen[tn.Name] = true
				params += tn.Elems
				dtypes[tn.DType]++
				if tn.Frozen {
					frozen++
					frozenParams += tn.Elems
				}
			}
			if len(prog.Tensors) != m.tensors {
				t.Errorf("%d tensors, want %d", len(prog.Tensors), m.tensors)
			}
			if params != m.params {
				t.Errorf("%d parameters, want %d (off by %d)", params, m.params, params-m.params)
			}
			if frozen != m.frozen || frozenParams != m.frozenParams {
				t.Errorf("%d frozen tensors with %d parameters, want %d with %d", frozen, frozenParams, m.frozen, m.frozenParams)
			}
			for dt, n := range m.dtypes {
				if dtypes[dt] != n {
					t.Errorf("%d %s tensors, want %d", dtypes[dt], dt, n)
				}
			}
			if len(dtypes) != len(m.dtypes) {
				t.Errorf("dtypes %v, want %v", dtypes, m.dtypes)
			}
		})
	}
}

// TestModelOrder spot-checks that the big models keep PyTorch's
// named_parameters() order: it is what backward's "reverse declaration order"
// and the bucket layout follow.
func TestModelOrder(t *testing.T) {
	cases := map[string][]string{
		"models/resnet50": {"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight",
			"layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.0.conv2.weight"},
		"models/bert_large": {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
			"embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
			"encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.query.bias"},
		"models/gpt2_xl":   {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight"},
		"models/llama2_7b": {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"},
	}
	last := map[string][]string{
		"models/resnet50":   {"layer4.2.bn3.weight", "layer4.2.bn3.bias", "fc.weight", "fc.bias"},
		"models/bert_large": {"encoder.layer.23.output.LayerNorm.bias", "pooler.dense.weight", "pooler.dense.bias"},
		"models/gpt2_xl":    {"h.47.mlp.c_proj.bias", "ln_f.weight", "ln_f.bias"},
		"models/llama2_7b":  {"model.layers.31.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"},
	}
	for module, want := range cases {
		prog := load(t, module)
		var names []string
		for _, tn := range prog.Tensors {
			names = append(names, tn.Name)
		}
		if got := names[:len(want)]; !slices.Equal(got, want) {
			t.Errorf("%s: first tensors %q, want %q", module, got, want)
		}
		w := last[module]
		if got := names[len(names)-len(w):]; !slices.Equal(got, w) {
			t.Errorf("%s: last tensors %q, want %q", module, got, w)
		}
	}
	// Spot-check shapes that are easy to get wrong.
	shapes := map[string]map[string][]int64{
		"models/resnet50": {"layer2.0.downsample.0.weight": {512, 256, 1, 1}, "layer3.1.conv2.weight": {256, 256, 3, 3}},
		"models/gpt2_xl":  {"h.10.attn.c_attn.weight": {1600, 4800}, "h.10.mlp.c_proj.weight": {6400, 1600}},
		"models/llama2_7b": {"model.layers.5.mlp.down_proj.weight": {4096, 11008},
			"lm_head.weight": {32000, 4096}},
	}
	for module, want := range shapes {
		prog := load(t, module)
		for _, tn := range prog.Tensors {
			if s, ok := want[tn.Name]; ok {
				if !slices.Equal(tn.Shape, s) {
					t.Errorf("%s: %s shape %v, want %v", module, tn.Name, tn.Shape, s)
				}
				delete(want, tn.Name)
			}
		}
		for name := range want {
			t.Errorf("%s: no tensor %s", module, name)
		}
	}
}

func TestModules(t *testing.T) {
	got := stdlib.Modules()
	var want []string
	for _, m := range models {
		want = append(want, m.module)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Modules() = %q, want %q (a new module needs its figures in this test)", got, want)
	}
	for _, name := range got {
		if _, err := fs.ReadFile(stdlib.FS, name+".sync"); err != nil {
			t.Errorf("FS has no %s.sync: %v", name, err)
		}
	}
}

// TestGeneratedUpToDate checks that the generated model files are what
// gen/genmodels.py writes (skipped when python3 is not installed).
func TestGeneratedUpToDate(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	cmd := exec.Command(py, filepath.Join("gen", "genmodels.py"), "--check")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("gen/genmodels.py --check: %v\n%s", err, out)
	}
}

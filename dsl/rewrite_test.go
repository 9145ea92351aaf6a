package dsl

import (
	"strings"
	"testing"
)

func TestSetBucketOptions(t *testing.T) {
	src := `// header comment
tensor a f32[4]
tensor b f32[4]
bucket grads { * } cap 25MiB first 1MiB order reverse // keep me
step {
    backward 1ms
    allreduce grads after ready
}
`
	out, err := SetBucketOptions("p.sync", []byte(src), "grads", map[string]string{"cap": "5MiB", "first": "", "wire": "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "bucket grads { * } cap 5MiB order reverse wire bf16 // keep me\n") || !strings.HasPrefix(string(out), "// header comment\n") {
		t.Errorf("got:\n%s", out)
	}
	if _, diags := Check("p.sync", out); diags.HasErrors() {
		t.Errorf("the rewritten plan does not check: %v", diags)
	}
	if _, err := SetBucketOptions("p.sync", []byte(src), "nope", map[string]string{"cap": "1MiB"}); err == nil || !strings.Contains(err.Error(), "declares no bucket \"nope\" (in this file: grads)") {
		t.Errorf("a missing bucket: %v", err)
	}
	if _, err := SetBucketOptions("p.sync", []byte(src), "grads", map[string]string{"colour": "red"}); err == nil {
		t.Error("an unknown option was set")
	}
}

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
	// The comment on the bucket's line described the old options.
	if !strings.Contains(string(out), "bucket grads { * } cap 5MiB order reverse wire bf16 // was `cap 25MiB first 1MiB order reverse`: keep me\n") || !strings.HasPrefix(string(out), "// header comment\n") {
		t.Errorf("got:\n%s", out)
	}
	// Rewritten again, it keeps the first options; unchanged, as it was.
	again, err := SetBucketOptions("p.sync", out, "grads", map[string]string{"cap": "8MiB"})
	if err != nil || !strings.Contains(string(again), "cap 8MiB order reverse wire bf16 // was `cap 25MiB first 1MiB order reverse`: keep me\n") {
		t.Errorf("rewritten twice (%v):\n%s", err, again)
	}
	same, err := SetBucketOptions("p.sync", []byte(src), "grads", map[string]string{"cap": "25MiB"})
	if err != nil || !strings.Contains(string(same), "order reverse // keep me\n") {
		t.Errorf("unchanged options (%v):\n%s", err, same)
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

func TestSplitCollective(t *testing.T) {
	src := `tensor t{0..4} f32[1024]
stream compute
stream comm priority high
bucket grads { * } cap 4KiB
step {
    backward 1ms on compute
    allreduce grads op avg on comm after ready // the sync
    wait comm
}
`
	// Pieces 0..4 over two streams: comm gets 0, 2, 4; comm_2 gets 1, 3.
	// The statement's comment stays on its first collective.
	// Pieces 2 and 4 are small and consecutive on comm: a group.
	out, err := SplitCollective("p.sync", []byte(src), "grads", 5, 2, []bool{false, true, true, true, true})
	if err != nil {
		t.Fatal(err)
	}
	want := `tensor t{0..4} f32[1024]
stream compute
stream comm priority high
stream comm_2 priority high
bucket grads { * } cap 4KiB
step {
    backward 1ms on compute
    allreduce grads[0] op avg on comm after ready // the sync
    group {
        allreduce grads[2], grads[4] op avg on comm after ready
    }
    group {
        allreduce grads[1], grads[3] op avg on comm_2 after ready
    }
    wait comm
    wait comm_2
}
`
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	if _, diags := Check("p.sync", out); diags.HasErrors() {
		t.Errorf("the split plan does not check: %v", diags)
	}
	if _, err := SplitCollective("p.sync", []byte(src), "other", 5, 2, make([]bool, 5)); err == nil {
		t.Error("split a bucket the step does not name")
	}
}

// TestSplitCollectiveKeepsComments: the comment that ends a rewritten
// line stays on the line of what it was written about: the collective's
// on its first collective (inside a group when the first piece is
// grouped), the stream's and the wait's on the original's, never moving
// to a group's closing brace or to a new stream's wait.
func TestSplitCollectiveKeepsComments(t *testing.T) {
	src := `tensor t{0..7} f32[1024]
stream compute
stream comm priority high /* the comms */
bucket grads { * } cap 4KiB // small pieces
step {
    backward 1ms on compute
    allreduce grads op avg on comm after ready // the sync
    wait comm // done
}
`
	for _, c := range []struct {
		streams int
		small   []bool
		want    string
	}{
		{2, []bool{true, true, true, true, true, true, true, true}, `tensor t{0..7} f32[1024]
stream compute
stream comm priority high /* the comms */
stream comm_2 priority high
bucket grads { * } cap 4KiB // small pieces
step {
    backward 1ms on compute
    group {
        allreduce grads[0], grads[2], grads[4], grads[6] op avg on comm after ready // the sync
    }
    group {
        allreduce grads[1], grads[3], grads[5], grads[7] op avg on comm_2 after ready
    }
    wait comm // done
    wait comm_2
}
`},
		{1, []bool{false, true, true, true, true, true, true, true}, `tensor t{0..7} f32[1024]
stream compute
stream comm priority high   /* the comms */
bucket grads { * } cap 4KiB // small pieces
step {
    backward 1ms on compute
    allreduce grads[0] op avg on comm after ready // the sync
    group {
        allreduce grads[1], grads[2], grads[3], grads[4], grads[5], grads[6], grads[7] op avg on comm after ready
    }
    wait comm // done
}
`},
	} {
		out, err := SplitCollective("p.sync", []byte(src), "grads", 8, c.streams, c.small)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != c.want {
			t.Errorf("%d streams: got:\n%s\nwant:\n%s", c.streams, out, c.want)
		}
		if _, diags := Check("p.sync", out); diags.HasErrors() {
			t.Errorf("%d streams: the split plan does not check: %v", c.streams, diags)
		}
	}
}

func TestSplitCollectiveOtherBucket(t *testing.T) {
	src := "tensor t f32[4]\nstream comm\nbucket grads { * }\nstep {\n    allreduce grads on comm\n    wait comm\n}\n"
	if _, err := SplitCollective("p.sync", []byte(src), "other", 5, 2, make([]bool, 5)); err == nil {
		t.Error("split a bucket the step does not name")
	}
}

// TestRelocateImports: a plan moved to another directory names the same
// files by paths relative to it; absolute paths and standard library
// modules stay.
func TestRelocateImports(t *testing.T) {
	for _, c := range []struct {
		from, to, in, want string
	}{
		{"/a", "/a/out", `import "hf/m.sync"`, `import "../hf/m.sync"`},
		{"/a", "/a/out/deep", `import "./lib/z" // z`, `import "../../lib/z" // z`},
		{"/a", "/a/hf", `import "hf/m.sync"`, `import "m.sync"`},
		{"/a/b", "/a", `import "./lib/z"`, `import "./b/lib/z"`},
		{"/a/b", "/a/c", `import "../m.sync"`, `import "../m.sync"`},
		{"/a", "/b", `import "/abs/m.sync"`, `import "/abs/m.sync"`},
		{"/a", "/b", `import "models/resnet50"`, `import "models/resnet50"`},
		{"/a", "/a", `import "hf/m.sync"`, `import "hf/m.sync"`},
	} {
		src := c.in + "\nimport \"x.sync\"\nstream s\n"
		got, err := RelocateImports("p.sync", []byte(src), c.from, c.to)
		if err != nil {
			t.Errorf("%s from %s to %s: %v", c.in, c.from, c.to, err)
			continue
		}
		first, rest, _ := strings.Cut(string(got), "\n")
		if first != c.want || !strings.HasSuffix(rest, "\nstream s\n") {
			t.Errorf("%s from %s to %s: %q; want %q", c.in, c.from, c.to, got, c.want)
		}
	}
}

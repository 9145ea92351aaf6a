package dsl

import (
	"fmt"
	"strings"
	"testing"
)

// program10k generates a plan with 10,000 tensors: 1,000 layers of ten
// tensors each, declared one per line (no brace ranges, so the parser sees
// every declaration), three bucket declarations with globs and a cap, and a
// step with overlapped collectives.
func program10k() []byte {
	var b strings.Builder
	b.WriteString("// generated: 10,000 tensors\nstream compute\nstream comm priority high\nstream side priority low\n\n")
	parts := []string{"attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.o.weight", "mlp.up.weight",
		"mlp.down.weight", "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"}
	for l := range 1000 {
		for i, p := range parts {
			shape := "[256, 256]"
			if i >= 6 {
				shape = "[256]"
			}
			fmt.Fprintf(&b, "tensor model.layers.%d.%s f32%s\n", l, p, shape)
		}
	}
	b.WriteString(`
bucket norms { *.ln?.* } cap 1MiB wire bf16
bucket attn { *.attn.* } cap 25MiB first 1MiB
bucket mlp { model.layers.*.mlp.* } cap 25MiB order declared

step {
    compute 20ms on compute
    backward 60ms on compute
    allreduce attn op avg on comm after ready
    allreduce mlp, model.layers.999.mlp.* op avg on comm after ready
    allreduce norms on side after ready
    wait side
    group {
        allreduce model.layers.0.attn.*, model.layers.0.mlp.* on comm after compute
    }
    wait comm
}

run steps 100 warmup 10 check every 10
`)
	return []byte(b.String())
}

// BenchmarkFrontEnd10k parses and checks a 10,000-tensor program.
func BenchmarkFrontEnd10k(b *testing.B) {
	src := program10k()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		prog, diags := Check("big.sync", src)
		if diags.HasErrors() || len(prog.Tensors) != 10_000 {
			var out strings.Builder
			diags.Render(&out)
			b.Fatalf("program %v, diagnostics:\n%s", prog != nil, out.String())
		}
	}
}

// BenchmarkFormat10k formats the same program.
func BenchmarkFormat10k(b *testing.B) {
	src := program10k()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, diags := Format("big.sync", src); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

// badProgram generates a plan of n tensor declarations that each have a
// syntax error (a missing comma in the shape).
func badProgram(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "tensor layer%d.weight f32[4 4]\n", i)
	}
	return []byte(b.String())
}

// BenchmarkSyntaxErrors20k checks a 20,000-line file where every line is
// a syntax error: the time and memory should go to the errors reported
// (at most maxSyntaxErrors), not grow with each error times the file.
func BenchmarkSyntaxErrors20k(b *testing.B) {
	src := badProgram(20_000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := Check("bad.sync", src); len(diags) != maxSyntaxErrors {
			b.Fatalf("%d diagnostics, want %d", len(diags), maxSyntaxErrors)
		}
	}
}

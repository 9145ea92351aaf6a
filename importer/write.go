package importer

import (
	"fmt"
	"strings"
)

// Module returns the text of a formatted .sync module declaring tensors
// in their order: repeated layers as `for` templates, and a template of
// one tensor as a brace range (which keeps the order), under a header
// comment that says where they came from.
func Module(tensors []Tensor, source string) string {
	es := make([]entry, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		es[i] = entry{name: t.Name, decl: t.decl(), t: t, fixed: strings.ContainsAny(t.Name, "{}")}
	}
	items := simplify(collapse(es, 0))
	var params int64
	for i := range tensors {
		n := int64(1)
		for _, d := range tensors[i].Shape {
			n *= d
		}
		params = satAdd(params, n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Tensors of %s, written by `syncgen import`: %s, %s,\n", source, count(len(tensors), "tensor"), paramCount(params))
	b.WriteString("// in declaration order (the backward makes their gradients ready in the reverse order).\n\n")
	write(&b, items, "")
	return b.String()
}

// simplify writes a template whose body is one tensor as that tensor with
// a brace range, bottom up: `for i in 0..47 { tensor h.{i}.w f32[8] }` is
// `tensor h.{0..47}.w f32[8]`, in the same order.
func simplify(items []item) []item {
	for k := range items {
		it := &items[k]
		if it.t != nil {
			continue
		}
		it.body = simplify(it.body)
		if len(it.body) == 1 && it.body[0].t != nil {
			one := it.body[0]
			one.name = strings.Replace(one.name, "{"+it.v+"}", fmt.Sprintf("{%d..%d}", it.lo, it.hi), 1)
			*it = one
		}
	}
	return items
}

// write writes items at indent.
func write(b *strings.Builder, items []item, indent string) {
	for _, it := range items {
		if it.t != nil {
			name := quote(it.name)
			if it.fixed {
				name = QuotedName(it.name)
			}
			fmt.Fprintf(b, "%stensor %s %s\n", indent, name, it.t.decl())
			continue
		}
		fmt.Fprintf(b, "%sfor %s in %d..%d {\n", indent, it.v, it.lo, it.hi)
		write(b, it.body, indent+"    ")
		fmt.Fprintf(b, "%s}\n", indent)
	}
}

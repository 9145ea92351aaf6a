package dsl

import (
	"fmt"
	"sort"
	"strings"
)

// SetBucketOptions returns src with the options of the bucket declaration
// named bucket changed: each key of set (cap, first, order, wire, divide)
// gets its value, and a key whose value is "" is removed; the other
// options stay. The result is formatted (Format) but not checked: the
// caller checks it, as any source. It is how `syncgen tune` writes its
// candidates and the winning plan: through the syntax tree, so that
// comments and every other declaration stay as written.
func SetBucketOptions(filename string, src []byte, bucket string, set map[string]string) ([]byte, error) {
	f := newSourceFile(filename, src)
	ast, diags := parseFile(f)
	if len(diags) > 0 {
		return nil, fmt.Errorf("%s has syntax errors: %v", filename, sortDiagnostics(diags, nil))
	}
	var decl *BucketDecl
	var names []string
	for _, d := range ast.Decls {
		if d.Bucket == nil {
			continue
		}
		names = append(names, d.Bucket.Name.source())
		if d.Bucket.Name.source() == bucket {
			if decl != nil {
				return nil, fmt.Errorf("%s: two bucket declarations named %q", filename, bucket)
			}
			decl = d.Bucket
		}
	}
	if decl == nil {
		return nil, fmt.Errorf("%s declares no bucket %q (in this file: %s)", filename, bucket, strings.Join(names, ", "))
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		switch k {
		case "cap", "first", "order", "wire", "divide":
		default:
			return nil, fmt.Errorf("unknown bucket option %q: the options are cap, first, order, wire and divide", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	nd := *decl
	nd.Options = nil
	for _, o := range decl.Options {
		if _, ok := set[o.Key]; !ok {
			nd.Options = append(nd.Options, o)
		}
	}
	for _, k := range keys {
		if v := set[k]; v != "" {
			nd.Options = append(nd.Options, &Option{Key: k, Value: &Word{Text: v}})
		}
	}
	start, end := decl.Pos.Offset, decl.EndPos.Offset
	if start < 0 || end > len(src) || start > end {
		return nil, fmt.Errorf("%s: bucket %q: no source range", filename, bucket)
	}
	out := append([]byte{}, src[:start]...)
	out = append(out, bucketText(&nd)...)
	out = append(out, src[end:]...)
	formatted, fd := Format(filename, out)
	if len(fd) > 0 {
		return nil, fmt.Errorf("rewriting bucket %q: %v", bucket, fd)
	}
	return formatted, nil
}

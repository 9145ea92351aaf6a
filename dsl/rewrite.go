package dsl

import (
	"fmt"
	"path"
	"path/filepath"
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
	out = append(out, wasComment(src[end:], optionsText(decl.Options), optionsText(nd.Options))...)
	formatted, fd := Format(filename, out)
	if len(fd) > 0 {
		return nil, fmt.Errorf("rewriting bucket %q: %v", bucket, fd)
	}
	return formatted, nil
}

// SplitCollective returns src with the step's one collective statement
// whose only target is the bucket declaration decl (all n of its pieces)
// rewritten: piece i goes to stream i mod streams, the statement's own
// stream first, then new streams STREAM_2, STREAM_3, ... declared after
// it with its priority; each stream's pieces are one statement with the
// original's options, but that a run of two or more of a stream's
// consecutive pieces marked small (small[i]) is issued as one group. The
// step's `wait STREAM` gets a wait for each new stream. The result is
// formatted, not checked. It is how `syncgen tune` tries more
// communication streams and grouped small buckets.
func SplitCollective(filename string, src []byte, decl string, n, streams int, small []bool) ([]byte, error) {
	if streams < 1 || n < 1 || len(small) != n {
		return nil, fmt.Errorf("split %s: %d pieces over %d streams with %d marks", decl, n, streams, len(small))
	}
	f := newSourceFile(filename, src)
	ast, diags := parseFile(f)
	if len(diags) > 0 {
		return nil, fmt.Errorf("%s has syntax errors: %v", filename, sortDiagnostics(diags, nil))
	}
	var step *BlockDecl
	streamDecls := map[string]*StreamDecl{}
	for _, d := range ast.Decls {
		switch {
		case d.Block != nil && d.Block.Kind == "step":
			step = d.Block
		case d.Stream != nil:
			streamDecls[d.Stream.Name.source()] = d.Stream
		}
	}
	if step == nil {
		return nil, fmt.Errorf("%s has no step block", filename)
	}
	var stmt *CollectiveStmt
	for _, s := range step.Body {
		c := s.Collective
		if c == nil || len(c.Targets) != 1 || c.Targets[0].Index != nil || c.Targets[0].Name.name().source() != decl {
			continue
		}
		if stmt != nil {
			return nil, fmt.Errorf("the step has more than one collective of bucket %s", decl)
		}
		stmt = c
	}
	if stmt == nil {
		return nil, fmt.Errorf("the step has no collective whose only target is bucket %s", decl)
	}
	stream := ""
	var opts []*Option
	for _, o := range stmt.Options {
		if o.Key == "on" && o.Value != nil {
			stream = o.Value.Text
			continue
		}
		opts = append(opts, o)
	}
	var edits []rewriteEdit
	names := []string{stream}
	if streams > 1 {
		sd := streamDecls[stream]
		if stream == "" || sd == nil {
			return nil, fmt.Errorf("the collective of bucket %s names no declared stream (on STREAM): more streams need one to copy", decl)
		}
		var wait *WaitStmt
		for _, s := range step.Body {
			if s.Wait != nil && s.Wait.Stream.Text == stream {
				wait = s.Wait
			}
		}
		if wait == nil {
			return nil, fmt.Errorf("the step has no `wait %s` to add the new streams' waits to", stream)
		}
		declText := "stream " + stream
		if sd.Priority != nil {
			declText += " priority " + sd.Priority.Text
		}
		waits := "wait " + stream
		decls := declText
		for j := 2; j <= streams; j++ {
			name := fmt.Sprintf("%s_%d", stream, j)
			if streamDecls[name] != nil {
				return nil, fmt.Errorf("a stream %s is declared already", name)
			}
			names = append(names, name)
			decls += "\n" + strings.Replace(declText, "stream "+stream, "stream "+name, 1)
			waits += "\nwait " + name
		}
		edits = append(edits, keepComment(src, sd.Pos.Offset, sd.EndPos.Offset, decls, 0),
			keepComment(src, wait.Pos.Offset, wait.EndPos.Offset, waits, 0))
	}
	var stmts []string
	issue := func(pieces []int, on string, group bool) {
		if len(pieces) == 0 {
			return
		}
		var targets []string
		for _, i := range pieces {
			targets = append(targets, fmt.Sprintf("%s[%d]", decl, i))
		}
		all := append([]*Option(nil), opts...)
		if on != "" {
			all = append(all, &Option{Key: "on", Value: &Word{Text: on}})
		}
		text := stmt.Kind + " " + strings.Join(targets, ", ") + optionsText(all)
		if group {
			text = "group {\n" + text + "\n}"
		}
		stmts = append(stmts, text)
	}
	for j := 0; j < streams; j++ {
		var mine []int
		for i := j; i < n; i += streams {
			mine = append(mine, i)
		}
		var plain []int
		for k := 0; k < len(mine); {
			e := k
			for e < len(mine) && small[mine[e]] {
				e++
			}
			if e-k >= 2 {
				issue(plain, names[j], false)
				plain = nil
				issue(mine[k:e], names[j], true)
				k = e
				continue
			}
			plain = append(plain, mine[k])
			k++
		}
		issue(plain, names[j], false)
	}
	// The statement's comment stays on its first collective, which
	// the first of stmts holds on its first line or, as a group, on its
	// second.
	first := 0
	if strings.HasPrefix(stmts[0], "group {") {
		first = 1
	}
	edits = append(edits, keepComment(src, stmt.Pos.Offset, stmt.EndPos.Offset, strings.Join(stmts, "\n"), first))
	sort.Slice(edits, func(a, b int) bool { return edits[a].start > edits[b].start })
	out := append([]byte{}, src...)
	for _, e := range edits {
		if e.start < 0 || e.end > len(out) || e.start > e.end {
			return nil, fmt.Errorf("%s: no source range to rewrite", filename)
		}
		out = append(append(append([]byte{}, out[:e.start]...), e.text...), out[e.end:]...)
	}
	formatted, fd := Format(filename, out)
	if len(fd) > 0 {
		return nil, fmt.Errorf("splitting the collective of %s: %v", decl, fd)
	}
	return formatted, nil
}

// rewriteEdit replaces src[start:end] with text.
type rewriteEdit struct {
	start, end int
	text       string
}

// keepComment returns the edit that replaces src[start:end], a statement
// or declaration, with text, and keeps the comment that ends the
// statement's line (`// ...`, or `/* ... */` closed on it) at the end of
// text's line line: the line that the statement's own content opens.
// Replaced alone, the comment would follow text's last line, another
// statement (`} // the sync` after a group).
func keepComment(src []byte, start, end int, text string, line int) rewriteEdit {
	e := rewriteEdit{start, end, text}
	if start < 0 || end > len(src) || start > end {
		return e // SplitCollective reports the range
	}
	i := end
	for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	eol := i + strings.IndexAny(string(src[i:]), "\r\n")
	if eol < i {
		eol = len(src)
	}
	comment := strings.TrimRight(string(src[i:eol]), " \t")
	block := strings.HasPrefix(comment, "/*") && strings.HasSuffix(comment, "*/") && len(comment) >= 4 && strings.Index(comment, "*/") == len(comment)-2
	if !strings.HasPrefix(comment, "//") && !block {
		return e
	}
	lines := strings.Split(text, "\n")
	line = min(max(line, 0), len(lines)-1)
	lines[line] += " " + comment
	return rewriteEdit{start, i + len(comment), strings.Join(lines, "\n")}
}

// wasComment returns rest, the source after a rewritten declaration, with
// the comment on the declaration's line (if any) saying which options it
// was written about: it described the old options, not the new ones
// ("// PyTorch DDP's defaults" above a tuned cap). A comment that already
// says so keeps the plan's first options; unchanged options keep it as is.
func wasComment(rest []byte, oldOpts, newOpts string) []byte {
	i := 0
	for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
		i++
	}
	if oldOpts == newOpts || !strings.HasPrefix(string(rest[i:]), "//") {
		return rest
	}
	eol := strings.IndexAny(string(rest[i:]), "\r\n")
	if eol < 0 {
		eol = len(rest) - i
	}
	text := strings.TrimSpace(string(rest[i+2 : i+eol]))
	if strings.HasPrefix(text, "was `") || strings.HasPrefix(text, "was without options") {
		return rest
	}
	was := "was without options"
	if o := strings.TrimSpace(oldOpts); o != "" {
		was = "was `" + o + "`"
	}
	if text != "" {
		was += ": " + text
	}
	out := append([]byte{}, rest[:i]...)
	out = append(out, "// "+was...)
	return append(out, rest[i+eol:]...)
}

// RelocateImports returns src, a plan whose file is in the directory
// fromDir, rewritten to be written into the directory toDir: each import
// of a file by a relative path (`import "hf/m.sync"`, `import
// "./lib/x"`) names the same file from toDir instead, by a relative path
// (an absolute one when there is none). Absolute paths and the standard
// library's modules stay as written, and so does everything else in src.
// It is how `syncgen tune --out DIR/tuned.sync` writes a winner whose
// imports still resolve.
func RelocateImports(filename string, src []byte, fromDir, toDir string) ([]byte, error) {
	f := newSourceFile(filename, src)
	ast, diags := parseFile(f)
	if len(diags) > 0 {
		return nil, fmt.Errorf("%s has syntax errors: %v", filename, sortDiagnostics(diags, nil))
	}
	absFrom, err := filepath.Abs(fromDir)
	if err != nil {
		return nil, err
	}
	absTo, err := filepath.Abs(toDir)
	if err != nil {
		return nil, err
	}
	var edits []rewriteEdit
	for _, d := range ast.Decls {
		if d.Import == nil || d.Import.Path == nil || d.Import.Path.Quoted == "" {
			continue
		}
		p, why := d.Import.Path.unquoted()
		if why != "" || path.IsAbs(p) || filepath.IsAbs(p) {
			continue
		}
		// The loader's rule (resolveImport): anything else names a
		// standard library module.
		dotted := strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../")
		if !dotted && !strings.HasSuffix(p, ".sync") {
			continue
		}
		target := filepath.Join(absFrom, filepath.FromSlash(p))
		np := target
		if rel, err := filepath.Rel(absTo, target); err == nil {
			np = filepath.ToSlash(rel)
			if dotted && !strings.HasPrefix(np, "../") {
				// Still a file's path, not a module's name.
				np = "./" + np
			}
		}
		if np == p {
			continue
		}
		start, end := d.Import.Path.Pos.Offset, d.Import.Path.EndPos.Offset
		if start < 0 || end > len(src) || start > end {
			return nil, fmt.Errorf("%s: import %q: no source range", filename, p)
		}
		q := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(np) + `"`
		edits = append(edits, rewriteEdit{start, end, q})
	}
	out := append([]byte{}, src...)
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		out = append(out[:e.start:e.start], append([]byte(e.text), out[e.end:]...)...)
	}
	return out, nil
}

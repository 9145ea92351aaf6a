package importer

import (
	"fmt"
	"strings"
)

// item is one declaration of the module: a tensor, or a `for` template
// whose body repeats for Lo..Hi.
type item struct {
	t    *Tensor // a tensor: its name may hold {var} placeholders
	name string
	// fixed: name is the tensor's own, holding braces that are part of it
	// (never placeholders), so it is written quoted, and at the top level.
	fixed  bool
	v      string // a template's variable
	lo, hi int64
	body   []item
}

// vars are the loop variables by depth.
var vars = []string{"i", "j", "k", "l", "m", "n"}

// entry is a tensor while templates are found: its name (with the
// placeholders of enclosing loops) and its declaration after the name.
type entry struct {
	name string
	decl string
	t    *Tensor
	// fixed: the tensor's own name holds braces; it has no number slots,
	// so it never enters a template, where braces are placeholders.
	fixed bool
}

// collapse writes runs of repeated blocks as templates: a run of blocks
// whose names differ only in one number, counting up by one from block to
// block, and whose declarations are the same, becomes `for v in lo..hi`
// with the number replaced by {v}; the bodies are collapsed in turn with
// the next variable. Of the numbers in a name, the one whose run covers
// most tensors wins (the outer layer index, usually); a run of blocks is
// left written out when the loop would save no lines.
func collapse(es []entry, depth int) []item {
	var out []item
	for s := 0; s < len(es); {
		best, bestSlot, bestLen, bestCount := 0, -1, 0, 0
		if depth < len(vars) {
			for k := 0; !es[s].fixed && k < numberSlots(es[s].name); k++ {
				l, c := blockRun(es, s, k)
				// A loop costs two lines (for and }): worth it when it saves
				// more, or as a brace range (one tensor a block).
				if c >= 2 && (l == 1 || (c-1)*l > 2) && l*c > best {
					best, bestSlot, bestLen, bestCount = l*c, k, l, c
				}
			}
		}
		if bestSlot < 0 {
			out = append(out, item{t: es[s].t, name: es[s].name, fixed: es[s].fixed})
			s++
			continue
		}
		v := vars[depth]
		lo, _ := slotValue(es[s].name, bestSlot)
		body := make([]entry, bestLen)
		for i := range body {
			e := es[s+i]
			body[i] = entry{name: withSlot(e.name, bestSlot, "{"+v+"}"), decl: e.decl, t: e.t}
		}
		out = append(out, item{v: v, lo: lo, hi: lo + int64(bestCount) - 1, body: collapse(body, depth+1)})
		s += best
	}
	return out
}

// blockRun measures the run of blocks at es[s:] over number slot k: the
// block's length (the entries with es[s]'s value and text before the
// slot) and how many blocks follow, each the same with the value one
// higher.
func blockRun(es []entry, s, k int) (length, count int) {
	v0, ok := slotValue(es[s].name, k)
	if !ok {
		return 0, 0
	}
	prefix := slotPrefix(es[s].name, k)
	l := 0
	for s+l < len(es) {
		if v, ok := slotValue(es[s+l].name, k); es[s+l].fixed || !ok || v != v0 || slotPrefix(es[s+l].name, k) != prefix {
			break
		}
		l++
	}
	count = 1
	for {
		base := s + count*l
		if base+l > len(es) {
			break
		}
		same := true
		for i := 0; i < l && same; i++ {
			a, b := es[s+i], es[base+i]
			v, ok := slotValue(b.name, k)
			same = ok && !b.fixed && v == v0+int64(count) && a.decl == b.decl && withSlot(a.name, k, "#") == withSlot(b.name, k, "#")
		}
		if !same {
			break
		}
		count++
	}
	return l, count
}

// numberSlots counts the runs of digits of a bare name that a template
// may replace: written without leading zeros (a template prints numbers
// without them).
func numberSlots(name string) int {
	n := 0
	forSlots(name, func(int, int) { n++ })
	return n
}

// forSlots calls fn with the start and end of every number slot.
func forSlots(name string, fn func(a, b int)) {
	if !bareName.MatchString(strings.NewReplacer("{", "", "}", "").Replace(name)) {
		return // quoted names are literal: nothing to replace
	}
	inBrace := false
	for i := 0; i < len(name); {
		switch c := name[i]; {
		case c == '{':
			inBrace = true
			i++
		case c == '}':
			inBrace = false
			i++
		case c >= '0' && c <= '9' && !inBrace && (i == 0 || !isWordByte(name[i-1]) || !isDigit(name[i-1])):
			j := i + digitPrefix(name[i:])
			// A number glued to letters on its right (2d) is part of a word.
			if (j-i == 1 || name[i] != '0') && (j == len(name) || !isLetter(name[j])) {
				fn(i, j)
			}
			i = j
		default:
			i++
		}
	}
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isLetter(c byte) bool   { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isWordByte(c byte) bool { return isDigit(c) || isLetter(c) }

// slotSpan returns slot k's bounds.
func slotSpan(name string, k int) (a, b int, ok bool) {
	n := 0
	forSlots(name, func(x, y int) {
		if n == k {
			a, b, ok = x, y, true
		}
		n++
	})
	return a, b, ok
}

func slotValue(name string, k int) (int64, bool) {
	a, b, ok := slotSpan(name, k)
	if !ok || b-a > 15 {
		return 0, false
	}
	var v int64
	fmt.Sscan(name[a:b], &v)
	return v, true
}

func slotPrefix(name string, k int) string {
	a, _, _ := slotSpan(name, k)
	return name[:a]
}

func withSlot(name string, k int, with string) string {
	a, b, ok := slotSpan(name, k)
	if !ok {
		return name
	}
	return name[:a] + with + name[b:]
}

package codegen

import (
	"strings"
	"unicode"
)

// namer hands out Go identifiers made from .sync names. Only ASCII letters
// and digits survive, so an identifier can never be a keyword-shaped
// surprise or contain anything a name from the source smuggled in; clashes
// get a numeric suffix.
type namer struct {
	used map[string]bool
}

func newNamer() *namer {
	// Names the generated file declares itself, and the runtime alias.
	used := map[string]bool{}
	for _, n := range []string{"tensors", "streams", "buckets", "plan", "step", "initBlock", "main", "rt", "time", "s"} {
		used[n] = true
	}
	return &namer{used: used}
}

// unique returns a fresh identifier of the form prefixName (lower camel
// case), e.g. unique("stream", "comm") == "streamComm".
func (n *namer) unique(prefix, name string) string {
	id := camel(prefix, name)
	if id == "" {
		id = "x"
	}
	cand := id
	for i := 2; n.used[cand]; i++ {
		cand = id + itoa(i)
	}
	n.used[cand] = true
	return cand
}

// camel joins the ASCII alphanumeric runs of the parts in lower camel case.
func camel(parts ...string) string {
	var b strings.Builder
	for _, part := range parts {
		upperNext := b.Len() > 0
		for _, r := range part {
			isAlnum := r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
			if !isAlnum {
				upperNext = b.Len() > 0
				continue
			}
			if b.Len() == 0 && unicode.IsDigit(r) {
				b.WriteByte('n')
			}
			if upperNext {
				r = unicode.ToUpper(r)
				upperNext = false
			} else if b.Len() == 0 {
				r = unicode.ToLower(r)
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

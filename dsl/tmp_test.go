package dsl

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTmpParse(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.sync")
	more, _ := filepath.Glob("../stdlib/models/*.sync")
	more2, _ := filepath.Glob("../testdata/golden/*.sync")
	for _, p := range append(append(files, more...), more2...) {
		src, _ := os.ReadFile(p)
		f, d := parseFile(newSourceFile(p, src))
		if len(d) > 0 {
			d.Render(os.Stdout)
			continue
		}
		t.Logf("%s: %d decls", p, len(f.Decls))
	}
	f, d := parseFile(newSourceFile("x", []byte("tensor a f32[3\ntensor b f32[4]\nstep {\n wait\n}\nrun steps 3 check every 4 check off warmup 3\n")))
	d.Render(os.Stdout)
	_ = f
}

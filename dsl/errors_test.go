package dsl

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// expectRE finds the expectations written in a test file's comments:
// // ERROR "regexp" or // WARNING "regexp", several per line allowed.
var expectRE = regexp.MustCompile(`\b(ERROR|WARNING) ("(?:[^"\\]|\\.)*")`)

// expectation is one diagnostic a test file expects on a line.
type expectation struct {
	severity Severity
	re       *regexp.Regexp
	raw      string
	met      bool
}

// readExpectations returns the expectations of a file by line number.
func readExpectations(t *testing.T, path string) map[int][]*expectation {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	out := map[int][]*expectation{}
	// Lines end as the loader counts them: LF, CRLF or a lone CR.
	sc := bufio.NewScanner(bytes.NewReader(unifyLineEnds(src)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		i := strings.Index(line, "//")
		if i < 0 {
			continue
		}
		for _, m := range expectRE.FindAllStringSubmatch(line[i:], -1) {
			// The text between the quotes is the regexp as is, except
			// that \" stands for a quote.
			pat := strings.ReplaceAll(m[2][1:len(m[2])-1], `\"`, `"`)
			re, err := regexp.Compile(pat)
			if err != nil {
				t.Fatalf("%s:%d: bad regexp %q: %v", path, n, pat, err)
			}
			sev := Error
			if m[1] == "WARNING" {
				sev = Warning
			}
			out[n] = append(out[n], &expectation{severity: sev, re: re, raw: pat})
		}
	}
	return out
}

// TestErrorFiles loads every testdata/errors/*.sync and checks that each
// diagnostic is expected by an // ERROR or // WARNING comment on its line
// (in whichever file it points into) and that every expectation is met.
func TestErrorFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "errors", "*.sync"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in testdata/errors (%v)", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			prog, diags := Load(path)
			expects := map[string]map[int][]*expectation{}
			get := func(file string) map[int][]*expectation {
				if e, ok := expects[file]; ok {
					return e
				}
				e := map[int][]*expectation{}
				if _, err := os.Stat(file); err == nil {
					e = readExpectations(t, file)
				}
				expects[file] = e
				return e
			}
			get(path)
			for _, d := range diags {
				found := false
				for _, e := range get(d.Pos.File)[d.Pos.Line] {
					if !e.met && e.severity == d.Severity && e.re.MatchString(d.Message) {
						e.met = true
						found = true
						break
					}
				}
				if !found {
					t.Errorf("unexpected diagnostic %s", d.Error())
				}
			}
			wantErrors := false
			for file, byLine := range expects {
				for line, es := range byLine {
					for _, e := range es {
						if e.severity == Error {
							wantErrors = true
						}
						if !e.met {
							t.Errorf("%s:%d: missing %s matching %q", file, line, e.severity, e.raw)
						}
					}
				}
			}
			if wantErrors != (prog == nil) {
				t.Errorf("program returned: %v, errors expected: %v", prog != nil, wantErrors)
			}
			if t.Failed() {
				var b bytes.Buffer
				diags.Render(&b)
				t.Logf("all diagnostics:\n%s", b.String())
			}
		})
	}
}

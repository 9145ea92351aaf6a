package build

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/syncgen/syncgen/codegen"
	"github.com/syncgen/syncgen/dsl"
)

// generated loads the plan at path and returns its generated files.
func generated(t *testing.T, path, version string) map[string][]byte {
	t.Helper()
	prog, diags := dsl.Load(path)
	if diags.HasErrors() {
		var b bytes.Buffer
		diags.Render(&b)
		t.Fatalf("%s does not check:\n%s", path, b.String())
	}
	files, err := codegen.Generate(prog, codegen.Options{Version: version})
	if err != nil {
		t.Fatalf("Generate(%s): %v", path, err)
	}
	return files
}

// TestCacheKeySameFromAnyDirectory builds the key of one plan reached
// through a relative path, an absolute path, a copy in another directory
// and its bare name from that directory: a plan built again from elsewhere
// must find its cached binary. A different syncgen version, which the
// generated header names, must not.
func TestCacheKeySameFromAnyDirectory(t *testing.T) {
	const (
		name      = "collectives.sync"
		goVersion = "go1.24.0"
		version   = "0.1.0-dev"
	)
	rel := filepath.Join("..", "testdata", "golden", name)
	want, err := cacheKey(generated(t, rel, version), goVersion)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, name), src, 0o644); err != nil {
		t.Fatal(err)
	}
	key := func(path string) string {
		t.Helper()
		k, err := cacheKey(generated(t, path, version), goVersion)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, path := range []string{abs, filepath.Join(other, name)} {
		if got := key(path); got != want {
			t.Errorf("cache key of %s = %s, of %s = %s; want the same", path, got, rel, want)
		}
	}
	t.Chdir(other)
	if got := key(name); got != want {
		t.Errorf("cache key of %s from %s = %s, of %s = %s; want the same", name, other, got, rel, want)
	}

	newer, err := cacheKey(generated(t, name, "0.2.0"), goVersion)
	if err != nil {
		t.Fatal(err)
	}
	if newer == want {
		t.Errorf("the cache key is %s for the code of two syncgen versions; want different keys", want)
	}
}

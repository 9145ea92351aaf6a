package runtime

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	p := &Plan{Name: "m", Source: "m.sync", Run: Run{Steps: 7, Warmup: 2, CheckEvery: 3}}
	for _, c := range []struct {
		args    []string
		wantErr string // "" for success
		steps   int
		check   int
	}{
		{nil, "", 7, 3},
		{[]string{"--steps", "5", "-check", "off"}, "", 5, 0},
		{[]string{"--check", "0"}, "", 7, 0},
		{[]string{"--steps", "x"}, `invalid value "x" for flag --steps: parse error (prog --help lists the flags)`, 0, 0},
		{[]string{"--bogus"}, "flag provided but not defined: --bogus (prog --help lists the flags)", 0, 0},
		{[]string{"--", "--steps", "3"}, `unexpected argument "--steps": the "--" before it ends the flags`, 0, 0},
		{[]string{"extra"}, `unexpected argument "extra": the program takes only flags`, 0, 0},
		{[]string{"--steps", "-1"}, "must not be negative", 0, 0},
		{[]string{"--backend", "tpu"}, `--backend "tpu": want auto, cpu or nccl`, 0, 0},
		{[]string{"--timeout", "0s"}, "--timeout must be positive", 0, 0},
		{[]string{"--json", "--quiet"}, `--json "--quiet": want a FILE after --json, not a flag`, 0, 0},
		{[]string{"--trace", "-x.json"}, `write ./-x.json`, 0, 0},
		{[]string{"--json", "./-x.json"}, "", 7, 3},
	} {
		var out bytes.Buffer
		o, err := parseOptions(p, "prog", c.args, &out)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%q: error %v, want one containing %q", c.args, err, c.wantErr)
		case c.wantErr == "" && (o.steps != c.steps || o.checkEvery != c.check):
			t.Errorf("%q: steps %d check %d, want %d and %d", c.args, o.steps, o.checkEvery, c.steps, c.check)
		}
		// Only --help prints the help; an error is only the error.
		if out.Len() > 0 {
			t.Errorf("%q printed %q", c.args, out.String())
		}
	}
	var out bytes.Buffer
	if _, err := parseOptions(p, "prog", []string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "\n  --timeout DUR") {
		t.Errorf("--help: %v, printed %q", err, out.String())
	}
	// The flags are listed with two dashes, as the help text and the
	// documentation write them.
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
			t.Errorf("--help lists a flag with one dash: %q", line)
		}
	}
}

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "out.json")
	kept := filepath.Join(dir, "kept.json")
	if err := os.WriteFile(kept, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkOutputs(&options{json: fresh, trace: kept}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("the check left %s behind: %v", fresh, err)
	}
	if b, _ := os.ReadFile(kept); string(b) != "old" {
		t.Errorf("the check changed an existing file: %q", b)
	}
	err := checkOutputs(&options{trace: filepath.Join(dir, "no", "such", "dir", "t.json")})
	if err == nil || !strings.Contains(err.Error(), "--trace") || !strings.Contains(err.Error(), "cannot write") {
		t.Errorf("an unwritable --trace: %v", err)
	}
}

package runtime

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncgen/syncgen/runtime/internal/engine"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/report"
)

func TestParseOptions(t *testing.T) {
	p := &plan.Plan{Name: "m", Source: "m.sync", Run: Run{Steps: 7, Warmup: 2, CheckEvery: 3}}
	for _, c := range []struct {
		args    []string
		wantErr string // "" for success
		steps   int
		check   int
	}{
		{nil, "", 7, 3},
		{[]string{"--steps", "5", "-check", "off"}, "", 5, 0},
		{[]string{"--check", "0"}, "", 7, 0},
		{[]string{"--steps", "x"}, `invalid value "x" for flag --steps: want a number of steps, 0 or more (prog --help lists the flags)`, 0, 0},
		{[]string{"--warmup", "1e3"}, `invalid value "1e3" for flag --warmup: want a number of steps`, 0, 0},
		{[]string{"--bogus"}, "flag provided but not defined: --bogus (prog --help lists the flags)", 0, 0},
		{[]string{"--", "--steps", "3"}, `unexpected argument "--steps": the "--" before it ends the flags`, 0, 0},
		{[]string{"extra"}, `unexpected argument "extra": the program takes only flags`, 0, 0},
		{[]string{"--steps", "-1"}, `invalid value "-1" for flag --steps: want a number of steps, 0 or more`, 0, 0},
		// The flag package's own messages said "parse error", and named
		// a bool flag with one dash.
		{[]string{"--timeout", "30"}, `invalid value "30" for flag --timeout: want a duration with a unit, like 90s`, 0, 0},
		{[]string{"--quiet=maybe"}, `invalid boolean value "maybe" for --quiet`, 0, 0},
		{[]string{"--steps"}, "flag needs an argument: --steps (prog --help lists the flags)", 0, 0},
		// One file for both would keep only the JSON, written last.
		{[]string{"--json", "out.json", "--trace", "./out.json"}, "--json and --trace both name out.json: give them different files", 0, 0},
		{[]string{"--json", "a.json", "--trace", "t.json", "--timeout", "90s"}, "", 7, 3},
		// A repeated output flag: the last one won, and the first file was
		// never written, without a word.
		{[]string{"--json", "a.json", "--json", "b.json"}, `--json given twice ("a.json", then "b.json"): give it once`, 0, 0},
		{[]string{"--trace=t.json", "--steps", "7", "-trace", "u.json"}, `--trace given twice ("t.json", then "u.json"): give it once`, 0, 0},
		{[]string{"--backend", "tpu"}, `--backend "tpu": want auto, cpu or nccl`, 0, 0},
		{[]string{"--checkpoint-keep", "0"}, "--checkpoint-keep: want a number of checkpoints, 1 or more", 0, 0},
		{[]string{"--checkpoint-keep", "-1"}, "--checkpoint-keep: want a number of checkpoints, 1 or more", 0, 0},
		{[]string{"--checkpoint-dir", ""}, "--checkpoint-dir is empty: give the directory", 0, 0},
		// An empty --resume (an unset variable) is not a run from step 0.
		{[]string{"--resume", ""}, "--resume is empty: give a checkpoint's directory, auto or since:TIME", 0, 0},
		{[]string{"--resume="}, "--resume is empty", 0, 0},
		// So are the other flags whose empty value would be taken as none.
		{[]string{"--json", ""}, "--json is empty: give FILE, or leave --json out (prog --help lists the flags)", 0, 0},
		{[]string{"--trace="}, "--trace is empty: give FILE, or leave --trace out", 0, 0},
		{[]string{"--profile", ""}, "--profile is empty: give FILE, or leave --profile out", 0, 0},
		{[]string{"--speed", ""}, "--speed is empty: give R=S[,R=S], or leave --speed out", 0, 0},
		{[]string{"--straggler", ""}, "--straggler is empty: give RANK:FACTOR[:FROMSTEP], or leave --straggler out", 0, 0},
		{[]string{"--jitter", ""}, "--jitter is empty: give SEED:MAXDUR, or leave --jitter out", 0, 0},
		{[]string{"--balance", ""}, "--balance is empty: give RULE, or leave --balance out", 0, 0},
		{[]string{"--resume", "since:garbage"}, `--resume since:garbage: "garbage" is not a time: want since:TIME or since:TIME,else:DIR|auto`, 0, 0},
		{[]string{"--timeout", "0s"}, "--timeout 0s must be positive: want a duration like 90s, 5m or 1h30m (prog --help lists the flags)", 0, 0},
		{[]string{"--timeout", "-1m"}, "--timeout -1m0s must be positive: want a duration like 90s", 0, 0},
		{[]string{"--json", "--quiet"}, `--json "--quiet": want a FILE after --json, not a flag`, 0, 0},
		{[]string{"--trace", "-x.json"}, `write ./-x.json`, 0, 0},
		{[]string{"--json", "./-x.json"}, "", 7, 3},
		// A lone "-" is standard output, for one of the two.
		{[]string{"--json", "-"}, "", 7, 3},
		{[]string{"--trace", "-", "--json", "out.json"}, "", 7, 3},
		{[]string{"--json", "-", "--trace", "-"}, "--json - and --trace - both name standard output", 0, 0},
		// Steps are numbered in 32 bits: this overflowed the count of
		// steps, ran none and passed.
		{[]string{"--warmup", "9223372036854775807", "--steps", "1"}, "make 9223372036854775808 steps, more than a run can number (at most 4294967295, warm-up included)", 0, 0},
		{[]string{"--warmup", "4294967295", "--steps", "1"}, "more than a run can number", 0, 0},
		{[]string{"--warmup", "4294967294", "--steps", "1"}, "", 1, 3},
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
	// --flight-dir "" asks for no flight records: an empty value it takes.
	if o, err := parseOptions(p, "prog", []string{"--flight-dir", ""}, io.Discard); err != nil || o.flightDir != "" {
		t.Errorf(`--flight-dir "": %v`, err)
	}
	var out bytes.Buffer
	if _, err := parseOptions(p, "prog", []string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "\n  --timeout DUR") ||
		!strings.Contains(out.String(), "\n  --steps N") || !strings.Contains(out.String(), "(default 5m0s)") {
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
	// Standard output needs no check.
	if err := checkOutputs(&options{json: "-", trace: fresh}); err != nil {
		t.Errorf("--json -: %v", err)
	}
	// Two names of one file, through a link: the trace, written first,
	// was lost without a word. The check leaves no file behind.
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	err = checkOutputs(&options{json: fresh, trace: link})
	if err == nil || !strings.Contains(err.Error(), "--json "+fresh+" and --trace "+link+" are the same file") {
		t.Errorf("--json and --trace through a link: %v", err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("the check left %s behind: %v", fresh, err)
	}
}

// A named pipe as --json or --trace: the check's blocking open held rank 0
// until --timeout when no process read the pipe, and closing the pipe
// after the check ended its reader's input before the data came.
func TestCheckOutputsNamedPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	check := func(o *options) error {
		done := make(chan error, 1)
		go func() { done <- checkOutputs(o) }()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("checkOutputs(--json %s) still blocked after 5s", o.json)
			return nil
		}
	}
	// Nobody reads it: a clear error, at once.
	err := check(&options{json: fifo})
	if err == nil || !strings.Contains(err.Error(), "--json "+fifo+": cannot write the file: it is a named pipe (FIFO) that no process reads") {
		t.Fatalf("a FIFO without a reader: %v", err)
	}
	// A reader: the pipe stays open for the data.
	rd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(rd)
	o := &options{trace: filepath.Join(dir, "t.json"), json: fifo}
	if err := check(o); err != nil {
		t.Fatalf("a FIFO with a reader: %v", err)
	}
	buf := make([]byte, 64)
	if n, err := syscall.Read(rd, buf); err != syscall.EAGAIN {
		t.Fatalf("after the check the reader got %d bytes, %v; want EAGAIN (a writer still holds the pipe, no data yet)", n, err)
	}
	if err := report.WriteOutput(o.json, o.jsonPipe, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	n, err := syscall.Read(rd, buf)
	if err != nil || string(buf[:n]) != `{"a":1}` {
		t.Fatalf("the reader got %q, %v", buf[:n], err)
	}
	if n, err := syscall.Read(rd, buf); n != 0 || err != nil {
		t.Errorf("after the data the reader got %d bytes, %v; want the end of its input", n, err)
	}
}

func TestCheckStepsFit(t *testing.T) {
	if err := checkStepsFit(1000000, 10, false, false); err != nil {
		t.Errorf("a million steps of 10 rows: %v", err)
	}
	err := checkStepsFit(2000000000, 1, false, false)
	if err == nil || !strings.Contains(err.Error(), "run at most 6710886 steps") {
		t.Errorf("2e9 steps of 1 row: %v", err)
	}
	// The limit it names must pass.
	if err := checkStepsFit(6710886, 1, false, false); err != nil {
		t.Errorf("the limit itself: %v", err)
	}
	// steps times the bytes a step overflowed int64 and passed; the
	// allocation then panicked.
	if err := checkStepsFit(1<<62, 10, true, true); err == nil {
		t.Errorf("2^62 steps of 10 rows passed")
	}
}
func TestSettleFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{
		{"", engine.DefaultSettle},
		{"0", 0},
		{"off", 0},
		{"OFF", 0},
		{"20ms", 20 * time.Millisecond},
		{" 1s ", time.Second},
		{"-1s", engine.DefaultSettle},  // negative: ignored
		{"2m", engine.DefaultSettle},   // over a minute: ignored
		{"soon", engine.DefaultSettle}, // not a duration: ignored
	} {
		t.Setenv("SYNCGEN_SETTLE", c.env)
		if got := settleFromEnv(); got != c.want {
			t.Errorf("SYNCGEN_SETTLE=%q: %v, want %v", c.env, got, c.want)
		}
	}
}

// TestParseOptionsOutputOverPlan: --json and --trace never name an
// existing .sync file, a plan that the output would replace; a .sync name
// not yet there, and other files, are written as asked.
func TestParseOptionsOutputOverPlan(t *testing.T) {
	dir := t.TempDir()
	planFile := filepath.Join(dir, "hello.sync")
	if err := os.WriteFile(planFile, []byte("stream s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.SYNC")
	if err := os.WriteFile(other, []byte("stream s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{Name: "m", Source: "m.sync", Run: Run{Steps: 7, Warmup: 2, CheckEvery: 3}}
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--json", planFile}, "--json " + planFile + " is a .sync file, a plan: the json would overwrite it; give --json another path, such as " + filepath.Join(dir, "hello.json")},
		{[]string{"--trace", planFile}, "--trace " + planFile + " is a .sync file, a plan: the trace would overwrite it"},
		{[]string{"--trace=" + other}, "--trace " + other + " is a .sync file"},
		{[]string{"--json", filepath.Join(dir, "new.sync")}, ""},
		{[]string{"--json", filepath.Join(dir, "hello.json")}, ""},
	} {
		_, err := parseOptions(p, "prog", c.args, io.Discard)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%q: %v; want %q", c.args, err, c.wantErr)
		}
		if data, _ := os.ReadFile(planFile); string(data) != "stream s\n" {
			t.Fatalf("%q changed the plan: %q", c.args, data)
		}
	}
}

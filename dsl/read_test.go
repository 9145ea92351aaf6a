package dsl

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// endless is a reader of text followed by NUL bytes without end, as
// /dev/zero after a prefix.
type endless struct{ text []byte }

func (e *endless) Read(p []byte) (int, error) {
	if len(e.text) > 0 {
		n := copy(p, e.text)
		e.text = e.text[n:]
		return n, nil
	}
	clear(p)
	return len(p), nil
}

// TestReadPlanStopsAtNUL checks that ReadPlan ends at the first NUL byte
// of a source that never ends, and that the checker then reports the file
// as not text at that byte.
func TestReadPlanStopsAtNUL(t *testing.T) {
	text := strings.Repeat("tensor a f32[1]\n", 10000) // several chunks
	src, err := ReadPlan(&endless{text: []byte(text)})
	if err != nil || len(src) != len(text)+1 || !bytes.HasPrefix(src, []byte(text)) || src[len(src)-1] != 0 {
		t.Fatalf("ReadPlan = %d bytes, %v; want the %d bytes of text and one NUL", len(src), err, len(text))
	}
	_, diags := Check("zero.sync", src)
	if len(diags) != 1 || !strings.HasPrefix(diags[0].Message, "not a text file") || diags[0].Pos.Line != 10001 {
		t.Errorf("diagnostics %v, want one: not a text file, on line 10001", diags)
	}
	// Without a NUL it reads everything.
	src, err = ReadPlan(io.MultiReader(strings.NewReader(text), strings.NewReader("run steps 1\n")))
	if err != nil || string(src) != text+"run steps 1\n" {
		t.Errorf("ReadPlan of text = %d bytes, %v; want all %d", len(src), err, len(text)+12)
	}
}

// TestImportNotRegular checks that an import of a device or a named pipe
// is an error, not a read that never ends or waits forever for a writer.
func TestImportNotRegular(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.sync")
	if err := os.WriteFile(plan, []byte("import \"/dev/zero\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan Diagnostics, 1)
	go func() {
		_, diags := Load(plan)
		done <- diags
	}()
	select {
	case diags := <-done:
		if len(diags) != 1 || diags[0].Message != "cannot import `/dev/zero`: not a regular file" || !strings.Contains(diags[0].Hint, "a named pipe or a device is never read") {
			t.Errorf("diagnostics %v, want: cannot import `/dev/zero`: not a regular file", diags)
		}
	case <-time.After(time.Minute):
		// A liveness guard, not a timing assertion: without the rule the
		// import reads /dev/zero until memory runs out.
		t.Fatal("the import of /dev/zero did not return")
	}
	// The plan itself may be a device: it is read up to its first NUL.
	_, diags := Load("/dev/zero")
	if len(diags) != 1 || !strings.HasPrefix(diags[0].Message, "not a text file") {
		t.Errorf("Load(/dev/zero): %v, want not a text file", diags)
	}
}

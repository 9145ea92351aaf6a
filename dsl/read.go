package dsl

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
)

// ReadPlan reads a plan's source from r, up to its end or up to and
// including its first NUL byte. A source that holds a NUL is not text,
// which the checker reports at that byte whatever follows, so nothing
// after it is needed; stopping there keeps a device such as /dev/zero or
// /dev/urandom, given as a plan, from being read forever.
func ReadPlan(r io.Reader) ([]byte, error) {
	var src []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		if i := bytes.IndexByte(chunk[:n], 0); i >= 0 {
			return append(src, chunk[:i+1]...), nil
		}
		src = append(src, chunk[:n]...)
		if errors.Is(err, io.EOF) {
			return src, nil
		}
		if err != nil {
			return src, err
		}
	}
}

// ReadPlanFile is ReadPlan of the file at path. A named pipe is read as
// any reader is (a plan given as `<(cmd)` is one).
func ReadPlanFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := ReadPlan(f)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: unwrapPathError(err)}
	}
	return src, nil
}

// errNotRegular is the error of an import that names something other than
// a regular file or a directory.
var errNotRegular = errors.New("not a regular file")

// readImport reads the file an import names. Only a regular file is
// read: a named pipe would wait for a writer forever and a device would
// be read again by every check. A directory is read to get its error,
// which importHint explains.
func readImport(name string) ([]byte, error) {
	if fi, err := os.Stat(name); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	return ReadPlanFile(name)
}

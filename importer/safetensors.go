package importer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxHeaderBytes bounds a safetensors header: the format's own limit
// (the reference implementation refuses larger ones), and what keeps a
// corrupt length from making the reader allocate gigabytes.
const maxHeaderBytes = 100 << 20

// ReadSafetensors reads the tensors' names, dtypes and shapes from the
// header of the safetensors file at path; no tensor data is read. The
// tensors come in the order of their data in the file.
func ReadSafetensors(path string) ([]Param, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a safetensors file", path)
	}
	var head [8]byte
	n, err := io.ReadFull(f, head[:])
	if err != nil {
		return nil, fmt.Errorf("%s: truncated: %d bytes, but a safetensors file starts with an 8-byte header length", path, n)
	}
	hlen := binary.LittleEndian.Uint64(head[:])
	if err := checkHeaderLength(hlen, st.Size()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, fmt.Errorf("%s: reading the %d-byte header at byte 8: %w", path, hlen, err)
	}
	params, err := ParseHeader(header, st.Size()-8-int64(hlen))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range params {
		params[i].Source = path
	}
	return params, nil
}

// checkHeaderLength refuses a header length that the file of size bytes
// cannot hold, or that passes maxHeaderBytes.
func checkHeaderLength(hlen uint64, size int64) error {
	switch {
	case hlen > maxHeaderBytes:
		return fmt.Errorf("header length %d (bytes 0-7) is above the format's limit of %d bytes: not a safetensors file, or a corrupt one", hlen, maxHeaderBytes)
	case int64(hlen) > size-8:
		return fmt.Errorf("header length %d (bytes 0-7) reaches beyond the file's %d bytes: the file is truncated, or not a safetensors file", hlen, size)
	case hlen < 2:
		return fmt.Errorf("header length %d (bytes 0-7) is too short for a JSON object", hlen)
	}
	return nil
}

// headerEntry is one tensor of a header.
type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// ParseHeader parses a safetensors JSON header whose file has dataBytes
// bytes of tensor data after it, and checks that the tensors tile the
// data exactly: every tensor's byte range matches its shape and dtype,
// and the ranges neither overlap nor leave gaps (the empty range of a
// tensor without elements may stand anywhere in the data). Positions in errors are
// byte offsets in the file (the header starts at byte 8; the data at
// 8+len(header)).
func ParseHeader(header []byte, dataBytes int64) ([]Param, error) {
	if at := invalidUTF8(header); at >= 0 {
		// encoding/json would replace the bytes and read another name.
		return nil, fmt.Errorf("header byte %d is not UTF-8: a safetensors header is UTF-8 JSON, tensor names included; the file is corrupt, or its writer is broken", 8+at)
	}
	// The object's end first: bytes after it that are not padding mean
	// that the header length is wrong (it took in the data), which would
	// otherwise show as tensors reaching beyond the data.
	pre := json.NewDecoder(bytes.NewReader(header))
	var whole json.RawMessage
	if err := pre.Decode(&whole); err == nil {
		if err := checkPadding(header, pre.InputOffset()); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, headerJSONError(err, 8, len(header))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("the header (bytes 8-%d) is not a JSON object", 8+len(header))
	}
	var params []Param
	var offsets [][2]int64
	seen := map[string]bool{}
	for dec.More() {
		at := 8 + dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, headerJSONError(err, at, len(header))
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, headerJSONError(err, at, len(header)))
		}
		if name == "__metadata__" {
			// Free-form text, as the reference implementation reads it:
			// an object of strings, or null.
			var meta map[string]string
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, fmt.Errorf("header byte %d: __metadata__ must be an object of strings, such as {\"format\": \"pt\"}, not %s", at, snippet(raw))
			}
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("header byte %d: tensor %q appears twice", at, name)
		}
		seen[name] = true
		var e headerEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			rawAt := 8 + dec.InputOffset() - int64(len(raw))
			return nil, fmt.Errorf("tensor %q: want {\"dtype\", \"shape\", \"data_offsets\"}: %s", name, jsonProblem(err, rawAt))
		}
		p, off, err := checkEntry(name, e, dataBytes)
		if err != nil {
			return nil, fmt.Errorf("header byte %d: %w", at, err)
		}
		params = append(params, p)
		offsets = append(offsets, off)
	}
	if _, err := dec.Token(); err != nil {
		return nil, headerJSONError(err, 8, len(header))
	}
	if err := checkPadding(header, dec.InputOffset()); err != nil {
		return nil, err
	}
	if err := checkTiling(params, offsets, dataBytes, 8+int64(len(header))); err != nil {
		return nil, err
	}
	return params, nil
}

// checkPadding checks that after the header's JSON object, which ends at
// offset end of header, only whitespace follows: the padding (spaces)
// that writers add to align the data.
func checkPadding(header []byte, end int64) error {
	for i := end; i < int64(len(header)); i++ {
		if c := header[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return fmt.Errorf("header byte %d: %s after the header's JSON object, where only padding (spaces) may follow: the header length (bytes 0-7, %d) is too long, or the file is corrupt",
				8+i, snippet(header[i:]), len(header))
		}
	}
	return nil
}

// headerJSONError says why the header (of hlen bytes, from byte 8 of the
// file) is not a JSON object, at byte at of the file: its JSON ends before
// the header does, which a header length (bytes 0-7) shorter than the
// header makes, or it is not JSON there.
func headerJSONError(err error, at int64, hlen int) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("the header's JSON is cut off at byte %d, where the header length (bytes 0-7) says the header ends: the length is wrong, or the file is corrupt", 8+hlen)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("header byte %d: not JSON: %s", 8+syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	}
	return fmt.Errorf("header byte %d: not JSON: %v", at, err)
}

// shapeBytes is the size in bytes of a tensor of dtype (a known one) and
// shape, or why no file can hold it: a negative dimension, an element
// count beyond maxElems, or elements whose bits are not a whole number of
// bytes.
func shapeBytes(dtype string, shape []int64) (int64, error) {
	elems := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d > 0 && elems > maxElems/d {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		elems *= d
	}
	size, whole := tensorBytes(dtype, elems)
	if !whole {
		return 0, fmt.Errorf("%s%v is %d elements of %d bits, which is not a whole number of bytes", dtype, shape, elems, dtypeBits[dtype])
	}
	return size, nil
}

// snippet quotes the start of b for a message.
func snippet(b []byte) string {
	const max = 20
	if len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return strconv.Quote(string(b[:cut])) + "..."
	}
	return strconv.Quote(string(b))
}

// checkEntry checks one tensor's dtype, shape and byte range.
func checkEntry(name string, e headerEntry, dataBytes int64) (Param, [2]int64, error) {
	_, ok := dtypeBits[e.DType]
	switch {
	case name == "":
		return Param{}, [2]int64{}, fmt.Errorf("a tensor with an empty name")
	case !ok:
		return Param{}, [2]int64{}, fmt.Errorf("tensor %q: unknown dtype %q", name, e.DType)
	case len(e.DataOffsets) != 2:
		return Param{}, [2]int64{}, fmt.Errorf("tensor %q: data_offsets must be [begin, end], got %v", name, e.DataOffsets)
	}
	size, err := shapeBytes(e.DType, e.Shape)
	if err != nil {
		return Param{}, [2]int64{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	b, end := e.DataOffsets[0], e.DataOffsets[1]
	switch {
	case b < 0 || end < b:
		return Param{}, [2]int64{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] do not make a range", name, b, end)
	case end > dataBytes:
		return Param{}, [2]int64{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] reach beyond the file's %d bytes of data: the file is truncated", name, b, end, dataBytes)
	case end-b != size:
		return Param{}, [2]int64{}, fmt.Errorf("tensor %q: %s%v is %d bytes, but its data_offsets [%d, %d] hold %d", name, e.DType, e.Shape, size, b, end, end-b)
	}
	return Param{Name: name, DType: e.DType, Shape: append([]int64{}, e.Shape...)}, [2]int64{b, end}, nil
}

// checkTiling sorts params by their data's byte range, begin then end,
// as the reference implementation does, and checks that the ranges that
// hold bytes cover the data exactly once. An empty range (a tensor without
// elements) holds no byte, so it may stand anywhere inside the data. dataAt
// is the data's first byte in the file, for the messages.
func checkTiling(params []Param, offsets [][2]int64, dataBytes, dataAt int64) error {
	idx := make([]int, len(params))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := offsets[idx[a]], offsets[idx[b]]
		return x[0] < y[0] || x[0] == y[0] && x[1] < y[1]
	})
	var pos int64
	prev := ""
	for _, i := range idx {
		b, e := offsets[i][0], offsets[i][1]
		switch {
		case b == e:
			continue // no bytes: nothing to overlap, no gap to leave
		case b < pos:
			return fmt.Errorf("tensor %q (bytes %d-%d of the file) overlaps tensor %q", params[i].Name, dataAt+b, dataAt+e, prev)
		case b > pos:
			return fmt.Errorf("a gap of %d bytes at byte %d of the file, before tensor %q: the tensors must cover the data without holes", b-pos, dataAt+pos, params[i].Name)
		}
		pos, prev = e, params[i].Name
	}
	if pos != dataBytes {
		return fmt.Errorf("%d bytes at byte %d of the file belong to no tensor: the tensors must cover the data without holes", dataBytes-pos, dataAt+pos)
	}
	sorted := make([]Param, len(params))
	for k, i := range idx {
		sorted[k] = params[i]
	}
	copy(params, sorted)
	return nil
}

package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// invalidUTF8 returns the offset of the first byte of data that is not
// part of UTF-8 text, or -1 when all of it is. JSON readers check it
// first: encoding/json would replace such bytes and read another name.
func invalidUTF8(data []byte) int {
	for at := 0; at < len(data); {
		r, n := utf8.DecodeRune(data[at:])
		if r == utf8.RuneError && n == 1 {
			return at
		}
		at += n
	}
	return -1
}

// jsonProblem says in a user's terms what a JSON decoding error of a
// file's content means, with the byte offset where the decoder says one,
// shifted by base (the content's first byte in the file): a syntax error,
// a value of the wrong kind in a named field, an unknown field, or the
// content ending early. It never names Go's types.
func jsonProblem(err error, base int64) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "the JSON ends early, inside a value (the file is truncated)"
	case errors.As(err, &syn):
		return fmt.Sprintf("byte %d: not JSON: %s", base+syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		where := "the top level"
		if typ.Field != "" {
			where = fmt.Sprintf("%q", typ.Field)
		}
		return fmt.Sprintf("byte %d: %s: want %s, not %s", base+typ.Offset, where, jsonKind(typ.Type), typ.Value)
	}
	// Unknown fields (DisallowUnknownFields) and the rest: encoding/json's
	// own words, which name the field.
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names what a Go type holds, as a JSON value.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number (at most 9223372036854775807)"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another value"
}

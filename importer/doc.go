// Package importer turns a model's parameter list into .sync tensor
// declarations: `syncgen import`'s reader and writer.
//
// It takes a safetensors file (the 8-byte header length and the JSON
// header; no tensor data is read), a Hugging Face directory or its
// model.safetensors.index.json with the shards it names, or the JSON list
// of named_parameters() that scripts/dump-params.py writes; and gives a
// Model (the tensors in declaration order, with dtypes, shapes and frozen
// marks) and, from it, the text of a formatted .sync module in which
// repeated layers are written as `for` templates. Every reader of a user's
// file returns errors with the file and the byte offset or the tensor's
// name, and never panics (FuzzHeader, FuzzIndex). It imports only the
// standard library: the CLI checks the module it writes with package dsl.
package importer

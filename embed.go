// Package syncgen holds what the compiler carries inside its own binary:
// the runtime's source, which `syncgen build` writes next to every
// generated program so that building one needs no network.
package syncgen

import "embed"

// RuntimeFS is the source tree of package runtime and its subpackages,
// rooted at "runtime". Tests and testdata are in it too; the writer skips
// them.
//
//go:embed runtime
var RuntimeFS embed.FS

// ModulePath is the module path of this repository, which the generated
// program's go.mod replaces with the embedded copy.
const ModulePath = "github.com/syncgen/syncgen"

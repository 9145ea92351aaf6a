//go:build !syncgen_testhooks

package cpu

import "time"

// testPieceTime is 0 without the build tag syncgen_testhooks: a user's
// program has none of the runtime's test hooks (hooks.go).
func testPieceTime() time.Duration { return 0 }

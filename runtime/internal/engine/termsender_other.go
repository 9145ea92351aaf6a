//go:build !linux || !cgo

package engine

// Without Linux's siginfo handler (termsender_linux.go) the sender of a
// SIGTERM is not known.

func watchTermSender() {}

func termSender() (int, bool) { return 0, false }

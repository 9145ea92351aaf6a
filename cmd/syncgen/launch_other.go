//go:build !linux

package main

import "os/exec"

// endWithParent does nothing where the kernel cannot signal a child when
// its parent dies (see launch_linux.go).
func endWithParent(cmd *exec.Cmd) {}

//go:build unix && !linux

package testproc

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent-death signal.
// The helpers still stop their servers when the tests end normally.
func setParentDeathSignal(*syscall.SysProcAttr) {}

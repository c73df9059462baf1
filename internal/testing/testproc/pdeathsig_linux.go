package testproc

import "syscall"

// setParentDeathSignal has the kernel kill the process when the thread
// that started it (the test binary) dies, even when the binary crashes.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

//go:build unix

package testproc

import "syscall"

// SysProcAttr returns the exec.Cmd attributes for a.
func SysProcAttr(a Attr) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: a.Group}
	if a.Cred != nil {
		attr.Credential = &syscall.Credential{Uid: a.Cred.Uid, Gid: a.Cred.Gid}
	}
	if a.DieWithParent {
		setParentDeathSignal(attr)
	}
	return attr
}

// Stop freezes process pid (SIGSTOP).
func Stop(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

// Continue resumes process pid frozen by Stop (SIGCONT).
func Continue(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }

// Kill kills process pid at once (SIGKILL).
func Kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// StopGroup freezes every process of the process group led by pid
// (SIGSTOP).
func StopGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGSTOP) }

// ContinueGroup resumes the process group led by pid (SIGCONT).
func ContinueGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGCONT) }

// Terminate asks process pid to shut down cleanly (SIGTERM).
func Terminate(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }

// KillGroup kills every process of the process group led by pid (SIGKILL).
func KillGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

//go:build !unix

package testproc

import (
	"errors"
	"os"
	"syscall"
)

// SysProcAttr returns nil: the attributes in a need a Unix system.
func SysProcAttr(Attr) *syscall.SysProcAttr { return nil }

// Stop reports errors.ErrUnsupported: freezing a process needs a Unix
// system.
func Stop(int) error { return errors.ErrUnsupported }

// Continue reports errors.ErrUnsupported: see Stop.
func Continue(int) error { return errors.ErrUnsupported }

// Kill kills process pid at once.
func Kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// StopGroup reports errors.ErrUnsupported: see Stop.
func StopGroup(int) error { return errors.ErrUnsupported }

// ContinueGroup reports errors.ErrUnsupported: see Stop.
func ContinueGroup(int) error { return errors.ErrUnsupported }

// Terminate kills process pid: there is no portable clean-shutdown signal.
func Terminate(pid int) error { return Kill(pid) }

// KillGroup reports errors.ErrUnsupported: process groups need a Unix
// system.
func KillGroup(int) error { return errors.ErrUnsupported }

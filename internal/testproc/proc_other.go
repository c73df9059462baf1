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

// KillGroup reports errors.ErrUnsupported: process groups need a Unix
// system.
func KillGroup(int) error { return errors.ErrUnsupported }

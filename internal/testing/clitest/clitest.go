// Package clitest runs a command line's Main in-process for tests, as the
// binary would run with a store URL, environment variables, a memory store
// and a clock of the test's choosing.
package clitest

import (
	"bytes"
	"context"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store"
)

// Main is a command line's entry point (cli.Main, lab.Main).
type Main func(ctx context.Context, args []string, env clikit.Env) int

// Run is what one run of a command sees.
type Run struct {
	// URL is SLUICE_STORE.
	URL string
	// Vars are the other environment variables.
	Vars map[string]string
	// Memory, when not nil, is the store memory:// names.
	Memory store.Store
	// ClockMs, when not nil and not 0 as the run starts, reads the clock's
	// time in Unix milliseconds at every reading (the test may move it
	// while the command runs); otherwise the command uses the wall clock.
	ClockMs func() int64
}

// Exec runs main with args as r describes and returns its stdout, stderr
// and exit code.
func (r Run) Exec(ctx context.Context, main Main, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	env := clikit.Env{Stdout: &out, Stderr: &errb, LookupEnv: func(k string) (string, bool) {
		if k == "SLUICE_STORE" {
			return r.URL, true
		}
		v, ok := r.Vars[k]
		return v, ok
	}}
	if r.Memory != nil {
		env.Memory = r.Memory
	}
	if r.ClockMs != nil && r.ClockMs() != 0 {
		env.Clock = sluice.ClockFunc(func() time.Time { return time.UnixMilli(r.ClockMs()).UTC() })
	}
	code = main(ctx, args, env)
	return out.String(), errb.String(), code
}

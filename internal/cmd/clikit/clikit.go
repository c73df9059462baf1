// Package clikit holds what the sluice command lines share: the process
// Env, the exit codes and the errors that map to them, and output
// formatting. It links no store driver: the --store flag and opening its
// store are package clistore's. The admin CLI (internal/cmd/cli), the lab
// (internal/cmd/lab) and the demo (internal/cmd/demo) build on it, each
// with its own import graph.
package clikit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
)

// Exit codes, documented in docs/cli.md.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
	// ExitUnavailable: the store could not be reached (store.ErrUnavailable).
	ExitUnavailable = 3
	// ExitRetry: acquire answered RETRY_IN.
	ExitRetry = 4
)

// Env is everything a command reads from or writes to its process.
type Env struct {
	// Stdout receives results; Stderr receives progress and errors.
	Stdout, Stderr io.Writer
	// LookupEnv reads environment variables (os.LookupEnv); nil means none.
	LookupEnv func(string) (string, bool)
	// BuildInfo reads the binary's build information
	// (debug.ReadBuildInfo); nil means debug.ReadBuildInfo.
	BuildInfo func() (*debug.BuildInfo, bool)
	// Memory, when set, is the store memory:// opens, shared by every
	// command run with this Env (tests). Nil means a fresh in-process store
	// per command, which lives only as long as the process.
	Memory store.Store
	// Clock tells the time for decisions and displays; nil means the wall
	// clock. Stores with their own clock (Redis TIME) ignore it.
	Clock sluice.Clock
	// Executable returns the path of the running binary, which bench re-runs
	// as its child processes; nil means os.Executable.
	Executable func() (string, error)
}

// OSEnv returns the Env of the running process.
func OSEnv() Env {
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, BuildInfo: debug.ReadBuildInfo,
		Executable: os.Executable}
}

// Lookup returns the environment variable name, or "" when it is not set.
func (e Env) Lookup(name string) string {
	if e.LookupEnv == nil {
		return ""
	}
	v, _ := e.LookupEnv(name)
	return v
}

// UsageError is a command line the commands cannot run: exit code 2.
type UsageError struct{ Err error }

// Error implements error.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError formatted as fmt.Errorf does.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// RetryError is acquire's RETRY_IN answer: exit code 4.
type RetryError struct{ Msg string }

// Error implements error.
func (e *RetryError) Error() string { return e.Msg }

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var (
		u *UsageError
		r *RetryError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		// Usage and configuration errors are the caller's to fix, never
		// an outage.
		return ExitUsage
	case errors.As(err, &r):
		return ExitRetry
	case errors.Is(err, store.ErrUnavailable):
		return ExitUnavailable
	}
	return ExitError
}

// Configure sets what every command tree shares on root: output to env,
// stderr safe for concurrent writes, flag errors as usage errors, no
// default completion command.
func Configure(root *cobra.Command, env Env) {
	root.SilenceErrors, root.SilenceUsage = true, true
	root.SetOut(env.Stdout)
	root.SetErr(Serialized(env.Stderr))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &UsageError{Err: fmt.Errorf("%w; run '%s --help'", err, cmd.CommandPath())}
	})
	root.CompletionOptions.DisableDefaultCmd = true
}

// Run runs the command tree root with args and returns the exit code,
// printing any error to env.Stderr in one line that starts with the
// command's name. explain, when set, rewrites an error first (adding what
// to do, or making it a UsageError).
func Run(ctx context.Context, root *cobra.Command, args []string, env Env, explain func(error) error) int {
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var u *UsageError
	if err != nil && !errors.As(err, &u) && cobraUsage(err) {
		err = &UsageError{Err: err}
	}
	if err != nil && explain != nil {
		err = explain(err)
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		if prefix := root.Name() + ": "; !strings.HasPrefix(msg, prefix) {
			msg = prefix + msg
		}
		fmt.Fprintln(env.Stderr, msg)
	}
	return ExitCode(err)
}

// OutputFlag validates an --output value.
func OutputFlag(v string) error {
	switch v {
	case "table", "json":
		return nil
	}
	return Usagef("--output %q: must be table or json", v)
}

// NoArgs rejects positional arguments as a usage error.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// cobraUsage recognises the usage errors cobra returns itself.
func cobraUsage(err error) bool {
	m := err.Error()
	for _, p := range []string{"required flag(s)", "unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument"} {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

// Serialized returns w made safe for concurrent writes: progress lines and
// log records reach stderr from several goroutines (bench's workers log
// while its progress ticker prints). An *os.File already is.
func Serialized(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok || w == nil {
		return w
	}
	return &syncWriter{w: w}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

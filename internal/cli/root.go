// Package cli implements the sluice command line. Each command lives in its
// own file and is added to the tree by NewRoot; commands write only to the
// Env they are given, so tests run them in-process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// Exit codes (issue 6 will add 3, store unavailable, and 4, RETRY_IN).
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
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
}

// OSEnv returns the Env of the running process.
func OSEnv() Env {
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, BuildInfo: debug.ReadBuildInfo}
}

func (e Env) lookup(name string) string {
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

func usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var u *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		return ExitUsage
	}
	return ExitError
}

// globals holds the persistent flags shared by every command.
type globals struct {
	env   Env
	store string
}

// NewRoot returns the sluice command tree, writing to env.
func NewRoot(env Env) *cobra.Command {
	g := &globals{env: env}
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Share vendor API limits across a fleet",
		Long: `Sluice lets many processes share vendor API limits (requests or tokens per
minute, concurrent requests) through a shared store. A caller asks for a slot
and gets GRANTED, with a lease, or RETRY_IN, with exactly how long to wait.

Exit codes: 0 ok, 1 error, 2 usage.`,
		Example: `  sluice demo                      # 20 simulated workers share three limits for 10 s
  sluice demo --workers 50 --duration 30s
  sluice version --output json`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q; run 'sluice --help'", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &UsageError{Err: fmt.Errorf("%w; run '%s --help'", err, cmd.CommandPath())}
	})
	root.CompletionOptions.DisableDefaultCmd = true
	def := env.lookup("SLUICE_STORE")
	if def == "" {
		def = "memory://"
	}
	root.PersistentFlags().StringVar(&g.store, "store", def,
		"store URL (env SLUICE_STORE); this build supports memory://")
	root.AddCommand(newVersionCmd(g), newDemoCmd(g))
	return root
}

// Main runs the command line args against env and returns the exit code,
// printing any error to env.Stderr in one line.
func Main(ctx context.Context, args []string, env Env) int {
	root := NewRoot(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(env.Stderr, "sluice: "+strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return ExitCode(err)
}

// openStore builds the store named by a --store URL.
func openStore(raw string) (store.Store, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, usagef("--store %q is not a store URL (try memory://)", raw)
	}
	switch u.Scheme {
	case "memory":
		return memstore.New(), nil
	}
	return nil, usagef("--store: scheme %q is not supported by this build (supported: memory://)", u.Scheme)
}

// outputFlag validates an --output value.
func outputFlag(v string) error {
	switch v {
	case "table", "json":
		return nil
	}
	return usagef("--output %q: must be table or json", v)
}

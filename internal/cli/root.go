// Package cli implements the sluice command line. Each command lives in its
// own file and is added to the tree by NewRoot; commands write only to the
// Env they are given, so tests run them in-process.
package cli

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
	"github.com/ontopix/sluice/store/dynamostore"
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
	// Executable returns the path of the sluice binary, which bench re-runs
	// as its child processes; nil means os.Executable.
	Executable func() (string, error)
}

// OSEnv returns the Env of the running process.
func OSEnv() Env {
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, BuildInfo: debug.ReadBuildInfo,
		Executable: os.Executable}
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
	case errors.As(err, &u), errors.Is(err, dynamostore.ErrCredentials):
		// Usage and configuration errors (no AWS credentials) are the
		// caller's to fix, never an outage.
		return ExitUsage
	case errors.As(err, &r):
		return ExitRetry
	case errors.Is(err, store.ErrUnavailable):
		return ExitUnavailable
	}
	return ExitError
}

// globals holds the persistent flags shared by every command.
type globals struct {
	env          Env
	store        string
	passwordFile string
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

The store is chosen by --store or SLUICE_STORE: memory:// (in-process, gone
when the command exits), redis://host:port/db, rediss://…, redis+cluster://h1:p1,h2:p2,
postgres://user@host/db, dynamodb://TABLE?region=R. See docs/cli.md.
A password never goes in the URL: use SLUICE_REDIS_PASSWORD, PGPASSWORD or
--password-file.

Exit codes: 0 ok, 1 error, 2 usage, 3 store unavailable, 4 RETRY_IN (acquire).`,
		Example: `  sluice demo                      # 20 simulated workers share three limits for 10 s
  export SLUICE_STORE=redis://127.0.0.1:6379/0
  sluice limits apply -f limits.yaml
  sluice status --watch
  sluice acquire openai#rpm openai#tpm:1500 --hold 30s
  sluice bench --processes 4 --workers 8 --duration 10s --limits limits.yaml`,
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
	// --version prints the first line of 'sluice version'.
	root.Version = readVersion(env.BuildInfo).short()
	root.SetVersionTemplate("sluice {{.Version}}\n")
	root.SetOut(env.Stdout)
	root.SetErr(serialized(env.Stderr))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &UsageError{Err: fmt.Errorf("%w; run '%s --help'", err, cmd.CommandPath())}
	})
	root.CompletionOptions.DisableDefaultCmd = true
	def := env.lookup("SLUICE_STORE")
	if def == "" {
		def = "memory://"
	}
	root.PersistentFlags().StringVar(&g.store, "store", def,
		"store URL (env SLUICE_STORE): memory://, redis://, rediss://, redis+cluster://, postgres://, dynamodb://")
	root.PersistentFlags().StringVar(&g.passwordFile, "password-file", "",
		"read the store password from this file (else SLUICE_REDIS_PASSWORD or PGPASSWORD)")
	root.AddCommand(newVersionCmd(g), newDemoCmd(g), newStatusCmd(g), newBucketCmd(g), newLeasesCmd(g),
		newAcquireCmd(g), newReleaseCmd(g), newPenalizeCmd(g), newCooldownCmd(g), newSyncCmd(g), newReconcileCmd(g), newLimitsCmd(g),
		newBenchCmd(g), newBenchChildCmd(g), newBenchVendorChildCmd(g), newPostgresCmd(g), newDynamoDBCmd(g), newVendorsimCmd(g), newCompletionCmd(root))
	return root
}

// Main runs the command line args against env and returns the exit code,
// printing any error to env.Stderr in one line.
func Main(ctx context.Context, args []string, env Env) int {
	root := NewRoot(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var u *UsageError
	if err != nil && !errors.As(err, &u) && cobraUsage(err) {
		err = &UsageError{Err: err}
	}
	err = explain(err)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		if !strings.HasPrefix(msg, "sluice: ") {
			msg = "sluice: " + msg
		}
		fmt.Fprintln(env.Stderr, msg)
	}
	return ExitCode(err)
}

// outputFlag validates an --output value.
func outputFlag(v string) error {
	switch v {
	case "table", "json":
		return nil
	}
	return usagef("--output %q: must be table or json", v)
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

// serialized returns w made safe for concurrent writes: progress lines and
// log records reach stderr from several goroutines (bench's workers log
// while its progress ticker prints). An *os.File already is.
func serialized(w io.Writer) io.Writer {
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

// Package clistore holds the --store and --password-file flags the sluice
// command lines share, and opening their store with every driver linked
// (store/allstores).
package clistore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/allstores"
	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/storeurl"
)

// Globals holds the persistent flags every command shares, and the Env the
// commands run in.
type Globals struct {
	Env clikit.Env
	// Store is the --store URL; PasswordFile is --password-file.
	Store        string
	PasswordFile string
}

// AddStoreFlags adds --store (default SLUICE_STORE, else memory://) and
// --password-file to cmd's persistent flags, set into g.
func (g *Globals) AddStoreFlags(cmd *cobra.Command) {
	def := g.Env.Lookup("SLUICE_STORE")
	if def == "" {
		def = "memory://"
	}
	cmd.PersistentFlags().StringVar(&g.Store, "store", def,
		"store URL (env SLUICE_STORE): memory://, redis://, rediss://, redis+cluster://, postgres://, dynamodb://")
	cmd.PersistentFlags().StringVar(&g.PasswordFile, "password-file", "",
		"read the store password from this file (else SLUICE_REDIS_PASSWORD or PGPASSWORD)")
}

// Open opens the store named by --store. A malformed URL is a usage error.
func (g *Globals) Open(ctx context.Context) (*storeurl.Opened, error) {
	return g.OpenWith(ctx, storeurl.Options{})
}

// OpenWith is Open with o's Table and NoMigrate.
func (g *Globals) OpenWith(ctx context.Context, o storeurl.Options) (*storeurl.Opened, error) {
	o.LookupEnv, o.PasswordFile, o.Memory = g.Env.LookupEnv, g.PasswordFile, g.Env.Memory
	if o.LookupEnv == nil { // an Env without one has no variables set
		o.LookupEnv = func(string) (string, bool) { return "", false }
	}
	op, err := allstores.OpenDetailed(ctx, g.Store, o)
	if errors.Is(err, storeurl.ErrBadURL) {
		return nil, &clikit.UsageError{Err: err}
	}
	if err == nil {
		if log, lerr := g.Logger(g.Env.Stderr); lerr == nil {
			log.LogAttrs(ctx, slog.LevelDebug, "cli.store.opened", slog.String("store", op.Redacted), slog.String("kind", op.Kind))
		}
	}
	return op, err
}

// Now returns the Env's time.
func (g *Globals) Now() time.Time {
	if g.Env.Clock != nil {
		return g.Env.Clock.Now()
	}
	return time.Now()
}

// Clock returns the Env's clock.
func (g *Globals) Clock() sluice.Clock {
	if g.Env.Clock != nil {
		return g.Env.Clock
	}
	return sluice.SystemClock{}
}

// Config reads the SLUICE_* variables of the Env.
func (g *Globals) Config() (sluice.Config, error) {
	lookup := g.Env.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	return sluice.ConfigFromLookup(lookup)
}

// Logger writes JSON lines to stderr at SLUICE_LOG_LEVEL (default info).
func (g *Globals) Logger(w io.Writer) (*slog.Logger, error) {
	cfg, err := g.Config()
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel})), nil
}

// WithClient opens the store, runs f with a Client over it and closes the
// store. The Client reads the SLUICE_* variables, tells time by the Env's
// clock, logs at SLUICE_LOG_LEVEL to stderr and fails closed: a command
// never grants without the store. A stateful command (one that changes the
// store) warns, after it ran (unless the command line was wrong), when the
// store lives only in this process: a change is lost, and a bucket put by
// an earlier command is not there.
func (g *Globals) WithClient(cmd *cobra.Command, stateful bool, f func(c *sluice.Client) error) error {
	ctx := cmd.Context()
	log, err := g.Logger(cmd.ErrOrStderr())
	if err != nil {
		return &clikit.UsageError{Err: err}
	}
	op, err := g.Open(ctx)
	if err != nil {
		return err
	}
	defer op.Close()
	c, err := g.Client(op.Store, log)
	if err != nil {
		return err
	}
	err = f(c)
	var u *clikit.UsageError
	if stateful && !errors.As(err, &u) {
		g.WarnEphemeral(cmd, op)
	}
	return err
}

// Client returns a Client over st configured as WithClient describes, its
// Config then changed by edits.
func (g *Globals) Client(st store.Store, log *slog.Logger, edits ...func(*sluice.Config)) (*sluice.Client, error) {
	opts, err := g.ClientOptions(log, edits...)
	if err != nil {
		return nil, err
	}
	return sluice.New(st, opts...)
}

// ClientOptions returns the options Client builds its Client with.
func (g *Globals) ClientOptions(log *slog.Logger, edits ...func(*sluice.Config)) ([]sluice.Option, error) {
	cfg, err := g.Config()
	if err != nil {
		return nil, &clikit.UsageError{Err: err}
	}
	if d, ok := g.urlTimeout(); ok {
		cfg.OpTimeout = d
	}
	cfg.FailurePolicy = sluice.FailClosed
	for _, e := range edits {
		e(&cfg)
	}
	return []sluice.Option{sluice.WithConfig(cfg), sluice.WithClock(g.Clock()), sluice.WithLogger(log)}, nil
}

// urlTimeout returns the store URL's timeout= when SLUICE_OP_TIMEOUT is
// not set. The store applies its timeout only to calls without a deadline
// (see package store), and every call of the Client has one, from
// OpTimeout: the URL's timeout becomes that bound, so that it bounds each
// store call of a command as it says.
func (g *Globals) urlTimeout() (time.Duration, bool) {
	if g.Env.LookupEnv != nil {
		if _, set := g.Env.LookupEnv("SLUICE_OP_TIMEOUT"); set {
			return 0, false
		}
	}
	u, err := url.Parse(g.Store)
	if err != nil || !u.Query().Has("timeout") {
		return 0, false
	}
	d, err := time.ParseDuration(u.Query().Get("timeout"))
	return d, err == nil && d >= 0
}

// WarnEphemeral warns on stderr that a change to a store living only in
// this process (memory:// without a store shared by the Env) is lost when
// the command exits. It warns rather than refuses: trying a command out on
// memory:// is how the CLI is learnt.
func (g *Globals) WarnEphemeral(cmd *cobra.Command, op *storeurl.Opened) {
	if op.Kind != "memory" || g.Env.Memory != nil {
		return
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "sluice: warning: %s ran on memory://, which lives in this process only: "+
		"nothing persists after it exits, and nothing an earlier command did is here (set --store or SLUICE_STORE to a shared store)\n", cmd.CommandPath())
}

// Explain adds what to do to the errors of a store whose schema or table
// does not exist. A missing DynamoDB table is an error (exit 1), not an
// outage: the store answered. AWS credentials that cannot be obtained are
// a usage error (exit 2): the caller's to fix, never an outage.
func Explain(err error) error {
	if errors.Is(err, dynamostore.ErrCredentials) {
		var u *clikit.UsageError
		if !errors.As(err, &u) {
			return &clikit.UsageError{Err: err}
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "3F000", "42P01", "42883": // invalid_schema_name, undefined_table, undefined_function
			return fmt.Errorf("%w (the PostgreSQL schema is missing or incomplete: run 'sluice postgres migrate', or drop migrate=false from the URL)", err)
		}
	}
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("the DynamoDB table does not exist: create it with 'sluice dynamodb create-table' (%s)", aws.ToString(nf.Message))
	}
	return err
}

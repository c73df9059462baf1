// Package storeurl opens the store.Store named by a store URL, the form the
// sluice CLI takes in --store and services read from SLUICE_STORE, so that
// a service and the CLI open the same store from the same string. Each
// store package opens its own schemes (memstore.URLOpener,
// redisstore.URLOpener, pgstore.URLOpener, dynamostore.URLOpener); a
// program names the ones it accepts, and links only those stores' drivers:
//
//	openers := storeurl.Openers{redisstore.URLOpener()}
//	st, err := openers.Open(ctx, os.Getenv("SLUICE_STORE"))
//	if err != nil {
//		return err // errors.Is(err, storeurl.ErrBadURL): fix the URL
//	}
//	defer st.Close()
//	client, err := sluice.New(st)
//
// Package allstores opens every scheme, as the sluice CLI does.
//
// The schemes:
//
//	memory://                                   in-process; lives only as long as the process
//	redis://[user@]host:port[/db][?opts]        a standalone Redis (rediss:// for TLS)
//	redis+cluster://h1:p1,h2:p2[?opts]          a Redis Cluster (rediss+cluster:// for TLS)
//	postgres://[user@]host:port/db[?opts]       PostgreSQL (also postgresql://)
//	dynamodb://TABLE?region=R&endpoint=URL      DynamoDB (SLUICE_TABLE_NAME, SLUICE_AWS_REGION, SLUICE_ENDPOINT_URL)
//
// Options in the query string: for Redis, prefix (key prefix), hash_tag,
// timeout (default 2s; 0 for none) and caller_clock, the rest going to
// go-redis (dial_timeout, read_timeout, pool_size, client_name, …); for
// PostgreSQL, schema (default sluice), timeout (default 2s), caller_clock
// and migrate (default true: create or upgrade the schema when opening), the
// rest going to pgx and libpq (sslmode, …); for DynamoDB, region, endpoint,
// timeout and read_then_transact (acquire in two round trips: read the buckets,
// then write them in one transaction, the original algorithm, instead of
// the one-round-trip conditional write).
//
// A password is never part of the URL: a URL carrying one, in the userinfo
// or in a password or sslpassword query parameter, is rejected, so that it
// cannot leak through shell history, process listings or logs. It comes
// from a file (WithPasswordFile, the CLI's --password-file) or the
// environment (SLUICE_REDIS_PASSWORD for Redis, PGPASSWORD for PostgreSQL).
//
// Every error about the URL itself matches ErrBadURL: a configuration
// error, never store.ErrUnavailable. Connecting is lazy: an unreachable
// server shows up as store.ErrUnavailable on the first operation (except
// that opening PostgreSQL with migrate=true runs the migration at once).
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// ErrBadURL is matched by every error about the URL itself (a usage error,
// as opposed to a store that cannot be reached).
var ErrBadURL = errors.New("bad store URL")

// Options are the inputs of Open besides the URL. An Options value is
// itself an Option that sets them all; the With functions set one each.
type Options struct {
	// LookupEnv reads environment variables (passwords, SLUICE_TABLE_NAME,
	// SLUICE_AWS_REGION, SLUICE_ENDPOINT_URL); nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// PasswordFile, when set, holds the store password (trailing newline
	// ignored). It takes precedence over the environment.
	PasswordFile string
	// Memory, when set, is what memory:// opens (and Close leaves open), so
	// that several commands in one test share a store. Nil means a new
	// memstore per Open.
	Memory store.Store
	// Table, when set, is the DynamoDB table, taking precedence over the
	// URL's and SLUICE_TABLE_NAME (sluice dynamodb create-table TABLE).
	Table string
	// NoMigrate, when set, opens a PostgreSQL store without creating or
	// upgrading its schema, whatever the URL's migrate option says (sluice
	// postgres migrate|version, which report the version before migrating).
	NoMigrate bool
}

// Option configures Open.
type Option interface {
	apply(*Options)
}

type optionFunc func(*Options)

func (f optionFunc) apply(o *Options) { f(o) }

// apply makes an Options value an Option: it replaces every setting.
func (o Options) apply(dst *Options) { *dst = o }

// WithLookupEnv reads the environment through lookup instead of
// os.LookupEnv.
func WithLookupEnv(lookup func(string) (string, bool)) Option {
	return optionFunc(func(o *Options) { o.LookupEnv = lookup })
}

// WithPasswordFile reads the store password from the file at path
// (trailing newline ignored) instead of the environment.
func WithPasswordFile(path string) Option {
	return optionFunc(func(o *Options) { o.PasswordFile = path })
}

// WithMemory makes memory:// open st (which the returned store's Close
// leaves open) instead of a new memory store.
func WithMemory(st store.Store) Option {
	return optionFunc(func(o *Options) { o.Memory = st })
}

// WithTable names the DynamoDB table, taking precedence over the URL's and
// SLUICE_TABLE_NAME.
func WithTable(name string) Option {
	return optionFunc(func(o *Options) { o.Table = name })
}

// WithoutMigrate opens a PostgreSQL store without creating or upgrading
// its schema, whatever the URL's migrate option says: for a database user
// that may not run DDL, the schema being migrated by a deployment step
// (sluice postgres migrate).
func WithoutMigrate() Option {
	return optionFunc(func(o *Options) { o.NoMigrate = true })
}

// Lookup returns the environment variable name, or "" when it is not set.
func (o Options) Lookup(name string) string {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(name)
	return v
}

// Password returns the store password: the content of PasswordFile when
// set, else the environment variable envName.
func (o Options) Password(envName string) (string, error) {
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("%w: --password-file: %w", ErrBadURL, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return o.Lookup(envName), nil
}

// Opened is an open store, what the URL resolved to, and what it takes to
// close it (Openers.OpenDetailed). A store package's OpenURL fills it in.
type Opened struct {
	// Store is the store; behind contract.Checked when it comes from
	// Openers.OpenDetailed.
	Store store.Store
	// Kind is the scheme family: "memory", "redis", "redis-cluster",
	// "postgres", "dynamodb" or "sluice".
	Kind string
	// Redacted is the URL, safe to print.
	Redacted string
	// SharedClock reports that every process using the store decides on one
	// clock (the server's), so grant times from several processes are
	// directly comparable.
	SharedClock bool
	// Admin is the store's handle for administration, when it has one: the
	// *pgstore.Store for "postgres" (Migrate, Version), the
	// *dynamodb.Client for "dynamodb" (CreateTable).
	Admin any
	// Table is the DynamoDB table, when Kind is "dynamodb".
	Table string
	// CloseClient, when set, closes the client the store was built on,
	// after the store.
	CloseClient func() error
	// Borrowed reports that the store is not the Opened's to close (the
	// memory store given by WithMemory).
	Borrowed bool
	// closeStore is the store's own Close, kept before Store is wrapped.
	closeStore func() error
}

// Close closes the store, unless Borrowed, and the client it was built on.
func (o *Opened) Close() error {
	var errs []error
	if !o.Borrowed {
		closeStore := o.closeStore
		if closeStore == nil {
			closeStore = o.Store.Close
		}
		errs = append(errs, closeStore())
	}
	if o.CloseClient != nil {
		errs = append(errs, o.CloseClient())
	}
	return errors.Join(errs...)
}

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadURL}, args...)...)
}

// An Opener opens the store URLs of some schemes. Each store package
// returns its own from URLOpener.
type Opener struct {
	// Schemes are the URL schemes it opens.
	Schemes []string
	// Open opens u, whose scheme is one of Schemes.
	Open func(ctx context.Context, u *url.URL, o Options) (*Opened, error)
}

// Openers are the stores a program opens from a URL: Open refuses any
// other scheme. The first Opener of a scheme opens it.
type Openers []Opener

// Schemes lists the URL schemes the openers open.
func (s Openers) Schemes() []string {
	var out []string
	for _, o := range s {
		out = append(out, o.Schemes...)
	}
	return out
}

// Open parses raw and opens its store, for a service to pass to
// sluice.New (which validates every request). The store's Close also
// closes the client it was built on. Connecting is lazy for the network
// stores: an unreachable server shows up as store.ErrUnavailable on the
// first operation, not here.
func (s Openers) Open(ctx context.Context, raw string, opts ...Option) (store.Store, error) {
	op, err := s.open(ctx, raw, opts...)
	if err != nil {
		return nil, err
	}
	if op.CloseClient == nil && !op.Borrowed {
		return op.Store, nil // the store's own Close is all there is to do
	}
	return &closing{Forward: contract.Forward{Store: op.Store}, op: op}, nil
}

// closing is a store whose Close closes what Open built around it.
type closing struct {
	contract.Forward
	op *Opened
}

func (c *closing) Close() error { return c.op.Close() }

// Unwrap returns the store c wraps, for the Client to find its optional
// capabilities (contract.Unwrap).
func (c *closing) Unwrap() store.Store { return c.Forward.Store }

// OpenDetailed is Open that also returns what the URL resolved to: its
// kind, the URL safe to print, and the store's administration handle
// (migrations, table creation). Close the Opened, not its Store.
//
// The store is behind the portable layer's checks (the same validation and
// defaults a Client applies), so that a tool calling it directly gets them
// too.
func (s Openers) OpenDetailed(ctx context.Context, raw string, opts ...Option) (*Opened, error) {
	op, err := s.open(ctx, raw, opts...)
	if err != nil {
		return nil, err
	}
	if op.closeStore == nil {
		op.closeStore = op.Store.Close
	}
	op.Store = contract.Checked(op.Store)
	return op, nil
}

func (s Openers) open(ctx context.Context, raw string, opts ...Option) (*Opened, error) {
	var o Options
	for _, opt := range opts {
		opt.apply(&o)
	}
	u, err := parse(raw, s.Schemes())
	if err != nil {
		return nil, err
	}
	for _, op := range s {
		if slices.Contains(op.Schemes, u.Scheme) {
			return op.Open(ctx, u, o)
		}
	}
	return nil, badf("scheme %q is not supported (supported: %s)", u.Scheme, strings.Join(s.Schemes(), ", "))
}

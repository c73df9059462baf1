// Package storeurl opens the store.Store named by a store URL, the form the
// sluice CLI takes in --store and services read from SLUICE_STORE, so that
// a service and the CLI open the same store from the same string:
//
//	st, err := storeurl.Open(ctx, os.Getenv("SLUICE_STORE"))
//	if err != nil {
//		return err // errors.Is(err, storeurl.ErrBadURL): fix the URL
//	}
//	defer st.Close()
//	client, err := sluice.New(st)
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
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/pgstore"
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

func (o Options) lookup(name string) string {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(name)
	return v
}

// password returns the password from the file or the environment variable.
func (o Options) password(envName string) (string, error) {
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("%w: --password-file: %w", ErrBadURL, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return o.lookup(envName), nil
}

// Opened is an open store, what the URL resolved to, and what it takes to
// close it (OpenDetailed).
type Opened struct {
	// Store is the store, behind contract.Checked.
	Store store.Store
	// Kind is the scheme family: "memory", "redis", "redis-cluster",
	// "postgres" or "dynamodb".
	Kind string
	// Redacted is the URL, safe to print.
	Redacted string
	// SharedClock reports that every process using the store decides on one
	// clock (the server's), so grant times from several processes are
	// directly comparable.
	SharedClock bool
	// Postgres is the store again, as its own type, when Kind is
	// "postgres" (for Migrate and Version).
	Postgres *pgstore.Store
	// DynamoDB is the client the store was built on, and Table its table,
	// when Kind is "dynamodb" (for CreateTable).
	DynamoDB *dynamodb.Client
	Table    string
	closers  []func() error
	// owns reports that closers is only Store's own Close.
	owns bool
}

// Close closes the store and the client it was built on.
func (o *Opened) Close() error {
	var errs []error
	for i := len(o.closers) - 1; i >= 0; i-- {
		errs = append(errs, o.closers[i]())
	}
	return errors.Join(errs...)
}

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadURL}, args...)...)
}

// Schemes lists the URL schemes Open understands.
func Schemes() []string {
	return []string{"memory", "redis", "rediss", "redis+cluster", "rediss+cluster", "postgres", "postgresql", "dynamodb"}
}

// Open parses raw and opens its store, for a service to pass to
// sluice.New (which validates every request). The store's Close also
// closes the client it was built on. Connecting is lazy for the network stores: an
// unreachable server shows up as store.ErrUnavailable on the first
// operation, not here.
func Open(ctx context.Context, raw string, opts ...Option) (store.Store, error) {
	op, err := openDetailed(ctx, raw, opts...)
	if err != nil {
		return nil, err
	}
	if len(op.closers) == 1 && op.owns {
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

// OpenDetailed is Open that also returns what the URL resolved to: its
// kind, the URL safe to print, and the PostgreSQL store or DynamoDB client
// for administration (migrations, table creation). Close the Opened, not
// its Store.
//
// The store is behind the portable layer's checks (the same validation and
// defaults a Client applies), so that a tool calling it directly gets them
// too.
func OpenDetailed(ctx context.Context, raw string, opts ...Option) (*Opened, error) {
	op, err := openDetailed(ctx, raw, opts...)
	if err != nil {
		return nil, err
	}
	op.Store = contract.Checked(op.Store)
	return op, nil
}

func openDetailed(ctx context.Context, raw string, opts ...Option) (*Opened, error) {
	var o Options
	for _, opt := range opts {
		opt.apply(&o)
	}
	u, err := parse(raw)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "memory":
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, badf("%s: memory:// takes no host, path or options", redact(u))
		}
		if o.Memory != nil {
			return &Opened{Store: o.Memory, Kind: "memory", Redacted: "memory://", SharedClock: true}, nil
		}
		st := memstore.New()
		return &Opened{Store: st, Kind: "memory", Redacted: "memory://", SharedClock: true, closers: []func() error{st.Close}, owns: true}, nil
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		return openRedis(ctx, u, o)
	case "postgres", "postgresql":
		return openPostgres(ctx, u, o)
	case "dynamodb":
		return openDynamo(ctx, u, o)
	}
	return nil, badf("scheme %q is not supported (supported: %s)", u.Scheme, strings.Join(Schemes(), ", "))
}

// parse checks what every store URL must satisfy: a URL with a scheme
// Open understands and no password in it.
func parse(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, badf("empty store URL (try memory:// or redis://127.0.0.1:6379)")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, badf("%q is not a store URL (try memory:// or redis://127.0.0.1:6379)", redactRaw(raw))
	}
	if _, set := u.User.Password(); set {
		return nil, badf("%s: the URL contains a password; pass it in %s or --password-file instead, never on the command line",
			redact(u), passwordEnv(u.Scheme))
	}
	if k := secretParam(u); k != "" {
		return nil, badf("%s: the URL contains a password (%s=); pass it in %s or --password-file instead, never on the command line",
			redact(u), k, passwordEnv(u.Scheme))
	}
	if !slices.Contains(Schemes(), u.Scheme) {
		return nil, badf("scheme %q is not supported (supported: %s)", u.Scheme, strings.Join(Schemes(), ", "))
	}
	return u, nil
}

// passwordEnv names the variable a scheme reads its password from.
func passwordEnv(scheme string) string {
	switch scheme {
	case "postgres", "postgresql":
		return "PGPASSWORD"
	}
	return "SLUICE_REDIS_PASSWORD"
}

// secretParams are the query parameters that carry a secret (libpq's and
// pgx's password and sslpassword). They are refused like a password in the
// userinfo, whatever their case, since a server may be sent a parameter it
// does not know as is.
var secretParams = []string{"password", "sslpassword"}

// secretParam returns the name of the first query parameter of u (or of
// a key=value pair in its fragment) that carries a secret, or "". It
// reads the raw query itself rather than u.Query(), which drops the pairs
// it cannot decode ("password=hunter2%zz") or that hold a semicolon
// ("a=1;password=hunter2"), although a server may still receive them and
// the URL would be printed as it is.
func secretParam(u *url.URL) string {
	for _, q := range []string{u.RawQuery, u.Fragment} {
		for _, p := range rawParams(q) {
			if isSecret(p.key) {
				return p.key
			}
		}
	}
	return ""
}

func isSecret(key string) bool {
	key = strings.TrimSpace(key)
	for _, s := range secretParams {
		if strings.EqualFold(key, s) {
			return true
		}
	}
	return false
}

// rawParam is one key=value pair of a raw query: its key, decoded
// leniently (see lenientUnescape), and where its value lies in the query.
type rawParam struct {
	key          string
	vstart, vend int
	eq           bool // the pair has a '=': a value, possibly empty
}

// rawParams splits a raw query on both '&' and ';', the separators a
// server may accept, and never fails: a pair without '=' has an empty
// value.
func rawParams(q string) []rawParam {
	var out []rawParam
	start := 0
	for i := 0; i <= len(q); i++ {
		if i < len(q) && q[i] != '&' && q[i] != ';' {
			continue
		}
		pair := q[start:i]
		k, vstart, eq := pair, i, false
		if j := strings.IndexByte(pair, '='); j >= 0 {
			k, vstart, eq = pair[:j], start+j+1, true
		}
		if pair != "" {
			out = append(out, rawParam{key: lenientUnescape(k), vstart: vstart, vend: i, eq: eq})
		}
		start = i + 1
	}
	return out
}

// lenientUnescape decodes the valid %XX escapes and '+' of s and keeps
// every other byte as it is.
func lenientUnescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '+':
			b.WriteByte(' ')
		case s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// redactQuery replaces the value of every secret pair of a raw query by
// "xxxxx", keeping everything else, malformed or not, as it is.
func redactQuery(q string) string {
	ps := rawParams(q)
	for i := len(ps) - 1; i >= 0; i-- {
		if p := ps[i]; p.eq && isSecret(p.key) {
			q = q[:p.vstart] + "xxxxx" + q[p.vend:]
		}
	}
	return q
}

// redact returns u safe to print: the userinfo's password and the values of
// secret query parameters (and fragment pairs) are replaced by "xxxxx",
// however malformed the query.
func redact(u *url.URL) string {
	if secretParam(u) == "" {
		return u.Redacted()
	}
	r := *u
	r.RawQuery = redactQuery(u.RawQuery)
	r.Fragment, r.RawFragment = redactQuery(u.Fragment), ""
	return r.Redacted()
}

// secretRaw matches a secret key=value pair in a string that is not a URL
// (a libpq key/value connection string, say).
var secretRaw = regexp.MustCompile(`(?i)((?:ssl)?password\s*=\s*)('[^']*'|[^\s&]*)`)

// redactRaw hides anything that looks like userinfo or a password in an
// unparsable URL: key=value secrets anywhere, and secret query pairs
// (see redactQuery) after the first '?'.
func redactRaw(raw string) string {
	raw = secretRaw.ReplaceAllString(raw, "${1}xxxxx")
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i+1] + redactQuery(raw[i+1:])
	}
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "…@" + raw[i+1:]
		}
		return "…@" + raw[i+1:]
	}
	return raw
}

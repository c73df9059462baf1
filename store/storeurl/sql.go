package storeurl

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/pgstore"
)

// takeOpts removes Sluice's own options from q and returns them.
func takeOpts(q url.Values, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if q.Has(n) {
			out[n] = q.Get(n)
			q.Del(n)
		}
	}
	return out
}

func boolOpt(u *url.URL, opts map[string]string, name string, def bool) (bool, error) {
	v, ok := opts[name]
	if !ok || v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badf("%s: %s=%q must be true or false", redact(u), name, v)
	}
	return b, nil
}

func durOpt(u *url.URL, opts map[string]string, name string, def time.Duration) (time.Duration, error) {
	v, ok := opts[name]
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, badf("%s: %s=%q must be a duration such as 2s", redact(u), name, v)
	}
	return d, nil
}

// openPostgres opens postgres:// through pgxpool. Sluice's options:
// schema, timeout, caller_clock, migrate (default true: create or upgrade
// the schema, idempotent). The rest are libpq/pgx parameters.
func openPostgres(ctx context.Context, u *url.URL, o Options) (*Opened, error) {
	q := u.Query()
	so := takeOpts(q, "schema", "timeout", "caller_clock", "migrate")
	var opts []pgstore.Option
	if s := so["schema"]; s != "" {
		opts = append(opts, pgstore.WithSchema(s))
	}
	timeout, err := durOpt(u, so, "timeout", pgstore.DefaultTimeout)
	if err != nil {
		return nil, err
	}
	opts = append(opts, pgstore.WithTimeout(timeout))
	callerClock, err := boolOpt(u, so, "caller_clock", false)
	if err != nil {
		return nil, err
	}
	if callerClock {
		opts = append(opts, pgstore.WithCallerClock())
	}
	migrate, err := boolOpt(u, so, "migrate", true)
	if err != nil {
		return nil, err
	}
	base := *u
	base.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(base.String())
	if err != nil {
		return nil, badf("%s: %v", redact(u), err)
	}
	pass, err := o.password("PGPASSWORD")
	if err != nil {
		return nil, err
	}
	if pass != "" {
		cfg.ConnConfig.Password = pass
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, badf("%s: %v", redact(u), err)
	}
	st, err := pgstore.New(pool, opts...)
	if err != nil {
		pool.Close()
		return nil, badf("%s: %v", redact(u), err)
	}
	op := &Opened{Store: st, Kind: "postgres", Redacted: redact(u), SharedClock: !callerClock, Postgres: st,
		closers: []func() error{func() error { pool.Close(); return nil }, st.Close}}
	if migrate && !o.NoMigrate {
		if err := st.Migrate(ctx); err != nil {
			op.Close()
			return nil, err
		}
	}
	return op, nil
}

// openDynamo opens dynamodb://TABLE?region=R&endpoint=URL with the AWS SDK's
// default credential chain. TABLE, region and endpoint default to
// SLUICE_TABLE_NAME, SLUICE_AWS_REGION and SLUICE_ENDPOINT_URL. Options:
// timeout, read_then_transact (acquire in two round trips: read, then
// transact; seeds_path is its former name, still accepted).
func openDynamo(ctx context.Context, u *url.URL, o Options) (*Opened, error) {
	if u.User != nil {
		return nil, badf("%s: dynamodb:// takes no user; credentials come from the AWS SDK's default chain", redact(u))
	}
	q := u.Query()
	so := takeOpts(q, "region", "endpoint", "timeout", "read_then_transact", "seeds_path")
	if len(q) > 0 {
		return nil, badf("%s: unknown option(s) %s (want region, endpoint, timeout, read_then_transact)", redact(u), q.Encode())
	}
	table := o.Table
	if table == "" {
		table = u.Host
	}
	if table == "" {
		table = o.lookup("SLUICE_TABLE_NAME")
	}
	if table == "" {
		return nil, badf("%s: name the table: dynamodb://TABLE or SLUICE_TABLE_NAME", redact(u))
	}
	region, endpoint := so["region"], so["endpoint"]
	if region == "" {
		region = o.lookup("SLUICE_AWS_REGION")
	}
	if endpoint == "" {
		endpoint = o.lookup("SLUICE_ENDPOINT_URL")
	}
	var opts []dynamostore.Option
	if d, err := durOpt(u, so, "timeout", 0); err != nil {
		return nil, err
	} else if d > 0 {
		opts = append(opts, dynamostore.WithTimeout(d))
	}
	twoTrips, err := boolOpt(u, so, "read_then_transact", false)
	if err != nil {
		return nil, err
	}
	if old, err := boolOpt(u, so, "seeds_path", false); err != nil {
		return nil, err
	} else if old {
		twoTrips = true
	}
	if twoTrips {
		opts = append(opts, dynamostore.WithReadThenTransact())
	}
	// No SDK log lines: the CLI reports failures itself, in one line (the
	// SDK's default logger would print warnings such as a checksum it could
	// not verify on an error response straight to stderr).
	lo := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if region != "" {
		lo = append(lo, config.WithRegion(region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, badf("%s: AWS configuration: %v", redact(u), err)
	}
	if awsCfg.Region == "" {
		return nil, badf("%s: no AWS region: add ?region=R, or set SLUICE_AWS_REGION or AWS_REGION", redact(u))
	}
	db := dynamodb.NewFromConfig(awsCfg, dynamostore.ClientOptions, func(do *dynamodb.Options) {
		if endpoint != "" {
			do.BaseEndpoint = aws.String(endpoint)
		}
	})
	st, err := dynamostore.New(db, table, opts...)
	if err != nil {
		return nil, badf("%s: %v", redact(u), err)
	}
	return &Opened{Store: st, Kind: "dynamodb", Redacted: redact(u), DynamoDB: db, Table: table,
		closers: []func() error{st.Close}, owns: true}, nil
}

package pgstore

import (
	"context"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ontopix/sluice/internal/urlparam"
	"github.com/ontopix/sluice/store/storeurl"
)

// URLOpener opens the PostgreSQL URLs for storeurl.Openers: postgres://
// and postgresql://.
func URLOpener() storeurl.Opener {
	return storeurl.Opener{Schemes: []string{"postgres", "postgresql"}, Open: OpenURL}
}

// OpenURL opens a store on the PostgreSQL database u names (see package
// storeurl for the URL's form), through pgxpool. Sluice's options: schema,
// timeout, caller_clock, migrate (default true: create or upgrade the
// schema at once, idempotent, unless o.NoMigrate). The rest are libpq/pgx
// parameters. The password comes from o (its file, else PGPASSWORD), never
// from u. The Opened's Admin is the *Store. Closing the Opened closes the
// pool too.
func OpenURL(ctx context.Context, u *url.URL, o storeurl.Options) (*storeurl.Opened, error) {
	if err := storeurl.Check(u); err != nil {
		return nil, err
	}
	q := u.Query()
	so := urlparam.Take(q, "schema", "timeout", "caller_clock", "migrate")
	var opts []Option
	if s := so["schema"]; s != "" {
		opts = append(opts, WithSchema(s))
	}
	timeout, err := urlparam.Duration(u, so, "timeout", DefaultTimeout)
	if err != nil {
		return nil, err
	}
	opts = append(opts, WithTimeout(timeout))
	callerClock, err := urlparam.Bool(u, so, "caller_clock", false)
	if err != nil {
		return nil, err
	}
	if callerClock {
		opts = append(opts, WithCallerClock())
	}
	migrate, err := urlparam.Bool(u, so, "migrate", true)
	if err != nil {
		return nil, err
	}
	base := *u
	base.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(base.String())
	if err != nil {
		return nil, storeurl.Errorf(u, "%v", err)
	}
	pass, err := o.Password("PGPASSWORD")
	if err != nil {
		return nil, err
	}
	if pass != "" {
		cfg.ConnConfig.Password = pass
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, storeurl.Errorf(u, "%v", err)
	}
	st, err := New(pool, opts...)
	if err != nil {
		pool.Close()
		return nil, storeurl.Errorf(u, "%v", err)
	}
	op := &storeurl.Opened{Store: st, Kind: "postgres", Redacted: storeurl.Redact(u), SharedClock: !callerClock, Admin: st,
		CloseClient: func() error { pool.Close(); return nil }}
	if migrate && !o.NoMigrate {
		if err := st.Migrate(ctx); err != nil {
			op.Close()
			return nil, err
		}
	}
	return op, nil
}

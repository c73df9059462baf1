// Package allstores opens a store URL of any scheme Sluice has a store for,
// as the sluice command line does. It links every store's driver (go-redis,
// pgx, the AWS SDK): a service that uses one store names that store's
// opener instead (see package storeurl).
package allstores

import (
	"context"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/pgstore"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/store/remotestore"
	"github.com/ontopix/sluice/store/storeurl"
)

// Openers returns the openers of every store: memory://, redis://,
// rediss://, redis+cluster://, rediss+cluster://, postgres://,
// postgresql://, dynamodb://, and sluice:// and sluices:// (the store
// door of sluice serve).
func Openers() storeurl.Openers {
	return storeurl.Openers{memstore.URLOpener(), redisstore.URLOpener(), pgstore.URLOpener(), dynamostore.URLOpener(), remotestore.URLOpener()}
}

// Open is storeurl.Openers.Open with every store's opener.
func Open(ctx context.Context, raw string, opts ...storeurl.Option) (store.Store, error) {
	return Openers().Open(ctx, raw, opts...)
}

// OpenDetailed is storeurl.Openers.OpenDetailed with every store's opener.
func OpenDetailed(ctx context.Context, raw string, opts ...storeurl.Option) (*storeurl.Opened, error) {
	return Openers().OpenDetailed(ctx, raw, opts...)
}

package storeurl

import (
	"context"
	"net/url"
)

// openPostgres is wired once store/pgstore is committed.
func openPostgres(_ context.Context, u *url.URL, _ Options) (*Opened, error) {
	return nil, badf("%s: the PostgreSQL store (postgres://) is not in this build yet", u.Redacted())
}

// openDynamo is wired once store/dynamostore is committed.
func openDynamo(_ context.Context, u *url.URL, _ Options) (*Opened, error) {
	return nil, badf("%s: the DynamoDB store (dynamodb://) is not in this build yet", u.Redacted())
}

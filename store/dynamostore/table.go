package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates the SDKs' table: partition key vendor_dimension (S),
// on-demand billing (PAY_PER_REQUEST), TTL enabled on ttl. It waits until
// the table is ACTIVE. A table that already exists is not an error; its TTL
// setting is still ensured.
func CreateTable(ctx context.Context, db *dynamodb.Client, table string) error {
	return createTable(ctx, db, table, true)
}

// createTable is CreateTable with TTL optional: DynamoDB Local runs its TTL
// sweeper promptly, which would delete the lease records of tests that use
// fixed past times behind their back.
func createTable(ctx context.Context, db *dynamodb.Client, table string, ttl bool) error {
	return ensureTable(ctx, db, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}, "table", ttl)
}

// ensureTable creates the table in (what names it in errors: "table",
// "usage table") unless it exists, waits until it is ACTIVE, and, with
// ttl, makes sure TTL is enabled on the ttl attribute.
func ensureTable(ctx context.Context, db *dynamodb.Client, in *dynamodb.CreateTableInput, what string, ttl bool) error {
	table := aws.ToString(in.TableName)
	_, err := db.CreateTable(ctx, in)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamostore: create %s %q: %w", what, table, err)
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("dynamostore: waiting for %s %q to be ACTIVE: %w", what, table, err)
	}
	if !ttl {
		return nil
	}
	d, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err == nil && d.TimeToLiveDescription != nil && aws.ToString(d.TimeToLiveDescription.AttributeName) == attrTTL &&
		(d.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: enable TTL on %s %q: %w", what, table, err)
	}
	return nil
}

// SDK settings applied by ClientOptions.
const (
	// SDKMaxAttempts bounds the SDK's attempts per request (1 + 2 retries)
	// on throttling, 5xx and transport errors.
	SDKMaxAttempts = 3
	// SDKMaxBackoff caps the SDK's jittered exponential backoff.
	SDKMaxBackoff = 200 * time.Millisecond
	// SDKAttemptTimeout bounds one HTTP attempt (response headers).
	SDKAttemptTimeout = 2 * time.Second
)

// ClientOptions configures a *dynamodb.Client the way this store expects:
// the standard retryer with at most SDKMaxAttempts attempts and
// SDKMaxBackoff between them, no client-side retry quota (a throttled fleet
// should fail closed quickly, not stall), and an HTTP client whose
// attempts time out after SDKAttemptTimeout. Pass it to dynamodb.New or
// dynamodb.NewFromConfig. The store also bounds each whole operation by its
// context's deadline, or by WithTimeout when the context has none.
func ClientOptions(o *dynamodb.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = SDKMaxAttempts
		so.MaxBackoff = SDKMaxBackoff
		so.RateLimiter = noQuota{}
	})
	if o.HTTPClient == nil {
		o.HTTPClient = awshttp.NewBuildableClient().WithTimeout(0).WithTransportOptions(func(t *http.Transport) {
			t.ResponseHeaderTimeout = SDKAttemptTimeout
			t.MaxIdleConnsPerHost = 256
		})
	}
}

// noQuota is a retry rate limiter that never refuses a retry.
type noQuota struct{}

func (noQuota) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}
func (noQuota) AddTokens(uint) error { return nil }

package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/storeurl"
)

// The table layout dynamostore.CreateTable makes.
const (
	ddbPartitionKey = "vendor_dimension"
	ddbTTLAttribute = "ttl"
)

// ddbTableView is what dynamodb create-table prints.
type ddbTableView struct {
	Table    string `json:"table"`
	Region   string `json:"region"`
	Endpoint string `json:"endpoint,omitempty"`
	// Created is false when the table already existed (--if-not-exists).
	Created      bool   `json:"created"`
	Status       string `json:"status"`
	BillingMode  string `json:"billing_mode"`
	PartitionKey string `json:"partition_key"`
	TTLAttribute string `json:"ttl_attribute"`
	TTLStatus    string `json:"ttl_status"`
	// UsageTable keeps the usage history (the console's charts).
	UsageTable string `json:"usage_table"`
}

func newDynamoDBCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dynamodb",
		Short: "Manage the DynamoDB store's table",
		Long: `dynamodb manages the table of the DynamoDB store named by --store or
SLUICE_STORE (dynamodb://TABLE?region=R&endpoint=URL; TABLE, region and
endpoint default to SLUICE_TABLE_NAME, SLUICE_AWS_REGION and
SLUICE_ENDPOINT_URL; credentials come from the AWS SDK's default chain).`,
		Example: `  sluice dynamodb create-table --store 'dynamodb://sluice-limits?region=eu-west-1'
  SLUICE_TABLE_NAME=sluice-limits SLUICE_AWS_REGION=eu-west-1 sluice dynamodb create-table --store dynamodb://`,
		Args: clikit.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var (
		output      string
		ifNotExists bool
	)
	create := &cobra.Command{
		Use:   "create-table [TABLE]",
		Short: "Create the store's tables: on-demand billing, TTL on ttl",
		Long: `create-table creates the store's table as dynamostore expects it: partition key
vendor_dimension (string), on-demand billing (PAY_PER_REQUEST), and TTL
enabled on the ttl attribute, so that DynamoDB eventually deletes lease
records the reconciler has not. It also creates the usage history table,
TABLE-usage (partition key usage_key, sort key start_key, TTL on ttl),
unless it exists. It waits until the tables are ACTIVE.

TABLE, when given, takes precedence over the table of the store URL and
SLUICE_TABLE_NAME. A table that already exists is an error (exit 1) unless
--if-not-exists is given: then, if its key is Sluice's, create-table only
makes sure TTL is enabled on ttl and exits 0. A table with another key is
always an error.

The caller needs dynamodb:CreateTable, DescribeTable, DescribeTimeToLive
and UpdateTimeToLive on both tables (see docs/stores/dynamodb.md).`,
		Example: `  sluice dynamodb create-table --store 'dynamodb://sluice-limits?region=eu-west-1'
  sluice dynamodb create-table sluice-limits --if-not-exists -o json
  # DynamoDB Local:
  sluice dynamodb create-table sluice --store 'dynamodb://?region=us-east-1&endpoint=http://127.0.0.1:8000'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s takes at most 1 argument, got %d; usage: %s", cmd.CommandPath(), len(args), cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clikit.OutputFlag(output); err != nil {
				return err
			}
			var table string
			if len(args) == 1 {
				table = args[0]
			}
			op, err := g.OpenWith(cmd.Context(), storeurl.Options{Table: table})
			if err != nil {
				return err
			}
			defer op.Close()
			db, ok := op.Admin.(*dynamodb.Client)
			if !ok {
				return usagef("%s needs a DynamoDB store (--store dynamodb://TABLE?region=R or SLUICE_STORE), not %s",
					cmd.CommandPath(), op.Redacted)
			}
			v, err := createTable(cmd.Context(), db, op.Table, ifNotExists)
			if err != nil {
				return err
			}
			if output == "json" {
				return clikit.WriteJSON(cmd.OutOrStdout(), v)
			}
			what := "created table " + v.Table
			if !v.Created {
				what = "table " + v.Table + " already exists"
			}
			where := "region " + v.Region
			if v.Endpoint != "" {
				where += " at " + v.Endpoint
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s (%s): %s, %s, partition key %s, TTL on %s %s; usage history in %s\n",
				what, where, v.Status, v.BillingMode, v.PartitionKey, v.TTLAttribute, v.TTLStatus, v.UsageTable)
			return err
		},
	}
	create.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	create.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "accept a table that already exists (exit 0)")
	cmd.AddCommand(create)
	return cmd
}

// createTable creates table with dynamostore.CreateTable unless it exists
// already, and describes the result.
func createTable(ctx context.Context, db *dynamodb.Client, table string, ifNotExists bool) (ddbTableView, error) {
	opts := db.Options()
	if c := opts.Credentials; c != nil {
		// Without credentials every call fails; say so as the
		// configuration error it is, not as an outage.
		if _, err := c.Retrieve(ctx); err != nil {
			return ddbTableView{}, fmt.Errorf("dynamodb: %w: %w", dynamostore.ErrCredentials, err)
		}
	}
	v := ddbTableView{Table: table, Region: opts.Region, Endpoint: aws.ToString(opts.BaseEndpoint)}
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		v.Created = true
	case err != nil:
		return v, ddbError("describe table "+table, err)
	default:
		if key := keyOf(d.Table); key != ddbPartitionKey+" (S)" {
			return v, fmt.Errorf("table %s already exists but is not a Sluice table: its key is %s, not %s (S)", table, key, ddbPartitionKey)
		}
		if !ifNotExists {
			return v, fmt.Errorf("table %s already exists (--if-not-exists accepts it)", table)
		}
	}
	// CreateTable also accepts a table created meanwhile by someone else,
	// and makes sure TTL is enabled on an existing one.
	if err := dynamostore.CreateTable(ctx, db, table); err != nil {
		return v, ddbError("create table", err)
	}
	if d, err = db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
		return v, ddbError("describe table "+table, err)
	}
	v.Status, v.PartitionKey = string(d.Table.TableStatus), ddbPartitionKey
	v.BillingMode = string(types.BillingModeProvisioned)
	if b := d.Table.BillingModeSummary; b != nil && b.BillingMode != "" {
		v.BillingMode = string(b.BillingMode)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return v, ddbError("describe TTL of "+table, err)
	}
	v.TTLAttribute, v.TTLStatus = ddbTTLAttribute, string(types.TimeToLiveStatusDisabled)
	if t := ttl.TimeToLiveDescription; t != nil {
		if a := aws.ToString(t.AttributeName); a != "" {
			v.TTLAttribute = a
		}
		v.TTLStatus = string(t.TimeToLiveStatus)
	}
	usage := table + dynamostore.UsageTableSuffix
	if err := dynamostore.CreateUsageTable(ctx, db, usage); err != nil {
		return v, ddbError("create usage table", err)
	}
	v.UsageTable = usage
	return v, nil
}

// keyOf describes a table's primary key: "vendor_dimension (S)", or with a
// sort key "pk (S), sk (N)".
func keyOf(t *types.TableDescription) string {
	if t == nil {
		return "unknown"
	}
	attrType := map[string]string{}
	for _, a := range t.AttributeDefinitions {
		attrType[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	s := ""
	for _, k := range t.KeySchema {
		if s != "" {
			s += ", "
		}
		n := aws.ToString(k.AttributeName)
		s += n + " (" + attrType[n] + ")"
	}
	return s
}

// ddbError makes transport errors, throttling and server faults
// store.ErrUnavailable (exit 3); the service's other answers (access
// denied, validation, …) stay plain errors (exit 1).
func ddbError(op string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorFault() == smithy.FaultClient {
		switch ae.ErrorCode() {
		case "ThrottlingException", "RequestLimitExceeded", "LimitExceededException", "ProvisionedThroughputExceededException":
		default:
			return fmt.Errorf("dynamodb: %s: %w", op, err)
		}
	}
	return store.Unavailable("dynamodb: "+op, err)
}

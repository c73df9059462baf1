package dynamostore

import (
	"context"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/ontopix/sluice/internal/urlparam"
	"github.com/ontopix/sluice/store/storeurl"
)

// URLOpener opens dynamodb:// URLs for storeurl.Openers.
func URLOpener() storeurl.Opener {
	return storeurl.Opener{Schemes: []string{"dynamodb"}, Open: OpenURL}
}

// OpenURL opens a store on the table dynamodb://TABLE?region=R&endpoint=URL
// names, with the AWS SDK's default credential chain. TABLE (unless
// o.Table names it), region and endpoint default to SLUICE_TABLE_NAME,
// SLUICE_AWS_REGION and SLUICE_ENDPOINT_URL. Options: timeout,
// read_then_transact (acquire in two round trips: read, then transact;
// seeds_path is its former name, still accepted). The Opened's Admin is
// the *dynamodb.Client, and its Table the table.
func OpenURL(ctx context.Context, u *url.URL, o storeurl.Options) (*storeurl.Opened, error) {
	if err := storeurl.Check(u); err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, storeurl.Errorf(u, "dynamodb:// takes no user; credentials come from the AWS SDK's default chain")
	}
	q := u.Query()
	so := urlparam.Take(q, "region", "endpoint", "timeout", "read_then_transact", "seeds_path")
	if len(q) > 0 {
		return nil, storeurl.Errorf(u, "unknown option(s) %s (want region, endpoint, timeout, read_then_transact)", q.Encode())
	}
	table := o.Table
	if table == "" {
		table = u.Host
	}
	if table == "" {
		table = o.Lookup("SLUICE_TABLE_NAME")
	}
	if table == "" {
		return nil, storeurl.Errorf(u, "name the table: dynamodb://TABLE or SLUICE_TABLE_NAME")
	}
	region, endpoint := so["region"], so["endpoint"]
	if region == "" {
		region = o.Lookup("SLUICE_AWS_REGION")
	}
	if endpoint == "" {
		endpoint = o.Lookup("SLUICE_ENDPOINT_URL")
	}
	var opts []Option
	if d, err := urlparam.Duration(u, so, "timeout", 0); err != nil {
		return nil, err
	} else if d > 0 {
		opts = append(opts, WithTimeout(d))
	}
	twoTrips, err := urlparam.Bool(u, so, "read_then_transact", false)
	if err != nil {
		return nil, err
	}
	if old, err := urlparam.Bool(u, so, "seeds_path", false); err != nil {
		return nil, err
	} else if old {
		twoTrips = true
	}
	if twoTrips {
		opts = append(opts, WithReadThenTransact())
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
		return nil, storeurl.Errorf(u, "AWS configuration: %v", err)
	}
	if awsCfg.Region == "" {
		return nil, storeurl.Errorf(u, "no AWS region: add ?region=R, or set SLUICE_AWS_REGION or AWS_REGION")
	}
	db := dynamodb.NewFromConfig(awsCfg, ClientOptions, func(do *dynamodb.Options) {
		if endpoint != "" {
			do.BaseEndpoint = aws.String(endpoint)
		}
	})
	st, err := New(db, table, opts...)
	if err != nil {
		return nil, storeurl.Errorf(u, "%v", err)
	}
	return &storeurl.Opened{Store: st, Kind: "dynamodb", Redacted: storeurl.Redact(u), Admin: db, Table: table}, nil
}

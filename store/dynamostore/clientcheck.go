package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice/bucket"
)

// ErrCredentials is matched by the error of an operation whose AWS
// credentials could not be obtained (none configured, an expired profile, a
// provider that failed). It is a configuration error, not an outage: it
// never matches store.ErrUnavailable, so a fail-open client reports it
// instead of running without limits.
var ErrCredentials = errors.New("dynamostore: AWS credentials could not be obtained")

// checkEndpoint validates the client's BaseEndpoint, when set: an absolute
// http or https URL with a host and, if any, a numeric port. A malformed
// endpoint is a configuration error reported by New, never an outage at
// the first operation.
func checkEndpoint(db *dynamodb.Client) error {
	ep := aws.ToString(db.Options().BaseEndpoint)
	if ep == "" {
		return nil
	}
	bad := func(reason string) error {
		return &bucket.FieldError{Field: "endpoint", Value: ep, Reason: reason}
	}
	u, err := url.Parse(ep)
	if err != nil {
		return bad(fmt.Sprintf("is not a URL (%v)", errors.Unwrap(err)))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("must start with http:// or https://")
	}
	if u.Hostname() == "" {
		return bad("has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("has an invalid port")
		}
	}
	return nil
}

// credentials wraps the client's credentials provider so that a failure to
// obtain credentials is recognisable (credentialsError) when the SDK
// returns it, and classified as a configuration error.
type credentials struct{ aws.CredentialsProvider }

// Retrieve implements aws.CredentialsProvider.
func (c credentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	v, err := c.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return v, &credentialsError{err: err}
	}
	return v, nil
}

// credentialsError is a failure of the credentials provider.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string        { return "AWS credentials: " + e.err.Error() }
func (e *credentialsError) Unwrap() error        { return e.err }
func (e *credentialsError) Is(target error) bool { return target == ErrCredentials }

// opts is applied to every request of the store: it marks credential
// failures (see credentials). A context cancelled by the caller while
// credentials were being fetched stays a context error.
func opts(o *dynamodb.Options) {
	switch o.Credentials.(type) {
	case nil, aws.AnonymousCredentials, credentials:
		return
	}
	o.Credentials = credentials{o.Credentials}
}

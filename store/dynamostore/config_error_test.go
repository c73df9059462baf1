package dynamostore

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// failingProvider is a credentials provider with nothing to give, like the
// default chain on a host without credentials.
type failingProvider struct{}

func (failingProvider) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errors.New("no credentials in the environment, profile or instance metadata")
}

// A malformed endpoint is a configuration error: New reports it, naming
// the field and the value, and it never matches ErrUnavailable (a fail-open
// client would otherwise grant degraded leases without limits).
func TestBadEndpointIsAConfigurationError(t *testing.T) {
	tests := []struct {
		endpoint string
		ok       bool
	}{
		{"http://127.0.0.1:notaport", false},
		{"127.0.0.1:8000", false},
		{"ftp://127.0.0.1:8000", false},
		{"http://:8000", false},
		{"http://127.0.0.1:70000", false},
		{server.Endpoint, true},
		{"https://dynamodb.eu-west-1.amazonaws.com", true},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			db := newClient(func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(tt.endpoint) })
			s, err := New(db, "sluice-config")
			if tt.ok {
				if err != nil {
					t.Fatalf("New(%q) = %v; want nil", tt.endpoint, err)
				}
				return
			}
			if err == nil {
				// The old behaviour: the first operation fails as an
				// outage, and fail open grants degraded leases.
				c, cerr := sluice.New(s, sluice.WithConfig(failOpen()))
				if cerr != nil {
					t.Fatal(cerr)
				}
				r, aerr := c.Acquire(context.Background(), "v#rpm")
				t.Fatalf("New(%q) accepted the endpoint; fail-open Acquire = %+v, %v", tt.endpoint, r, aerr)
			}
			if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("New(%q) = %v; want ErrInvalid, not ErrUnavailable", tt.endpoint, err)
			}
			var fe *bucket.FieldError
			if !errors.As(err, &fe) || fe.Field != "endpoint" || fe.Value != tt.endpoint {
				t.Errorf("New(%q) = %v; want a FieldError on endpoint naming the value", tt.endpoint, err)
			}
		})
	}
}

// Credentials that cannot be obtained are a configuration error on every
// operation: ErrCredentials, never ErrUnavailable, so a fail-open client
// reports it instead of granting degraded leases.
func TestMissingCredentialsIsAConfigurationError(t *testing.T) {
	db := newClient()
	table := newTable(t, db)
	put(t, openStore(t, db, table), t0, store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
	nocreds := newClient(func(o *dynamodb.Options) { o.Credentials = failingProvider{} })
	s := openStore(t, nocreds, table)
	var res store.AcquireResult
	err := s.Acquire(context.Background(), &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#rpm"}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
	if !errors.Is(err, ErrCredentials) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("store Acquire = %v; want ErrCredentials, not ErrUnavailable", err)
	}
	if _, err := s.Peek(context.Background(), store.PeekRequest{Now: t0, Dimensions: []string{"v#rpm"}}); !errors.Is(err, ErrCredentials) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Peek = %v; want ErrCredentials, not ErrUnavailable", err)
	}
	if _, err := s.Reconcile(context.Background(), store.ReconcileRequest{Now: t0, Limit: store.DefaultReconcileLimit}); !errors.Is(err, ErrCredentials) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Reconcile = %v; want ErrCredentials, not ErrUnavailable", err)
	}
	open, err := sluice.New(s, sluice.WithConfig(failOpen()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := open.Acquire(context.Background(), "v#rpm")
	if err == nil || r.Granted() || errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("fail-open client Acquire = %+v, %v; want the credentials error, not a degraded grant", r, err)
	}
}

// unreachableProvider fails as a credentials endpoint that cannot be
// reached does (STS, the instance metadata service, a container's
// credentials endpoint).
type unreachableProvider struct{}

func (unreachableProvider) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
}

// TestUnreachableCredentialsAreAnOutage: credentials that exist but whose
// endpoint cannot be reached for the moment (a network failure on the way
// to STS or the metadata service) are an outage, as DynamoDB's own
// network failures are — the failure policy applies — while credentials
// that do not exist stay a configuration error (see above). Both still
// match ErrCredentials.
func TestUnreachableCredentialsAreAnOutage(t *testing.T) {
	db := newClient(func(o *dynamodb.Options) { o.Credentials = unreachableProvider{} })
	s := openStore(t, db, "sluice-unreachable-credentials")
	_, err := s.Peek(context.Background(), store.PeekRequest{Now: t0, Dimensions: []string{"v#rpm"}})
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, ErrCredentials) {
		t.Errorf("Peek = %v; want ErrUnavailable (and ErrCredentials)", err)
	}
}

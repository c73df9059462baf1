package dynamostore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/store"
)

// A table that does not exist is a misconfiguration, not an outage: it must
// not match store.ErrUnavailable, or a fail-open client would run without
// limits instead of reporting it.
func TestMissingTableIsNotUnavailable(t *testing.T) {
	s, err := New(newClient(), server.TableName("no-such-table"))
	if err != nil {
		t.Fatal(err)
	}
	var res store.AcquireResult
	err = s.Acquire(context.Background(), &store.AcquireRequest{
		Now: time.Now(), Items: []store.Item{{Dimension: "openai#rpm", Cost: 1}}, ID: store.NewLeaseID(), TTL: time.Minute,
	}, &res)
	var nf *types.ResourceNotFoundException
	if err == nil || errors.Is(err, store.ErrUnavailable) || !errors.As(err, &nf) {
		t.Fatalf("acquire on a missing table = %v; want a ResourceNotFoundException that does not match ErrUnavailable", err)
	}
}
